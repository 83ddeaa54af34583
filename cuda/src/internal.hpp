// Private to the cuda module's sources: CUDA headers, the driver entry-point
// table and the helpers that turn CUDA return codes into Status.
#pragma once

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/status.hpp"
#include "gpuwire/cuda/stream.hpp"

#if GPUWIRE_HAVE_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#endif

namespace gpuwire::cuda {

namespace detail {
// The name of a CUDA error code (driver.cpp), which Status::message() asks
// through the hook that driver.cpp sets when the library loads: status.cpp
// uses nothing of driver.cpp (no circle between the two).
const char* native_error_name(NativeApi api, int code);
using ErrorNamer = const char* (*)(NativeApi api, int code);
void set_error_namer(ErrorNamer namer);
}  // namespace detail

inline Status no_cuda_status() {
  return Status::error(Errc::no_device, "gpuwire built without CUDA");
}

#if GPUWIRE_HAVE_CUDA

// Driver functions, each at the ABI of the version in its type's name.
struct DriverEntryPoints {
  PFN_cuInit_v2000 cuInit = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuDeviceGetUuid_v11040 cuDeviceGetUuid = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuPointerGetAttributes_v7000 cuPointerGetAttributes = nullptr;
  PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 cuMemRetainAllocationHandle = nullptr;
  PFN_cuMemRelease_v10020 cuMemRelease = nullptr;
  PFN_cuStreamWriteValue64_v11070 cuStreamWriteValue64 = nullptr;  // optional
  PFN_cuPointerSetAttribute_v6000 cuPointerSetAttribute = nullptr;  // optional

  // Primary contexts, retained on first use and kept for the process' life.
  std::unique_ptr<std::atomic<CUcontext>[]> primary;
  std::mutex primary_mu;
};

inline Status rt_check(cudaError_t e, const char* call) {
  return e == cudaSuccess ? Status{} : Status::runtime_error(call, static_cast<int>(e));
}
inline Status drv_check(CUresult r, const char* call) {
  return r == CUDA_SUCCESS ? Status{} : Status::driver_error(call, static_cast<int>(r));
}

// The fallback signal when streams cannot write values: a one-thread kernel.
cudaError_t launch_write_value64(cudaStream_t stream, unsigned long long* device_ptr,
                                 unsigned long long value);

// TrackedStream::copy_and_mark's kernel (copy_signal.cu): the items, then
// `ticket` into the pinned counter (its device address) once all landed.
cudaError_t launch_copy_signal(cudaStream_t stream, const CopyItem* items, int n, unsigned* arrivals,
                               unsigned long long* counter, unsigned long long ticket);

// Enqueues on `stream` (of `device`), behind the work submitted to it, the
// write of `value` into a pinned, device-mapped counter (its device address):
// cuStreamWriteValue64 where `memop`, else the one-thread kernel. The
// completion signal of TrackedStream and of the NVLink teams.
Status enqueue_write_value64(void* stream, int device, uint64_t* device_ptr, uint64_t value,
                             bool memop);

#endif  // GPUWIRE_HAVE_CUDA

}  // namespace gpuwire::cuda
