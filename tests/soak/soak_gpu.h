/* Payloads of device and managed buffers, written and checked on the GPU
 * (soak_gpu.cu) with the pattern of soak_pattern.h, so that no byte of them
 * crosses PCIe for the soak's own sake.
 *
 * Everything below is queued on one stream of the soak's own and runs in
 * order there; soak_gpu_sync() waits for it. The soak waits before it hands
 * any buffer to MPI, and MPI has finished with a receive buffer before its
 * check is queued. Checks are answered together: soak_gpu_check() queues
 * one and returns its slot, soak_gpu_results() waits for all queued since
 * the last call and brings their results back in one small copy. Every CUDA
 * call is checked; a failure ends the job with one line naming the call. */
#ifndef GPUWIRE_SOAK_GPU_H
#define GPUWIRE_SOAK_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    unsigned long long wrong; /* bytes that differ from what was expected */
    unsigned long long first; /* offset of the first of them (meaningless if wrong == 0) */
} soak_gpu_result_t;

#ifdef SOAK_HAVE_CUDA

/* After the device is selected: the stream and room for max_checks results. */
void soak_gpu_init(int max_checks);
void soak_gpu_fini(void);
/* The pattern of key into buf[0, len). */
void soak_gpu_fill(void *buf, size_t len, uint64_t key);
/* buf[off] ^= mask (the checker's own test). */
void soak_gpu_flip(void *buf, size_t off, unsigned char mask);
void soak_gpu_memset(void *buf, int byte, size_t len);
void soak_gpu_sync(void);
/* Compares buf[0, len) with the pattern of key and buf[len, len + tail) with
 * guard; returns the slot of the result (0, 1, ... since the last
 * soak_gpu_results). */
int soak_gpu_check(const void *buf, size_t len, size_t tail, unsigned char guard, uint64_t key);
/* Waits for the queued checks; their results into out[slot]; returns how many. */
int soak_gpu_results(soak_gpu_result_t *out);

#else /* built without CUDA: --device ends in a skip before any of these is reached */

#include <stdio.h>
#include <stdlib.h>

static inline void soak_gpu_unavailable(void)
{
    fprintf(stderr, "soak: built without CUDA, device buffers are unavailable\n");
    abort();
}
static inline void soak_gpu_init(int max_checks)
{
    (void)max_checks;
    soak_gpu_unavailable();
}
static inline void soak_gpu_fini(void) {}
static inline void soak_gpu_fill(void *buf, size_t len, uint64_t key)
{
    (void)buf, (void)len, (void)key;
    soak_gpu_unavailable();
}
static inline void soak_gpu_flip(void *buf, size_t off, unsigned char mask)
{
    (void)buf, (void)off, (void)mask;
    soak_gpu_unavailable();
}
static inline void soak_gpu_memset(void *buf, int byte, size_t len)
{
    (void)buf, (void)byte, (void)len;
    soak_gpu_unavailable();
}
static inline void soak_gpu_sync(void) {}
static inline int soak_gpu_check(const void *buf, size_t len, size_t tail, unsigned char guard,
                                 uint64_t key)
{
    (void)buf, (void)len, (void)tail, (void)guard, (void)key;
    soak_gpu_unavailable();
    return 0;
}
static inline int soak_gpu_results(soak_gpu_result_t *out)
{
    (void)out;
    return 0;
}

#endif

#ifdef __cplusplus
}
#endif

#endif
