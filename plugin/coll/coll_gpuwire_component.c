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
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var.h"

static int component_register(void);
static int component_open(void);
static int component_close(void);
static int component_init_query(bool enable_progress_threads, bool enable_mpi_threads);

mca_coll_gpuwire_globals_t mca_coll_gpuwire = {
    /* Above every module a stock Open MPI 4.1 enables by default (tuned 30,
     * sync 50, self 75), so that device buffers are caught on every
     * communicator, MPI_COMM_SELF included, and below hcoll (90). */
    .priority = GW_COLL_DEFAULT_PRIORITY,
    .verbose = 0,
    .device = true,
    .device_sync = true,
    .staging_bytes = (size_t)256 << 20,
    .reduce_algorithm = GW_REDUCE_ALGO_AUTO,
    .move_algorithm = GW_REDUCE_ALGO_AUTO,
    .reduce_segment_bytes = (size_t)4 << 20,
    .reduce_device_min_bytes = 32768,
    .bcast_chain_ranks = 4,
    .bcast_chain_bytes = (size_t)4 << 20,
    .bcast_segment_bytes = (size_t)2 << 20,
    .hierarchical = GW_HIER_AUTO,
    .nvlink = true,
    .nvlink_oneshot_bytes = (size_t)1 << 20,
    .nvlink_timeout = 20,
    .nvlink_direct = false,
    .nvlink_shared_gpu = false,
    .output = -1,
};

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

static void register_counter(const char *name, const char *help, unsigned long long *storage,
                             int var_class)
{
    (void)mca_base_component_pvar_register(
        &mca_coll_gpuwire_component.collm_version, name, help, OPAL_INFO_LVL_4, var_class,
        MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
        MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, NULL, NULL, NULL, storage);
}

