/*
 * The engine's counters as MPI_T performance variables (pml_gpuwire_<name>):
 * continuous read-only counters (and levels), readable by any MPI tool through
 * MPI_T_pvar_read. They cost nothing until read: the engine counts anyway.
 */
#include <stddef.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "pml_gpuwire.h"

static const struct {
    const char *name;
    const char *help;
    size_t offset;
} pvars[] = {
    {"sends", "Messages sent", offsetof(gw_engine_stats_t, sends)},
    {"recvs", "Messages received", offsetof(gw_engine_stats_t, recvs)},
    {"bytes_sent", "Payload bytes sent", offsetof(gw_engine_stats_t, bytes_sent)},
    {"bytes_received", "Payload bytes received", offsetof(gw_engine_stats_t, bytes_received)},
    {"eager_sends", "Host messages sent eagerly (completed at once)",
     offsetof(gw_engine_stats_t, eager_sends)},
    {"rndv_sends", "Host messages sent through UCX rendezvous",
     offsetof(gw_engine_stats_t, rndv_sends)},
    {"probe_pulls", "Messages a probe took out of UCX to read a device descriptor",
     offsetof(gw_engine_stats_t, probe_pulls)},
    {"ipc_sends", "Device messages sent through CUDA IPC", offsetof(gw_engine_stats_t, ipc_sends)},
    {"staged_sends", "Device messages staged through host memory",
     offsetof(gw_engine_stats_t, staged_sends)},
    {"device_recvs", "Messages received into GPU memory",
     offsetof(gw_engine_stats_t, device_recvs)},
    {"ipc_map_hits", "CUDA IPC mappings found in the cache",
     offsetof(gw_engine_stats_t, ipc_map_hits)},
    {"ipc_map_misses", "CUDA IPC mappings opened", offsetof(gw_engine_stats_t, ipc_map_misses)},
    {"chunked_sends", "Chunked transfers sent (staged device memory, paced sends)",
     offsetof(gw_engine_stats_t, chunked_sends)},
    {"chunked_recvs", "Chunked transfers received", offsetof(gw_engine_stats_t, chunked_recvs)},
    {"pacer_deferrals", "Chunks the pacer held back", offsetof(gw_engine_stats_t, pacer_deferrals)},
    {"window_deferrals", "Chunk receives held back by the receive window",
     offsetof(gw_engine_stats_t, window_deferrals)},
    {"pace_rate_mbps", "Rate of the pacer toward other nodes (Mb/s; 0: no pacing)",
     offsetof(gw_engine_stats_t, pace_rate_mbps)},
    {"pace_cnps", "CNPs of the RoCE port fed to the pacer", offsetof(gw_engine_stats_t, pace_cnps)},
    {"staging_heap_chunks", "Chunks staged in plain host memory (every pinned chunk on loan)",
     offsetof(gw_engine_stats_t, staging_heap_chunks)},
    {"pinned_bounce_hits", "Device messages staged whole through a pinned buffer pinned before",
     offsetof(gw_engine_stats_t, pinned_bounce_hits)},
    {"pinned_bounce_pins", "Pinned bounce buffers pinned (pml_gpuwire_pinned_bounce_bytes)",
     offsetof(gw_engine_stats_t, pinned_bounce_pins)},
    {"pinned_bounce_evictions", "Idle pinned bounce buffers unpinned to make room for a larger one",
     offsetof(gw_engine_stats_t, pinned_bounce_evictions)},
    {"pinned_bounce_fallbacks",
     "Device messages staged through pageable memory: no pinned bounce buffer could be lent",
     offsetof(gw_engine_stats_t, pinned_bounce_fallbacks)},
    {"pinned_bounce_held_bytes", "Bytes of pinned host memory the bounce cache holds now",
     offsetof(gw_engine_stats_t, pinned_bounce_held_bytes)},
    {"pinned_staging_held_bytes", "Bytes of pinned host memory held for staging chunks now",
     offsetof(gw_engine_stats_t, pinned_staging_held_bytes)},
    {"ipc_mappings_open", "Peer GPU allocations mapped through CUDA IPC now",
     offsetof(gw_engine_stats_t, ipc_mappings_open)},
    {"ipc_mapped_bytes", "Bytes of peer GPU allocations in the CUDA IPC mapping cache now",
     offsetof(gw_engine_stats_t, ipc_mapped_bytes)},
    {"dropped_messages", "Messages dropped (malformed, or for a freed communicator)",
     offsetof(gw_engine_stats_t, dropped_messages)},
};

/* Values now (MPI_T levels) rather than counts since the start. */
static int is_level(size_t offset)
{
    return offset == offsetof(gw_engine_stats_t, pace_rate_mbps) ||
           offset == offsetof(gw_engine_stats_t, pinned_bounce_held_bytes) ||
           offset == offsetof(gw_engine_stats_t, pinned_staging_held_bytes) ||
           offset == offsetof(gw_engine_stats_t, ipc_mappings_open) ||
           offset == offsetof(gw_engine_stats_t, ipc_mapped_bytes);
}

static int read_counter(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    unsigned long long v = 0;
    if (mca_pml_gpuwire.engine) {
        gw_engine_stats_t s;
        gw_engine_stats(mca_pml_gpuwire.engine, &s);
        v = *(const uint64_t *)((const char *)&s + (size_t)(uintptr_t)pvar->ctx);
    }
    *(unsigned long long *)value = v;
    return OPAL_SUCCESS;
}

void mca_pml_gpuwire_register_pvars(const mca_base_component_t *component)
{
    for (size_t i = 0; i < sizeof(pvars) / sizeof(pvars[0]); ++i) {
        (void)mca_base_component_pvar_register(
            component, pvars[i].name, pvars[i].help, OPAL_INFO_LVL_4,
            is_level(pvars[i].offset) ? MCA_BASE_PVAR_CLASS_LEVEL : MCA_BASE_PVAR_CLASS_COUNTER,
            MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
            MPI_T_BIND_NO_OBJECT, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
            read_counter, NULL, NULL, (void *)(uintptr_t)pvars[i].offset);
    }
}
