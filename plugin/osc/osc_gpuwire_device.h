/*
 * osc/gpuwire's only door to the GPU: where a buffer lives and copies between
 * host and device memory, over the cuda layer's C interface
 * (gpuwire/gpu_device.h, the core's C device API). Without a GPU (open failed) every buffer is host
 * memory and nothing here touches CUDA.
 */
#ifndef OSC_GPUWIRE_DEVICE_H
#define OSC_GPUWIRE_DEVICE_H

#include <stddef.h>

#include <mpi.h>

/* Returns the number of GPUs (> 0) or -1 with a one-line reason. */
int gw_osc_dev_open(char *why, size_t why_len);
void gw_osc_dev_close(void);
/* The GPU holding [p, p + len), or -1 for host memory. */
int gw_osc_dev_where(const void *p, size_t len);
/* Blocking copies between host memory and gpu's memory; 0 or -1 (logged). */
int gw_osc_dev_copy(void *dst, const void *src, size_t len, int gpu);
/* dst (gpu's memory) = src (host) op dst over len bytes of type elements,
 * by the cuda layer's reduction kernels. Returns 1 when done, 0 when no
 * kernel takes op on type (the caller stages), -1 on failure (logged). */
int gw_osc_dev_reduce(void *dst, const void *src, size_t len, MPI_Datatype type, MPI_Op op,
                      int gpu);

#endif
