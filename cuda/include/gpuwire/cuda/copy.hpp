// Asynchronous copies on a stream of the pool.
//
// copy_async covers every pair the engine moves within one device's view:
// device to device on one GPU, from or to an IPC-mapped allocation of a peer
// (the mapping belongs to the stream's device, the copy engine crosses
// NVLink), host to device and device to host. Unified addressing tells the
// direction. Pinned host memory keeps the copy asynchronous; pageable host
// memory makes CUDA stage it synchronously, so the engine stages through a
// PinnedPool chunk instead.
//
// copy_peer_async copies between two devices used by this process; it goes
// over NVLink directly once enable_peer_access() has been called for the pair.
//
// Contract: enqueue only, never block; completion is found through the
// stream's TrackedStream::mark(). Callable from any thread that owns the stream.
#pragma once

#include <cstddef>

#include "gpuwire/cuda/status.hpp"
#include "gpuwire/cuda/stream.hpp"

namespace gpuwire::cuda {

Status copy_async(void* dst, const void* src, size_t len, const Stream& stream);

Status copy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t len,
                       const Stream& stream);

// Lets `device` access `peer`'s memory directly. Idempotent; not_supported
// when the pair has no peer path.
Status enable_peer_access(int device, int peer);

// Waits until work already queued on `device`'s legacy default stream by this
// process is done (cudaStreamSynchronize(cudaStreamLegacy)); another process
// reading this process's memory through CUDA IPC is not ordered by streams.
Status wait_legacy_stream(int device);

}  // namespace gpuwire::cuda
