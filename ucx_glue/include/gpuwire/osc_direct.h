/*
 * The one-sided engine's GPU door and same-node direct path (ucx_glue/osc,
 * in the core; gpuwire/osc.h has the rest of the engine).
 *
 *   device   where a buffer lives, blocking and asynchronous copies, the
 *            reduction of an op by the GPU kernels, peers' buffers described
 *            and mapped -- all over the core's C device API
 *            (gpuwire/gpu_device.h), so the process keeps one GPU context,
 *            one stream per GPU and one IPC mapping cache, shared with pml
 *            and coll gpuwire (ucx_glue/osc/device)
 *   direct   a window's same-node direct path: this rank's description of
 *            its window for the peers, the peers' windows mapped, a
 *            contiguous Put or Get done as one copy (or one cross-memory
 *            attach call for a host window), the tickets waited for, and
 *            whether an Accumulate may go by reference (ucx_glue/osc/direct)
 *
 * Ops and types are the reduction kernels' ids (gpuwire/cuda/reduce.h's
 * GW_OP_*, GW_TYPE_*), -1 where the caller's op or type has none, and
 * GW_OSC_OP_REPLACE for MPI_REPLACE: the caller translates its own.
 *
 * Messages: one line each, through the function given to gw_osc_log_set
 * (verbosity 0: an error, always shown; n > 0: shown at verbosity n).
 */
#ifndef GPUWIRE_OSC_DIRECT_H
#define GPUWIRE_OSC_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/core.h"
#include "gpuwire/gpu_device.h" /* gw_coll_copy_item_t */
#include "gpuwire/osc.h" /* GW_OSC_ERR_* */

