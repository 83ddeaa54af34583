#include "soak_mem.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak_gpu.h"
#include "soak_plan.h"

#ifdef SOAK_HAVE_CUDA
#include <cuda_runtime_api.h>

static void cuda_ok(cudaError_t e, const char *call)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "soak: %s failed: %s\n", call, cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define CUDA_OK(call) cuda_ok((call), #call)
#endif

int soak_mem_init_device(int local_rank, char *why, size_t len)
{
#ifdef SOAK_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, len, "no GPU (CUDA driver or device absent): %s",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    CUDA_OK(cudaSetDevice(local_rank % n));
    CUDA_OK(cudaFree(NULL)); /* the context, before the first sample */
    return 0;
#else
    (void)local_rank;
    snprintf(why, len, "no CUDA (built without the CUDA toolkit)");
    return 77;
#endif
}

void *soak_alloc(int kind, size_t n)
{
    void *p = NULL;
    if (n == 0) n = 1;
    if (kind == SK_HOST) {
        p = malloc(n);
        if (!p) {
            fprintf(stderr, "soak: out of host memory (%zu bytes)\n", n);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* Not 0: the compiler may turn malloc + memset 0 into calloc, which
         * leaves fresh pages untouched (and out of the resident set). */
        memset(p, 0x5A, n);
        return p;
    }
#ifdef SOAK_HAVE_CUDA
    if (kind == SK_DEVICE) {
        CUDA_OK(cudaMalloc(&p, n));
    } else {
        CUDA_OK(cudaMallocManaged(&p, n, cudaMemAttachGlobal));
    }
    CUDA_OK(cudaMemset(p, 0, n));
    CUDA_OK(cudaDeviceSynchronize());
#endif
    return p;
}

void soak_free(int kind, void *p)
{
    if (kind == SK_HOST) {
        free(p);
        return;
    }
#ifdef SOAK_HAVE_CUDA
    CUDA_OK(cudaFree(p));
#endif
}

void soak_set(int kind, void *dst, int byte, size_t n)
{
    if (!n) return;
    if (kind == SK_HOST) {
        memset(dst, byte, n);
        return;
    }
    soak_gpu_memset(dst, byte, n);
}
