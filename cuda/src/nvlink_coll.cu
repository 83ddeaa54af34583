// Kernels of the NVLink collectives (contract: gpuwire/cuda/nvlink_coll.h).
//
// Memory traffic crosses NVLink as plain loads and stores of 16 bytes where
// the buffers allow it. Block b of every rank handles the same part of the
// data and signals through its own flags, so no block waits for another
// block of its own rank and the grids need not be co-resident.
#include <cuda/atomic>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpuwire/cuda/nvlink_coll.h"
#include "gpuwire/cuda/reduce.h"
#include "gpuwire/cuda/why.hpp"
#include "reduce_functors.hpp"

namespace gpuwire::cuda::nvlink {
namespace {

using reduce::apply;
using reduce::Class;
using reduce::TypeOf;

constexpr int kThreads = 512;
constexpr int kUnroll = 4;
constexpr size_t kOneShotBlockBytes = 16 << 10;  // bytes per block, one-shot
constexpr int kOneShotMaxBlocks = 32;
constexpr size_t kDirectBlockBytes = 256 << 10;
constexpr int kDirectMaxBlocks = 64;
static_assert(kOneShotMaxBlocks <= GW_NVL_MAX_BLOCKS && kDirectMaxBlocks <= GW_NVL_MAX_BLOCKS);

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t* flag(const gw_nvl_team_t& t, int owner, int from) {
  return t.flags[owner] + static_cast<size_t>(blockIdx.x) * GW_NVL_MAX_RANKS + from;
}

// barrier(v) of the header, for this block. Every thread's earlier stores
// (to this GPU or a peer) are visible to every rank before the flag is.
__device__ void barrier(const gw_nvl_team_t& t, uint64_t value) {
  __threadfence_system();
  __syncthreads();
  const int q = static_cast<int>(threadIdx.x);
  if (q < t.nranks) {
    ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system> mine(*flag(t, q, t.rank));
    mine.store(value, ::cuda::memory_order_release);
    ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system> theirs(*flag(t, t.rank, q));
    uint64_t start = 0;
    unsigned spins = 0;
    volatile unsigned* error = t.error;
    while (theirs.load(::cuda::memory_order_acquire) < value) {
      if ((++spins & 1023u) != 0) continue;
      if (*error != 0) break;  // another block of this rank gave up
      const uint64_t now = now_ns();
      if (start == 0) {
        start = now;
      } else if (now - start > t.timeout_ns) {
        *error = 1;
        break;
      }
    }
  }
  __threadfence_system();
  __syncthreads();
}

// Bytes [lo, hi) of src to dst, by threads tid, tid + stride, ...
__device__ void copy_range(char* dst, const char* src, size_t lo, size_t hi, size_t tid,
                           size_t stride) {
  if (hi <= lo) return;
  char* d = dst + lo;
  const char* s = src + lo;
  const size_t n = hi - lo;
  size_t done = 0;
  if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15) == 0) {
    const size_t nv = n / 16;
    uint4* vd = reinterpret_cast<uint4*>(d);
    const uint4* vs = reinterpret_cast<const uint4*>(s);
    size_t i = tid;
    for (; i + (kUnroll - 1) * stride < nv; i += kUnroll * stride) {
      uint4 x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) x[u] = vs[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) vd[i + u * stride] = x[u];
    }
    for (; i < nv; i += stride) vd[i] = vs[i];
    done = nv * 16;
  }
  for (size_t i = done + tid; i < n; i += stride) d[i] = s[i];
}

// This block's part of [0, n) when n is cut into gridDim.x parts of a
// multiple of `align` units.
__device__ void block_part(size_t n, size_t align, size_t* lo, size_t* hi) {
  size_t per = (n + gridDim.x - 1) / gridDim.x;
  per = (per + align - 1) / align * align;
  *lo = per * blockIdx.x;
  if (*lo > n) *lo = n;
  *hi = *lo + per < n ? *lo + per : n;
}

