/*
 * coll/gpuwire: MPI collectives on GPU buffers for an Open MPI that is not
 * CUDA-aware.
 *
 * The module sits above the modules Open MPI would otherwise use on a
 * communicator. At enable it saves, for every collective it provides, the
 * function and module that were there before it (previous_<op>,
 * previous_<op>_module, each retained). A call whose buffers are all host
 * memory goes to that previous function unchanged; a call with a device
 * buffer goes to a GPU algorithm chosen by memory kind (the dispatch in
 * coll_gpuwire_dispatch.h). Barrier carries no buffer and is not provided:
 * Open MPI calls the modules below directly. Ibarrier is provided only to
 * keep its place among the non-blocking collectives of its communicator
 * (coll_gpuwire_requests.c): the non-blocking collectives must start in the
 * same order on every rank.
 */
#ifndef COLL_GPUWIRE_H
#define COLL_GPUWIRE_H

#include "ompi_config.h"
#include "gpuwire_compat.h"
#include "gpuwire/core.h"
#include "gpuwire/coll_agree.h"
#include "gpuwire/coll_nvlink.h"
#include "gpuwire/coll_sched.h"
#include "gpuwire/coll_select.h"
#include "gpuwire/coll_turn.h"

#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/base/base.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/request/request.h"

/* coll_gpuwire_reduce_algorithm and coll_gpuwire_move_algorithm: how
 * reductions, and Bcast, Allgather(v), Alltoall(v), run on device buffers. */
enum {
    GW_REDUCE_ALGO_AUTO,   /* device where the pml carries device memory, else staged */
    GW_REDUCE_ALGO_STAGED, /* always staged through host memory */
    GW_REDUCE_ALGO_DEVICE, /* device whatever the pml (one that is CUDA-aware) */
};

/* coll_gpuwire_hierarchical: device Allreduce, Reduce, Bcast and Allgather
 * on communicators that span several nodes composed per level, e.g.
 * Allreduce as reduce in each node, allreduce among the nodes' first ranks,
 * bcast in each node (ucx_glue/coll/hier, coll_gpuwire_hier.c). */
enum {
    GW_HIER_NEVER = 0,
    GW_HIER_AUTO = 1,   /* where the levels' algorithms run on the GPU */
    GW_HIER_ALWAYS = 2, /* also where they are staged (testing) */
};

/* mca_coll_gpuwire_module_t's peers: which processes of the communicator
 * have the GPU layer open. */
enum {
    GW_PEERS_UNKNOWN = 0, /* asked at the first blocking call; until then as UNASKED */
    GW_PEERS_SOME_UNTIL_ASKED, /* asked at the first blocking call; until then as SOME */
    GW_PEERS_ALL,         /* every one: blocking calls agree before a GPU algorithm */
    GW_PEERS_SOME,        /* some: calls on device memory staged, no agreement */
    GW_PEERS_NONE,        /* none: every call passes through */
    GW_PEERS_UNASKED,     /* coll_gpuwire_agree 0, one rank, or nothing to ask with */
};

/* mca_coll_gpuwire_module_t's hier_state. */
enum { HIER_UNKNOWN = 0, HIER_READY = 1, HIER_UNUSABLE = -1 };

