// The one place where a message's path is decided: memory kind x locality x
// size -> protocol. Nothing downstream re-checks what is decided here.
#pragma once

#include <cstddef>

namespace gpuwire::engine {

enum class Protocol {
    host,       // the bytes go to UCX as host memory (eager or rendezvous)
    ipc,        // same node, device memory: the receiver copies from a CUDA IPC mapping
    ucx_device, // other node: device pointer handed to a UCX that moves CUDA memory (GPUDirect RDMA)
    staged,     // device memory copied through host memory by gpuwire
};

// A host message into a same-node receiver's GPU memory (SendPath::host_shared):
// whether the sender offers to copy it into that buffer itself (through the
// receiver's CUDA IPC description, chunked_push.cpp) instead of a CPU copy
// into a shared slot. Pinned memory: one DMA per piece, as the receiver of a
// device message into pinned host memory copies it out of the sender's
// mapping; pageable memory (cudaMemcpy stages it through the driver's own
// buffers) only from pageable_min bytes, 0: never.
struct PushConfig {
    bool enabled = true;     // pml_gpuwire_shared_push
    size_t pageable_min = 0; // pml_gpuwire_push_pageable_min
};

struct PathConfig {
    bool ipc_enabled = true;
    size_t ipc_threshold = 0;  // device messages of at least this size use IPC
    bool ucx_has_cuda = false; // the UCX in use reports CUDA memory support
    size_t ipc_sync_max = 16384; // IPC copies up to this size are waited for at once
    size_t ipc_kernel_max = size_t{64} << 20; // IPC copies into GPU memory: the copy kernel
    PushConfig push;
};

struct SendTraits {
    bool on_gpu = false;        // device, managed or VMM memory
    bool ipc_exportable = false; // legacy CUDA IPC accepts the allocation
    bool peer_local = false;    // the receiver runs on this node
};

constexpr Protocol choose_protocol(const SendTraits &t, size_t len, const PathConfig &c)
{
    if (!t.on_gpu || len == 0) return Protocol::host;
    if (t.peer_local && c.ipc_enabled && t.ipc_exportable && len >= c.ipc_threshold)
        return Protocol::ipc;
    // On this node the shared staging slots beat UCX's CUDA transports: the
    // receiver lands a message from this node in host memory (a CUDA IPC
    // descriptor may come instead of the data).
    if (c.ucx_has_cuda && !t.peer_local) return Protocol::ucx_device;
    return Protocol::staged;
}

constexpr bool push_host_message(bool pinned_host, size_t len, const PushConfig &c)
{
    return c.enabled && (pinned_host || (c.pageable_min && len >= c.pageable_min));
}

const char *protocol_name(Protocol p);

} // namespace gpuwire::engine
