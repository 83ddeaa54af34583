// The reduction kernels: one per supported (op, type) of the table in
// gpuwire/cuda/reduce.h, and the launcher that picks one.
//
// Memory-bound, so the kernel is about bytes in flight: 16-byte loads and
// stores where all three pointers are 16-byte aligned (scalar types only;
// pairs are combined field by field), four independent vectors per thread per
// iteration, a grid-stride loop over a grid sized to the GPU (a few blocks per
// SM), and the tail (and unaligned buffers) element by element.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "gpuwire/cuda/reduce.h"
#include "gpuwire/cuda/why.hpp"
#include "reduce_functors.hpp"

namespace gpuwire::cuda::reduce {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr int kBlocksPerSm = 8;
constexpr int kMaxDevices = 64;

template <int Type>
inline constexpr bool kVectorizable =
    TypeOf<Type>::klass != Class::PAIR && 16 % sizeof(typename TypeOf<Type>::type) == 0;

template <int Op, int Type>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(const typename TypeOf<Type>::type* a, const typename TypeOf<Type>::type* b,
                  typename TypeOf<Type>::type* out, size_t n, bool vec) {
  using T = typename TypeOf<Type>::type;
  constexpr Class C = TypeOf<Type>::klass;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t done = 0;
  if constexpr (kVectorizable<Type>) {
    if (vec) {
      constexpr int V = 16 / sizeof(T);
      union Pack {
        uint4 v;
        T e[V];
      };
      const uint4* va = reinterpret_cast<const uint4*>(a);
      const uint4* vb = reinterpret_cast<const uint4*>(b);
      uint4* vo = reinterpret_cast<uint4*>(out);
      const size_t nv = n / V;
      size_t i = tid;
      // Four independent loads of each operand before any use.
      for (; i + (kUnroll - 1) * stride < nv; i += kUnroll * stride) {
        Pack x[kUnroll], y[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          x[u].v = va[i + u * stride];
          y[u].v = vb[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
          for (int k = 0; k < V; ++k) x[u].e[k] = apply<Op, T, C>(x[u].e[k], y[u].e[k]);
          vo[i + u * stride] = x[u].v;
        }
      }
      for (; i < nv; i += stride) {
        Pack x, y;
        x.v = va[i];
        y.v = vb[i];
#pragma unroll
        for (int k = 0; k < V; ++k) x.e[k] = apply<Op, T, C>(x.e[k], y.e[k]);
        vo[i] = x.v;
      }
      done = nv * V;
    }
  }
  for (size_t i = done + tid; i < n; i += stride) element<Op, Type>(a, b, out, i);
}

using Launcher = cudaError_t (*)(const void*, const void*, void*, size_t, int, cudaStream_t);

template <int Op, int Type>
cudaError_t launch(const void* a, const void* b, void* out, size_t n, int max_blocks,
                   cudaStream_t stream) {
  using T = typename TypeOf<Type>::type;
  const bool vec = kVectorizable<Type> &&
                   ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                     reinterpret_cast<uintptr_t>(out)) &
                    15) == 0;
  const size_t per_thread = vec ? (16 / sizeof(T)) * kUnroll : 1;
  const size_t threads_needed = (n + per_thread - 1) / per_thread;
  size_t blocks = (threads_needed + kThreads - 1) / kThreads;
  if (blocks > static_cast<size_t>(max_blocks)) blocks = static_cast<size_t>(max_blocks);
  if (blocks == 0) blocks = 1;
  reduce_kernel<Op, Type><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n, vec);
  return cudaGetLastError();
}

template <int Op, int Type>
struct MakeLauncher {
  static constexpr Launcher get() {
    if constexpr (applies<Op, Type>()) {
      return &launch<Op, Type>;
    } else {
      return nullptr;
    }
  }
};

constexpr auto launchers = make_table<Launcher, MakeLauncher>();

// Blocks per grid: kBlocksPerSm per SM of the current device, asked once.
std::atomic<int> g_max_blocks[kMaxDevices];

cudaError_t max_blocks(int* out) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev >= 0 && dev < kMaxDevices) {
    int cached = g_max_blocks[dev].load(std::memory_order_relaxed);
    if (cached > 0) {
      *out = cached;
      return cudaSuccess;
    }
  }
  int sms = 0;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  const int blocks = (sms > 0 ? sms : 1) * kBlocksPerSm;
  if (dev >= 0 && dev < kMaxDevices) g_max_blocks[dev].store(blocks, std::memory_order_relaxed);
  *out = blocks;
  return cudaSuccess;
}

using gpuwire::cuda::detail::fail;

// One element of MPI_Compare_and_swap: the old bytes out, the new ones in
// where the old equal the compare value.
__global__ void cas_kernel(unsigned char* dst, const unsigned char* origin,
                           const unsigned char* compare, unsigned char* result, unsigned len) {
  unsigned char old[16];
  bool equal = true;
  for (unsigned i = 0; i < len; i++) {
    old[i] = dst[i];
    equal = equal && old[i] == compare[i];
  }
  for (unsigned i = 0; i < len; i++) result[i] = old[i];
  if (equal) {
    for (unsigned i = 0; i < len; i++) dst[i] = origin[i];
  }
}

}  // namespace
}  // namespace gpuwire::cuda::reduce

namespace red = gpuwire::cuda::reduce;

extern "C" int gw_dev_cas(void* dst, const void* origin, const void* compare, void* result,
                          size_t len, void* stream, char* why, size_t why_len) {
  if (len == 0 || len > 16) return red::fail(why, why_len, "GPU compare-and-swap of %zu bytes", len);
  red::cas_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(origin),
      static_cast<const unsigned char*>(compare), static_cast<unsigned char*>(result),
      static_cast<unsigned>(len));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    return red::fail(why, why_len, "GPU compare-and-swap: kernel launch: %s (%d)",
                     cudaGetErrorName(e), static_cast<int>(e));
  }
  return 0;
}

extern "C" int gw_dev_reduce3(int op, int type, const void* a, const void* b, void* out,
                              size_t count, void* stream, char* why, size_t why_len) {
  if (!gw_reduce_supported(op, type)) {
    return red::fail(why, why_len, "no GPU reduction %s on %s: the op does not apply to the type",
                     gw_reduce_op_name(op), gw_reduce_type_name(type));
  }
  if (count == 0) return 0;
  int blocks = 0;
  cudaError_t e = red::max_blocks(&blocks);
  if (e != cudaSuccess) {
    return red::fail(why, why_len, "GPU reduction: cudaDeviceGetAttribute: %s (%d)",
                     cudaGetErrorName(e), static_cast<int>(e));
  }
  e = red::launchers[op][type](a, b, out, count, blocks, static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {
    return red::fail(why, why_len, "GPU reduction %s on %s: kernel launch: %s (%d)",
                     gw_reduce_op_name(op), gw_reduce_type_name(type), cudaGetErrorName(e),
                     static_cast<int>(e));
  }
  return 0;
}

extern "C" int gw_dev_reduce(int op, int type, const void* in, void* inout, size_t count,
                             void* stream, char* why, size_t why_len) {
  return gw_dev_reduce3(op, type, in, inout, inout, count, stream, why, why_len);
}
