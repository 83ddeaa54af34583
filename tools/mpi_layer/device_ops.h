/*
 * The PMPI layer's only door to CUDA: what kind of memory a buffer is, copies
 * between device and host, and host temporaries. Everything the wrappers know
 * of the GPU goes through these five functions, so that pointing the library
 * at another CUDA layer changes this pair of files only.
 *
 * Without a driver or a GPU (or in a build without CUDA) every buffer is host
 * memory and the copies are never asked for.
 */
#ifndef GPUWIRE_MPI_LAYER_DEVICE_OPS_H
#define GPUWIRE_MPI_LAYER_DEVICE_OPS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1: memory only the GPU can read (cudaMalloc, cuMemMap); 0: the CPU can read
 * it (pageable, pinned, managed, NULL); -1: the driver failed (a line naming
 * the call went to stderr). */
int gw_dev_is_device(const void *ptr);

/* Synchronous copy of len bytes, either direction (unified addressing tells);
 * 0 or -1 after a line on stderr. */
int gw_dev_copy(void *dst, const void *src, size_t len);

/* A host temporary of len bytes (pinned when it is large enough to matter and
 * pinning works, else malloc-ed); NULL when out of memory. */
void *gw_dev_host_alloc(size_t len);
void gw_dev_host_free(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
