// device_ops.h over the cuda module: the classifier for the memory kind, the
// runtime's cudaMemcpy for copies, the driver's portable pinned memory for
// large temporaries.
#include "device_ops.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"

#if GPUWIRE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

using gpuwire::cuda::Driver;
using gpuwire::cuda::MemoryClassifier;
using gpuwire::cuda::MemoryInfo;
using gpuwire::cuda::MemoryKind;

// No host cache: a preload library sees no unmap events, and a host range
// unmapped and then mapped by cuMemMap would be served as host. Device
// allocations are cached and confirmed by buffer ID (safe after a free).
MemoryClassifier& classifier() {
  static MemoryClassifier instance(Driver::instance(), {.host_entries = 0, .device_entries = 256});
  return instance;
}

// Below this a pageable temporary is as fast as pinning one would be.
constexpr size_t kPinMin = size_t{256} << 10;
// Pinning costs milliseconds: a few freed pinned temporaries are kept.
constexpr int kKeep = 4;

struct alignas(64) Header {
  size_t capacity;
  bool pinned;
};

std::mutex g_keep_mutex;
Header* g_kept[kKeep] = {};

// GPUWIRE_MPI_STAGE_ALL=1 (tests only): every buffer takes the device path,
// copied by memcpy where there is no GPU, so that CI runs the staging code.
bool stage_all() {
  static const bool on = [] {
    const char* v = std::getenv("GPUWIRE_MPI_STAGE_ALL");
    return v && v[0] == '1';
  }();
  return on;
}

}  // namespace

extern "C" int gw_dev_is_device(const void* ptr) {
  if (ptr == nullptr) return 0;
  if (stage_all()) return 1;
  if (!Driver::instance().available()) return 0;
  MemoryInfo info;
  auto st = classifier().classify(ptr, 1, info);
  if (!st.ok()) {
    std::fprintf(stderr, "libgpuwire_mpi: cannot tell the memory kind of %p: %s\n", ptr,
                 st.message().c_str());
    return -1;
  }
  // Managed memory is readable by the CPU: Open MPI's own code handles it.
  return info.kind == MemoryKind::device || info.kind == MemoryKind::vmm;
}

extern "C" int gw_dev_copy(void* dst, const void* src, size_t len) {
  if (len == 0) return 0;
  if (stage_all() && !Driver::instance().available()) {
    std::memcpy(dst, src, len);
    return 0;
  }
#if GPUWIRE_HAVE_CUDA
  // The copy runs in the context of the GPU holding the device side, never
  // in a context created on GPU 0 for the purpose.
  MemoryInfo info;
  const void* dev = src;
  if (!classifier().classify(src, 1, info).ok() || !info.on_gpu()) dev = dst;
  int device = 0;
  if (classifier().classify(dev, 1, info).ok() && info.device >= 0) device = info.device;
  gpuwire::cuda::DeviceGuard guard(device);
  if (!guard.status().ok()) {
    std::fprintf(stderr, "libgpuwire_mpi: cannot use GPU %d: %s\n", device,
                 guard.status().message().c_str());
    return -1;
  }
  cudaError_t err = cudaMemcpy(dst, src, len, cudaMemcpyDefault);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "libgpuwire_mpi: cudaMemcpy of %zu bytes: %s\n", len,
                 cudaGetErrorString(err));
    return -1;
  }
  return 0;
#else
  (void)dst;
  (void)src;
  (void)len;
  std::fprintf(stderr, "libgpuwire_mpi: built without CUDA, cannot copy device memory\n");
  return -1;
#endif
}

extern "C" void* gw_dev_host_alloc(size_t len) {
  const size_t need = len + sizeof(Header);
  if (len >= kPinMin && Driver::instance().available()) {
    {
      std::lock_guard<std::mutex> lock(g_keep_mutex);
      for (auto& kept : g_kept) {
        if (kept && kept->capacity >= need) {
          Header* h = kept;
          kept = nullptr;
          return h + 1;
        }
      }
    }
    // Round up so that a kept temporary fits the next call of similar size.
    size_t capacity = kPinMin;
    while (capacity < need) capacity *= 2;
    // Pinned by the GPU the thread uses now (portable: every GPU copies at
    // full speed), so that no context is made on a GPU the rank leaves alone.
    int device = 0;
#if GPUWIRE_HAVE_CUDA
    if (cudaGetDevice(&device) != cudaSuccess) device = 0;
#endif
    void* p = nullptr;
    if (Driver::instance().host_alloc(capacity, device, &p).ok()) {
      auto* h = static_cast<Header*>(p);
      h->capacity = capacity;
      h->pinned = true;
      return h + 1;
    }
    // Pinning refused (locked-memory limit): pageable memory still works.
  }
  auto* h = static_cast<Header*>(std::aligned_alloc(64, (need + 63) / 64 * 64));
  if (!h) return nullptr;
  h->capacity = need;
  h->pinned = false;
  return h + 1;
}

extern "C" void gw_dev_host_free(void* ptr) {
  if (!ptr) return;
  Header* h = static_cast<Header*>(ptr) - 1;
  if (!h->pinned) {
    std::free(h);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g_keep_mutex);
    for (auto& kept : g_kept) {
      if (!kept) {
        kept = h;
        return;
      }
    }
  }
  // Kept pinned temporaries live until exit; a failing free leaks one block.
  (void)Driver::instance().host_free(h);
}
