// The pack/unpack kernel of gpuwire/cuda/pack.h and its launcher.
//
// One warp per block of the list, a grid-stride loop over blocks. Inside a
// block the warp copies 16 bytes per lane where source and destination share
// their alignment modulo 16 (bytes up to the first aligned address, then
// vectors, then the tail), 8 or 4 bytes per lane where they share only that,
// bytes otherwise. Blocks longer than kChunk are cut into chunks on the host
// so that one long block spreads over many warps; kChunk is a multiple of 16,
// so a chunk keeps the alignment relation of its block.
#include <cuda_runtime_api.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <vector>

#include "gpuwire/cuda/pack.h"
#include "gpuwire/cuda/why.hpp"

namespace gpuwire::cuda::pack {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBlocksPerSm = 8;
constexpr int kMaxDevices = 64;
constexpr uint64_t kChunk = 16 * 1024;

static_assert(sizeof(gw_block_t) == 24, "gw_block_t is uploaded as is");

template <class W>
__device__ inline void copy_as(char* d, const char* s, uint64_t len, unsigned lane) {
  constexpr uint64_t A = sizeof(W);
  const uint64_t head = (A - (reinterpret_cast<uintptr_t>(d) & (A - 1))) & (A - 1);
  for (uint64_t k = lane; k < head; k += 32) d[k] = s[k];
  const uint64_t nv = (len - head) / A;
  const W* vs = reinterpret_cast<const W*>(s + head);
  W* vd = reinterpret_cast<W*>(d + head);
  for (uint64_t k = lane; k < nv; k += 32) vd[k] = vs[k];
  for (uint64_t k = head + nv * A + lane; k < len; k += 32) d[k] = s[k];
}

__device__ inline void copy_block(char* d, const char* s, uint64_t len, unsigned lane) {
  const uintptr_t rel = reinterpret_cast<uintptr_t>(d) ^ reinterpret_cast<uintptr_t>(s);
  if ((rel & 15) == 0 && len >= 32) {
    copy_as<uint4>(d, s, len, lane);
  } else if ((rel & 7) == 0 && len >= 16) {
    copy_as<unsigned long long>(d, s, len, lane);
  } else if ((rel & 3) == 0 && len >= 8) {
    copy_as<unsigned>(d, s, len, lane);
  } else {
    for (uint64_t k = lane; k < len; k += 32) d[k] = s[k];
  }
}

// unpack == false: packed <- user; true: user <- packed.
__global__ void __launch_bounds__(kThreads)
    pack_kernel(char* user, char* packed, const gw_block_t* blocks, size_t n, bool unpack) {
  const unsigned lane = threadIdx.x & 31;
  const size_t warp = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const size_t warps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  for (size_t i = warp; i < n; i += warps) {
    const gw_block_t b = blocks[i];
    char* u = user + b.user_off;
    char* p = packed + b.packed_off;
    if (unpack) {
      copy_block(u, p, b.len, lane);
    } else {
      copy_block(p, u, b.len, lane);
    }
  }
}

// What one device keeps between calls, guarded by mu.
struct DeviceState {
  std::mutex mu;
  cudaStream_t stream = nullptr;
  gw_block_t* scratch = nullptr;  // device array
  size_t capacity = 0;            // blocks in scratch
  int max_grid = 0;
  std::vector<gw_block_t> split;  // host: the list with long blocks cut
};

DeviceState g_state[kMaxDevices];

using gpuwire::cuda::detail::fail;

// Restores the calling thread's current device.
class CurrentDevice {
 public:
  cudaError_t set(int device) {
    cudaError_t e = cudaGetDevice(&saved_);
    if (e != cudaSuccess) return e;
    if (saved_ == device) return cudaSuccess;
    e = cudaSetDevice(device);
    if (e == cudaSuccess) restore_ = true;
    return e;
  }
  ~CurrentDevice() {
    if (restore_) (void)cudaSetDevice(saved_);  // best effort: the work is done
  }

 private:
  int saved_ = 0;
  bool restore_ = false;
};

#define GW_PACK_CHECK(call)                                                                  \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      return fail(why, why_len, "GPU %s on device %d: %s failed: %s (%d); check that both "  \
                  "buffers are memory of that GPU and large enough for the datatype",        \
                  what, device, #call, cudaGetErrorName(e_), static_cast<int>(e_));          \
    }                                                                                        \
  } while (0)

