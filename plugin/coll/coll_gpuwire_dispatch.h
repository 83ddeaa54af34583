/*
 * One collective call, described once, and the one place that decides how it
 * runs: memory kind -> algorithm.
 *
 *   entry point (coll_gpuwire_entry.c)       packs the arguments into gw_coll_args_t
 *     -> gw_coll_dispatch()                  regions (what MPI lets the call touch),
 *                                            one classification per significant buffer
 *        host   -> gw_coll_passthrough       the previous module, arguments unchanged
 *        device -> first algorithm of the    GPU algorithms in order of preference; the
 *                  device list that accepts  staged one (coll_gpuwire_staged.c) accepts
 *                                            everything and is last
 *
 * A GPU algorithm added later (kernels over NVLink, IPC-mapped one-shot /
 * two-shot allreduce) is one more gw_coll_algorithm_t in front of the staged
 * one; its accepts() looks at the call (collective, bytes, datatype, op,
 * locality) and declines what it cannot do.
 */
#ifndef COLL_GPUWIRE_DISPATCH_H
#define COLL_GPUWIRE_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "coll_gpuwire.h"
#include "gpuwire/coll_regions.h"
#include "gpuwire/coll_sched.h"
#include "gpuwire/gpu_device.h"

/* The engine's collectives (gpuwire/coll_regions.h). */
typedef enum {
    GW_COLL_ALLGATHER = GW_CE_COLL_ALLGATHER,
    GW_COLL_ALLGATHERV = GW_CE_COLL_ALLGATHERV,
    GW_COLL_ALLREDUCE = GW_CE_COLL_ALLREDUCE,
    GW_COLL_ALLTOALL = GW_CE_COLL_ALLTOALL,
    GW_COLL_ALLTOALLV = GW_CE_COLL_ALLTOALLV,
    GW_COLL_ALLTOALLW = GW_CE_COLL_ALLTOALLW,
    GW_COLL_BCAST = GW_CE_COLL_BCAST,
    GW_COLL_EXSCAN = GW_CE_COLL_EXSCAN,
    GW_COLL_GATHER = GW_CE_COLL_GATHER,
    GW_COLL_GATHERV = GW_CE_COLL_GATHERV,
    GW_COLL_REDUCE = GW_CE_COLL_REDUCE,
    GW_COLL_REDUCE_SCATTER = GW_CE_COLL_REDUCE_SCATTER,
    GW_COLL_REDUCE_SCATTER_BLOCK = GW_CE_COLL_REDUCE_SCATTER_BLOCK,
    GW_COLL_SCAN = GW_CE_COLL_SCAN,
    GW_COLL_SCATTER = GW_CE_COLL_SCATTER,
    GW_COLL_SCATTERV = GW_CE_COLL_SCATTERV,
    /* Ibarrier only: no buffer, never dispatched (gw_coll_nb_passthrough) */
    GW_COLL_BARRIER = GW_CE_COLL_BARRIER,
    /* MPI_Reduce_local, blocking only: rbuf = sbuf op rbuf on this process
     * (MPI_COMM_SELF's module; comm is MPI_COMM_SELF) */
    GW_COLL_REDUCE_LOCAL = GW_CE_COLL_REDUCE_LOCAL,
    GW_COLL_COUNT = GW_CE_COLL_COUNT
} gw_coll_id_t;

static inline const char *gw_coll_name(gw_coll_id_t id)
{
    return gw_ce_coll_name((gw_ce_coll_t)id);
}

/* The arguments of any provided collective, as the application passed them.
 * Fields a collective does not have stay zero. Bcast's buffer is rbuf; the
 * reductions and bcast use count and dtype. */
