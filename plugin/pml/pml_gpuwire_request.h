/*
 * MPI requests of pml/gpuwire.
 *
 * A request is an ompi_request_t followed by the engine's gw_request_t, taken
 * from a free list, so a message allocates nothing. Lifetime: the request is
 * returned to the free list once both the engine has completed it and the MPI
 * layer has freed it, whichever comes last (two "votes"); a persistent
 * request counts as completed while inactive.
 */
#ifndef PML_GPUWIRE_REQUEST_H
#define PML_GPUWIRE_REQUEST_H

#include "pml_gpuwire.h"
#include "ompi/proc/proc.h"
#include "pml_gpuwire_datatype.h"

enum { PML_GW_SEND = 1, PML_GW_RECV = 2 };
enum {
    PML_GW_PERSISTENT = 0x1, /* MPI_*_init */
    PML_GW_INTERNAL = 0x2,   /* no MPI handle: returns itself when done */
    PML_GW_DTYPE_HELD = 0x4, /* holds a reference to dtype and comm */
};
/* Where a non-contiguous message is packed: malloc'ed or bsend host memory,
 * a device temporary (gw_dev_temp_get) on GPU staging_device, or nowhere:
 * a large one on host memory is packed piece by piece as UCX moves it
 * (LAYOUT, the request's layout). */
enum {
    PML_GW_STAGING_NONE = 0,
    PML_GW_STAGING_MALLOC,
    PML_GW_STAGING_BSEND,
    PML_GW_STAGING_DEVICE,
    PML_GW_STAGING_LAYOUT
};

typedef struct mca_pml_gpuwire_request {
    ompi_request_t ompi;
    gw_request_t gw;
    uint8_t kind;
    uint8_t flags;
    uint8_t staging_kind;
    int32_t votes; /* see above; atomically updated */

    /* The operation's arguments (kept for restarts and unpacking). */
    void *buf;
    size_t count;
    ompi_datatype_t *dtype;
    int peer;
    int tag;
    ompi_communicator_t *comm;
    mca_pml_base_send_mode_t mode;
    gw_message_t *message; /* for MPI_Imrecv */

    void *staging;
    size_t staging_len;
    int staging_device;
    pml_gpuwire_layout_t layout; /* PML_GW_STAGING_LAYOUT */
} mca_pml_gpuwire_request_t;

OBJ_CLASS_DECLARATION(mca_pml_gpuwire_request_t);

/* Takes a request from the free list, initialized for kind. */
mca_pml_gpuwire_request_t *pml_gw_request_get(int kind, uint8_t flags, void *buf, size_t count,
                                              ompi_datatype_t *dtype, int peer, int tag,
                                              ompi_communicator_t *comm,
                                              mca_pml_base_send_mode_t mode);

/* Returns a request to the free list with the references it holds. */
void pml_gw_request_release(mca_pml_gpuwire_request_t *req);

/* Hands the operation to the engine; uses only the request's own fields (not
 * the ompi_request_t), so blocking calls use it with a request on the stack. */
int pml_gw_issue(mca_pml_gpuwire_request_t *req);

/* Starts (or restarts) the operation described by the request. */
int pml_gw_request_start(mca_pml_gpuwire_request_t *req);

/* pml_start: MPI_Start / MPI_Startall. */
int mca_pml_gpuwire_start(size_t count, ompi_request_t **requests);

/* The peer number of a rank of another job (MPI_Comm_spawn/connect)
 * (pml_gw_other_job_add); else one line and the error. */
int pml_gw_peer_other_job(ompi_communicator_t *comm, int rank, const ompi_proc_t *proc,
                          uint32_t *peer);
/* The peer number of proc (of another job; pml_gpuwire_peers.c), given now
 * if it has none (Open MPI 5 adds such processes without add_procs); an
 * error when they are all taken. */
int pml_gw_other_job_add(const ompi_proc_t *proc, uint32_t *peer);
/* The process behind a peer number; false for a number not given. */
bool pml_gw_name_of_peer(uint32_t peer, opal_process_name_t *name);

/* Translates (comm, rank) into the engine's process index. Inline: it is
 * part of every send. */
static inline int pml_gw_peer_index(ompi_communicator_t *comm, int rank, uint32_t *peer)
{
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, rank);
    /* *peer is set on every path: inlined, the compiler cannot see that
     * the callers read it only on success. */
    if (OPAL_UNLIKELY(NULL == proc)) {
        *peer = 0;
        return MPI_ERR_RANK;
    }
    *peer = proc->super.proc_name.vpid;
    if (OPAL_UNLIKELY(proc->super.proc_name.jobid != OMPI_PROC_MY_NAME->jobid ||
                      *peer >= mca_pml_gpuwire.world)) {
        return pml_gw_peer_other_job(comm, rank, proc, peer);
    }
    return MPI_SUCCESS;
}

/* Prepares the bytes of a send: the user's buffer when contiguous, else a
 * staging buffer (from the attached bsend buffer in buffered mode; a device
 * temporary packed by a kernel for GPU memory). */
int pml_gw_send_prepare(mca_pml_gpuwire_request_t *req, const void **addr, size_t *len);
/* Prepares where a receive lands; the inverse of the above. */
int pml_gw_recv_prepare(mca_pml_gpuwire_request_t *req, void **addr, size_t *cap);

/* Fills an MPI status from a finished engine receive into a buffer of
 * full_size bytes; returns the MPI error code. status->MPI_ERROR is left
 * alone: MPI_Recv, MPI_Mrecv and the probes must not write it (only the
 * multiple-completion calls do, from the request's own status, which
 * request_engine_done sets). */
static inline int pml_gw_recv_status(const gw_request_t *g, size_t full_size,
                                     ompi_status_public_t *status)
{
    int err = OPAL_LIKELY(GW_OK == g->status) ? MPI_SUCCESS : mca_pml_gpuwire_mpi_error(g->status);
    if (OPAL_UNLIKELY(g->status == GW_ERR_CANCELED)) {
        status->_cancelled = 1;
        status->_ucount = 0;
        err = MPI_SUCCESS;
    } else {
        status->MPI_SOURCE = g->source;
        status->MPI_TAG = g->tag;
        status->_cancelled = 0;
        status->_ucount = g->status == GW_ERR_TRUNCATE ? full_size : g->length;
    }
    return err;
}

/* Fills an MPI status (but its MPI_ERROR) from a finished engine receive;
 * unpacks a staged receive into the user's buffer. Returns the MPI error code. */
int pml_gw_recv_finish(mca_pml_gpuwire_request_t *req, ompi_status_public_t *status);
void pml_gw_staging_release(mca_pml_gpuwire_request_t *req);

#endif