int run(char* user, char* packed, const gw_block_t* blocks, size_t nblocks, int device,
        bool unpack, char* why, size_t why_len) {
  const char* what = unpack ? "unpack" : "pack";
  if (nblocks == 0) return 0;
  if (device < 0 || device >= kMaxDevices) {
    return fail(why, why_len, "GPU %s: device %d out of range (0..%d)", what, device,
                kMaxDevices - 1);
  }
  DeviceState& st = g_state[device];
  std::lock_guard<std::mutex> lock(st.mu);
  CurrentDevice current;
  GW_PACK_CHECK(current.set(device));
  if (!st.stream) {
    // A blocking stream, like the engine's (stream.cpp): the kernel starts after
    // work the application queued on the legacy default stream, so a buffer it
    // filled with cudaMemcpy (whose DMA may still be running) is read whole, and
    // a write it queued before a receive lands before the unpacked data.
    GW_PACK_CHECK(cudaStreamCreateWithFlags(&st.stream, cudaStreamDefault));
  }
  if (st.max_grid == 0) {
    int sms = 0;
    GW_PACK_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    st.max_grid = (sms > 0 ? sms : 1) * kBlocksPerSm;
  }

  // Long blocks cut into chunks, so that no warp carries most of the bytes.
  const gw_block_t* list = blocks;
  size_t n = nblocks;
  bool long_block = false;
  for (size_t i = 0; i < nblocks && !long_block; ++i) long_block = blocks[i].len > kChunk;
  if (long_block) {
    st.split.clear();
    for (size_t i = 0; i < nblocks; ++i) {
      const gw_block_t& b = blocks[i];
      for (uint64_t off = 0; off < b.len; off += kChunk) {
        const uint64_t len = b.len - off < kChunk ? b.len - off : kChunk;
        st.split.push_back(gw_block_t{b.user_off + static_cast<int64_t>(off),
                                      b.packed_off + off, len});
      }
    }
    list = st.split.data();
    n = st.split.size();
  }

  if (n > st.capacity) {
    size_t cap = st.capacity ? st.capacity : 1024;
    while (cap < n) cap *= 2;
    if (st.scratch) {
      GW_PACK_CHECK(cudaFree(st.scratch));
      st.scratch = nullptr;
      st.capacity = 0;
    }
    GW_PACK_CHECK(cudaMalloc(reinterpret_cast<void**>(&st.scratch), cap * sizeof(gw_block_t)));
    st.capacity = cap;
  }
  GW_PACK_CHECK(cudaMemcpyAsync(st.scratch, list, n * sizeof(gw_block_t),
                                cudaMemcpyHostToDevice, st.stream));
  size_t grid = (n + kWarps - 1) / kWarps;
  if (grid > static_cast<size_t>(st.max_grid)) grid = static_cast<size_t>(st.max_grid);
  pack_kernel<<<static_cast<unsigned>(grid), kThreads, 0, st.stream>>>(user, packed, st.scratch,
                                                                       n, unpack);
  GW_PACK_CHECK(cudaGetLastError());
  GW_PACK_CHECK(cudaStreamSynchronize(st.stream));
  return 0;
}

#undef GW_PACK_CHECK

}  // namespace
}  // namespace gpuwire::cuda::pack

extern "C" int gw_dev_pack(void* packed, const void* user_base, const gw_block_t* blocks,
                           size_t nblocks, int device, char* why, size_t why_len) {
  return gpuwire::cuda::pack::run(const_cast<char*>(static_cast<const char*>(user_base)),
                                  static_cast<char*>(packed), blocks, nblocks, device, false, why,
                                  why_len);
}

extern "C" int gw_dev_unpack(void* user_base, const void* packed, const gw_block_t* blocks,
                             size_t nblocks, int device, char* why, size_t why_len) {
  return gpuwire::cuda::pack::run(static_cast<char*>(user_base),
                                  const_cast<char*>(static_cast<const char*>(packed)), blocks,
                                  nblocks, device, true, why, why_len);
}
