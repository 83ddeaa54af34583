/*
 * Shared by the MPI tests on device buffers: a CUDA call that fails fails the
 * test with its error, and the GPU each rank uses (rank r on GPU r modulo the
 * count; GPU 0 for every rank with GW_TEST_SAME_GPU=1).
 */
#ifndef GPUWIRE_TESTS_DEVICE_TEST_H
#define GPUWIRE_TESTS_DEVICE_TEST_H

#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "mpi_pvar.h"
#include "mpitest.h"

#define CUDA_OK(call)                                                                     \
    do {                                                                                  \
        cudaError_t _e = (call);                                                          \
        if (_e != cudaSuccess) {                                                          \
            mt_fail(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(_e));         \
        }                                                                                 \
    } while (0)

/* Selects this rank's GPU and returns its index, or -1 when there is none. */
static inline int device_test_select_gpu(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return -1;
    const char *same = getenv("GW_TEST_SAME_GPU");
    int dev = (same && atoi(same)) ? 0 : mt_rank % ndev;
    CUDA_OK(cudaSetDevice(dev));
    return dev;
}

/* With GW_TEST_NEED_UCX_CUDA=1: nonzero when the UCX in use cannot move CUDA
 * memory (pml_gpuwire_ucx_moves_cuda), so the test must skip. After MPI_Init;
 * the same answer on every rank. */
static inline int device_test_lacks_ucx_cuda(void)
{
    const char *need = getenv("GW_TEST_NEED_UCX_CUDA");
    if (!need || atoi(need) != 1) return 0;
    return pvar_value_now("pml_gpuwire_ucx_moves_cuda") == 0;
}

#endif
