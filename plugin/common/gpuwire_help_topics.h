/*
 * The messages gpuwire's components print through Open MPI's help mechanism,
 * each as GW_HELP_<NAME>: the topic in plugin/help-gpuwire.txt and the same
 * text compiled in, printed when the help file cannot be found. Every message
 * is one line: the cause, then the fix. The test tools_help_file checks that
 * the help file holds exactly these topics with exactly this text.
 *
 * Use: gw_help(GW_HELP_DECLINED, "pml", why);  (gpuwire_help.h)
 */
#ifndef GPUWIRE_HELP_TOPICS_H
#define GPUWIRE_HELP_TOPICS_H

/* A component's register function: built for another Open MPI release.
 * The argument is gw_version_compare()'s line (names both releases and the fix). */
#define GW_HELP_OTHER_RELEASE "other-release", "%s"

/* pml/gpuwire cannot start (UCX missing or unusable, ...): framework, cause. */
#define GW_HELP_DECLINED "declined", "%s:gpuwire: declined: %s"

/* A component parameter out of range: "pml:gpuwire" or "coll:gpuwire", the
 * line of gw_param_describe() (names parameter, value, range and fix). */
#define GW_HELP_BAD_PARAMETER "bad-parameter", "%s: declined: %s"

/* A peer's worker address is missing from the runtime's exchange. */
#define GW_HELP_NO_PEER_ADDRESS                                                                   \
    "no-peer-address",                                                                            \
        "pml:gpuwire: process %u published no gpuwire address; select pml gpuwire in every "     \
        "process of the job (--mca pml gpuwire, or OMPI_MCA_pml=gpuwire in every process's "     \
        "environment)"

/* A process of another job (spawn/connect) beyond GW_PML_OTHER_JOBS_MAX: rank, communicator. */
#define GW_HELP_OTHER_JOB                                                                         \
    "other-job",                                                                                  \
        "pml:gpuwire: rank %d of communicator %s is a process of another job beyond the 1024 "   \
        "such processes pml gpuwire can reach from one process (MPI_Comm_spawn, "               \
        "MPI_Comm_connect); spawn or connect fewer, or run such jobs with --mca pml ucx"

/* A buffered send (MPI_Bsend/MPI_Ibsend) from GPU memory: rank, communicator. */
#define GW_HELP_BSEND_DEVICE                                                                      \
    "bsend-device",                                                                               \
        "pml:gpuwire: a buffered send (MPI_Bsend) from GPU memory is not supported (rank %d of "  \
        "%s); use MPI_Send/MPI_Isend, or copy the data to host memory first"

/* Packing or unpacking a non-contiguous datatype on GPU memory failed: rank,
 * communicator, the cuda module's line (names cause and fix). */
#define GW_HELP_DEVICE_PACK "device-pack", "pml:gpuwire: rank %d of %s: %s"

/* MPI_Finalize while non-blocking collectives on device buffers are pending. */
#define GW_HELP_COLL_PENDING                                                                      \
    "coll-pending",                                                                               \
        "coll:gpuwire: non-blocking collectives on device buffers were still pending at "         \
        "finalize; complete every request (MPI_Wait/MPI_Test) before MPI_Finalize"

#endif
