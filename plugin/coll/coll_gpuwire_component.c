/*
 * The coll/gpuwire component: version check, MCA parameters and MPI_T
 * counters, the device layer's life cycle, selection.
 */
#include "coll_gpuwire.h"

#include <string.h>

#include "gpuwire/gpu_device.h"
#include "gpuwire_params.h"
#include "gpuwire_preflight.h"
#include "ompi/mca/pml/base/base.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var.h"

static int component_register(void);
static int component_open(void);
static int component_close(void);
static int component_init_query(bool enable_progress_threads, bool enable_mpi_threads);


static const gw_param_enum_value_t algorithms[] = {
    {GW_REDUCE_ALGO_AUTO, "auto"},
    {GW_REDUCE_ALGO_STAGED, "staged"},
    {GW_REDUCE_ALGO_DEVICE, "device"},
    {0, NULL},
};

/* Every MCA parameter of coll gpuwire: registration, defaults, ranges, the
 * help ompi_info shows and docs/parameters.md all come from this table
 * (gpuwire_params.h). Help: one line each; the details are in docs/coll.md. */
/* The rows of gpuwire_params.h, each parameter in its field of mca_coll_gpuwire. */
#define GW_PARAMS_STORE mca_coll_gpuwire
#define PINT GW_PINT
#define PSIZE GW_PSIZE
#define PBOOL GW_PBOOL
#define PENUM(n, def, lvl, help) GW_PENUM(n, def, lvl, help, algorithms)
static const gw_param_t params[] = {
    /* Above every module a stock Open MPI 4.1 enables by default (tuned 30,
     * sync 50, self 75), so that device buffers are caught on every
     * communicator, MPI_COMM_SELF included, and below hcoll (90). */
    PINT(priority, GW_COLL_DEFAULT_PRIORITY, -1, 1000, 3,
         "Selection priority of coll gpuwire: the module with the highest priority provides "
         "each collective, and gpuwire passes host buffers on to the one below it (tuned 30, "
         "self 75); -1 disables it",
         "-1 disables the component"),
    GW_PVERBOSE("Verbosity: 1 device support and errors, 10 every communicator, 20 every "
                "collective on device memory"),
    PBOOL(device, true, 3,
          "Accept GPU buffers (CUDA) when a GPU and its driver are present; 0: every collective "
          "passes through unchanged"),
    PBOOL(device_sync, false, 4,
          "Before a collective reads or writes device buffers, also wait for work still queued "
          "on the legacy default stream. Off: the application synchronizes its asynchronous "
          "work before an MPI call, as with every CUDA-aware MPI"),
    PSIZE(staging_bytes, 256 << 20, 0, GW_PARAM_MAX_MESSAGE, 5,
          "Pinned host memory kept for staging device buffers, reused across collectives; "
          "beyond it plain host memory (slower copies); 0: plain host memory only",
          NULL),
    PENUM(reduce_algorithm, GW_REDUCE_ALGO_AUTO, 4,
          "Allreduce, Reduce, Reduce_scatter(_block), Scan, Exscan on device buffers, blocking "
          "and non-blocking: auto (on the GPU over point-to-point when the pml moves device "
          "buffers, staged otherwise), staged (reduced in host memory), device (on the GPU "
          "whatever the pml)"),
    PENUM(move_algorithm, GW_REDUCE_ALGO_AUTO, 4,
          "Bcast, Allgather(v), Alltoall(v) on device buffers above the NVLink kernels' size, "
          "blocking and non-blocking: auto (point-to-point on the application's buffers when the "
          "pml moves device buffers, staged otherwise), staged (through host memory), device "
          "(point-to-point whatever the pml)"),
    PBOOL(agree, true, 5,
          "Blocking collectives on device buffers: the ranks first agree (one small host "
          "allreduce) that each passes device memory and a layout the GPU algorithms take, else "
          "every rank runs the call staged; and MPI_Init asks (one allreduce) which processes "
          "have a GPU, staging every device call where only some have; 0: neither (every "
          "process has a GPU and ranks always pass the same kinds)"),
    PBOOL(agree_nb, true, 5,
          "Non-blocking collectives where every process has a GPU (and coll_gpuwire_agree): the "
          "ranks agree the same way without blocking, and a call whose agreement is not over "
          "within coll_gpuwire_agree_nb_wait_us starts from MPI's progress; 0: they do not "
          "(ranks always pass the same kinds to a non-blocking call)"),
    PBOOL(op_wrap, true, 5,
          "MPI_SUM of 8- and 16-bit integers in host memory wraps as on the GPU: replaces the "
          "saturating functions of Open MPI 4.1's op avx; 0: leaves them"),
    PINT(agree_nb_wait_us, 200, 0, 1000000, 5,
         "Microseconds a non-blocking collective's initiation waits for its agreement "
         "(coll_gpuwire_agree_nb) before it returns and leaves the call to MPI's progress",
         "0 returns at once"),
    PSIZE(reduce_segment_bytes, 4 << 20, 1, (int64_t)1 << 30, 5,
          "Bytes per message of the reductions on the GPU: a kernel combines one segment while "
          "the next arrives",
          NULL),
    PSIZE(reduce_device_min_bytes, 32768, 0, (int64_t)1 << 40, 5,
          "Under reduce_algorithm auto, a reduction no NVLink team runs goes on the GPU only "
          "from this many bytes times (ranks - 1), smaller ones are staged; 0: always on the GPU",
          "0: always on the GPU"),
    PINT(hierarchical, GW_HIER_AUTO, 0, 2, 5,
         "Allreduce, Reduce, Bcast, Allgather(v) on device buffers across nodes composed per "
         "level (inside each node, then among the nodes' first ranks): 0 never, 1 where the "
         "levels run on the GPU, 2 also where they are staged",
         "0 never, 1 auto, 2 always"),
    PINT(bcast_chain_ranks, 4, 0, 1 << 24, 5,
         "Device Bcast over point-to-point to at least this many ranks, of at least "
         "bcast_chain_bytes, runs as a pipelined chain; 0: never",
         "0: never"),
    PSIZE(bcast_chain_bytes, 4 << 20, 0, GW_PARAM_MAX_MESSAGE, 5,
          "Smallest device Bcast (bytes) that runs as a pipelined chain (bcast_chain_ranks)",
          NULL),
    PSIZE(bcast_segment_bytes, 2 << 20, 1, (int64_t)1 << 30, 5,
          "Bytes per message of the pipelined chain Bcast (whole elements, at least one)", NULL),
    PBOOL(nvlink, true, 4,
          "Allreduce, Bcast and Allgather on device buffers, blocking and non-blocking, by "
          "kernels that read and write the other GPUs (CUDA IPC over NVLink) when every rank is "
          "on this node with a GPU of its own; 0: over point-to-point"),
    PSIZE(nvlink_oneshot_bytes, 1 << 20, 256, (int64_t)1 << 30, 5,
          "Largest NVLink call (bytes per rank) run through each rank's workspace (one kernel, no "
          "host exchange); each team holds twice this in device memory per rank",
          NULL),
    PBOOL(nvlink_direct, false, 5,
          "Experimental: blocking NVLink calls above nvlink_oneshot_bytes run on the "
          "application's buffers mapped through CUDA IPC after a host exchange; 0 (default): "
          "over point-to-point (delegated on a team on one GPU with nvlink_delegate 2)"),
    PINT(nvlink_timeout, 20, 1, 86400, 5,
         "Seconds an NVLink kernel waits for the other ranks before the call fails; on a "
         "delegated team, seconds a rank waits in a call (from its initiation) for the others",
         NULL),
    PBOOL(nvlink_shared_gpu, false, 9,
          "Ranks that share a GPU form an NVLink team even without CUDA MPS (correct but slow: "
          "the contexts take turns; for testing). Under MPS they do by default"),
    PINT(nvlink_delegate, 1, 0, 2, 5,
         "A team whose ranks all share one GPU runs a call as one kernel, launched by the rank "
         "that initiates it last, on every rank's buffers (no kernel waits for a peer): 0 never; "
         "1 the non-blocking calls (default); 2 those and the blocking calls above "
         "nvlink_oneshot_bytes",
         NULL),
    PBOOL(nvlink_launcher, true, 5,
          "A delegated call's kernel is launched by a thread of the team, free of the rank's CPU "
          "binding, so that the initiating call returns at once; 0: by the initiating call"),
};
#undef GW_PARAMS_STORE
#undef PINT
#undef PSIZE
#undef PBOOL
#undef PENUM

