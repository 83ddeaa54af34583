/*
 * The pml/gpuwire component: MCA parameters, version check, selection.
 */
#include "pml_gpuwire.h"

#include <string.h>

#include "gpuwire_params.h"
#include "gpuwire_preflight.h"
#include "opal/mca/base/mca_base_var.h"

/* Every MCA parameter of pml gpuwire: registration, defaults, ranges, the
 * help ompi_info shows and docs/parameters.md all come from this table
 * (gpuwire_params.h). Help: one line each; the details are in docs/. */
/* The rows of gpuwire_params.h, each parameter in its field of mca_pml_gpuwire_params. */
#define GW_PARAMS_STORE mca_pml_gpuwire_params
#define PINT GW_PINT
#define PSIZE GW_PSIZE
#define PBOOL GW_PBOOL
static const gw_param_t params[] = {
    PINT(priority, 5, 0, 1000, 3,
         "Selection priority of pml gpuwire (ob1 uses 20, ucx 51); --mca pml gpuwire selects it "
         "whatever the priority",
         "below 0 Open MPI never selects the PML"),
    GW_PVERBOSE("Verbosity: 1 errors and choices, 5 set-up, 10 every endpoint"),
    PSIZE(rndv_threshold, 0, 0, GW_PARAM_MAX_MESSAGE, 5,
          "Messages of at least this many bytes use UCX rendezvous (zero copy); 0 lets UCX "
          "decide (UCX_RNDV_THRESH)",
          NULL),
    PBOOL(err_handling, false, 5,
          "Detect failed peers (UCX peer error handling): a dead peer becomes an MPI error "
          "instead of a wait until mpirun ends the job; UCX 1.13 then leaves shared memory for TCP "
          "(8 B latency 24x, 1 MiB bandwidth 0.41x; docs/reliability.md)"),
    PBOOL(stats, false, 3,
          "At finalize, process 0 prints one table of every process's messages, bytes, paths "
          "and cache hits; 0: nothing is collected"),
    PBOOL(device, true, 3, "Accept GPU buffers (CUDA) when a GPU and its driver are present"),
    PBOOL(ipc, true, 4,
          "Move device buffers between processes of one node with CUDA IPC (over NVLink where "
          "present); off: staged through host memory"),
    PBOOL(device_sync, false, 4,
          "Also order device messages after work still queued on the legacy default stream "
          "(about 1.5 us per message). Off: the application synchronizes its asynchronous work "
          "before an MPI call, as with every CUDA-aware MPI; a cudaMemcpy has landed when it "
          "returns"),
    PSIZE(ipc_threshold, 0, 0, GW_PARAM_MAX_MESSAGE, 5,
          "Device messages of at least this many bytes use CUDA IPC", NULL),
    PSIZE(ipc_sync_max, 16384, 0, GW_PARAM_MAX_MESSAGE, 5,
          "CUDA IPC copies up to this many bytes are waited for at once; larger ones complete "
          "in the background so several overlap",
          NULL),
    PSIZE(ipc_kernel_max, 67108864, 0, GW_PARAM_MAX_MESSAGE, 5,
          "CUDA IPC copies into GPU memory up to this many bytes use gpuwire's copy kernel, which "
          "signals its own completion and takes every such copy of one progress call at once; "
          "0: the copy engine",
          NULL),
    PSIZE(ipc_cache_entries, 512, 1, (int64_t)1 << 20, 5,
          "Peer GPU allocations kept mapped per process (LRU)",
          "set pml_gpuwire_ipc 0 to switch CUDA IPC off"),
    PSIZE(ipc_cache_bytes, (int64_t)64 << 30, 1, (int64_t)1 << 50, 5,
          "Bytes of peer GPU allocations kept mapped per process (LRU)",
          "set pml_gpuwire_ipc 0 to switch CUDA IPC off"),
    PSIZE(chunk_bytes, 4 << 20, 4096, (int64_t)1 << 30, 5,
          "Chunk size of chunked transfers (staged device memory, paced sends); the same on "
          "every process",
          NULL),
    PSIZE(pace_mbps, 0, 0, 3200000, 4,
          "Pacing toward other nodes: 0 off; else host messages of at least "
          "pml_gpuwire_pace_min_bytes to another node go in chunks admitted at this rate "
          "(Mb/s), lowered by DCQCN on congestion notifications",
          "0 switches pacing off, the smallest rate is 1 (Mb/s)"),
    PSIZE(pace_min_bytes, 1 << 20, 1, GW_PARAM_MAX_MESSAGE, 5,
          "Host messages paced from this size (pml_gpuwire_pace_mbps)", NULL),
    PSIZE(recv_window_bytes, 64 << 20, 0, (int64_t)1 << 40, 5,
          "Bytes of chunks this process has posted at once, over all senders, which bounds the "
          "bytes in flight toward it; 0: no bound",
          "0: no bound"),
    PBOOL(staged_chunked, false, 5,
          "Device memory without CUDA IPC nor a CUDA-capable UCX: 1 sends it as a chunked "
          "transfer through pinned slots; 0 copies it whole into a pinned bounce buffer and "
          "sends one message"),
    PBOOL(pace_auto, true, 4,
          "With pml_gpuwire_pace_mbps 0: pace toward other nodes at the rate of the first "
          "active RoCE port found (none: no pacing)"),
    PSIZE(pace_poll_us, 100, 1, 1000000, 5,
          "Microseconds between reads of the RoCE port's CNP counter", NULL),
    PBOOL(roce_apply, false, 5,
          "1: hand the RoCEv2 GID index and traffic class gpuwire chooses to UCX "
          "(UCX_IB_GID_INDEX, UCX_IB_TRAFFIC_CLASS; never over the user's); 0: only log them"),
    PSIZE(pinned_bounce_bytes, 256 << 20, 0, (int64_t)1 << 40, 5,
          "Pinned host memory kept for device messages staged whole through host memory, at "
          "most this many bytes; 0: none",
          "0 switches the pinned bounce buffers off"),
    PSIZE(staging_bytes, 64 << 20, 1, (int64_t)1 << 40, 5,
          "Pinned host memory for staging chunks, pinned 8 MiB at a time as needed, never more "
          "than this (at least 8 MiB); past it chunks go through plain host memory",
          NULL),
    PBOOL(shared_staging, true, 5,
          "Device messages without CUDA IPC to a process of this node, from "
          "pml_gpuwire_shared_staging_min bytes: through staging slots both processes map and "
          "pin; 0: through UCX"),
    PSIZE(shared_staging_min, 32 << 10, 1, GW_PARAM_MAX_MESSAGE, 5,
          "Smallest device message sent through the shared staging slots "
          "(pml_gpuwire_shared_staging)",
          NULL),
    PSIZE(shared_staging_bytes, 32 << 20, 1, (int64_t)1 << 40, 5,
          "Host memory of this process's shared staging slots (pml_gpuwire_chunk_bytes each, at "
          "most 256 slots), pinned on first use",
          "set pml_gpuwire_shared_staging 0 to switch the shared staging slots off"),
    PBOOL(shared_staging_host, true, 5,
          "With pml_gpuwire_shared_staging: messages between host memory at one end and GPU "
          "memory at the other, to a process of this node, go through the slots too"),
    PSIZE(bounce_to_host_max, 4096, 0, GW_PARAM_MAX_MESSAGE, 5,
          "Device messages up to this size to a process of this node whose receives take them "
          "into pageable host memory go from a pinned bounce buffer as host messages; 0 never",
          NULL),
    PSIZE(shared_piece_bytes, 1 << 20, 0, (int64_t)1 << 30, 5,
          "Largest piece of a message through the shared staging slots (at most a slot): the "
          "sender's copy of one piece overlaps the receiver's copy of the one before; 0: a slot",
          NULL),
    PBOOL(shared_push, true, 5,
          "Host messages to a process of this node that receives them into GPU memory: the "
          "sender copies into that buffer itself (mapped through CUDA IPC; one DMA per piece "
          "from pinned memory) instead of a CPU copy into the slots"),
    PSIZE(push_pageable_min, 0, 0, GW_PARAM_MAX_MESSAGE, 5,
          "With pml_gpuwire_shared_push: smallest pageable host message copied that way "
          "(pinned ones always are); 0: pinned ones only",
          NULL),
    PSIZE(host_register_bytes, (int64_t)1 << 30, 0, (int64_t)1 << 50, 5,
          "Pageable host buffers that messages to or from GPU memory of this node use again "
          "are pinned for a DMA straight to or from them, at most this many bytes (least "
          "recently used out first); 0: none",
          "0 switches the pinning of host buffers off"),
    PSIZE(host_register_min, 1 << 20, 4096, GW_PARAM_MAX_MESSAGE, 5,
          "Smallest host buffer pinned that way (pml_gpuwire_host_register_bytes)", NULL),
    PINT(mpi_layer, 1, 0, 2, 3,
         "At MPI_Init, point the program's calls to MPI_Pack, Sendrecv_replace, File I/O and the "
         "other MPI-layer calls at libgpuwire_mpi.so when it was not preloaded: 0 never, 1 when "
         "the process has a GPU, 2 always",
         "0 leaves the program's calls to Open MPI (preload libgpuwire_mpi.so instead)"),
};
#undef GW_PARAMS_STORE
#undef PINT
#undef PSIZE
#undef PBOOL