/* Parameters and process-wide state of the component. */
typedef struct {
    int priority;
    int verbose;
    bool device;          /* accept device buffers when a GPU is present */
    bool device_sync;     /* wait for the legacy default stream before reading device data */
    size_t staging_bytes; /* pinned host staging kept for reuse (bytes) */
    int reduce_algorithm; /* GW_REDUCE_ALGO_* */
    size_t reduce_segment_bytes; /* bytes per message of the device reductions */
    size_t reduce_device_min_bytes; /* auto: smaller reductions (x (ranks - 1)) are staged */
    int move_algorithm;   /* GW_REDUCE_ALGO_*, for Bcast, Allgather(v), Alltoall(v) */
    int bcast_chain_ranks;     /* device Bcast to this many ranks or more: a pipelined chain */
    size_t bcast_chain_bytes;  /* ... of at least this many bytes */
    size_t bcast_segment_bytes; /* bytes per message of the chain */
    int hierarchical;          /* GW_HIER_* */
    bool device_p2p;      /* the selected pml moves device buffers (pml gpuwire) */
    bool agree;           /* blocking calls: ranks agree on memory kinds and layouts first */
    bool agree_nb;        /* ... and non-blocking calls, without blocking */
    int agree_nb_wait_us; /* how long an initiation waits for its agreement */
    bool nvlink;          /* kernels over NVLink for Allreduce, Bcast, Allgather */
    bool op_wrap;         /* 8- and 16-bit MPI_SUM on the host wraps (coll_gpuwire_opwrap.c) */
    size_t nvlink_oneshot_bytes; /* largest call through the workspace slots */
    bool nvlink_direct;   /* larger calls on the application's buffers (IPC-mapped) */
    int nvlink_timeout;   /* seconds a kernel waits for its peers */
    bool nvlink_shared_gpu; /* teams of ranks that share a GPU (testing) */
    int nvlink_delegate;  /* teams on one GPU: one kernel by the last rank to arrive (0-2) */
    bool nvlink_launcher; /* a thread launches a delegated call, not the call itself */
    int output;           /* opal_output stream */
    bool device_ready;    /* the device layer is open: a GPU and its driver are usable */
    int world_peers;      /* GW_PEERS_*: MPI_COMM_WORLD's, learnt at its enable */
    unsigned long long gpus;
    /* Counters, read through MPI_T (coll_gpuwire_*); approximate under
     * MPI_THREAD_MULTIPLE, never locked. The calls passed through, staged and
     * run on the GPU over point-to-point are counted in the core
     * (gw_core_counters(), gpuwire/core.h), where pml gpuwire's statistics
     * read them too. */
    unsigned long long staged_bytes;
    unsigned long long device_nb_calls;
    unsigned long long nvlink_calls;
    unsigned long long nvlink_nb_calls;
    unsigned long long hier_calls;
    unsigned long long persistent_mixed;
    unsigned long long mixed_calls;
    /* Non-blocking calls that agreed on memory kinds, and those of them
     * that acted on it from MPI's progress, after their initiation. */
    unsigned long long nb_agreements;
    unsigned long long nb_agreements_late;
    /* Non-blocking collectives whose previous module's collective started
     * later than their initiation (from MPI's progress), and ours not yet
     * complete (freed ones included). */
    unsigned long long nb_deferred_starts;
    unsigned long long nb_pending;
} mca_coll_gpuwire_globals_t;

/* Every collective function this module saves from the one below it, X(name)
 * for each: the blocking forms, the non-blocking ones with MPI_Reduce_local,
 * the persistent ones (MPI_<op>_init; MPIX_<op>_init in Open MPI 4.1). Each
 * is two fields of mca_coll_gpuwire_module_t, previous_<name> (of type
 * mca_coll_base_module_<name>_fn_t) and previous_<name>_module. */
#define GW_COLL_PREVIOUS(X) \
    X(allgather) X(allgatherv) X(allreduce) X(alltoall) X(alltoallv) X(alltoallw) X(bcast) \
    X(exscan) X(gather) X(gatherv) X(reduce) X(reduce_scatter) X(reduce_scatter_block) \
    X(scan) X(scatter) X(scatterv) \
    X(iallgather) X(iallgatherv) X(iallreduce) X(ialltoall) X(ialltoallv) X(ialltoallw) \
    X(ibcast) X(iexscan) X(igather) X(igatherv) X(ireduce) X(ireduce_scatter) \
    X(ireduce_scatter_block) X(iscan) X(iscatter) X(iscatterv) X(ibarrier) X(reduce_local) \
    X(allgather_init) X(allgatherv_init) X(allreduce_init) X(alltoall_init) \
    X(alltoallv_init) X(alltoallw_init) X(bcast_init) X(exscan_init) X(gather_init) \
    X(gatherv_init) X(reduce_init) X(reduce_scatter_init) X(reduce_scatter_block_init) \
    X(scan_init) X(scatter_init) X(scatterv_init)

#define GW_COLL_PREVIOUS_FIELDS(name)              \
    mca_coll_base_module_##name##_fn_t previous_##name; \
    mca_coll_base_module_t *previous_##name##_module;