__attribute__((visibility("default"))) mca_coll_base_component_t mca_coll_gpuwire_component = {
    .collm_version = {
        GW_COLL_BASE_VERSION,
        .mca_component_name = GW_COLL_COMPONENT_NAME,
        MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
        .mca_open_component = component_open,
        .mca_close_component = component_close,
        .mca_register_component_params = component_register,
    },
    .collm_data = {
        .param_field = MCA_BASE_METADATA_PARAM_NONE,
    },
    .collm_init_query = component_init_query,
    .collm_comm_query = mca_coll_gpuwire_comm_query,
};

static int component_register(void)
{
    /* First, before anything touches Open MPI's structures: is this the
     * release we were built for? */
    if (gw_component_preflight("coll", &mca_coll_gpuwire_component) != 0) {
        return OMPI_ERR_NOT_SUPPORTED;
    }

    mca_base_component_t *c = &mca_coll_gpuwire_component.collm_version;
    gw_params_register(c, params, GW_PARAM_COUNT(params));
    gw_coll_select_register(c);

    const int counter = MCA_BASE_PVAR_CLASS_COUNTER;
    const gw_pvar_t pvars[] = {
        {"passthrough_calls",
         "Collectives on host buffers passed to the module below unchanged",
         &gw_core_counters()->coll_passthrough_calls, counter},
        {"staged_calls",
         "Collectives on device buffers staged through host memory",
         &gw_core_counters()->coll_staged_calls, counter},
        {"staged_bytes", "Bytes of host staging used by staged collectives",
         &mca_coll_gpuwire.staged_bytes, counter},
        {"device_calls",
         "Collectives on device buffers run on the GPU over point-to-point: "
         "reductions (coll_gpuwire_reduce_algorithm), Bcast, Allgather(v), "
         "Alltoall(v) (coll_gpuwire_move_algorithm); and MPI_Reduce_local by "
         "one kernel",
         &gw_core_counters()->coll_device_calls, counter},
        {"device_nb_calls",
         "Non-blocking collectives on device buffers run on the GPU over "
         "point-to-point: the reductions (counted when their "
         "turn comes), Ibcast, Iallgather(v), Ialltoall(v) (at initiation)",
         &mca_coll_gpuwire.device_nb_calls, counter},
        {"nvlink_calls",
         "Collectives on device buffers run by the NVLink kernels",
         &mca_coll_gpuwire.nvlink_calls, counter},
        {"nvlink_nb_calls",
         "Non-blocking collectives on device buffers run by the NVLink kernels "
         "(Iallreduce, Ibcast, Iallgather; counted at the kernel's launch)",
         &mca_coll_gpuwire.nvlink_nb_calls, counter},
        {"hier_calls",
         "Allreduce, Reduce, Bcast, Allgather(v) calls on device buffers across nodes composed "
         "per level (coll_gpuwire_hierarchical)",
         &mca_coll_gpuwire.hier_calls, counter},
        {"persistent_mixed",
         "Persistent collectives (MPI_<op>_init) some ranks initialized on device "
         "buffers and others not: every rank's starts run them staged",
         &mca_coll_gpuwire.persistent_mixed, counter},
        {"mixed_calls",
         "Collectives some ranks called with device buffers and others with host buffers "
         "only (or no bytes): run staged on the ranks with device memory "
         "(coll_gpuwire_agree, coll_gpuwire_agree_nb)",
         &mca_coll_gpuwire.mixed_calls, counter},
        {"nb_agreements",
         "Non-blocking collectives whose ranks agreed on memory kinds and layouts "
         "(coll_gpuwire_agree_nb)",
         &mca_coll_gpuwire.nb_agreements, counter},
        {"nb_agreements_late",
         "Of those, the calls that acted on the agreement from MPI's progress: it was not over "
         "within coll_gpuwire_agree_nb_wait_us, or an earlier call's was not",
         &mca_coll_gpuwire.nb_agreements_late, counter},
        {"nb_deferred_starts",
         "Non-blocking collectives whose previous module's collective started after "
         "their initiation returned, from MPI's progress: copies to host staging, or "
         "an earlier non-blocking collective of the communicator, were pending",
         &mca_coll_gpuwire.nb_deferred_starts, counter},
        {"nb_pending",
         "Requests of coll gpuwire's non-blocking collectives not complete yet "
         "(freed ones included)",
         &mca_coll_gpuwire.nb_pending, MCA_BASE_PVAR_CLASS_LEVEL},
        {"gpus",
         "GPUs whose buffers coll gpuwire handles; 0: no GPU (or coll_gpuwire_device "
         "0), every collective passes through",
         &mca_coll_gpuwire.gpus, MCA_BASE_PVAR_CLASS_SIZE},
    };
    gw_pvars_register(c, pvars, sizeof(pvars) / sizeof(pvars[0]));
    return OMPI_SUCCESS;
}

