/*
 * Where the one-sided tests' buffers live: host memory, or (OSC_TEST_DEVICE)
 * GPU memory filled and read back with cudaMemcpy, or the simulated GPU's
 * (OSC_TEST_FAKEDEV: private pages; OSC_TEST_FAKEDEV_IPC: pages its peers
 * can map).
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
#elif defined(OSC_TEST_FAKEDEV) || defined(OSC_TEST_FAKEDEV_IPC)
/* osc "gpuwirefake"'s simulated GPU memory: pages the CPU cannot touch
 * (PROT_NONE), opened only to fill and read them back. */
#include <sys/mman.h> /* memfd_create: the includer defines _GNU_SOURCE first */
#include <unistd.h>
static const int osc_test_device = 1;
static inline int osc_test_setup(void) { return 0; }
static inline size_t osc_test_pages(size_t len) { return (len + 4095) & ~(size_t)4095; }
#ifdef OSC_TEST_FAKEDEV_IPC
/* Memory its peers can map: a "gwfake-ipc" memfd (tests/mpi_coll/fake_ipc.c
 * maps it through /proc/<pid>/fd, so it stays open; unmapped with the
 * process). */
static inline void *osc_test_alloc(size_t len)
{
    int fd = memfd_create("gwfake-ipc", 0);
    if (fd < 0 || ftruncate(fd, (off_t)osc_test_pages(len)) != 0) abort();
    void *p = mmap(NULL, osc_test_pages(len), PROT_NONE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) abort();
    return p;
}
static inline void osc_test_free(void *p) { (void)p; }
#else
/* Private pages, one each: every buffer of osc_rma fits. */
static inline void *osc_test_alloc(size_t len)
{
    if (len > 4096) abort();
    void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) abort();
    return p;
}
static inline void osc_test_free(void *p) { munmap(p, 4096); }
#endif
static inline void osc_test_to(void *dst, const void *src, size_t len)
{
    mprotect(dst, osc_test_pages(len), PROT_READ | PROT_WRITE);
    memcpy(dst, src, len);
    mprotect(dst, osc_test_pages(len), PROT_NONE);
}
static inline void osc_test_from(void *dst, const void *src, size_t len)
{
    mprotect((void *)src, osc_test_pages(len), PROT_READ);
    memcpy(dst, src, len);
    mprotect((void *)src, osc_test_pages(len), PROT_NONE);
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
