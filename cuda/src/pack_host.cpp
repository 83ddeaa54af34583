// The host side of gpuwire/cuda/pack.h: which GPU holds a pointer, the cache
// of device temporaries, and (built without CUDA) the kernels' "no CUDA"
// answers.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <vector>

#include "gpuwire/cuda/device_buffer.hpp"
#include "gpuwire/cuda/why.hpp"
#include "gpuwire/cuda/pack.h"
#include "internal.hpp"

namespace gpuwire::cuda::pack {
namespace {

using gpuwire::cuda::detail::fail;

// Temporaries: those handed out and those kept for reuse. Sizes are rounded
// up to a power of two (at least kMinTemp) so that messages of similar sizes
// share one.
constexpr size_t kMinTemp = size_t{1} << 16;

struct TempCache {
  std::mutex mu;
  std::vector<DeviceBuffer> in_use;
  std::vector<DeviceBuffer> kept;
};

TempCache& temps() {
  static TempCache* cache = new TempCache;  // outlives static destruction on purpose
  return *cache;
}

size_t round_up(size_t bytes) {
  size_t size = kMinTemp;
  while (size < bytes && size <= (SIZE_MAX >> 1)) size <<= 1;
  return size < bytes ? bytes : size;
}

}  // namespace
}  // namespace gpuwire::cuda::pack

namespace pk = gpuwire::cuda::pack;

extern "C" int gw_dev_temp_get(int device, size_t bytes, void** out, char* why, size_t why_len) {
  pk::TempCache& c = pk::temps();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    // The smallest kept one that fits.
    auto best = c.kept.end();
    for (auto it = c.kept.begin(); it != c.kept.end(); ++it) {
      if (it->device() == device && it->size() >= bytes &&
          (best == c.kept.end() || it->size() < best->size())) {
        best = it;
      }
    }
    if (best != c.kept.end()) {
      *out = best->data();
      c.in_use.push_back(std::move(*best));
      c.kept.erase(best);
      return 0;
    }
  }
  const size_t size = pk::round_up(bytes);
  auto buf = gpuwire::cuda::DeviceBuffer::allocate(device, size);
  if (!buf) {
    return pk::fail(why, why_len,
                    "no device temporary of %zu bytes on GPU %d for a non-contiguous datatype: "
                    "%s; free GPU memory or send from a contiguous buffer",
                    size, device, buf.status().message().c_str());
  }
  *out = buf->data();
  std::lock_guard<std::mutex> lock(c.mu);
  c.in_use.push_back(std::move(*buf));
  return 0;
}

extern "C" void gw_dev_temp_put(void* ptr) {
  if (!ptr) return;
  pk::TempCache& c = pk::temps();
  gpuwire::cuda::DeviceBuffer evicted;  // freed outside the lock (cudaFree synchronises)
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = std::find_if(c.in_use.begin(), c.in_use.end(),
                           [ptr](const gpuwire::cuda::DeviceBuffer& b) { return b.data() == ptr; });
    if (it == c.in_use.end()) return;
    c.kept.push_back(std::move(*it));
    c.in_use.erase(it);
    if (c.kept.size() > GW_DEV_TEMP_KEEP) {
      auto smallest = std::min_element(
          c.kept.begin(), c.kept.end(),
          [](const gpuwire::cuda::DeviceBuffer& a, const gpuwire::cuda::DeviceBuffer& b) {
            return a.size() < b.size();
          });
      evicted = std::move(*smallest);
      c.kept.erase(smallest);
    }
  }
}

extern "C" void gw_dev_temp_drain(void) {
  std::vector<gpuwire::cuda::DeviceBuffer> drop;
  pk::TempCache& c = pk::temps();
  std::lock_guard<std::mutex> lock(c.mu);
  drop.swap(c.kept);
}

#if GPUWIRE_HAVE_CUDA

extern "C" int gw_dev_pointer_device(const void* ptr, char* why, size_t why_len) {
  cudaPointerAttributes attr{};
  cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
  if (e != cudaSuccess) {
    return pk::fail(why, why_len, "cudaPointerGetAttributes(%p): %s (%d)", ptr,
                    cudaGetErrorName(e), static_cast<int>(e));
  }
  if (attr.type == cudaMemoryTypeManaged) {
    int dev = 0;
    e = cudaGetDevice(&dev);
    if (e != cudaSuccess) {
      return pk::fail(why, why_len, "cudaGetDevice: %s (%d)", cudaGetErrorName(e),
                      static_cast<int>(e));
    }
    return dev;
  }
  if (attr.type != cudaMemoryTypeDevice || attr.device < 0) {
    return pk::fail(why, why_len, "%p is not GPU memory", ptr);
  }
  return attr.device;
}

#else  // !GPUWIRE_HAVE_CUDA

extern "C" int gw_dev_pointer_device(const void*, char* why, size_t why_len) {
  return pk::fail(why, why_len, "no CUDA: gpuwire was built without CUDA");
}

extern "C" int gw_dev_pack(void*, const void*, const gw_block_t*, size_t, int, char* why,
                           size_t why_len) {
  return pk::fail(why, why_len, "no CUDA: gpuwire was built without CUDA");
}

extern "C" int gw_dev_unpack(void*, const void*, const gw_block_t*, size_t, int, char* why,
                             size_t why_len) {
  return pk::fail(why, why_len, "no CUDA: gpuwire was built without CUDA");
}

#endif  // GPUWIRE_HAVE_CUDA
