#include "gpuwire/cuda/device_buffer.hpp"

#include "internal.hpp"

namespace gpuwire::cuda {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}

#if GPUWIRE_HAVE_CUDA

Result<DeviceBuffer> DeviceBuffer::allocate(int device, size_t bytes) {
  if (bytes == 0) return Status::error(Errc::invalid_argument, "DeviceBuffer: zero bytes");
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  void* p = nullptr;
  Status s = rt_check(cudaMalloc(&p, bytes), "cudaMalloc");
  if (!s) return detail::log_status(LogLevel::error, "DeviceBuffer", s);
  DeviceBuffer b;
  b.data_ = p;
  b.size_ = bytes;
  b.device_ = device;
  return b;
}

void DeviceBuffer::reset() {
  if (data_) {
    DeviceGuard guard(device_);
    if (guard.status()) {
      detail::log_failure(LogLevel::warn, "DeviceBuffer", rt_check(cudaFree(data_), "cudaFree"));
    } else {
      detail::log_failure(LogLevel::warn, "DeviceBuffer", guard.status());
    }
  }
  data_ = nullptr;
  size_ = 0;
  device_ = -1;
}

#else  // !GPUWIRE_HAVE_CUDA

Result<DeviceBuffer> DeviceBuffer::allocate(int, size_t) { return no_cuda_status(); }
void DeviceBuffer::reset() {
  data_ = nullptr;
  size_ = 0;
  device_ = -1;
}

#endif  // GPUWIRE_HAVE_CUDA

}  // namespace gpuwire::cuda
