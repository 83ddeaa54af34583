/*
 * The pml/gpuwire component: MCA parameters, version check, selection.
 */
#include "pml_gpuwire.h"

#include <string.h>

#include "gpuwire_params.h"
#include "gpuwire_preflight.h"
#include "opal/mca/base/mca_base_var.h"

/* Every MCA parameter of pml gpuwire (ranges: component_open). */
static const struct {
    const char *name;
    const char *help;
    mca_base_var_type_t type;
    mca_base_var_info_lvl_t level;
    mca_base_var_scope_t scope;
    void *storage;
} params[] = {
    {"priority",
     "Selection priority of pml gpuwire (ob1 uses 20, ucx 51); --mca pml gpuwire selects it "
     "whatever the priority",
     MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.priority},
    {"verbose",
     "Verbosity: 1 errors and choices, 5 set-up, 10 every endpoint",
     MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_pml_gpuwire_params.verbose},
    {"rndv_threshold",
     "Messages of at least this many bytes use UCX rendezvous (zero copy); 0 lets UCX "
     "decide (UCX_RNDV_THRESH)",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.rndv_threshold},
    {"err_handling",
     "Detect failed peers (UCX peer error handling): a dead peer becomes an MPI error "
     "instead of a hang, at a small cost per message",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.err_handling},
    {"stats",
     "At finalize, print one table (from process 0) of every process's messages and bytes, "
     "messages by path and cache hits and misses; 0: nothing is collected",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.stats},
    {"device",
     "Accept GPU buffers (CUDA) when a GPU and its driver are present",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.device},
    {"ipc",
     "Move device buffers between processes of one node with CUDA IPC (over NVLink where "
     "present); off: staged through host memory",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.ipc},
    {"device_sync",
     "Before another process reads a device buffer through CUDA IPC, wait for work this "
     "process queued on the legacy default stream (makes cudaMemcpy followed by MPI_Send "
     "safe; about 1-2 us per message); 0 when the application synchronizes itself",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.device_sync},
    {"ipc_threshold",
     "Device messages of at least this many bytes use CUDA IPC",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.ipc_threshold},
    {"ipc_sync_max",
     "CUDA IPC copies up to this many bytes are waited for at once (lowest latency); larger "
     "ones complete in the background so several overlap",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.ipc_sync_max},
    {"ipc_cache_entries",
     "Peer GPU allocations kept mapped per process (LRU)",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.ipc_cache_entries},
    {"ipc_cache_bytes",
     "Bytes of peer GPU allocations kept mapped per process (LRU)",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.ipc_cache_bytes},
    {"chunk_bytes",
     "Chunk size of chunked transfers: device memory staged through pinned host memory (no "
     "CUDA IPC, no CUDA-capable UCX) and paced sends; the same on every process",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.chunk_bytes},
    {"pace_mbps",
     "Pacing toward other nodes: 0 off; else host messages of at least "
     "pml_gpuwire_pace_min_bytes to a process on another node go in chunks admitted at this "
     "rate (Mb/s), lowered by DCQCN on congestion notifications",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.pace_mbps},
    {"pace_min_bytes",
     "Host messages paced from this size (pml_gpuwire_pace_mbps)",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.pace_min_bytes},
    {"recv_window_bytes",
     "Receiver-driven admission: bytes of chunks (chunked transfers) this process has "
     "posted at once, over all senders; chunks move only once posted, so this bounds the "
     "bytes in flight toward it; 0: no bound",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.recv_window_bytes},
    {"staged_chunked",
     "Device memory without CUDA IPC (and without a CUDA-capable UCX): 1 sends it as a "
     "chunked transfer through pinned slots, device copies overlapping the wire; 0 (the "
     "default) copies it whole into a pinned bounce buffer and sends one message, the faster "
     "of the two measured on one node",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.staged_chunked},
    {"pace_auto",
     "With pml_gpuwire_pace_mbps 0: pace toward other nodes at the rate of the first active "
     "RoCE port found (none: no pacing); its rp_cnp_handled counter feeds DCQCN either way",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.pace_auto},
    {"pace_poll_us",
     "Microseconds between reads of the RoCE port's CNP counter",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.pace_poll_us},
    {"pinned_bounce_bytes",
     "Pinned host memory kept for device messages staged whole through host memory (a "
     "receive into GPU memory lands in one pinned buffer, a staged send is copied out into "
     "one): buffers of power-of-two sizes from 64 KiB are lent per message and kept for "
     "reuse, at most this many bytes in all; a message the bound cannot serve goes through "
     "pageable memory; 0: none",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.pinned_bounce_bytes},
    {"staging_bytes",
     "Pinned host memory for staging chunks (chunked transfers, and copies between pageable "
     "host memory and GPU memory): pinned 8 MiB at a time as needed and kept until "
     "MPI_Finalize, never more than this many bytes (at least 8 MiB); past it a chunk goes "
     "through plain host memory",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.staging_bytes},
    {"shared_staging",
     "Device memory without CUDA IPC to a process of this node (pml_gpuwire_ipc 0, or memory "
     "IPC cannot export): 1 (the default) moves messages of at least "
     "pml_gpuwire_shared_staging_min bytes through staging slots in host memory both "
     "processes map and pin (one DMA out of one GPU, one into the other, no CPU copy); 0 "
     "sends them through UCX",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.shared_staging},
    {"shared_staging_min",
     "Smallest device message sent through the shared staging slots "
     "(pml_gpuwire_shared_staging)",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.shared_staging_min},
    {"shared_staging_bytes",
     "Host memory of this process's shared staging slots (pml_gpuwire_chunk_bytes each, "
     "at most 256 slots), pinned once on first use; every process of the node that receives "
     "from it maps and pins it too",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.shared_staging_bytes},
    {"shared_staging_host",
     "With pml_gpuwire_shared_staging: messages of at least pml_gpuwire_shared_staging_min "
     "bytes between host memory at one end and GPU memory at the other, to a process of this "
     "node, go through the slots too: host messages its receives take into GPU memory (one "
     "CPU copy into a slot, one DMA out of it, instead of UCX's copy into host memory and a "
     "second copy up), and device messages its receives take into pageable host memory "
     "(instead of CUDA IPC and a copy through pinned chunks); small device messages to "
     "such a receiver go as host messages from a pinned bounce buffer "
     "(pml_gpuwire_bounce_to_host_max). The receiver says so after the first such message; "
     "a message it takes the other way switches the sender back",
     MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.shared_staging_host},
    {"bounce_to_host_max",
     "With pml_gpuwire_shared_staging_host: device messages up to this size (and below "
     "pml_gpuwire_shared_staging_min) to a process of this node whose receives take them into "
     "pageable host memory go as host messages from a pinned bounce buffer instead of CUDA "
     "IPC; 0 never",
     MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_pml_gpuwire_params.bounce_to_host_max},
};