// dst[d][i] = src[0][i] op src[1][i] op ... for i in [lo, hi) (elements), for
// every d < ndst; lo a multiple of the vector width when vec.
template <int Op, int Type>
__device__ void reduce_range(const typename TypeOf<Type>::type* const* src, int nsrc,
                             typename TypeOf<Type>::type* const* dst, int ndst, size_t lo,
                             size_t hi, size_t tid, size_t stride, bool vec) {
  using T = typename TypeOf<Type>::type;
  constexpr Class C = TypeOf<Type>::klass;
  size_t done = lo;
  if constexpr (16 % sizeof(T) == 0) {
    if (vec) {
      constexpr int V = 16 / sizeof(T);
      union Pack {
        uint4 v;
        T e[V];
      };
      const size_t vlo = lo / V, vhi = hi / V;
      size_t i = vlo + tid;
      for (; i + (kUnroll - 1) * stride < vhi; i += kUnroll * stride) {
        Pack acc[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc[u].v = reinterpret_cast<const uint4*>(src[0])[i + u * stride];
        for (int r = 1; r < nsrc; ++r) {
          Pack y[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) y[u].v = reinterpret_cast<const uint4*>(src[r])[i + u * stride];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
            for (int k = 0; k < V; ++k) acc[u].e[k] = apply<Op, T, C>(acc[u].e[k], y[u].e[k]);
          }
        }
        for (int d = 0; d < ndst; ++d) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) reinterpret_cast<uint4*>(dst[d])[i + u * stride] = acc[u].v;
        }
      }
      for (; i < vhi; i += stride) {
        Pack acc;
        acc.v = reinterpret_cast<const uint4*>(src[0])[i];
        for (int r = 1; r < nsrc; ++r) {
          Pack y;
          y.v = reinterpret_cast<const uint4*>(src[r])[i];
#pragma unroll
          for (int k = 0; k < V; ++k) acc.e[k] = apply<Op, T, C>(acc.e[k], y.e[k]);
        }
        for (int d = 0; d < ndst; ++d) reinterpret_cast<uint4*>(dst[d])[i] = acc.v;
      }
      done = vhi * V > lo ? vhi * V : lo;
    }
  }
  for (size_t i = done + tid; i < hi; i += stride) {
    T acc = src[0][i];
    for (int r = 1; r < nsrc; ++r) acc = apply<Op, T, C>(acc, src[r][i]);
    for (int d = 0; d < ndst; ++d) dst[d][i] = acc;
  }
}

template <int Op, int Type>
__global__ void __launch_bounds__(kThreads) allreduce_kernel(gw_nvl_team_t t, gw_nvl_call_t c,
                                                             bool vec) {
  using T = typename TypeOf<Type>::type;
  constexpr size_t V = 16 % sizeof(T) == 0 ? 16 / sizeof(T) : 1;
  const size_t n = c.bytes / sizeof(T);
  const T* src[GW_NVL_MAX_RANKS];
  T* dst[GW_NVL_MAX_RANKS];
  if (!c.direct) {
    size_t lo, hi;
    block_part(n, V, &lo, &hi);
    const size_t slot = static_cast<size_t>(c.slot) * t.slot_bytes;
    copy_range(t.slots[t.rank] + slot, static_cast<const char*>(c.in), lo * sizeof(T),
               hi * sizeof(T), threadIdx.x, blockDim.x);
    barrier(t, c.seq + 1);
    for (int r = 0; r < t.nranks; ++r) src[r] = reinterpret_cast<const T*>(t.slots[r] + slot);
    dst[0] = static_cast<T*>(c.out);
    reduce_range<Op, Type>(src, t.nranks, dst, 1, lo, hi, threadIdx.x, blockDim.x, vec);
    return;
  }
  // Rank r reduces part r of every input and writes it into every output.
  size_t per = (n + t.nranks - 1) / t.nranks;
  per = (per + V - 1) / V * V;
  const size_t lo = per * t.rank < n ? per * t.rank : n;
  const size_t hi = lo + per < n ? lo + per : n;
  for (int r = 0; r < t.nranks; ++r) {
    src[r] = static_cast<const T*>(c.peer_in[r]);
    dst[r] = static_cast<T*>(c.peer_out[r]);
  }
  barrier(t, c.seq + 1);
  reduce_range<Op, Type>(src, t.nranks, dst, t.nranks, lo, hi,
                         static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                         static_cast<size_t>(gridDim.x) * blockDim.x, vec);
  barrier(t, c.seq + 2);
}

