// Small copies and their completion signal in one submission
// (TrackedStream::copy_and_mark).
//
// Under MPS a cudaMemcpyAsync and the stream write that signals it are two
// submissions of about 2 us each; a kernel can do both. Each item gets a
// contiguous run of blocks; every block copies its share, and the last block
// to finish (counted in the stream's arrival counter, in device memory)
// resets the counter and writes the ticket into the pinned host counter. The
// next kernel on the same stream starts only after this one ended, so one
// arrival counter per stream suffices.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "gpuwire/cuda/stream.hpp"
#include "internal.hpp"

namespace gpuwire::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr size_t kBytesPerBlock = size_t{16} << 10;
constexpr unsigned kMaxBlocksPerItem = 2048;

// The kernel's arguments: a batch of one (most messages) is passed small, so
// its launch carries 40 bytes rather than 1.8 KiB.
template <int N>
struct CopyBatch {
  CopyItem item[N];
  unsigned first_block[N + 1];  // item i owns blocks [first_block[i], first_block[i+1])
  int n;
};

// Each thread has up to kRows loads in flight before their stores: a
// block's share is a few rows of blockDim words, so a small copy costs about
// one memory latency (a load from a peer's mapping is the slow part), not
// one per row.
constexpr int kRows = 4;

template <class T>
__device__ void copy_words(char* dst, const char* src, size_t begin, size_t end) {
  T* d = reinterpret_cast<T*>(dst);
  const T* s = reinterpret_cast<const T*>(src);
  const size_t n = end / sizeof(T), step = blockDim.x;
  size_t i = begin / sizeof(T) + threadIdx.x;
  for (; i + (kRows - 1) * step < n; i += kRows * step) {
    T v[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) v[k] = s[i + k * step];
#pragma unroll
    for (int k = 0; k < kRows; ++k) d[i + k * step] = v[k];
  }
  T v[kRows];  // the last rows, fewer than kRows
#pragma unroll
  for (int k = 0; k < kRows; ++k)
    if (i + k * step < n) v[k] = s[i + k * step];
#pragma unroll
  for (int k = 0; k < kRows; ++k)
    if (i + k * step < n) d[i + k * step] = v[k];
}

// Bytes [begin, end) of one item; begin and end are multiples of 16 but for
// the item's last block, whose end is the item's length.
__device__ void copy_range(const CopyItem& it, size_t begin, size_t end) {
  char* d = static_cast<char*>(it.dst);
  const char* s = static_cast<const char*>(it.src);
  const uintptr_t align = reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s);
  size_t body = begin;  // [begin, body) copied by words, [body, end) byte by byte
  if (align % 16 == 0) {
    body = end & ~size_t{15};
    copy_words<uint4>(d, s, begin, body);
  } else if (align % 8 == 0) {
    body = end & ~size_t{7};
    copy_words<uint64_t>(d, s, begin, body);
  } else if (align % 4 == 0) {
    body = end & ~size_t{3};
    copy_words<uint32_t>(d, s, begin, body);
  }
  for (size_t i = body + threadIdx.x; i < end; i += blockDim.x) d[i] = s[i];
}

template <int N>
__global__ void __launch_bounds__(kThreads)
    copy_signal_kernel(CopyBatch<N> b, unsigned* arrivals, volatile unsigned long long* counter,
                       unsigned long long ticket) {
  int i = 0;
  while (i + 1 < b.n && blockIdx.x >= b.first_block[i + 1]) ++i;
  const CopyItem it = b.item[i];
  const unsigned nb = b.first_block[i + 1] - b.first_block[i];
  const unsigned rank = blockIdx.x - b.first_block[i];
  const size_t share = ((it.len + nb - 1) / nb + 15) & ~size_t{15};
  const size_t begin = share * rank;
  const size_t end = begin + share < it.len ? begin + share : it.len;
  if (begin < end) copy_range(it, begin, end);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's writes, before its arrival is counted
    if (atomicAdd(arrivals, 1u) == gridDim.x - 1) {
      *arrivals = 0;
      __threadfence_system();
      *counter = ticket;
    }
  }
}

template <int N>
cudaError_t launch(cudaStream_t stream, const CopyItem* items, int n, unsigned* arrivals,
                   unsigned long long* counter, unsigned long long ticket) {
  CopyBatch<N> b;
  b.n = n;
  unsigned blocks = 0;
  for (int i = 0; i < n; ++i) {
    b.item[i] = items[i];
    b.first_block[i] = blocks;
    size_t nb = (items[i].len + kBytesPerBlock - 1) / kBytesPerBlock;
    blocks += static_cast<unsigned>(nb < 1 ? 1 : nb > kMaxBlocksPerItem ? kMaxBlocksPerItem : nb);
  }
  b.first_block[n] = blocks;
  copy_signal_kernel<N><<<blocks, kThreads, 0, stream>>>(b, arrivals, counter, ticket);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_copy_signal(cudaStream_t stream, const CopyItem* items, int n, unsigned* arrivals,
                               unsigned long long* counter, unsigned long long ticket) {
  if (n < 1 || n > kCopyBatchMax) return cudaErrorInvalidValue;
  if (n == 1) return launch<1>(stream, items, n, arrivals, counter, ticket);
  return launch<kCopyBatchMax>(stream, items, n, arrivals, counter, ticket);
}

}  // namespace gpuwire::cuda
