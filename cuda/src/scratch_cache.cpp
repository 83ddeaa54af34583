#include "gpuwire/cuda/scratch_cache.hpp"

#include <cstdint>

namespace gpuwire::cuda {

Result<DeviceBuffer*> ScratchCache::get(size_t len, int gpu) {
  if (gpu < 0) return Status::error(Errc::invalid_argument, "device scratch: no GPU given");
  if (static_cast<size_t>(gpu) >= idle_.size()) idle_.resize(gpu + 1);
  auto& idle = idle_[gpu];
  std::unique_ptr<DeviceBuffer>* best = nullptr;
  for (auto& slot : idle) {
    if (slot && slot->size() >= len && (!best || slot->size() < (*best)->size())) best = &slot;
  }
  if (best) return best->release();
  size_t want = 1 << 20;
  while (want < len && want < (SIZE_MAX >> 1)) want <<= 1;
  if (want < len) want = len;
  auto r = DeviceBuffer::allocate(gpu, want);
  if (!r) return r.status();
  return new DeviceBuffer(std::move(*r));
}

void ScratchCache::put(DeviceBuffer* buffer) {
  std::unique_ptr<DeviceBuffer> b(buffer);
  if (!b) return;
  const int gpu = b->device();
  if (static_cast<size_t>(gpu) >= idle_.size()) idle_.resize(gpu + 1);
  auto& idle = idle_[gpu];
  std::unique_ptr<DeviceBuffer>* smallest = nullptr;
  for (auto& slot : idle) {
    if (!slot) {
      smallest = &slot;
      break;
    }
    if (!smallest || slot->size() < (*smallest)->size()) smallest = &slot;
  }
  if (!*smallest || (*smallest)->size() < b->size()) *smallest = std::move(b);
  // Otherwise b is freed here.
}

}  // namespace gpuwire::cuda