__global__ void __launch_bounds__(kThreads) bcast_kernel(gw_nvl_team_t t, gw_nvl_call_t c) {
  const bool root = t.rank == c.root;
  if (!c.direct) {
    size_t lo, hi;
    block_part(c.bytes, 16, &lo, &hi);
    char* slot = t.slots[c.root] + static_cast<size_t>(c.slot) * t.slot_bytes;
    if (root) copy_range(slot, static_cast<const char*>(c.out), lo, hi, threadIdx.x, blockDim.x);
    barrier(t, c.seq + 1);
    if (!root) copy_range(static_cast<char*>(c.out), slot, lo, hi, threadIdx.x, blockDim.x);
    return;
  }
  barrier(t, c.seq + 1);
  if (root) {
    const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (int r = 0; r < t.nranks; ++r) {
      if (r == c.root) continue;
      copy_range(static_cast<char*>(c.peer_out[r]), static_cast<const char*>(c.out), 0, c.bytes,
                 tid, stride);
    }
  }
  barrier(t, c.seq + 2);
}

__global__ void __launch_bounds__(kThreads) allgather_kernel(gw_nvl_team_t t, gw_nvl_call_t c) {
  const char* in = static_cast<const char*>(c.in);
  if (!c.direct) {
    size_t lo, hi;
    block_part(c.bytes, 16, &lo, &hi);
    const size_t slot = static_cast<size_t>(c.slot) * t.slot_bytes;
    copy_range(t.slots[t.rank] + slot, in, lo, hi, threadIdx.x, blockDim.x);
    barrier(t, c.seq + 1);
    for (int r = 0; r < t.nranks; ++r) {
      copy_range(static_cast<char*>(c.out) + r * c.bytes, t.slots[r] + slot, lo, hi, threadIdx.x,
                 blockDim.x);
    }
    return;
  }
  barrier(t, c.seq + 1);
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (int k = 0; k < t.nranks; ++k) {
    // Start with a different rank on each GPU, so that the links share the work.
    const int r = (t.rank + k) % t.nranks;
    char* to = static_cast<char*>(c.peer_out[r]) + t.rank * c.bytes;
    if (to == in) continue;  // in place
    copy_range(to, in, 0, c.bytes, tid, stride);
  }
  barrier(t, c.seq + 2);
}

// The delegated form (gw_nvl_all_call_t): the whole call in one grid, every
// thread striding over all of it; nothing waits.
constexpr size_t kAllBlockBytes = 64 << 10;
constexpr int kAllMaxBlocks = 1024;

__device__ __forceinline__ size_t grid_tid() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_stride() {
  return static_cast<size_t>(gridDim.x) * blockDim.x;
}

template <int Op, int Type>
__global__ void __launch_bounds__(kThreads) allreduce_all_kernel(gw_nvl_all_call_t c, bool vec) {
  using T = typename TypeOf<Type>::type;
  const T* src[GW_NVL_MAX_RANKS];
  T* dst[GW_NVL_MAX_RANKS];
  for (int r = 0; r < c.nranks; ++r) {
    src[r] = static_cast<const T*>(c.in[r]);
    dst[r] = static_cast<T*>(c.out[r]);
  }
  reduce_range<Op, Type>(src, c.nranks, dst, c.nranks, 0, c.bytes / sizeof(T), grid_tid(),
                         grid_stride(), vec);
}

__global__ void __launch_bounds__(kThreads) bcast_all_kernel(gw_nvl_all_call_t c) {
  const char* from = static_cast<const char*>(c.out[c.root]);
  for (int r = 0; r < c.nranks; ++r) {
    if (r != c.root) copy_range(static_cast<char*>(c.out[r]), from, 0, c.bytes, grid_tid(), grid_stride());
  }
}

__global__ void __launch_bounds__(kThreads) allgather_all_kernel(gw_nvl_all_call_t c) {
  for (int r = 0; r < c.nranks; ++r) {
    const char* from = static_cast<const char*>(c.in[r]);
    for (int d = 0; d < c.nranks; ++d) {
      char* to = static_cast<char*>(c.out[d]) + static_cast<size_t>(r) * c.bytes;
      if (to != from) copy_range(to, from, 0, c.bytes, grid_tid(), grid_stride());
    }
  }
}

using AllLauncher = cudaError_t (*)(const gw_nvl_all_call_t&, unsigned, bool, cudaStream_t);