typedef struct {
    gw_coll_id_t id;
    bool nonblocking;
    const void *sbuf;
    void *rbuf;
    int count;
    struct ompi_datatype_t *dtype;
    int scount, rcount;
    const int *scounts, *sdispls, *rcounts, *rdispls;
    struct ompi_datatype_t *sdtype, *rdtype;
    struct ompi_datatype_t *const *sdtypes, *const *rdtypes; /* alltoallw */
    struct ompi_op_t *op;
    int root;
    struct ompi_communicator_t *comm;
    /* What the selection table chose for this call (gw_sel_algo_t;
     * GW_SEL_AUTO: the built-in rules), set by the dispatch. */
    int sel;
    /* A persistent start whose ranks all pass device memory (agreed at its
     * initialization): no agreement of its own. */
    bool agreed;
    /* Non-blocking only: a request of ours (gw_coll_request_t) whose job a
     * GPU algorithm's job replaces, in its place among the communicator's
     * calls, instead of a new request (a call decided after its agreement:
     * coll_gpuwire_agree.c). */
    void *adopt;
} gw_coll_args_t;

enum {
    GW_STAGE_IN = GW_CE_STAGE_IN,   /* the call reads the bytes: device -> host before */
    GW_STAGE_OUT = GW_CE_STAGE_OUT, /* the call writes the bytes: host -> device after */
};

/* The bytes one buffer argument lets the call touch, relative to the pointer
 * the application passed: [lo, hi), from the datatypes' true extents and
 * count * extent strides (displacements included). An empty region (hi == lo)
 * is not significant on this rank (MPI_IN_PLACE's send side, a non-root's
 * receive buffer, count 0) and is never classified or staged. A non-empty
 * region with neither flag is scratch: the call gets host memory, nothing is
 * copied (Exscan's rank-0 receive buffer). */
typedef gw_ce_region_t gw_coll_region_t; /* gpuwire/coll_stage.h */

enum {
    GW_REGION_SEND = GW_CE_REGION_SEND,
    GW_REGION_RECV = GW_CE_REGION_RECV,
    GW_REGION_COUNT = GW_CE_REGION_COUNT
};

/* Fills r[GW_REGION_SEND] and r[GW_REGION_RECV] from MPI's rules for a->id
 * (which arguments are significant on this rank, MPI_IN_PLACE): the engine's
 * gw_ce_regions over the call's datatypes (coll_gpuwire_regions.c). */
void gw_coll_regions(const gw_coll_args_t *a, gw_coll_region_t r[GW_REGION_COUNT]);

static inline size_t gw_region_bytes(const gw_coll_region_t *r) { return gw_ce_region_bytes(r); }

/* The GPU whose stream and scratch a call on this rank uses: the receive
 * region's when it is device memory, else the send region's; -1 when
 * neither is. */
static inline int gw_coll_regions_gpu(const gw_coll_region_t r[GW_REGION_COUNT])
{
    return gw_ce_regions_gpu(r);
}

typedef enum { GW_MEM_HOST, GW_MEM_DEVICE, GW_MEM_KINDS } gw_mem_kind_t;

/* Classifies each significant region (on_gpu, gpu, unordered set); *kind is
 * GW_MEM_DEVICE when any of them is GPU memory (coll_gpuwire_regions.c). */
int gw_coll_classify_regions(gw_coll_region_t r[GW_REGION_COUNT], gw_mem_kind_t *kind);

/* A non-blocking reduction on an inter-communicator (coll_gpuwire_inter.c). */
int gw_coll_inter_dispatch(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                           ompi_request_t **request);

/* What an algorithm's accepts() found out about a call, for its run() right
 * after: the dispatch keeps one per call, so that a call is described once
 * (the NVLink family's description: coll_gpuwire_nvlink.c). */
typedef union {
    gw_ce_nvl_call_t nvl;
} gw_coll_note_t;

typedef struct {
    const char *name;
    /* Whether this algorithm runs the call; NULL: always. Asked on every
     * rank that has device memory in the call: an algorithm whose ranks
     * must all take part (the device reductions) decides only from what is
     * identical on every rank, never from this rank's regions. It may leave
     * what it found in *note for run(). */
    bool (*accepts)(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                    gw_coll_note_t *note);
    /* Runs the call; note: where accepts() left what it found for this call
     * (NULL only where an algorithm without accepts() is run directly). */
    int (*run)(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
               gw_coll_region_t r[GW_REGION_COUNT], gw_coll_note_t *note, ompi_request_t **request);
} gw_coll_algorithm_t;

