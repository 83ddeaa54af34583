// ScratchCache: device scratch of the GPU collectives. Per GPU, at most kKeep
// idle buffers are kept (the largest given back). A reduction holds at most
// two at once: its algorithm's scratch and the temporaries for buffers it
// cannot use in place (host memory, another GPU). A request is served by the
// smallest idle buffer large enough, else by a buffer of its own, which on its
// return replaces the smallest idle one if it is larger. cudaFree synchronises
// the device, so buffers are kept rather than freed per call.
// Threading: not synchronised; the owner (GpuContext) serialises get and put.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "gpuwire/cuda/device_buffer.hpp"
#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

class ScratchCache {
 public:
  static constexpr size_t kKeep = 2;

  // A buffer of at least len bytes on gpu, lent until put().
  Result<DeviceBuffer*> get(size_t len, int gpu);
  // Takes back a buffer get() lent (nullptr: nothing).
  void put(DeviceBuffer* buffer);

 private:
  std::vector<std::array<std::unique_ptr<DeviceBuffer>, kKeep>> idle_;
};

}  // namespace gpuwire::cuda
