/*
 * libgpuwire_mpi.so's view of the GPU: a C interface of libgpuwire_core over
 * the process's one GPU context (gpuwire/cuda/gpu_context.hpp, the one pml
 * gpuwire and coll gpuwire use), for the profiling-interface layer that
 * stages device buffers through host temporaries around Open MPI's own
 * MPI-layer calls (tools/mpi_layer). The layer keeps no CUDA state of its
 * own: it classifies with the context's memory-kind cache, copies with the
 * core's CUDA runtime and borrows temporaries from the context's pinned cache.
 *
 * Contract:
 * - gw_layer_open() takes one reference on the process's GPU context (created
 *   by the first of pml gpuwire, coll gpuwire and this layer to ask for it)
 *   and returns the number of GPUs; without a driver or a GPU it fails with
 *   one line in why, and nothing else may be called. Opens are counted: each
 *   successful one needs a gw_layer_close(); the last close gives the
 *   reference back. Any order against the components' open and close.
 * - Between open and close any thread may call the rest. classify() is
 *   lock-free on a cache hit; copy() blocks until the bytes have landed;
 *   host_get/host_put take the pinned cache's lock.
 * - Every function returning int returns 0 (classify: 0 or 1) on success; on
 *   failure it writes one line naming the failed call into why (at most
 *   why_len bytes) and returns -1.
 */
#ifndef GPUWIRE_GPU_LAYER_H
#define GPUWIRE_GPU_LAYER_H

#include <stddef.h>

#include "gpuwire/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the number of GPUs (> 0), or -1 with why ("no GPU: ..."). Counted
 * in gw_core_counters_t.layer_opens, failed or not. */
GW_CORE_API int gw_layer_open(char *why, size_t why_len);
GW_CORE_API void gw_layer_close(void);

/* 1: memory only a GPU can read (cudaMalloc, cudaMallocAsync, cuMemMap), and
 * *gpu is its device; 0: the CPU can read it (pageable, pinned, managed,
 * NULL), *gpu is the device of managed memory, else -1; -1 with why when the
 * driver failed. */
GW_CORE_API int gw_layer_classify(const void *ptr, int *gpu, char *why, size_t why_len);

/* Copies len bytes between host memory and gpu's memory, either direction
 * (unified addressing tells), in gpu's context, ordered after the work of
 * its legacy default stream (as cudaMemcpy), and returns once they landed. */
GW_CORE_API int gw_layer_copy(void *dst, const void *src, size_t len, int gpu, char *why,
                              size_t why_len);

typedef struct {
    void *ptr;
    size_t len;
    void *owner; /* the pinned buffer lent; NULL for plain host memory */
} gw_layer_host_buf_t;

/* A host temporary of len bytes for copies with gpu's memory: pinned
 * (portable, gpu's context pins it) from the context's pinned cache, plain
 * malloc-ed memory when the cache cannot serve it. -1 only without memory. */
GW_CORE_API int gw_layer_host_get(size_t len, int gpu, gw_layer_host_buf_t *out, char *why,
                                  size_t why_len);
GW_CORE_API void gw_layer_host_put(gw_layer_host_buf_t *buf);

#ifdef __cplusplus
}
#endif

#endif /* GPUWIRE_GPU_LAYER_H */