/* What an algorithm's run() returns when it found, in agreement with every
 * other rank of the call, that it cannot run it: the dispatch goes on to the
 * next algorithm that accepts the call. */
#define GW_COLL_DECLINED GW_CE_DECLINED

/* What a persistent request's start runs (gw_coll_persistent_new). */
typedef int (*gw_coll_start_fn)(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                                ompi_request_t **request);

/* Asks every process of comm, of two ranks or more (a collective on it:
 * one host allreduce), whether it has the GPU layer open, into m->peers
 * (GW_PEERS_*). */
int gw_coll_learn_peers(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm);

/* The algorithms of a call whose regions r are classified (kind) and whose
 * ranks have agreed where they must: staged_only, on device memory the
 * staged algorithm; uneven, some rank's layout is one the NVLink kernels
 * cannot take. Under a->adopt, a call the staged algorithm would take
 * returns GW_COLL_IN_PLACE: its request stages it where it is. */
typedef int (*gw_coll_run_fn)(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                              gw_coll_region_t r[GW_REGION_COUNT], gw_mem_kind_t kind,
                              ompi_request_t **request, bool staged_only, bool uneven);
#define GW_COLL_IN_PLACE (GW_COLL_DECLINED + 1)

/* A non-blocking call on a communicator where every process has a GPU
 * (coll_gpuwire_agree_nb): its ranks agree, without blocking, whether each
 * passes device memory and a layout the NVLink kernels take; the call runs
 * as run (the dispatch's) decides from that, at once when the agreement ends within
 * coll_gpuwire_agree_nb_wait_us of the initiation and no earlier call waits
 * for its own, else from MPI's progress in initiation order
 * (coll_gpuwire_agree.c). */
int gw_coll_agree_nb(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                     gw_coll_region_t r[GW_REGION_COUNT], gw_mem_kind_t kind, gw_coll_run_fn run,
                     ompi_request_t **request);
/* A blocking call, or a persistent initialization, on m's communicator:
 * waits until every non-blocking call initiated before has acted on its
 * agreement. */
void gw_coll_agree_nb_settle(mca_coll_gpuwire_module_t *m);

/* Runs one call: classifies, picks the algorithm, runs it. request is NULL
 * for the blocking forms. */
int gw_coll_dispatch(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                     ompi_request_t **request);

/* gw_coll_dispatch with, on device memory, the staged algorithm whatever
 * else would accept the call. */
int gw_coll_dispatch_staged(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                            ompi_request_t **request);

/* Calls the previous module's function for a->id with sbuf/rbuf replacing
 * the application's buffers and everything else unchanged; the non-blocking
 * form when request is not NULL (coll_gpuwire_previous.c). */
int gw_coll_call_previous(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                          const void *sbuf, void *rbuf, ompi_request_t **request);

/* The persistent form of a call (MPI_<op>_init): the ranks agree on one
 * form (initialization is collective and nonlocal). Where no rank passes
 * device memory, the previous module's request; where every rank does, a
 * request of ours whose every MPI_Start runs the non-blocking form through
 * gw_coll_dispatch; where some do, a request of ours on every rank whose
 * starts run it through gw_coll_dispatch_staged. The buffers are classified
 * here, once: MPI fixes them for the request's life. */
int gw_coll_init(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a, struct ompi_info_t *info,
                 ompi_request_t **request);
/* The previous module's persistent form of a->id (coll_gpuwire_previous.c). */
int gw_coll_call_previous_init(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                               struct ompi_info_t *info, ompi_request_t **request);
/* A persistent request of ours (coll_gpuwire_persistent.c) whose every
 * start runs the non-blocking form through start_call (gw_coll_dispatch or
 * gw_coll_dispatch_staged). */
int gw_coll_persistent_new(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                           gw_coll_start_fn start_call, ompi_request_t **request);
/* Progresses MPI until no non-blocking call of m waits for its start. */
void gw_coll_nb_drain(mca_coll_gpuwire_module_t *m);

/* In-place Ialltoallv/w (or a start of the persistent forms): libnbc's
 * in-place schedule for them is wrong (docs/coll.md), so they always go
 * through a request of ours that hands it a separate send copy. */
