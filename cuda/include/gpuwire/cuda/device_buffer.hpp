// DeviceBuffer: one cudaMalloc allocation on one device, freed by its owner.
//
// Scratch memory of the GPU collectives. cudaMalloc (not a stream-ordered
// pool) on purpose: such memory can be exported over CUDA IPC, so the
// point-to-point layer moves it between processes over NVLink; pool memory
// would be refused by cudaIpcGetMemHandle and staged through the host.
//
// Ownership: move-only; the destructor frees (cudaFree synchronises the
// device, so owners keep buffers for reuse rather than free them per call).
// Threading: none; the owner serialises use.
#pragma once

#include <cstddef>
#include <utility>

#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(int device, size_t bytes);
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  int device() const { return device_; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset();

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  int device_ = -1;
};

}  // namespace gpuwire::cuda