template <int Op, int Type>
cudaError_t launch_allreduce_all(const gw_nvl_all_call_t& c, unsigned blocks, bool vec,
                                 cudaStream_t stream) {
  allreduce_all_kernel<Op, Type><<<blocks, kThreads, 0, stream>>>(c, vec);
  return cudaGetLastError();
}

using Launcher = cudaError_t (*)(const gw_nvl_team_t&, const gw_nvl_call_t&, unsigned, bool,
                                 cudaStream_t);

template <int Op, int Type>
cudaError_t launch_allreduce(const gw_nvl_team_t& t, const gw_nvl_call_t& c, unsigned blocks,
                             bool vec, cudaStream_t stream) {
  allreduce_kernel<Op, Type><<<blocks, kThreads, 0, stream>>>(t, c, vec);
  return cudaGetLastError();
}

template <int Op, int Type>
constexpr bool kRuns = reduce::applies<Op, Type>() && TypeOf<Type>::klass != Class::PAIR;

template <int Op, int Type>
struct MakeLauncher {
  static constexpr Launcher get() {
    if constexpr (kRuns<Op, Type>) {
      return &launch_allreduce<Op, Type>;
    } else {
      return nullptr;
    }
  }
};

constexpr auto launchers = reduce::make_table<Launcher, MakeLauncher>();
template <int Op, int Type>
struct MakeAllLauncher {
  static constexpr AllLauncher get() {
    if constexpr (kRuns<Op, Type>) {
      return &launch_allreduce_all<Op, Type>;
    } else {
      return nullptr;
    }
  }
};

constexpr auto all_launchers = reduce::make_table<AllLauncher, MakeAllLauncher>();


unsigned blocks_for(const gw_nvl_call_t& c, int nranks) {
  size_t bytes = c.bytes;
  if (c.coll == GW_NVL_ALLREDUCE && c.direct) bytes = (bytes + nranks - 1) / nranks;
  if (c.coll == GW_NVL_ALLGATHER && c.direct) bytes *= static_cast<size_t>(nranks);
  const size_t per = c.direct ? kDirectBlockBytes : kOneShotBlockBytes;
  const size_t cap = c.direct ? kDirectMaxBlocks : kOneShotMaxBlocks;
  size_t b = (bytes + per - 1) / per;
  if (b < 1) b = 1;
  if (b > cap) b = cap;
  return static_cast<unsigned>(b);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

using gpuwire::cuda::detail::fail;

}  // namespace
}  // namespace gpuwire::cuda::nvlink

namespace nvl = gpuwire::cuda::nvlink;

// One-shot: every rank's slot holds what that rank contributes (allgather:
// its block; bcast: the root's buffer; allreduce: its input).
extern "C" bool gw_nvl_fits_slot(const gw_nvl_team_t* team, const gw_nvl_call_t* call) {
  return call->bytes <= team->slot_bytes;
}

extern "C" bool gw_nvl_reduce_supported(int op, int type) {
  return op >= 0 && op < GW_OP_COUNT && type >= 0 && type < GW_TYPE_COUNT &&
         nvl::launchers[op][type] != nullptr;
}

