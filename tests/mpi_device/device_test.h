/*
 * Shared by the MPI tests on device buffers: a CUDA call that fails fails the
 * test with its error, and the GPU each rank uses (rank r on GPU r modulo the
 * count; GPU 0 for every rank with GW_TEST_SAME_GPU=1).
 */
#ifndef GPUWIRE_TESTS_DEVICE_TEST_H
#define GPUWIRE_TESTS_DEVICE_TEST_H

#include <cuda_runtime_api.h>
#include <stdlib.h>

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

#endif
