/*
 * The engine's counters as MPI_T performance variables (pml_gpuwire_<name>):
 * continuous read-only counters (and levels), readable by any MPI tool through
 * MPI_T_pvar_read. They cost nothing until read: the engine counts anyway.
 */
#include <stddef.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "pml_gpuwire.h"

#define COUNTER(name, help, field) {name, help, offsetof(gw_engine_stats_t, field), 0}
#define LEVEL(name, help, field) {name, help, offsetof(gw_engine_stats_t, field), 1}

static const struct {
    const char *name;
    const char *help;
    size_t offset;
    int level; /* a value now (MPI_T level), not a count since the start */
} pvars[] = {
    COUNTER("sends", "Messages sent", sends),
    COUNTER("recvs", "Messages received", recvs),
    COUNTER("bytes_sent", "Payload bytes sent", bytes_sent),
    COUNTER("bytes_received", "Payload bytes received", bytes_received),
    COUNTER("eager_sends", "Host messages sent eagerly (completed at once)", eager_sends),
    COUNTER("rndv_sends", "Host messages sent through UCX rendezvous", rndv_sends),
    COUNTER("probe_pulls", "Messages a probe took out of UCX to read a device descriptor",
          probe_pulls),
    COUNTER("ipc_sends", "Device messages sent through CUDA IPC", ipc_sends),
    COUNTER("staged_sends", "Device messages staged through host memory", staged_sends),
    COUNTER("ucx_device_sends",
          "Device messages to other nodes handed to UCX as GPU memory (GPUDirect RDMA where UCX "
          "has it)",
          ucx_device_sends),
    COUNTER("ucx_device_recvs",
          "Device receives from other nodes that UCX wrote straight into GPU memory",
          ucx_device_recvs),
    LEVEL("ucx_moves_cuda", "1 when the UCX in use moves CUDA memory (device pointers to other "
          "nodes go to it), else 0", ucx_moves_cuda),
    COUNTER("device_recvs", "Messages received into GPU memory", device_recvs),
    COUNTER("ipc_map_hits", "CUDA IPC mappings found in the cache", ipc_map_hits),
    COUNTER("ipc_map_misses", "CUDA IPC mappings opened", ipc_map_misses),
    COUNTER("chunked_sends", "Chunked transfers sent (staged device memory, paced sends)",
          chunked_sends),
    COUNTER("chunked_recvs", "Chunked transfers received", chunked_recvs),
    COUNTER("pacer_deferrals", "Chunks the pacer held back", pacer_deferrals),
    COUNTER("window_deferrals", "Chunk receives held back by the receive window", window_deferrals),
    LEVEL("pace_rate_mbps", "Rate of the pacer toward other nodes (Mb/s; 0: no pacing)",
          pace_rate_mbps),
    COUNTER("pace_cnps", "CNPs of the RoCE port fed to the pacer", pace_cnps),
    COUNTER("staging_heap_chunks",
          "Chunks staged in plain host memory (every pinned chunk on loan)",
          staging_heap_chunks),
    COUNTER("shared_chunks",
          "Chunks of device messages staged through host memory shared with a receiver on "
          "this node (pml_gpuwire_shared_staging)",
          shared_chunks),
    COUNTER("shared_host_sends",
          "Host messages sent through the shared staging slots because their receiver on this "
          "node takes them into GPU memory (pml_gpuwire_shared_staging_host)",
          shared_host_sends),
    COUNTER("shared_to_host_sends",
          "Device messages sent through the shared staging slots instead of CUDA IPC because "
          "their receiver on this node takes them into pageable host memory "
          "(pml_gpuwire_shared_staging_host)",
          shared_to_host_sends),
    COUNTER("bounce_to_host_sends",
          "Device messages below pml_gpuwire_shared_staging_min sent from a pinned bounce buffer "
          "as host messages instead of CUDA IPC because their receiver on this node takes them "
          "into pageable host memory (pml_gpuwire_shared_staging_host)",
          bounce_to_host_sends),
    COUNTER("shared_push_sends",
          "Host messages through the shared staging path that the sender copied into its "
          "receiver's GPU memory itself (pml_gpuwire_shared_push)",
          shared_push_sends),
    COUNTER("host_registered",
          "Pageable host buffers of messages to or from GPU memory pinned for reuse "
          "(pml_gpuwire_host_register_bytes)",
          host_registered),
    COUNTER("host_register_hits", "Messages whose pageable host buffer was pinned already",
          host_register_hits),
    COUNTER("host_register_unmapped",
          "Pinned host buffers unregistered because the process unmapped them",
          host_register_unmapped),
    LEVEL("host_registered_bytes", "Bytes of pageable host buffers pinned now",
          host_registered_bytes),
    COUNTER("host_register_refused",
          "Pageable host buffers used again but not pinned: not a mapping of their own, or the "
          "driver refused (the reason at coll_gpuwire_verbose 15)",
          host_register_refused),
    COUNTER("shared_slot_waits",
          "Times a chunk found every shared staging slot with a receiver (counted at each retry)",
          shared_slot_waits),
    COUNTER("pinned_bounce_hits",
          "Device messages staged whole through a pinned buffer pinned before",
          pinned_bounce_hits),
    COUNTER("pinned_bounce_pins", "Pinned bounce buffers pinned (pml_gpuwire_pinned_bounce_bytes)",
          pinned_bounce_pins),
    COUNTER("pinned_bounce_evictions",
          "Idle pinned bounce buffers unpinned to make room for a larger one",
          pinned_bounce_evictions),
    COUNTER("pinned_bounce_fallbacks",
          "Device messages staged through pageable memory: no pinned bounce buffer could be lent",
          pinned_bounce_fallbacks),
    LEVEL("pinned_bounce_held_bytes", "Bytes of pinned host memory the bounce cache holds now",
          pinned_bounce_held_bytes),
    LEVEL("pinned_staging_held_bytes", "Bytes of pinned host memory held for staging chunks now",
          pinned_staging_held_bytes),
    LEVEL("ipc_mappings_open", "Peer GPU allocations mapped through CUDA IPC now",
          ipc_mappings_open),
    LEVEL("ipc_mapped_bytes", "Bytes of peer GPU allocations in the CUDA IPC mapping cache now",
          ipc_mapped_bytes),
    COUNTER("dropped_messages", "Messages dropped (malformed, or for a freed communicator)",
          dropped_messages),
};
#undef COUNTER
#undef LEVEL

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
            pvars[i].level ? MCA_BASE_PVAR_CLASS_LEVEL : MCA_BASE_PVAR_CLASS_COUNTER,
            MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
            MPI_T_BIND_NO_OBJECT, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
            read_counter, NULL, NULL, (void *)(uintptr_t)pvars[i].offset);
    }
}
