/*
 * The default ordering contract on device buffers: a cudaMemcpy into a device
 * buffer has landed when it returns, so a message may read the buffer at once
 * without waiting for the default stream. (A cudaMemcpy from pageable host
 * memory may return before its DMA lands; CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on
 * the allocation stops that, and gpuwire sets it on every device allocation a
 * message or collective uses, as CUDA-aware Open MPI does.)
 *
 * Checked: the attribute is off on a fresh allocation and on once the buffer
 * has been sent or received through; pageable-host cudaMemcpy then an
 * immediate send, rounds of fresh patterns, arrive whole; an Allreduce on a
 * buffer written the same way gives the right sums.
 * Exits 77 (skipped) where there is no GPU.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "device_test.h"
#include "mpitest.h"

typedef CUresult (*get_attr_fn)(void *data, CUpointer_attribute attr, CUdeviceptr ptr);

/* The SYNC_MEMOPS attribute of ptr's allocation (through the runtime's entry
 * point lookup: the test does not link the driver library). */
static int sync_memops_of(const void *ptr)
{
    static get_attr_fn get = NULL;
    if (!get) {
        enum cudaDriverEntryPointQueryResult q;
        void *fn = NULL;
        CUDA_OK(cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fn, 12000,
                                                 cudaEnableDefault, &q));
        MT_CHECK(fn != NULL);
        get = (get_attr_fn)fn;
    }
    unsigned int on = 0;
    CUresult r = get(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS) mt_fail(__FILE__, __LINE__, "cuPointerGetAttribute: %d", (int)r);
    return (int)on;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (device_test_select_gpu() < 0) return mt_skip("no GPU (CUDA driver or device absent)");
    const int peer = mt_size - 1 - mt_rank;
    const size_t len = (size_t)8 << 20;
    unsigned char *host = malloc(len); /* pageable on purpose */
    unsigned char *back = malloc(len);
    void *buf = NULL;
    CUDA_OK(cudaMalloc(&buf, len));
    MT_CHECK_EQ(sync_memops_of(buf), 0);

    for (int round = 0; round < 8; ++round) {
        const unsigned seed = 100u + (unsigned)round;
        if (mt_rank == 0) {
            mt_fill(host, len, seed);
            CUDA_OK(cudaMemcpy(buf, host, len, cudaMemcpyHostToDevice));
            MT_CHECK_MPI(MPI_Send(buf, (int)len, MPI_BYTE, peer, round, MPI_COMM_WORLD));
        } else if (mt_rank == mt_size - 1) {
            MPI_Status st;
            MT_CHECK_MPI(MPI_Recv(buf, (int)len, MPI_BYTE, peer, round, MPI_COMM_WORLD, &st));
            int n = 0;
            MT_CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
            MT_CHECK_EQ((size_t)n, len);
            CUDA_OK(cudaMemcpy(back, buf, len, cudaMemcpyDeviceToHost));
            long bad = mt_check_fill(back, len, seed);
            if (bad >= 0) mt_fail(__FILE__, __LINE__, "round %d: byte %ld wrong", round, bad);
        }
        if (mt_rank == 0 || mt_rank == mt_size - 1) MT_CHECK_EQ(sync_memops_of(buf), 1);
    }

    /* A collective's buffer, written by a cudaMemcpy from pageable memory. */
    const size_t count = (size_t)1 << 20;
    int *ints = malloc(count * sizeof(int));
    int *dsum = NULL;
    CUDA_OK(cudaMalloc((void **)&dsum, count * sizeof(int)));
    for (size_t i = 0; i < count; ++i) ints[i] = (int)(i % 1000) + mt_rank;
    CUDA_OK(cudaMemcpy(dsum, ints, count * sizeof(int), cudaMemcpyHostToDevice));
    MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, dsum, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CUDA_OK(cudaMemcpy(ints, dsum, count * sizeof(int), cudaMemcpyDeviceToHost));
    const int rank_sum = mt_size * (mt_size - 1) / 2;
    for (size_t i = 0; i < count; ++i) {
        if (ints[i] != (int)(i % 1000) * mt_size + rank_sum) {
            mt_fail(__FILE__, __LINE__, "allreduce element %zu: %d", i, ints[i]);
            break;
        }
    }
    CUDA_OK(cudaFree(dsum));
    CUDA_OK(cudaFree(buf));
    free(ints);
    free(host);
    free(back);
    return mt_finish();
}