static int component_register(void);
static int component_open(void);
static int component_close(void);
static mca_pml_base_module_t *component_init(int *priority, bool enable_progress_threads,
                                             bool enable_mpi_threads);
static int component_finalize(void);

mca_pml_gpuwire_params_t mca_pml_gpuwire_params = {
    .priority = 5,
    .verbose = 0,
    .rndv_threshold = 0,
    .err_handling = false,
    .stats = false,
    .device = true,
    .ipc = true,
    .device_sync = true,
    .ipc_threshold = 0,
    .ipc_sync_max = 16384,
    .ipc_cache_entries = 512,
    .ipc_cache_bytes = (size_t)64 << 30,
    .chunk_bytes = (size_t)4 << 20,
    .pace_mbps = 0,
    .pace_min_bytes = (size_t)1 << 20,
    .recv_window_bytes = (size_t)64 << 20,
    .staged_chunked = false,
    .pace_auto = true,
    .pace_poll_us = 100,
    .pinned_bounce_bytes = (size_t)256 << 20,
    .staging_bytes = (size_t)64 << 20,
    .shared_staging = true,
    .shared_staging_min = (size_t)32 << 10,
    .shared_staging_bytes = (size_t)32 << 20,
    .shared_staging_host = true,
    .bounce_to_host_max = 4096,
};

__attribute__((visibility("default"))) gw_pml_component_t mca_pml_gpuwire_component = {
    .pmlm_version = {
        GW_PML_BASE_VERSION,
        .mca_component_name = "gpuwire",
        MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
        .mca_open_component = component_open,
        .mca_close_component = component_close,
        .mca_register_component_params = component_register,
    },
    .pmlm_data = {
        .param_field = MCA_BASE_METADATA_PARAM_NONE,
    },
    .pmlm_init = component_init,
    .pmlm_finalize = component_finalize,
};

static int component_register(void)
{
    /* First, before anything touches Open MPI's structures: is this the
     * release we were built for? */
    if (gw_component_preflight("pml", &mca_pml_gpuwire_component) != 0) {
        return OMPI_ERR_NOT_SUPPORTED;
    }

    mca_base_component_t *c = &mca_pml_gpuwire_component.pmlm_version;
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); ++i) {
        (void)mca_base_component_var_register(c, params[i].name, params[i].help, params[i].type,
                                              NULL, 0, 0, params[i].level, params[i].scope,
                                              params[i].storage);
    }
    mca_pml_gpuwire_register_pvars(c);
    return OMPI_SUCCESS;
}

