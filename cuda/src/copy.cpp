#include "gpuwire/cuda/copy.hpp"

#include "internal.hpp"

namespace gpuwire::cuda {

#if GPUWIRE_HAVE_CUDA

Status copy_async(void* dst, const void* src, size_t len, const Stream& stream) {
  if (len == 0) return Status{};
  DeviceGuard guard(stream.device());
  if (!guard.status()) return guard.status();
  return detail::log_status(
      LogLevel::error, "copy_async",
      rt_check(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, stream.handle()), "cudaMemcpyAsync"));
}

Status copy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t len,
                       const Stream& stream) {
  if (len == 0) return Status{};
  DeviceGuard guard(stream.device());
  if (!guard.status()) return guard.status();
  return detail::log_status(
      LogLevel::error, "copy_peer_async",
      rt_check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, len, stream.handle()),
               "cudaMemcpyPeerAsync"));
}

Status wait_legacy_stream(int device) {
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  return rt_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize(legacy)");
}

Status enable_peer_access(int device, int peer) {
  if (device == peer) return Status{};
  int can = 0;
  Status s = rt_check(cudaDeviceCanAccessPeer(&can, device, peer), "cudaDeviceCanAccessPeer");
  if (!s) return s;
  if (!can) return Status::error(Errc::not_supported, "cudaDeviceCanAccessPeer: no peer path", peer);
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // not sticky, but clear it from this runtime's last error
    return Status{};
  }
  return rt_check(e, "cudaDeviceEnablePeerAccess");
}

#else  // !GPUWIRE_HAVE_CUDA

Status copy_async(void*, const void*, size_t, const Stream&) { return no_cuda_status(); }
Status copy_peer_async(void*, int, const void*, int, size_t, const Stream&) { return no_cuda_status(); }
Status enable_peer_access(int, int) { return no_cuda_status(); }
Status wait_legacy_stream(int) { return no_cuda_status(); }

#endif  // GPUWIRE_HAVE_CUDA

}  // namespace gpuwire::cuda