static inline bool gw_coll_inplace_alltoallvw(const gw_coll_args_t *a)
{
    return MPI_IN_PLACE == a->sbuf && (GW_COLL_ALLTOALLV == a->id || GW_COLL_ALLTOALLW == a->id);
}

/* A non-blocking collective on the application's buffers, through the
 * previous module: started now when nothing initiated earlier on the
 * communicator is still waiting for its start, else queued behind it and
 * started in its turn from MPI's progress (coll_gpuwire_requests.c). */
int gw_coll_nb_passthrough(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                           ompi_request_t **request);

/* A non-blocking call whose steps an algorithm runs itself: the request
 * polls them from MPI's progress (under the requests' lock, never entered
 * twice) until they are done, then releases them before the application
 * sees completion. */
/* Its poll returns OMPI_SUCCESS, an OMPI error code (the request completes
 * with that error) or GW_COLL_DECLINED (gw_ce_job_ops_t, gpuwire/coll_sched.h). */
typedef gw_ce_job_ops_t gw_coll_job_ops_t;
/* A request of ours for a call on m (regions r, classified) run by job;
 * ordered: placed in the communicator's FIFO (coll_gpuwire_requests.c). */
int gw_coll_nb_job(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                   gw_coll_region_t r[GW_REGION_COUNT], const gw_coll_job_ops_t *ops, void *job,
                   bool ordered, ompi_request_t **request);

/* The staged algorithm (coll_gpuwire_staged.c). */
extern const gw_coll_algorithm_t gw_coll_staged;
/* The table's (op, type) ids (gpuwire/cuda/reduce.h) of a reduction on a
 * predefined op and datatype whose elements are moved whole, or false: the
 * same answer on every rank of a call (coll_gpuwire_optable.c). */
bool gw_coll_table_ids(struct ompi_op_t *op, struct ompi_datatype_t *dt, int *gop, int *gtype);

/* Kernels over NVLink: the collective engine's NVLink team family
 * (gpuwire/coll_nvlink.h) over this communicator (coll_gpuwire_nvlink.c). */
extern const gw_coll_algorithm_t gw_coll_nvlink;
/* Whether this rank's datatypes of a call describe bytes the NVLink kernels
 * can take as they are (contiguous Bcast and Allgather buffers; true for
 * every other call): a rank's own answer, agreed on in the dispatch. */
bool gw_coll_nvlink_layout_ok(const gw_coll_args_t *a);
/* Gives the team its transport over comm and the parameters (module
 * enable); the team is released by gw_ce_nvl_release (module destructor). */
void gw_coll_nvlink_init(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm);
/* False while comm's NVLink team is being set up; otherwise makes the
 * outcome what comm's non-blocking calls go by (nvl.seen) and returns true.
 * Only where every rank of comm asks before the same non-blocking call (and
 * waits until true), so that they all adopt the outcome at one place. The
 * blocking calls and persistent initializations, which may wait for the
 * other ranks, end a set-up under way with gw_ce_nvl_settle. */
bool gw_coll_nvlink_settled(struct ompi_communicator_t *comm);
/* Allreduce, Reduce, Bcast, Allgather(v) across nodes composed per level
 * (coll_gpuwire_hier.c). */
extern const gw_coll_algorithm_t gw_coll_hier;
/* Frees the communicator's sub-communicators (module destructor,
 * coll_gpuwire_state.c). */
void gw_coll_hier_release(mca_coll_gpuwire_module_t *m);
/* Sets the levels up for a persistent call on device buffers whose starts
 * the hierarchical algorithm would run (collective, as its blocking forms'
 * first call); OMPI_SUCCESS or the set-up's error. */
int gw_coll_hier_prepare(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a);
/* Reductions kept on the GPU (coll_gpuwire_devreduce.c). */
extern const gw_coll_algorithm_t gw_coll_devreduce;
/* Bcast, Allgather(v), Alltoall(v) over point-to-point on the application's
 * buffers (coll_gpuwire_devmove.c). */