static int component_open(void)
{
    /* Named after the component (the test build loads as coll gpuwirefake). */
    const mca_base_component_t *c = &mca_coll_gpuwire_component.collm_version;
    if (gw_params_component_open(c, params, GW_PARAM_COUNT(params), mca_coll_gpuwire.verbose,
                                 &mca_coll_gpuwire.output) != 0) {
        return OMPI_ERR_BAD_PARAM;
    }
    return OMPI_SUCCESS;
}

static void device_log(int level, const char *msg)
{
    if (level <= 0) {
        opal_output(0, "coll:gpuwire: %s", msg);
    } else {
        opal_output_verbose(level * 5, mca_coll_gpuwire.output, "coll:gpuwire: %s", msg);
    }
}

static int component_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    int rc = mca_coll_gpuwire_requests_init();
    if (OMPI_SUCCESS != rc) return rc;
    mca_coll_gpuwire.device_ready = false;
    mca_coll_gpuwire.world_peers = GW_PEERS_UNKNOWN;
    mca_coll_gpuwire.gpus = 0;
    if (!mca_coll_gpuwire.device) {
        COLL_GPUWIRE_VERBOSE(1, "device buffers: off (coll_gpuwire_device 0); every collective "
                                "passes through");
        return OMPI_SUCCESS;
    }
    gw_coll_device_params_t p = {
        .staging_bytes = mca_coll_gpuwire.staging_bytes,
        .log = device_log,
    };
    char why[256] = "";
    int gpus = gw_coll_device_open(&p, why, sizeof(why));
    if (gpus <= 0) {
        /* Not an error: host collectives work as before. */
        COLL_GPUWIRE_VERBOSE(1, "device buffers: %s; every collective passes through", why);
        return OMPI_SUCCESS;
    }
    gw_coll_team_launcher_mode(mca_coll_gpuwire.nvlink_launcher);
    gw_coll_device_stats_t s;
    gw_coll_device_stats(&s);
    mca_coll_gpuwire.gpus = (unsigned long long)gpus;
    mca_coll_gpuwire.device_ready = true;
    /* The pml is selected before coll: does it move device buffers? */
    const char *pml = mca_pml_base_selected_component.pmlm_version.mca_component_name;
    mca_coll_gpuwire.device_p2p = 0 == strcmp(pml, "gpuwire");
    COLL_GPUWIRE_VERBOSE(1, "reductions on device buffers: %s (pml %s)",
                         GW_REDUCE_ALGO_STAGED == mca_coll_gpuwire.reduce_algorithm ? "staged"
                         : GW_REDUCE_ALGO_DEVICE == mca_coll_gpuwire.reduce_algorithm ||
                                 mca_coll_gpuwire.device_p2p
                             ? "on the GPU where a kernel applies, staged otherwise"
                             : "staged (the pml does not move device buffers)",
                         pml);
    COLL_GPUWIRE_VERBOSE(1, "device buffers: %d GPU(s), staged through host memory (%zu bytes "
                            "pinned at most); host memory kinds %s",
                         gpus, mca_coll_gpuwire.staging_bytes,
                         s.unmap_hooked ? "cached (UCM unmap events)"
                                        : "asked of the driver every time (no UCM unmap events)");
    return OMPI_SUCCESS;
}

static int component_close(void)
{
    if (mca_coll_gpuwire.device_ready) {
        gw_coll_device_stats_t s;
        gw_coll_device_stats(&s);
        COLL_GPUWIRE_VERBOSE(2, "%llu collectives passed through, %llu staged (%llu bytes); "
                                "%llu classifications (%llu host hits, %llu driver queries); "
                                "%llu bytes pinned, %llu plain host staging buffers",
                             gw_core_counters()->coll_passthrough_calls,
                             gw_core_counters()->coll_staged_calls,
                             mca_coll_gpuwire.staged_bytes, s.classified, s.host_hits, s.misses,
                             s.pinned_bytes, s.plain_allocs);
    }
    mca_coll_gpuwire_requests_fini();
    gw_coll_op_wrap_remove();
    gw_coll_device_close();
    mca_coll_gpuwire.device_ready = false;
    gw_params_component_close(&mca_coll_gpuwire.output);
    gw_coll_select_close();
    return OMPI_SUCCESS;
}
