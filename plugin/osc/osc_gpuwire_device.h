/*
 * osc/gpuwire's only door to the GPU: where a buffer lives, copies between
 * host and device memory, peers' windows mapped for the same-node path, over the cuda layer's C interface
 * (gpuwire/gpu_device.h, the core's C device API). Without a GPU (open failed) every buffer is host
 * memory and nothing here touches CUDA.
 */
#ifndef OSC_GPUWIRE_DEVICE_H
#define OSC_GPUWIRE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

/* Returns the number of GPUs (> 0) or -1 with a one-line reason. */
int gw_osc_dev_open(char *why, size_t why_len);
void gw_osc_dev_close(void);
/* The GPU holding [p, p + len), or -1 for host memory. */
int gw_osc_dev_where(const void *p, size_t len);
/* Blocking copies between host memory and gpu's memory; 0 or -1 (logged). */
int gw_osc_dev_copy(void *dst, const void *src, size_t len, int gpu);
/* Like where, and *unordered when a cudaMemcpy of the application's may
 * still be writing it (wait_user before reading or writing it). */
int gw_osc_dev_where_order(const void *p, size_t len, bool *unordered);
/* Waits for the application's work on gpu's legacy default stream; 0 or -1
 * (logged). */
int gw_osc_dev_wait_user(int gpu);

/* The same-node direct path (osc_gpuwire_direct.c). A description of
 * [p, p + len) for the peers (GW_OSC_DESC_BYTES); 0, or -1 when it cannot be
 * exported (the description then tells every peer so). */
#define GW_OSC_DESC_BYTES 136
int gw_osc_dev_describe(const void *p, size_t len, void *desc, char *why, size_t why_len);
/* Maps a peer's description: *mapping (for unmap), *ptr, *gpu (the local GPU
 * whose stream copies to it). 0, or -1 with why. */
int gw_osc_dev_map(const void *desc, uint32_t peer_id, void **mapping, void **ptr, int *gpu,
                   char *why, size_t why_len);
void gw_osc_dev_unmap(void *mapping);
/* Enqueues dst = src (len bytes) on gpu's stream; both_device: both ends are
 * device memory (one kernel copies and signals). *ticket reaches it. 0 or -1
 * (logged). Never waits. */
int gw_osc_dev_copy_start(void *dst, const void *src, size_t len, int gpu, bool both_device,
                          uint64_t *ticket);
/* Waits until gpu's stream has passed ticket; 0 or -1 (logged). */
int gw_osc_dev_copy_wait(int gpu, uint64_t ticket);
/* dst (gpu's memory) = src (host) op dst over len bytes of type elements,
 * by the cuda layer's reduction kernels. Returns 1 when done, 0 when no
 * kernel takes op on type (the caller stages), -1 on failure (logged). */
int gw_osc_dev_reduce(void *dst, const void *src, size_t len, MPI_Datatype type, MPI_Op op,
                      int gpu);

/* Whether dst = src op dst runs on the GPU for op on type (REPLACE: a copy). */
bool gw_osc_dev_reduce_supported(MPI_Datatype type, MPI_Op op);
/* dst (gpu's memory) = src op dst over len bytes, where src is a peer's
 * device buffer given by its description (gw_osc_dev_describe): mapped,
 * reduced by the kernel (copied for REPLACE), waited for, unmapped. 0 or -1
 * (logged). */
int gw_osc_dev_reduce_mapped(void *dst, const void *desc, uint32_t peer_id, size_t len,
                             MPI_Datatype type, MPI_Op op, int gpu);

#endif