extern const gw_coll_algorithm_t gw_coll_devmove;
/* MPI_Reduce_local by one reduction kernel (coll_gpuwire_optable.c). */
extern const gw_coll_algorithm_t gw_coll_local;

/* The selection table's algorithm for a blocking call on device buffers
 * (gw_sel_algo_t), the same on every rank; GW_SEL_AUTO: the built-in rules
 * (coll_gpuwire_select.c). */
int gw_coll_select(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a);

/* Open MPI's tag for a collective's messages (coll_tags.h): the algorithms
 * over point-to-point send with it, as Open MPI's own algorithms do
 * (coll_gpuwire_state.c, with gw_coll_p2p_accepts and gw_coll_reduce_small). */
int gw_coll_tag(gw_coll_id_t id);

/* The tags of the component's own messages on a communicator: between
 * MPI_ANY_TAG (-1) and Open MPI's collective tags (-10 and below, libnbc's
 * from -27 down), where no component of Open MPI 4.1 or 5.0 sends. Each
 * kind of message has its own, so that messages posted at different times
 * never meet another kind's receives. */
enum {
    GW_TAG_AGREE_NB = -4,   /* agreements of non-blocking calls (coll_gpuwire_agree.c) */
    GW_TAG_RING = -5,       /* blocking reductions on the ring (coll_gpuwire_devreduce.c) */
    GW_TAG_MOVE_NB = -6,    /* non-blocking data movement (coll_gpuwire_devmove.c) */
    GW_TAG_NVL_SETUP = -7,  /* an NVLink team's set-up (coll_gpuwire_nvlink.c) */
    GW_TAG_NVL_ARRIVE = -8, /* arrivals of the NVLink kernels' non-blocking calls */
    GW_TAG_RING_NB = -9,    /* non-blocking reductions on the ring (coll_gpuwire_devreduce.c) */
};

#define GW_COLL_BIT(id) (1u << (id))
/* Whether a call of one of the collectives in ids (GW_COLL_BIT of each;
 * blocking and non-blocking forms alike) runs over point-to-point under
 * algorithm (GW_REDUCE_ALGO_*: on the GPU where auto and the pml moves
 * device buffers). Decided from what is the same on every rank. */
bool gw_coll_p2p_accepts(const gw_coll_args_t *a, unsigned ids, int algorithm);
/* Whether a reduction (Allreduce, Reduce, Reduce_scatter(_block), Scan,
 * Exscan) is too small for the GPU over point-to-point under
 * coll_gpuwire_reduce_algorithm auto: fewer bytes in the whole call than
 * coll_gpuwire_reduce_device_min_bytes x (ranks - 1). Staged costs less
 * there (docs/coll.md, "Small reductions without a team"). Decided from
 * what is the same on every rank. */
bool gw_coll_reduce_small(const gw_coll_args_t *a);

/* Device temporaries on one GPU for the significant regions that are
 * elsewhere (host memory, another GPU's memory), one scratch allocation for
 * all: the collective engine's (gpuwire/coll_stage.h). */
typedef gw_ce_temps_t gw_coll_temps_t;
static inline int gw_coll_temps_in(const gw_coll_region_t r[GW_REGION_COUNT], int gpu,
                                   gw_coll_temps_t *t, char *why, size_t why_len)
{
    return gw_ce_temps_in(r, gpu, t, why, why_len);
}
static inline int gw_coll_temps_out(const gw_coll_region_t r[GW_REGION_COUNT], int gpu,
                                    gw_coll_temps_t *t, char *why, size_t why_len)
{
    return gw_ce_temps_out(r, gpu, t, why, why_len);
}
static inline void gw_coll_temps_release(gw_coll_temps_t *t) { gw_ce_temps_release(t); }

/* With coll_gpuwire_device_sync, waits for the legacy default stream of every
 * GPU whose memory a significant region of the call is: the application's
 * work queued there comes first. 0, or -1 with why. */
static inline int gw_coll_wait_user_regions(const gw_coll_region_t r[GW_REGION_COUNT], char *why,
                                            size_t why_len)
{
    return gw_ce_wait_user_regions(r, mca_coll_gpuwire.device_sync, why, why_len);
}

#endif