extern "C" int gw_nvl_launch(const gw_nvl_team_t* team, const gw_nvl_call_t* call, void* stream,
                             char* why, size_t why_len) {
  const gw_nvl_team_t& t = *team;
  const gw_nvl_call_t& c = *call;
  if (t.nranks < 1 || t.nranks > GW_NVL_MAX_RANKS || t.rank < 0 || t.rank >= t.nranks) {
    return nvl::fail(why, why_len, "NVLink collective: team of %d ranks (rank %d) out of range",
                     t.nranks, t.rank);
  }
  if (!c.direct && (c.slot < 0 || c.slot > 1 || !gw_nvl_fits_slot(team, call))) {
    return nvl::fail(why, why_len, "NVLink collective: %zu bytes do not fit slot %d of %zu bytes",
                     c.bytes, c.slot, t.slot_bytes);
  }
  const unsigned blocks = nvl::blocks_for(c, t.nranks);
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaSuccess;
  switch (c.coll) {
    case GW_NVL_ALLREDUCE: {
      if (!gw_nvl_reduce_supported(c.op, c.type)) {
        return nvl::fail(why, why_len, "NVLink allreduce: no kernel for %s on %s",
                         gw_reduce_op_name(c.op), gw_reduce_type_name(c.type));
      }
      const size_t es = gw_reduce_type_size(c.type);
      if (c.bytes % es != 0) {
        return nvl::fail(why, why_len, "NVLink allreduce: %zu bytes are not whole %s elements",
                         c.bytes, gw_reduce_type_name(c.type));
      }
      bool vec = nvl::aligned16(c.out) && nvl::aligned16(c.in);
      if (c.direct) {
        for (int r = 0; r < t.nranks; ++r) {
          vec = vec && nvl::aligned16(c.peer_in[r]) && nvl::aligned16(c.peer_out[r]);
        }
      }
      e = nvl::launchers[c.op][c.type](t, c, blocks, vec, s);
      break;
    }
    case GW_NVL_BCAST:
      nvl::bcast_kernel<<<blocks, nvl::kThreads, 0, s>>>(t, c);
      e = cudaGetLastError();
      break;
    case GW_NVL_ALLGATHER:
      nvl::allgather_kernel<<<blocks, nvl::kThreads, 0, s>>>(t, c);
      e = cudaGetLastError();
      break;
    default:
      return nvl::fail(why, why_len, "NVLink collective: unknown collective %d",
                       static_cast<int>(c.coll));
  }
  if (e != cudaSuccess) {
    return nvl::fail(why, why_len, "NVLink collective: kernel launch: %s (%d)", cudaGetErrorName(e),
                     static_cast<int>(e));
  }
  return 0;
}

extern "C" int gw_nvl_launch_all(const gw_nvl_all_call_t* call, void* stream, char* why,
                                 size_t why_len) {
  const gw_nvl_all_call_t& c = *call;
  if (c.nranks < 1 || c.nranks > GW_NVL_MAX_RANKS ||
      (c.coll == GW_NVL_BCAST && (c.root < 0 || c.root >= c.nranks))) {
    return nvl::fail(why, why_len, "NVLink delegated call: %d ranks (root %d) out of range",
                     c.nranks, c.root);
  }
  size_t moved = c.bytes;
  if (c.coll == GW_NVL_ALLGATHER) moved *= static_cast<size_t>(c.nranks);
  size_t blocks = (moved + nvl::kAllBlockBytes - 1) / nvl::kAllBlockBytes;
  if (blocks < 1) blocks = 1;
  if (blocks > static_cast<size_t>(nvl::kAllMaxBlocks)) blocks = nvl::kAllMaxBlocks;
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaSuccess;
  switch (c.coll) {
    case GW_NVL_ALLREDUCE: {
      if (!gw_nvl_reduce_supported(c.op, c.type)) {
        return nvl::fail(why, why_len, "NVLink allreduce: no kernel for %s on %s",
                         gw_reduce_op_name(c.op), gw_reduce_type_name(c.type));
      }
      if (c.bytes % gw_reduce_type_size(c.type) != 0) {
        return nvl::fail(why, why_len, "NVLink allreduce: %zu bytes are not whole %s elements",
                         c.bytes, gw_reduce_type_name(c.type));
      }
      bool vec = true;
      for (int r = 0; r < c.nranks; ++r) vec = vec && nvl::aligned16(c.in[r]) && nvl::aligned16(c.out[r]);
      e = nvl::all_launchers[c.op][c.type](c, static_cast<unsigned>(blocks), vec, s);
      break;
    }
    case GW_NVL_BCAST:
      nvl::bcast_all_kernel<<<static_cast<unsigned>(blocks), nvl::kThreads, 0, s>>>(c);
      e = cudaGetLastError();
      break;
    case GW_NVL_ALLGATHER:
      nvl::allgather_all_kernel<<<static_cast<unsigned>(blocks), nvl::kThreads, 0, s>>>(c);
      e = cudaGetLastError();
      break;
    default:
      return nvl::fail(why, why_len, "NVLink collective: unknown collective %d",
                       static_cast<int>(c.coll));
  }
  if (e != cudaSuccess) {
    return nvl::fail(why, why_len, "NVLink delegated call: kernel launch: %s (%d)",
                     cudaGetErrorName(e), static_cast<int>(e));
  }
  return 0;
}
