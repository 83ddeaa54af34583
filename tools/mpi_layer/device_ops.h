/*
 * The PMPI layer's only door to the GPU: what kind of memory a buffer is,
 * copies between device and host, and host temporaries, all over
 * libgpuwire_core's GPU context (gpuwire/gpu_layer.h), the one pml gpuwire
 * and coll gpuwire share: the layer keeps no CUDA state of its own.
 *
 * The layer takes its reference on the context at its first classification
 * and gives it back in MPI_Finalize (gw_dev_close). Without a driver or a GPU
 * every buffer is host memory and the copies are never asked for.
 */
#ifndef GPUWIRE_MPI_LAYER_DEVICE_OPS_H
#define GPUWIRE_MPI_LAYER_DEVICE_OPS_H

#include <stddef.h>

/* 1: memory only the GPU can read (cudaMalloc, cuMemMap); 0: the CPU can read
 * it (pageable, pinned, managed, NULL); -1: the driver failed (a line naming
 * the call went to stderr). */
int gw_dev_is_device(const void *ptr);

/* Synchronous copy of len bytes, either direction (unified addressing tells);
 * 0 or -1 after a line on stderr. */
int gw_dev_copy(void *dst, const void *src, size_t len);

/* A host temporary of len bytes for copies with the device buffer near
 * (pinned from the context's cache when it can, else malloc-ed); NULL when
 * out of memory. */
void *gw_dev_host_alloc(size_t len, const void *near);
void gw_dev_host_free(void *ptr);

/* Gives the layer's reference on the GPU context back (MPI_Finalize); a
 * later classification takes a new one. */
void gw_dev_close(void);

#endif
