/* Buffers of every memory kind the soak uses (host, cudaMalloc, managed).
 * Host memory is touched when allocated, so that resident memory does not
 * grow later just because a bigger round first used more of it. Every CUDA
 * call is checked; a failure ends the job with one line naming the call. */
#ifndef GPUWIRE_SOAK_MEM_H
#define GPUWIRE_SOAK_MEM_H

#include <stdbool.h>
#include <stddef.h>

/* Selects a GPU (local rank modulo the count). Returns 0, or 77 with why
 * filled where device buffers cannot be had (no GPU, built without CUDA). */
int soak_mem_init_device(int local_rank, char *why, size_t len);

void *soak_alloc(int kind, size_t n);
void soak_free(int kind, void *p);
/* memset; on device and managed buffers queued on the soak's stream
 * (soak_gpu.h), done once soak_gpu_sync() returns. */
void soak_set(int kind, void *dst, int byte, size_t n);

#endif
