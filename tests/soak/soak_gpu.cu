/* The soak's payload kernels: fill a device or managed buffer with the
 * pattern of soak_pattern.h, and check a received one against it, returning
 * the number of wrong bytes and the first wrong offset. soak_gpu.h has the
 * contract. */
#include "soak_gpu.h"

#include <cuda_runtime.h>
#define OMPI_SKIP_MPICXX 1 /* the C API only (MPI_Abort) */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "soak_pattern.h"

#define THREADS 256

static cudaStream_t stream;
static soak_gpu_result_t *res_dev, *res_host;
static int res_cap, queued;
static int max_blocks;

static void cuda_ok(cudaError_t e, const char *call)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "soak: %s failed: %s\n", call, cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define CUDA_OK(call) cuda_ok((call), #call)
#define LAUNCHED(name) cuda_ok(cudaGetLastError(), "launch of " name)

/* ---- kernels ------------------------------------------------------------- */

static __global__ void fill_kernel(unsigned char *buf, size_t len, uint64_t key, bool aligned)
{
    size_t words = len / 8, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < words; j += stride) {
        uint64_t w = soak_word(key, j);
        if (aligned) {
            reinterpret_cast<uint64_t *>(buf)[j] = w;
        } else {
            for (int b = 0; b < 8; ++b) buf[8 * j + b] = (unsigned char)(w >> (8 * b));
        }
    }
    if (blockIdx.x == 0 && threadIdx.x < len % 8) {
        size_t i = 8 * words + threadIdx.x;
        buf[i] = soak_byte(key, i);
    }
}

static __global__ void flip_kernel(unsigned char *byte, unsigned char mask) { *byte ^= mask; }

static __global__ void init_kernel(soak_gpu_result_t *res, int n)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        res[i].wrong = 0;
        res[i].first = ~0ull;
    }
}

/* Byte i of what buf must hold: the pattern below len, the guard from len
 * to total. Word j covers bytes 8j to 8j + 7; those of the last word at or
 * beyond total are not compared. */
static __global__ void check_kernel(const unsigned char *buf, size_t len, size_t total,
                                    uint64_t key, unsigned char guard, bool aligned,
                                    soak_gpu_result_t *res)
{
    unsigned long long wrong = 0, first = ~0ull;
    size_t words = (total + 7) / 8, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < words; j += stride) {
        size_t off = 8 * j;
        uint64_t got = 0, mask = soak_word_mask(j, total);
        if (aligned && mask == ~0ull) {
            got = reinterpret_cast<const uint64_t *>(buf)[j];
        } else {
            for (int b = 0; b < 8 && off + b < total; ++b) got |= (uint64_t)buf[off + b] << (8 * b);
        }
        uint64_t want = off + 8 <= len ? soak_word(key, j) : soak_expected_word(key, j, len, guard);
        uint64_t d = (got ^ want) & mask;
        if (d) {
            wrong += (unsigned long long)soak_nonzero_bytes(d);
            unsigned long long at = off + (unsigned long long)(__ffsll((long long)d) - 1) / 8;
            first = at < first ? at : first;
        }
    }
    for (int s = 16; s > 0; s >>= 1) {
        wrong += __shfl_down_sync(0xffffffffu, wrong, s);
        unsigned long long f = __shfl_down_sync(0xffffffffu, first, s);
        first = f < first ? f : first;
    }
    if ((threadIdx.x & 31) == 0 && wrong) {
        atomicAdd(&res->wrong, wrong);
        atomicMin(&res->first, first);
    }
}

/* ---- host side ----------------------------------------------------------- */

static unsigned blocks_for(size_t words)
{
    size_t b = (words + THREADS - 1) / THREADS;
    if (b < 1) b = 1;
    return (unsigned)(b < (size_t)max_blocks ? b : (size_t)max_blocks);
}

static bool aligned8(const void *p) { return ((uintptr_t)p & 7) == 0; }

extern "C" void soak_gpu_init(int max_checks)
{
    int dev = 0, sms = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    max_blocks = (sms > 0 ? sms : 1) * 8;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    res_cap = max_checks > 0 ? max_checks : 1;
    CUDA_OK(cudaMalloc((void **)&res_dev, sizeof(soak_gpu_result_t) * res_cap));
    CUDA_OK(cudaMallocHost((void **)&res_host, sizeof(soak_gpu_result_t) * res_cap));
    queued = 0;
}

extern "C" void soak_gpu_fini(void)
{
    if (!stream) return;
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaFree(res_dev));
    CUDA_OK(cudaFreeHost(res_host));
    CUDA_OK(cudaStreamDestroy(stream));
    stream = NULL;
    res_dev = res_host = NULL;
}

extern "C" void soak_gpu_fill(void *buf, size_t len, uint64_t key)
{
    if (!len) return;
    fill_kernel<<<blocks_for(len / 8), THREADS, 0, stream>>>((unsigned char *)buf, len, key,
                                                              aligned8(buf));
    LAUNCHED("fill_kernel");
}

extern "C" void soak_gpu_flip(void *buf, size_t off, unsigned char mask)
{
    flip_kernel<<<1, 1, 0, stream>>>((unsigned char *)buf + off, mask);
    LAUNCHED("flip_kernel");
}

extern "C" void soak_gpu_memset(void *buf, int byte, size_t len)
{
    if (len) CUDA_OK(cudaMemsetAsync(buf, byte, len, stream));
}

extern "C" void soak_gpu_sync(void) { CUDA_OK(cudaStreamSynchronize(stream)); }

extern "C" int soak_gpu_check(const void *buf, size_t len, size_t tail, unsigned char guard,
                              uint64_t key)
{
    if (queued == res_cap) {
        fprintf(stderr, "soak: more than %d device checks queued\n", res_cap);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (queued == 0) {
        init_kernel<<<1, THREADS, 0, stream>>>(res_dev, res_cap);
        LAUNCHED("init_kernel");
    }
    int slot = queued++;
    size_t total = len + tail;
    if (total) {
        check_kernel<<<blocks_for((total + 7) / 8), THREADS, 0, stream>>>(
            (const unsigned char *)buf, len, total, key, guard, aligned8(buf), res_dev + slot);
        LAUNCHED("check_kernel");
    }
    return slot;
}

extern "C" int soak_gpu_results(soak_gpu_result_t *out)
{
    int n = queued;
    if (!n) return 0;
    CUDA_OK(cudaMemcpyAsync(res_host, res_dev, sizeof(soak_gpu_result_t) * n,
                            cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    memcpy(out, res_host, sizeof(soak_gpu_result_t) * n);
    queued = 0;
    return n;
}