#ifdef __cplusplus
extern "C" {
#endif

/* Where the engine's lines go (NULL: dropped); msg has no prefix. */
typedef void (*gw_osc_log_fn)(int verbosity, const char *msg);
GW_CORE_API void gw_osc_log_set(gw_osc_log_fn fn);

/* ---- device: the GPU door (ucx_glue/osc/device) --------------------------- */

#define GW_OSC_OP_REPLACE (-2)
/* A description of device memory for the peers (gpu_device.h's size). */
#define GW_OSC_DESC_BYTES 136

/* Returns the number of GPUs (> 0) or -1 with a one-line reason. Without
 * it, every buffer is host memory and nothing below touches the GPU. */
GW_CORE_API int gw_osc_dev_open(char *why, size_t why_len);
GW_CORE_API void gw_osc_dev_close(void);
/* The GPU holding [p, p + len), or -1 for host memory. */
GW_CORE_API int gw_osc_dev_where(const void *p, size_t len);
/* Like where, and *unordered when a cudaMemcpy of the application's may
 * still be writing it (wait_user before reading or writing it). */
GW_CORE_API int gw_osc_dev_where_order(const void *p, size_t len, bool *unordered);
/* Waits for the application's work on gpu's legacy default stream; 0 or -1
 * (logged). */
GW_CORE_API int gw_osc_dev_wait_user(int gpu);
/* Blocking copy between host memory and gpu's memory, behind the
 * application's work; 0 or -1 (logged). */
GW_CORE_API int gw_osc_dev_copy(void *dst, const void *src, size_t len, int gpu);
/* Enqueues dst = src (len bytes) on gpu's stream; both_device: both ends are
 * device memory (one kernel copies and signals). *ticket reaches it. 0 or -1
 * (logged). Never waits. */
GW_CORE_API int gw_osc_dev_copy_start(void *dst, const void *src, size_t len, int gpu,
                                      bool both_device, uint64_t *ticket);
/* Enqueues items[0..n) (copies between device buffers, disjoint; 1 <= n <=
 * GW_OSC_COPY_BATCH) on gpu's stream, one kernel; *ticket reaches them all.
 * 0 or -1 (logged). Never waits. */
#define GW_OSC_COPY_BATCH GW_COLL_COPY_BATCH_MAX
GW_CORE_API int gw_osc_dev_copy_batch(const gw_coll_copy_item_t *items, int n, int gpu,
                                      uint64_t *ticket);
/* Waits until gpu's stream has passed ticket; 0 or -1 (logged). */
GW_CORE_API int gw_osc_dev_copy_wait(int gpu, uint64_t ticket);
/* A description of [p, p + len) for the peers (GW_OSC_DESC_BYTES); 0, or -1
 * with why when it cannot be exported (the description then tells every
 * peer so). */
GW_CORE_API int gw_osc_dev_describe(const void *p, size_t len, void *desc, char *why,
                                    size_t why_len);
/* Maps a peer's description: *mapping (for unmap), *ptr, *gpu (the local GPU
 * whose stream copies to it). 0, or -1 with why. */
GW_CORE_API int gw_osc_dev_map(const void *desc, uint32_t peer_id, void **mapping, void **ptr,
                               int *gpu, char *why, size_t why_len);
GW_CORE_API void gw_osc_dev_unmap(void *mapping);
/* dst (gpu's memory) = src (host) op dst over len bytes of type elements, by
 * the kernels. 1 when done, 0 when no kernel takes op on type (the caller
 * stages), -1 on failure (logged). */
GW_CORE_API int gw_osc_dev_reduce(void *dst, const void *src, size_t len, int op, int type,
                                  int gpu);
/* An accumulate into dst (window memory that gpu's stream reaches: its
 * own, or a peer's mapped), len bytes, on gpu's stream: result (NULL:
 * none) gets dst's bytes first, then dst = src op dst (REPLACE: a copy;
 * src NULL: unchanged) by the kernels; waited for. src_here/result_here:
 * that buffer is device memory of gpu (else a copy stages it). The caller
 * has checked that op on type has a kernel and waited for the application's
 * work on its buffers. 0 or -1 (logged). */
GW_CORE_API int gw_osc_dev_acc(void *dst, int gpu, const void *src, bool src_here, void *result,
                               bool result_here, size_t len, int op, int type);
/* A compare-and-swap of one element (len <= 16 bytes) at dst, as
 * gw_osc_dev_acc: result gets the old bytes, dst becomes origin where they
 * equal compare; *_here: that buffer is device memory of gpu (else staged
 * through GPU scratch by copies on the stream). One wait. 0 or -1 (logged). */
GW_CORE_API int gw_osc_dev_cas(void *dst, int gpu, const void *origin, bool origin_here,
                               const void *compare, bool compare_here, void *result,
                               bool result_here, size_t len);
/* Whether dst = src op dst runs on the GPU for op on type (REPLACE: a copy). */
GW_CORE_API bool gw_osc_dev_reduce_supported(int op, int type);
/* dst (gpu's memory) = src op dst over len bytes, src a peer's device buffer
 * given by its description: mapped, reduced by the kernel (copied for
 * REPLACE), waited for, unmapped. 0 or -1 (logged). */
GW_CORE_API int gw_osc_dev_reduce_mapped(void *dst, const void *desc, uint32_t peer_id,
                                         size_t len, int op, int type, int gpu);

/* ---- direct: a window's same-node path (ucx_glue/osc/direct) -------------- */

enum { GW_OSC_WIN_MESSAGES, GW_OSC_WIN_DEVICE, GW_OSC_WIN_HOST };
/* What a rank's segment (gw_osc_lockwords_create) holds: its lock word,
 * taken by same-node origins; its window's bytes, after the word's page. */
enum { GW_OSC_SEG_WORD = 1, GW_OSC_SEG_DATA = 2 };

/* One rank's window as every rank of the window receives it (an allgather
 * of the caller's). */
typedef struct {
    uint32_t kind;     /* GW_OSC_WIN_DEVICE: desc describes it; _HOST: pid, base */
    int32_t disp_unit;
    uint64_t size;
    int32_t pid;
    uint32_t seg;     /* GW_OSC_SEG_* of its segment */
    uint64_t base;
    char desc[GW_OSC_DESC_BYTES];
    uint64_t seg_id;  /* its segment (gw_osc_lockwords_create); 0: none */
} gw_osc_win_desc_t;

/* This rank's window. */
typedef struct {
    int rank;
    char *base;
    uint64_t size;
    int disp_unit;
    int gpu;           /* -1: host memory */
} gw_osc_win_self_t;

/* This rank's part of the exchange: its size and disp_unit always (every
 * origin checks its accesses against them); GW_OSC_WIN_MESSAGES unless
 * enabled and the window has bytes and can be reached (a device window waits for the
 * application's work on it first, so that it lands before a peer copies). */
GW_CORE_API void gw_osc_direct_describe(bool enabled, const gw_osc_win_self_t *self,
                                        gw_osc_win_desc_t *mine);

/* Whether rank t of the window runs on this node, and its process-unique id
 * (the IPC mapping cache's key). */
typedef bool (*gw_osc_peer_fn)(void *ctx, int t, uint32_t *peer_id);

typedef struct gw_osc_direct gw_osc_direct_t;

/* Maps the windows of all[0..nranks) that this rank can reach (same node,
 * description mappable). host_data (NULL: none): per rank, its host window
 * as mapped here in shared memory (gw_osc_lockwords_data), reached with
 * memory copies; the other host windows by cross-memory attach. *out: the
 * path, or NULL when no target is direct; *mapped: how many are. 0 or
 * GW_OSC_ERR_NOMEM (nothing held then). */
GW_CORE_API int gw_osc_direct_open(const gw_osc_win_self_t *self, int nranks,
                                   const gw_osc_win_desc_t *all, void *const *host_data,
                                   gw_osc_peer_fn peer, void *peer_ctx, gw_osc_direct_t **out,
                                   int *mapped);
/* Waits for the copies, gives the mappings back. NULL is ignored. */
GW_CORE_API void gw_osc_direct_close(gw_osc_direct_t *d);

/* What gw_osc_direct_rma did. */
enum {
    GW_OSC_DIRECT_NO = 0,    /* not taken: the message path must */
    GW_OSC_DIRECT_DONE = 1,  /* taken; no bytes moved (nothing to move, or *rc) */
    GW_OSC_DIRECT_MOVED = 2, /* taken; a copy went (the caller counts it) */
    GW_OSC_DIRECT_BUSY = 3,  /* gw_osc_direct_acc: not taken, the target's accumulate
                                word stayed held: the message path must */
};
/* A Put (put: origin to target) or Get of bytes between origin (the first
 * byte of a contiguous origin buffer) and target's window at tdisp (in its
 * disp_units) + off, the caller having checked that both layouts are
 * contiguous and the signatures match. A device window: one asynchronous
 * copy (batched with the next ones when both ends are on the window's GPU),
 * complete after gw_osc_direct_wait (or on return when wait). A host
 * window: one memory copy where it is mapped in shared memory (a copy on the
 * origin buffer's GPU from device memory), else, from a host origin buffer,
 * one cross-memory-attach call; complete on return.
 * *rc: 0, GW_OSC_ERR_RANGE (logged) or GW_OSC_ERR_FAILED. */
GW_CORE_API int gw_osc_direct_rma(gw_osc_direct_t *d, bool put, void *origin, uint64_t bytes,
                                  int target, int64_t tdisp, int64_t off, bool wait, int *rc);
/* An accumulate-kind operation (GW_OSC_ACC, _GACC, _CAS) of bytes done
 * here on target's window at tdisp (its disp_units) + off, under word (its
 * gw_osc_lockwords_acc), complete on return: result (the fetching kinds)
 * gets the bytes before, then the window's bytes become origin op them
 * (origin NULL: MPI_NO_OP) or, for CAS, origin where they equal compare.
 * A host window mapped in shared memory: memory copies and ops->combine
 * (given type and op), host buffers only. A host window reached by
 * cross-memory attach: the same, on a scratch copy of each step's window
 * bytes read and written back (a first read the kernel refuses: NO,
 * nothing changed). A device window mapped here: the
 * kernels on its GPU's stream (gw_osc_dev_acc; type and op are the
 * kernels' ids; CAS: the compare-and-swap kernel, one element of at most
 * 16 bytes), origin, compare and result in host or device memory; not an
 * op the kernels lack. The caller has checked the layouts (each buffer
 * one contiguous run) and that no operation it sent target as a message
 * may still be unapplied (MPI's order from one origin).
 * GW_OSC_DIRECT_NO where the path cannot take it, GW_OSC_DIRECT_BUSY where
 * the word stayed held (gw_osc_acc_trylock); else *rc: 0, GW_OSC_ERR_RANGE
 * (logged) or GW_OSC_ERR_FAILED. */
GW_CORE_API int gw_osc_direct_acc(gw_osc_direct_t *d, int *word, uint32_t kind, int target,
                                  int64_t tdisp, int64_t off, uint64_t bytes, const void *origin,
                                  const void *compare, void *result, int32_t type, int32_t op,
                                  const gw_osc_mem_ops_t *ops, int *rc);
/* Waits for every copy issued so far (origin buffers reusable, data at the
 * targets). 0 or GW_OSC_ERR_FAILED. NULL: 0. */
GW_CORE_API int gw_osc_direct_wait(gw_osc_direct_t *d);
/* Starts the copies batched so far (between device buffers, up to
 * GW_OSC_COPY_BATCH per kernel) without waiting; for progress. One load when
 * there are none. 0 or GW_OSC_ERR_FAILED. NULL: 0. */
GW_CORE_API int gw_osc_direct_kick(gw_osc_direct_t *d);
/* Whether a contiguous Accumulate of bytes from origin (its first byte) to
 * target, op on type, may go by reference: a device buffer on the target
 * window's GPU, with a kernel for op. Then desc (GW_OSC_DESC_BYTES) holds its
 * description, to send instead of its bytes. */
GW_CORE_API bool gw_osc_direct_acc_ref(gw_osc_direct_t *d, int target, const void *origin,
                                       uint64_t bytes, int op, int type, void *desc);

#ifdef __cplusplus
}
#endif

#endif
