/*
 * Packing and unpacking of non-contiguous layouts on the GPU, for MPI
 * datatypes on device buffers. A C header: pml/gpuwire's C code and C++ code
 * include it alike; it names no CUDA type.
 *
 * A layout is a list of blocks. Block i says: len bytes at user_off from the
 * user's buffer pointer (signed: a datatype's lower bound may be negative)
 * are packed bytes [packed_off, packed_off + len). The caller builds the list
 * on the host from the datatype alone (it never reads the buffer); one kernel
 * then copies every block.
 *
 * Contract of gw_dev_pack / gw_dev_unpack:
 * - synchronous: the block list is uploaded into device scratch (kept per
 *   device, grown on demand), one kernel runs on a non-blocking stream of
 *   `device` (kept per device), and the call waits for that stream before
 *   returning. The data is in place when it returns 0.
 * - both buffers must be reachable from `device` (memory of that GPU, or
 *   managed memory); blocks must not overlap in the destination.
 * - nblocks 0 launches nothing and succeeds.
 * - 0 on success; -1 with one line naming the cause in why otherwise (a
 *   failed CUDA call, a block list too large, built without CUDA).
 * - thread-safe: calls for one device are serialised by a lock of that
 *   device; the calling thread's current device is left as it was.
 *
 * Device temporaries (gw_dev_temp_*): contiguous cudaMalloc memory for a
 * packed message, so the transport sees an ordinary (IPC-exportable) device
 * buffer. Returned temporaries are kept for reuse (at most
 * GW_DEV_TEMP_KEEP of them per process, largest kept) until
 * gw_dev_temp_drain(). Thread-safe.
 */
#ifndef GPUWIRE_CUDA_PACK_H
#define GPUWIRE_CUDA_PACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t user_off;    /* from the user's buffer pointer */
    uint64_t packed_off; /* in the packed (contiguous) buffer */
    uint64_t len;        /* bytes */
} gw_block_t;

/* Free temporaries kept for reuse, per process. */
#define GW_DEV_TEMP_KEEP 2

/* packed[b.packed_off + k] = user_base[b.user_off + k] for every block b. */
int gw_dev_pack(void *packed, const void *user_base, const gw_block_t *blocks, size_t nblocks,
                int device, char *why, size_t why_len);
/* user_base[b.user_off + k] = packed[b.packed_off + k] for every block b. */
int gw_dev_unpack(void *user_base, const void *packed, const gw_block_t *blocks, size_t nblocks,
                  int device, char *why, size_t why_len);

/* The ordinal of the GPU that holds ptr (the allocation's device; for
 * managed memory, the current device). -1 with why when ptr is not GPU
 * memory or the query fails. */
int gw_dev_pointer_device(const void *ptr, char *why, size_t why_len);

/* A device temporary of at least bytes on device: 0 and *out, or -1 and
 * why. */
int gw_dev_temp_get(int device, size_t bytes, void **out, char *why, size_t why_len);
/* Returns a temporary from gw_dev_temp_get (kept or freed). NULL is a no-op. */
void gw_dev_temp_put(void *ptr);
/* Frees every kept temporary (at finalize). */
void gw_dev_temp_drain(void);

#ifdef __cplusplus
}
#endif

#endif