typedef struct {
    mca_coll_base_module_t super;

    /* What Open MPI would have called without this module (GW_COLL_PREVIOUS).
     * Each module is retained at enable and released by the destructor. A
     * collective with no previous function is not provided (its slot is
     * NULL). A request of a persistent form on host buffers is the previous
     * module's. */
    GW_COLL_PREVIOUS(GW_COLL_PREVIOUS_FIELDS)

    /* Non-blocking collectives initiated on this communicator whose previous
     * module's collective has not started yet, oldest first; they start in
     * this order (the collective engine's scheduler, gpuwire/coll_sched.h). */
    gw_ce_order_t nb_order;

    /* The NVLink team of this communicator (the collective engine's,
     * gpuwire/coll_nvlink.h): set up from the first call that could use it
     * (a non-blocking one starts it, MPI's progress ends it); its state,
     * the state the non-blocking calls go by, their order. */
    gw_ce_nvl_t nvl;
    struct ompi_communicator_t *nvl_comm; /* the team's transport's communicator */

    /* Which processes of the communicator have the GPU layer open
     * (GW_PEERS_*), under coll_gpuwire_agree: MPI_COMM_WORLD learns it at
     * its enable in MPI_Init (one host allreduce), the communicators of its
     * processes take it from there; where only some of the job's processes
     * have, a communicator of them starts staged and learns its own at its
     * first blocking collective, as does one with processes of another job
     * (not staged until then). Where only some have, every call on device
     * memory is staged: Open MPI's algorithm on every rank, no team, no
     * per-call agreement. */
    int peers;

    /* Non-blocking reductions given to the device ring
     * (coll_gpuwire_devreduce.c), and how many of them are through with
     * their messages: they share one tag, so each posts its messages only
     * after the ones initiated before it are through with theirs. */
    gw_ce_turn_t ring_turn;

    /* The agreements of non-blocking calls (coll_gpuwire_agree.c): their
     * order, and their transport over this communicator. */
    gw_ce_agree_line_t agree_line;
    gw_ce_transport_t agree_tp;
    /* A communicator of this component's own (the hierarchical levels'),
     * whose calls come from algorithms whose ranks agreed already. */
    bool agreed_inside;

    /* Sub-communicators of the hierarchical collectives (coll_gpuwire_hier.c):
     * this rank's node, and the nodes' first ranks (NULL on the others). */
    int hier_state; /* HIER_UNKNOWN until the first call that could use them */
    struct ompi_communicator_t *hier_node, *hier_leaders;
    /* Per rank of the communicator: its node leader's rank among the
     * leaders, and its rank in its node (2 ints each). */
    int *hier_where;
    /* Non-blocking hierarchical calls, and how many of them have started
     * all their sub-collectives: each starts its first only after those
     * initiated before it have started their last, and a blocking one waits
     * until none is left behind, so that every rank starts the
     * sub-communicators' collectives in one order. */
    gw_ce_turn_t hier_turn;

    /* The communicator's topology as the selection table keys it
     * (coll_gpuwire_select.c), computed at its first lookup. */
    gw_sel_key_t sel_key;
    bool sel_key_ready;
} mca_coll_gpuwire_module_t;

OBJ_CLASS_DECLARATION(mca_coll_gpuwire_module_t);

#ifdef GW_COLL_FAKE_DEVICE
/* The test build over a simulated GPU (tests/mpi_coll/fake_device.c) loads
 * as coll "gpuwirefake" beside the real component, and only where asked for
 * by priority. */
#define mca_coll_gpuwire_component mca_coll_gpuwirefake_component
#define GW_COLL_COMPONENT_NAME "gpuwirefake"
#define GW_COLL_DEFAULT_PRIORITY -1
#else
#define GW_COLL_COMPONENT_NAME "gpuwire"
#define GW_COLL_DEFAULT_PRIORITY 80
#endif

extern __attribute__((visibility("default"))) mca_coll_base_component_t mca_coll_gpuwire_component;
extern mca_coll_gpuwire_globals_t mca_coll_gpuwire;

/* coll_gpuwire_module.c */
mca_coll_base_module_t *mca_coll_gpuwire_comm_query(struct ompi_communicator_t *comm,
                                                    int *priority);

/* coll_gpuwire_select.c: the selection table's parameters (registered after
 * the others, whose sources it reads), the table, and its release. */
void gw_coll_select_register(const mca_base_component_t *c);
const gw_sel_table_t *gw_coll_select_table(void);
void gw_coll_select_close(void);

/* coll_gpuwire_requests.c: the non-blocking machinery's life cycle. */
int mca_coll_gpuwire_requests_init(void);
void mca_coll_gpuwire_requests_fini(void);
/* MPI_SUM of 8- and 16-bit integers that wraps (coll_gpuwire_opwrap.c): installed
 * at the first communicator's query, removed at the component's close. */
int gw_coll_op_wrap_install(void);
void gw_coll_op_wrap_remove(void);

#define COLL_GPUWIRE_VERBOSE(level, ...) \
    opal_output_verbose((level), mca_coll_gpuwire.output, "coll:gpuwire: " __VA_ARGS__)

#endif
