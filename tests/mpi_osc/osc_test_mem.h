/*
 * Where osc_rma's buffers live: host memory, or (OSC_TEST_DEVICE) GPU memory
 * filled and read back with cudaMemcpy.
 */
#ifndef OSC_TEST_MEM_H
#define OSC_TEST_MEM_H

#include <stdlib.h>
#include <string.h>

#ifdef OSC_TEST_DEVICE
#include "device_test.h"
static const int osc_test_device = 1;
static inline int osc_test_setup(void) { return device_test_select_gpu() < 0 ? -1 : 0; }
static inline void *osc_test_alloc(size_t len)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, len));
    return p;
}
static inline void osc_test_free(void *p) { CUDA_OK(cudaFree(p)); }
static inline void osc_test_to(void *dst, const void *src, size_t len)
{
    CUDA_OK(cudaMemcpy(dst, src, len, cudaMemcpyHostToDevice));
}
static inline void osc_test_from(void *dst, const void *src, size_t len)
{
    CUDA_OK(cudaMemcpy(dst, src, len, cudaMemcpyDeviceToHost));
}
#else
static const int osc_test_device = 0;
static inline int osc_test_setup(void) { return 0; }
static inline void *osc_test_alloc(size_t len) { return malloc(len); }
static inline void osc_test_free(void *p) { free(p); }
static inline void osc_test_to(void *dst, const void *src, size_t len) { memcpy(dst, src, len); }
static inline void osc_test_from(void *dst, const void *src, size_t len) { memcpy(dst, src, len); }
#endif

#endif