static int component_register(void)
{
    /* First, before anything touches Open MPI's structures: is this the
     * release we were built for? */
    if (gw_component_preflight("coll", &mca_coll_gpuwire_component) != 0) {
        return OMPI_ERR_NOT_SUPPORTED;
    }

    mca_base_component_t *c = &mca_coll_gpuwire_component.collm_version;
    (void)mca_base_component_var_register(
        c, "priority",
        "Selection priority of coll gpuwire: the module with the highest priority provides "
        "each collective, and gpuwire passes host buffers on to the one below it (tuned 30, "
        "self 75); -1 disables it",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.priority);
    (void)mca_base_component_var_register(
        c, "verbose",
        "Verbosity: 1 device support and errors, 10 every communicator, 20 every collective "
        "on device memory",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL,
        &mca_coll_gpuwire.verbose);
    (void)mca_base_component_var_register(
        c, "device",
        "Accept GPU buffers (CUDA) when a GPU and its driver are present; 0: every collective "
        "passes through unchanged",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.device);
    (void)mca_base_component_var_register(
        c, "device_sync",
        "Before a collective reads or writes device buffers, wait for work this process "
        "queued on the legacy default stream (cudaMemcpy device to device, kernels without a "
        "stream); 0 when the application synchronizes itself",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.device_sync);
    (void)mca_base_component_var_register(
        c, "staging_bytes",
        "Pinned host memory kept for staging device buffers, reused across collectives; "
        "staging beyond it uses plain host memory (slower copies); 0: plain host memory only",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.staging_bytes);

    static const mca_base_var_enum_value_t algorithms[] = {
        {GW_REDUCE_ALGO_AUTO, "auto"},
        {GW_REDUCE_ALGO_STAGED, "staged"},
        {GW_REDUCE_ALGO_DEVICE, "device"},
        {0, NULL},
    };
    mca_base_var_enum_t *algorithm_enum = NULL;
    if (OPAL_SUCCESS ==
        mca_base_var_enum_create("coll_gpuwire_reduce_algorithms", algorithms, &algorithm_enum)) {
        (void)mca_base_component_var_register(
            c, "reduce_algorithm",
            "How blocking Allreduce, Reduce, Reduce_scatter(_block), Scan and Exscan run on "
            "device buffers: auto (on the GPU, over point-to-point, when the pml moves device "
            "buffers, i.e. pml gpuwire; staged otherwise), staged (copied to host memory and "
            "reduced there), device (on the GPU whatever the pml, for another CUDA-aware pml). "
            "User-defined ops, derived datatypes, types without a kernel (long double, complex) "
            "and non-blocking forms are always staged. On the GPU, every rank of a call must "
            "pass device buffers",
            MCA_BASE_VAR_TYPE_INT, algorithm_enum, 0, 0, OPAL_INFO_LVL_4,
            MCA_BASE_VAR_SCOPE_READONLY, &mca_coll_gpuwire.reduce_algorithm);
        (void)mca_base_component_var_register(
            c, "move_algorithm",
            "How blocking Bcast, Allgather(v) and Alltoall(v) above the NVLink kernels' size run "
            "on device buffers: auto (one point-to-point message per block on the application's "
            "buffers when the pml moves device buffers, i.e. pml gpuwire; staged otherwise), "
            "staged (copied through host memory, Open MPI's algorithm), device (point-to-point "
            "whatever the pml). Non-blocking forms and Alltoall(v) in place are always staged. "
            "Point-to-point needs every rank of a call to pass device memory: a rank with host "
            "buffers only runs Open MPI's algorithm",
            MCA_BASE_VAR_TYPE_INT, algorithm_enum, 0, 0, OPAL_INFO_LVL_4,
            MCA_BASE_VAR_SCOPE_READONLY, &mca_coll_gpuwire.move_algorithm);
        OBJ_RELEASE(algorithm_enum);
    }
    (void)mca_base_component_var_register(
        c, "reduce_segment_bytes",
        "Bytes per message of the reductions on the GPU: a kernel combines one segment while "
        "the next arrives (smaller: more overlap, more messages)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.reduce_segment_bytes);
    (void)mca_base_component_var_register(
        c, "reduce_device_min_bytes",
        "Under coll_gpuwire_reduce_algorithm auto, a reduction that no NVLink team runs goes "
        "over point-to-point on the GPU only from this many bytes times (ranks - 1) (the ring's "
        "step count); smaller ones are staged through host memory, which costs less there "
        "(two ranks: 20 us against 40 us at 8 bytes, even near 32 KiB). Counted over the "
        "whole call: count, the sum of Reduce_scatter's counts. 0: always on the GPU",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.reduce_device_min_bytes);

    (void)mca_base_component_var_register(
        c, "hierarchical",
        "Allreduce, Reduce, Bcast, Allgather(v) on device buffers over communicators that span several "
        "nodes: 1 (auto, where the level's algorithms run on the GPU) composes them per level "
        "(Allreduce: reduce inside each node to its first rank, allreduce among the nodes' "
        "first ranks, bcast inside each node; Reduce likewise to the root; Bcast: inside the "
        "root's node, among the first ranks, inside the other nodes), so only one rank per node "
        "uses the network; 2 also where they are staged (Reduce needs a pml that moves device "
        "memory); 0 never. The non-blocking forms compose them too once a blocking call or a "
        "persistent initialization has set the levels up on the communicator",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.hierarchical);
    (void)mca_base_component_var_register(
        c, "bcast_chain_ranks",
        "Device Bcast over point-to-point (coll_gpuwire_move_algorithm) to at least this many "
        "ranks, of at least coll_gpuwire_bcast_chain_bytes, runs as a pipelined chain: each "
        "rank receives the message from the one before it in segments and forwards each "
        "segment as soon as it has it, so the root sends the message once instead of once per "
        "rank. 0: never (the root sends to every rank)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.bcast_chain_ranks);
    (void)mca_base_component_var_register(
        c, "bcast_chain_bytes",
        "Smallest device Bcast (bytes) that runs as a pipelined chain (see "
        "coll_gpuwire_bcast_chain_ranks)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.bcast_chain_bytes);
    (void)mca_base_component_var_register(
        c, "bcast_segment_bytes",
        "Bytes per message of the pipelined chain Bcast (whole elements of the datatype; at "
        "least one element)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.bcast_segment_bytes);

    (void)mca_base_component_var_register(
        c, "nvlink",
        "Allreduce, Bcast and Allgather on device buffers by kernels that read and write the "
        "other GPUs directly (CUDA IPC over NVLink), when every rank of the communicator is on "
        "this node with a GPU of its own; blocking forms, predefined ops and types (no "
        "MINLOC/MAXLOC), contiguous buffers. 0: the algorithms over point-to-point",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.nvlink);
    (void)mca_base_component_var_register(
        c, "nvlink_oneshot_bytes",
        "Largest NVLink collective (bytes per rank) that goes through each rank's workspace "
        "(one kernel, one GPU-side barrier, no host exchange); larger ones read and write the "
        "application's buffers directly after a host exchange of their IPC handles. Each "
        "communicator using NVLink holds twice this in device memory per rank. Larger calls: "
        "see coll_gpuwire_nvlink_direct",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.nvlink_oneshot_bytes);
    (void)mca_base_component_var_register(
        c, "nvlink_direct",
        "NVLink collectives larger than coll_gpuwire_nvlink_oneshot_bytes map the application's "
        "buffers of every rank (CUDA IPC) and run there; 0 (default): they run over "
        "point-to-point. Experimental, off by default: CUDA opens an allocation's IPC handle once per "
        "process, and pml gpuwire keeps its own mappings, so a buffer that both map fails in "
        "the second (cudaErrorAlreadyMapped) and the call falls back or fails",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.nvlink_direct);
    (void)mca_base_component_var_register(
        c, "nvlink_timeout",
        "Seconds an NVLink collective's kernel waits for the other ranks before it gives up "
        "and the call fails (a rank died or called another collective)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.nvlink_timeout);
    (void)mca_base_component_var_register(
        c, "nvlink_shared_gpu",
        "For testing the NVLink kernels on one GPU: ranks that share a GPU form a team too. "
        "Correct but slow: their kernels take turns on the GPU, so every GPU-side barrier waits "
        "for a switch between the processes' contexts (milliseconds)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpuwire.nvlink_shared_gpu);

    register_counter("passthrough_calls",
                     "Collectives on host buffers passed to the module below unchanged",
                     &gw_core_counters()->coll_passthrough_calls, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("staged_calls",
                     "Collectives on device buffers staged through host memory",
                     &gw_core_counters()->coll_staged_calls, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("staged_bytes", "Bytes of host staging used by staged collectives",
                     &mca_coll_gpuwire.staged_bytes, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("device_calls",
                     "Collectives on device buffers run on the GPU over point-to-point: "
                     "reductions (coll_gpuwire_reduce_algorithm), Bcast, Allgather(v), "
                     "Alltoall(v) (coll_gpuwire_move_algorithm); and MPI_Reduce_local by "
                     "one kernel",
                     &gw_core_counters()->coll_device_calls, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("device_nb_calls",
                     "Non-blocking collectives on device buffers run on the GPU over "
                     "point-to-point: the reductions (counted when their "
                     "turn comes), Ibcast, Iallgather(v), Ialltoall(v) (at initiation)",
                     &mca_coll_gpuwire.device_nb_calls, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("nvlink_calls",
                     "Collectives on device buffers run by the NVLink kernels",
                     &mca_coll_gpuwire.nvlink_calls, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("nvlink_nb_calls",
                     "Non-blocking collectives on device buffers run by the NVLink kernels "
                     "(Iallreduce, Ibcast, Iallgather; counted at the kernel's launch)",
                     &mca_coll_gpuwire.nvlink_nb_calls, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("hier_calls",
                     "Allreduce, Reduce, Bcast, Allgather(v) calls on device buffers across nodes composed "
                     "per level (coll_gpuwire_hierarchical)",
                     &mca_coll_gpuwire.hier_calls, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("persistent_mixed",
                     "Persistent collectives (MPI_<op>_init) some ranks initialized on device "
                     "buffers and others not: every rank's starts run them staged",
                     &mca_coll_gpuwire.persistent_mixed, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("nb_deferred_starts",
                     "Non-blocking collectives whose previous module's collective started after "
                     "their initiation returned, from MPI's progress: copies to host staging, or "
                     "an earlier non-blocking collective of the communicator, were pending",
                     &mca_coll_gpuwire.nb_deferred_starts, MCA_BASE_PVAR_CLASS_COUNTER);
    register_counter("nb_pending",
                     "Requests of coll gpuwire's non-blocking collectives not complete yet "
                     "(freed ones included)",
                     &mca_coll_gpuwire.nb_pending, MCA_BASE_PVAR_CLASS_LEVEL);
    register_counter("gpus",
                     "GPUs whose buffers coll gpuwire handles; 0: no GPU (or coll_gpuwire_device "
                     "0), every collective passes through",
                     &mca_coll_gpuwire.gpus, MCA_BASE_PVAR_CLASS_SIZE);
    return OMPI_SUCCESS;
}

static int component_open(void)
{
    /* Named after the component: the test build loads as coll gpuwirefake. */
#define GW_COLL_PARAM(name) "coll_" GW_COLL_COMPONENT_NAME "_" name
    const gw_param_range_t ranges[] = {
        {GW_COLL_PARAM("priority"), GW_PARAM_INT, &mca_coll_gpuwire.priority, -1, 1000,
         "-1 disables the component"},
        {GW_COLL_PARAM("verbose"), GW_PARAM_INT, &mca_coll_gpuwire.verbose, 0, 100, NULL},
        {GW_COLL_PARAM("staging_bytes"), GW_PARAM_SIZE, &mca_coll_gpuwire.staging_bytes, 0,
         GW_PARAM_MAX_MESSAGE, NULL},
        {GW_COLL_PARAM("reduce_segment_bytes"), GW_PARAM_SIZE,
         &mca_coll_gpuwire.reduce_segment_bytes, 1, (int64_t)1 << 30, NULL},
        {GW_COLL_PARAM("reduce_device_min_bytes"), GW_PARAM_SIZE,
         &mca_coll_gpuwire.reduce_device_min_bytes, 0, (int64_t)1 << 40, "0: always on the GPU"},
        {GW_COLL_PARAM("hierarchical"), GW_PARAM_INT, &mca_coll_gpuwire.hierarchical, 0, 2,
         "0 never, 1 auto, 2 always"},
        {GW_COLL_PARAM("bcast_chain_ranks"), GW_PARAM_INT, &mca_coll_gpuwire.bcast_chain_ranks, 0,
         1 << 24, "0: never"},
        {GW_COLL_PARAM("bcast_chain_bytes"), GW_PARAM_SIZE, &mca_coll_gpuwire.bcast_chain_bytes, 0,
         GW_PARAM_MAX_MESSAGE, NULL},
        {GW_COLL_PARAM("bcast_segment_bytes"), GW_PARAM_SIZE,
         &mca_coll_gpuwire.bcast_segment_bytes, 1, (int64_t)1 << 30, NULL},
        {GW_COLL_PARAM("nvlink_oneshot_bytes"), GW_PARAM_SIZE,
         &mca_coll_gpuwire.nvlink_oneshot_bytes, 256, (int64_t)1 << 30, NULL},
        {GW_COLL_PARAM("nvlink_timeout"), GW_PARAM_INT, &mca_coll_gpuwire.nvlink_timeout, 1,
         86400, NULL},
    };
#undef GW_COLL_PARAM
    if (gw_params_check("coll:" GW_COLL_COMPONENT_NAME, ranges,
                        sizeof(ranges) / sizeof(ranges[0])) != 0) {
        return OMPI_ERR_BAD_PARAM;
    }
    mca_coll_gpuwire.output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_coll_gpuwire.output, mca_coll_gpuwire.verbose);
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
    gw_coll_device_close();
    mca_coll_gpuwire.device_ready = false;
    if (mca_coll_gpuwire.output >= 0) {
        opal_output_close(mca_coll_gpuwire.output);
        mca_coll_gpuwire.output = -1;
    }
    return OMPI_SUCCESS;
}
