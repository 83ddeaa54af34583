// The completion signal where streams cannot write values themselves.
#include <cuda_runtime_api.h>

namespace gpuwire::cuda {

namespace {
__global__ void write_value64_kernel(volatile unsigned long long* counter, unsigned long long value) {
  __threadfence_system();
  *counter = value;
}
}  // namespace

cudaError_t launch_write_value64(cudaStream_t stream, unsigned long long* device_ptr,
                                 unsigned long long value) {
  write_value64_kernel<<<1, 1, 0, stream>>>(device_ptr, value);
  return cudaGetLastError();
}

}  // namespace gpuwire::cuda