static int component_open(void)
{
    const gw_param_range_t ranges[] = {
        {"pml_gpuwire_priority", GW_PARAM_INT, &mca_pml_gpuwire_params.priority, 0, 1000,
         "below 0 Open MPI never selects the PML"},
        {"pml_gpuwire_verbose", GW_PARAM_INT, &mca_pml_gpuwire_params.verbose, 0, 100, NULL},
        {"pml_gpuwire_rndv_threshold", GW_PARAM_SIZE, &mca_pml_gpuwire_params.rndv_threshold,
         0, GW_PARAM_MAX_MESSAGE, NULL},
        {"pml_gpuwire_ipc_threshold", GW_PARAM_SIZE, &mca_pml_gpuwire_params.ipc_threshold, 0,
         GW_PARAM_MAX_MESSAGE, NULL},
        {"pml_gpuwire_ipc_sync_max", GW_PARAM_SIZE, &mca_pml_gpuwire_params.ipc_sync_max, 0,
         GW_PARAM_MAX_MESSAGE, NULL},
        {"pml_gpuwire_ipc_cache_entries", GW_PARAM_SIZE,
         &mca_pml_gpuwire_params.ipc_cache_entries, 1, (int64_t)1 << 20,
         "set pml_gpuwire_ipc 0 to switch CUDA IPC off"},
        {"pml_gpuwire_ipc_cache_bytes", GW_PARAM_SIZE, &mca_pml_gpuwire_params.ipc_cache_bytes,
         1, (int64_t)1 << 50, "set pml_gpuwire_ipc 0 to switch CUDA IPC off"},
        {"pml_gpuwire_chunk_bytes", GW_PARAM_SIZE, &mca_pml_gpuwire_params.chunk_bytes, 4096,
         (int64_t)1 << 30, NULL},
        {"pml_gpuwire_pace_mbps", GW_PARAM_SIZE, &mca_pml_gpuwire_params.pace_mbps, 0, 3200000,
         "0 switches pacing off"},
        {"pml_gpuwire_pace_min_bytes", GW_PARAM_SIZE, &mca_pml_gpuwire_params.pace_min_bytes, 1,
         GW_PARAM_MAX_MESSAGE, NULL},
        {"pml_gpuwire_pace_poll_us", GW_PARAM_SIZE, &mca_pml_gpuwire_params.pace_poll_us, 1,
         1000000, NULL},
        {"pml_gpuwire_recv_window_bytes", GW_PARAM_SIZE,
         &mca_pml_gpuwire_params.recv_window_bytes, 0, (int64_t)1 << 40, "0: no bound"},
        {"pml_gpuwire_pinned_bounce_bytes", GW_PARAM_SIZE,
         &mca_pml_gpuwire_params.pinned_bounce_bytes, 0, (int64_t)1 << 40,
         "0 switches the pinned bounce buffers off"},
        {"pml_gpuwire_staging_bytes", GW_PARAM_SIZE, &mca_pml_gpuwire_params.staging_bytes, 1,
         (int64_t)1 << 40, NULL},
        {"pml_gpuwire_shared_staging_min", GW_PARAM_SIZE,
         &mca_pml_gpuwire_params.shared_staging_min, 1, GW_PARAM_MAX_MESSAGE, NULL},
        {"pml_gpuwire_shared_staging_bytes", GW_PARAM_SIZE,
         &mca_pml_gpuwire_params.shared_staging_bytes, 1, (int64_t)1 << 40,
         "set pml_gpuwire_shared_staging 0 to switch the shared staging slots off"},
        {"pml_gpuwire_bounce_to_host_max", GW_PARAM_SIZE,
         &mca_pml_gpuwire_params.bounce_to_host_max, 0, GW_PARAM_MAX_MESSAGE, NULL},
    };
    if (gw_params_check("pml:gpuwire", ranges, sizeof(ranges) / sizeof(ranges[0])) != 0) {
        return OMPI_ERR_BAD_PARAM;
    }
    mca_pml_gpuwire.output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_pml_gpuwire.output, mca_pml_gpuwire_params.verbose);
    return OMPI_SUCCESS;
}

static int component_close(void)
{
    if (mca_pml_gpuwire.output >= 0) {
        opal_output_close(mca_pml_gpuwire.output);
        mca_pml_gpuwire.output = -1;
    }
    return OMPI_SUCCESS;
}

static mca_pml_base_module_t *component_init(int *priority, bool enable_progress_threads,
                                             bool enable_mpi_threads)
{
    if (OMPI_SUCCESS != mca_pml_gpuwire_open_engine(enable_mpi_threads)) return NULL;
    *priority = mca_pml_gpuwire_params.priority;
    return &mca_pml_gpuwire.super;
}

static int component_finalize(void)
{
    mca_pml_gpuwire_close_engine();
    return OMPI_SUCCESS;
}