static int component_register(void);
static int component_open(void);
static int component_close(void);
static mca_pml_base_module_t *component_init(int *priority, bool enable_progress_threads,
                                             bool enable_mpi_threads);
static int component_finalize(void);

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
    gw_params_register(c, params, GW_PARAM_COUNT(params));
    mca_pml_gpuwire_register_pvars(c);
    return OMPI_SUCCESS;
}

static int component_open(void)
{
    const mca_base_component_t *c = &mca_pml_gpuwire_component.pmlm_version;
    if (gw_params_component_open(c, params, GW_PARAM_COUNT(params), mca_pml_gpuwire_params.verbose,
                                 &mca_pml_gpuwire.output) != 0) {
        return OMPI_ERR_BAD_PARAM;
    }
    return OMPI_SUCCESS;
}

static int component_close(void)
{
    gw_params_component_close(&mca_pml_gpuwire.output);
    return OMPI_SUCCESS;
}

static mca_pml_base_module_t *component_init(int *priority, bool enable_progress_threads,
                                             bool enable_mpi_threads)
{
    if (OMPI_SUCCESS != mca_pml_gpuwire_open_engine(enable_mpi_threads,
                                                    &mca_pml_gpuwire_component.pmlm_version)) {
        return NULL;
    }
    *priority = mca_pml_gpuwire_params.priority;
    return mca_pml_gpuwire_module();
}

static int component_finalize(void)
{
    mca_pml_gpuwire_close_engine();
    return OMPI_SUCCESS;
}
