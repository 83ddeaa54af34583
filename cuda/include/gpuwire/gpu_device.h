/*
 * coll gpuwire's view of the GPU: a C interface of libgpuwire_core over the
 * process's one GPU context (gpuwire/cuda/gpu_context.hpp, shared with the
 * engine of pml gpuwire), so that the Open MPI glue stays C and sees no CUDA
 * type.
 *
 * Contract:
 * - gw_coll_device_open() once (MPI_Init, coll framework init), then any
 *   thread may call the rest until gw_coll_device_close() (MPI_Finalize).
 *   Without a GPU, open fails with a one-line reason and nothing else may be
 *   called. Open takes a reference on the process's GPU context, close gives
 *   it back: pml gpuwire may open its own before or after, and close before
 *   or after.
 * - classify() is lock-free. Host answers are cached until the range is
 *   unmapped: every unmap of the process reaches the classifier through a UCM
 *   VM_UNMAPPED handler; where UCM refuses the handler, host answers are not
 *   cached (one driver query per host buffer).
 * - Staging buffers are pinned (portable, reused) from the context's pinned
 *   cache (shared with pml gpuwire's bounce buffers, bounded by whichever
 *   component created the context), plain host memory beyond it or when
 *   staging_bytes is 0.
 * - Copies go to one stream per device and are ordered on it; tickets tell
 *   when a copy has finished without a CUDA call. copy_start never blocks,
 *   copy_wait blocks, copy_done never blocks.
 * - Every function returns 0 on success; on failure it writes one line naming
 *   the failed call into why (at most why_len bytes) and returns -1.
 */
#ifndef GPUWIRE_GPU_DEVICE_H
#define GPUWIRE_GPU_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/core.h"

#ifdef __cplusplus
extern "C" {
#endif /* GPUWIRE_GPU_DEVICE_H */

typedef struct {
    size_t staging_bytes; /* pinned staging kept for reuse; 0: plain host only */
    /* Where the cuda module's messages go (level 0 error, 1 warning, 2 info,
     * 3 debug); NULL drops them. */
    void (*log)(int level, const char *msg);
} gw_coll_device_params_t;

typedef struct {
    bool on_gpu; /* device, managed or VMM memory: the CPU must not touch it */
    int gpu;     /* device ordinal when on_gpu, else -1 */
    bool unordered; /* a cudaMemcpy into it may not have landed yet: wait for the
                       legacy default stream before using it */
} gw_coll_mem_t;

typedef struct {
    void *ptr;
    size_t len;
    void *owner; /* the pinned buffer lent; NULL for plain host memory */
} gw_coll_host_buf_t;

/* Of the process's GPU context, so pml gpuwire's share is included:
 * classifications; bytes of the pinned cache held and lent; plain host
 * staging buffers (the collectives' own). */
typedef struct {
    unsigned long long classified, host_hits, misses, stale, invalidated;
    unsigned long long pinned_bytes, pinned_lent, plain_allocs;
    bool unmap_hooked;
} gw_coll_device_stats_t;

/* Returns the number of GPUs (> 0), or -1 with why ("no GPU: ..."). */
GW_CORE_API int gw_coll_device_open(const gw_coll_device_params_t *params, char *why, size_t why_len);
GW_CORE_API void gw_coll_device_close(void);

GW_CORE_API int gw_coll_device_classify(const void *ptr, size_t len, gw_coll_mem_t *out, char *why,
                            size_t why_len);

GW_CORE_API int gw_coll_staging_get(size_t len, int gpu, gw_coll_host_buf_t *out, char *why, size_t why_len);
GW_CORE_API void gw_coll_staging_put(gw_coll_host_buf_t *buf);

/* Waits for work queued on gpu's legacy default stream (the application's
 * cudaMemcpy / kernels without a stream). */
GW_CORE_API int gw_coll_device_wait_user(int gpu, char *why, size_t why_len);

/* Enqueues a copy between host and gpu's memory on gpu's stream and returns the
 * ticket that reaches it (tickets grow; a later one covers earlier copies). */
GW_CORE_API int gw_coll_copy_start(void *dst, const void *src, size_t len, int gpu, uint64_t *ticket,
                       char *why, size_t why_len);
GW_CORE_API int gw_coll_copy_wait(int gpu, uint64_t ticket, char *why, size_t why_len);
/* *done is set only on success. A stream that failed never reaches its
 * ticket: query_errors asks CUDA (about 1.5 us) whether it did; pass it now
 * and then, not on every poll. */
GW_CORE_API int gw_coll_copy_done(int gpu, uint64_t ticket, bool query_errors, bool *done, char *why,
                      size_t why_len);
/* Enqueues a copy between any two ranges gpu can address (its own memory, a
 * peer's mapped by gw_coll_peer_map, host memory) on gpu's stream and returns
 * its ticket, as copy_start. When both ends are device memory the copy and its
 * ticket are one kernel (TrackedStream::copy_and_mark), else a copy engine. */
GW_CORE_API int gw_coll_copy_device_start(void *dst, const void *src, size_t len, int gpu,
                              bool both_device, uint64_t *ticket, char *why, size_t why_len);
/* One copy of a batch. */
typedef struct {
    void *dst;
    const void *src;
    size_t len;
} gw_coll_copy_item_t;
#define GW_COLL_COPY_BATCH_MAX 64
/* Enqueues items[0..n) (device memory at both ends, the items disjoint,
 * 1 <= n <= GW_COLL_COPY_BATCH_MAX) on gpu's stream as one kernel that
 * signals its ticket itself; as copy_start. */
GW_CORE_API int gw_coll_copy_device_batch(const gw_coll_copy_item_t *items, int n, int gpu,
                                          uint64_t *ticket, char *why, size_t why_len);

GW_CORE_API void gw_coll_device_stats(gw_coll_device_stats_t *out);

typedef struct {
    void *ptr;
    size_t len;
    void *owner; /* the buffer lent; NULL when nothing is held */
} gw_coll_dev_buf_t;

GW_CORE_API int gw_coll_scratch_get(size_t len, int gpu, gw_coll_dev_buf_t *out, char *why, size_t why_len);
GW_CORE_API void gw_coll_scratch_put(gw_coll_dev_buf_t *buf);

/* Enqueues a compare-and-swap of one element of len bytes (<= 16) on gpu's
 * stream (gw_dev_cas: result = *dst; *dst = *origin where it equalled
 * *compare), every pointer memory gpu reaches; as copy_start. */
GW_CORE_API int gw_coll_cas_start(void *dst, const void *origin, const void *compare,
                                  void *result, size_t len, int gpu, uint64_t *ticket, char *why,
                                  size_t why_len);
/* Whether the device can reduce op on type (ids of gpuwire/cuda/reduce.h). */
GW_CORE_API bool gw_coll_reduce_supported(int op, int type);
/* Enqueues out[i] = a[i] op b[i], i < count, on gpu's stream and returns the
 * ticket that reaches it. out may equal a or b. */
GW_CORE_API int gw_coll_reduce_start(int op, int type, const void *a, const void *b, void *out, size_t count,
                         int gpu, uint64_t *ticket, char *why, size_t why_len);


/* ------------------------------------------------------------------------
 * NVLink teams: kernels that read and write the other GPUs of the node
 * (gpuwire/cuda/nvlink_coll.h). One team per communicator, every rank on a
 * GPU of its own. open and connect are collective: each rank's description
 * (GW_COLL_TEAM_DESC_BYTES) goes to every rank between them.
 * ------------------------------------------------------------------------ */
#define GW_COLL_TEAM_DESC_BYTES 112
#define GW_COLL_BUF_DESC_BYTES 136

typedef struct gw_coll_team gw_coll_team_t;

/* On failure *out is NULL and desc still holds a description (one that
 * tells the peers this rank cannot take part), so the exchange goes on. */
GW_CORE_API int gw_coll_team_open(int gpu, int rank, int nranks, size_t slot_bytes, double timeout_s,
                      gw_coll_team_t **out, void *desc, char *why, size_t why_len);
/* descs: every rank's description in rank order; peer_ids: a process-unique
 * id per rank (keys of the IPC mapping cache). Ranks that share a GPU are
 * refused unless shared_gpu (coll_gpuwire_nvlink_shared_gpu, for testing). */
GW_CORE_API int gw_coll_team_connect(gw_coll_team_t *t, const void *descs, const uint32_t *peer_ids,
                         bool shared_gpu, char *why, size_t why_len);
GW_CORE_API void gw_coll_team_close(gw_coll_team_t *t);
GW_CORE_API int gw_coll_team_gpu(const gw_coll_team_t *t);
GW_CORE_API size_t gw_coll_team_slot_bytes(const gw_coll_team_t *t);

/* Describes [ptr, ptr + len) of this rank's device memory for the peers of
 * a direct call. Memory that CUDA IPC cannot export (stream-ordered pools,
 * VMM, managed) gets a description every peer refuses, and -1. */
GW_CORE_API int gw_coll_buffer_describe(const void *ptr, size_t len, void *desc, char *why, size_t why_len);

/* One peer's described buffer mapped into this process outside a team (osc
 * gpuwire's windows), through the process's one IPC mapping cache: the same
 * cache as pml gpuwire and the teams, so an allocation is opened once.
 * peer_id: the peer's process-unique id (its vpid). On success *ptr is the
 * described range's first byte here and *gpu the local GPU it is mapped on
 * (the peer's GPU when this process sees it, else GPU 0); the mapping is
 * held (never evicted) until gw_coll_peer_unmap. A description that cannot be
 * mapped (the peer could not export it, or CUDA refuses) gives -1 and why. */
typedef struct gw_coll_peer_mapping gw_coll_peer_mapping_t;
GW_CORE_API int gw_coll_peer_map(const void *desc, uint32_t peer_id, gw_coll_peer_mapping_t **out,
                     void **ptr, int *gpu, char *why, size_t why_len);
/* Gives the mapping back (the cache may keep it open for later use). The
 * caller has waited for every copy that uses it. NULL is ignored. */
GW_CORE_API void gw_coll_peer_unmap(gw_coll_peer_mapping_t *m);

enum { GW_COLL_TEAM_ALLREDUCE, GW_COLL_TEAM_BCAST, GW_COLL_TEAM_ALLGATHER };

typedef struct {
    int coll;        /* GW_COLL_TEAM_* */
    int op, type;    /* allreduce: ids of gpuwire/cuda/reduce.h */
    const void *in;  /* allreduce, allgather */
    void *out;       /* bcast: the buffer */
    size_t bytes;    /* allreduce: all; bcast: all; allgather: per rank */
    int root;
    bool direct;     /* through the application's buffers: team_map first */
} gw_coll_team_call_t;

/* Whether allreduce has a kernel for op on type. */
GW_CORE_API bool gw_coll_team_reduce_supported(int op, int type);
/* Whether the direct form maps peers' buffers through the process's one
 * mapping cache, the one pml gpuwire uses too: always, since the GPU context
 * is shared (kept for the component's log line). */
GW_CORE_API bool gw_coll_ipc_shared(void);
/* Direct form: maps every peer's buffers (in_descs / out_descs: one
 * description per rank in rank order, or NULL when the call needs none); the
 * mappings are held until team_run or team_unmap. */
GW_CORE_API int gw_coll_team_map(gw_coll_team_t *t, const void *in_descs, const void *out_descs, char *why,
                     size_t why_len);
GW_CORE_API void gw_coll_team_unmap(gw_coll_team_t *t);
/* Runs the call and waits for it; releases the mappings of team_map. */
GW_CORE_API int gw_coll_team_run(gw_coll_team_t *t, const gw_coll_team_call_t *c, char *why, size_t why_len);
/* Launches a one-shot call (not direct) behind those launched before and
 * returns its ticket; never waits. Each rank's kernel waits at its barrier
 * for the others' (and holds up the application's cudaDeviceSynchronize
 * meanwhile): start a call only once every rank has initiated it. */
GW_CORE_API int gw_coll_team_start(gw_coll_team_t *t, const gw_coll_team_call_t *c, uint64_t *ticket,
                       char *why, size_t why_len);
/* *done (set only on success) when the call of ticket has finished on this
 * rank's GPU; one load. query: also ask CUDA whether the stream failed
 * (1.5 us): now and then, not on every poll. -1 with why for a peer that did
 * not arrive in time or a failed stream (the team fails every call after). */
GW_CORE_API int gw_coll_team_done(gw_coll_team_t *t, uint64_t ticket, bool query, bool *done, char *why,
                      size_t why_len);

/* The delegated form, for a team whose ranks all share one GPU (under MPS):
 * no kernel ever waits for another rank. The ranks share a board (host
 * memory, gpuwire/cuda/nvlink_board.hpp); each call, numbered alike on
 * every rank from 1, has an entry there. Each rank posts its buffers'
 * descriptions; the rank that posts last maps every rank's buffers (the
 * process's one mapping cache) and launches one kernel for the whole call,
 * whose stream then marks the entry done for all. */
/* Whether every rank of the team is on this rank's GPU (after connect). */
GW_CORE_API bool gw_coll_team_one_gpu(const gw_coll_team_t *t);
/* Creates (create: one rank, before the others open it) or opens the board
 * named name (a POSIX shared-memory name). */
GW_CORE_API int gw_coll_team_board_open(gw_coll_team_t *t, const char *name, bool create, char *why,
                                        size_t why_len);
/* Lets the board go where the form is not used (nothing of it may run). */
GW_CORE_API void gw_coll_team_board_close(gw_coll_team_t *t);
/* Removes the name once every rank has opened the board. */
GW_CORE_API void gw_coll_team_board_unlink(const char *name);
/* Posts call seq: in_desc / out_desc describe this rank's c->in and c->out
 * (gw_coll_buffer_describe; NULL: this rank cannot take part, and the call
 * fails on every rank). *launched when this rank was the last and launched
 * it. 0; 1 when the call's entry is still in use by the call 256 before it
 * (post again later); -1 with why (the call then fails on every rank). */
GW_CORE_API int gw_coll_team_post(gw_coll_team_t *t, uint64_t seq, const gw_coll_team_call_t *c,
                                  const void *in_desc, const void *out_desc, bool *launched,
                                  char *why, size_t why_len);
/* How the rank that posts a call last launches it: 0 within
 * gw_coll_team_post; 1 through a thread of the team's, free of the rank's
 * CPU binding (the post returns at once, the launch overlaps the
 * application's work; a failed launch fails the call on every rank, and the
 * thread names the cause). For the whole process, before the calls. */
GW_CORE_API void gw_coll_team_launcher_mode(int mode);
/* *done once call seq has run on every rank's buffers; one load (query:
 * also ask CUDA whether this rank's stream failed). -1 with why where the
 * launching rank failed. */
GW_CORE_API int gw_coll_team_posted_done(gw_coll_team_t *t, uint64_t seq, bool query, bool *done,
                                         char *why, size_t why_len);

#ifdef __cplusplus
}
#endif /* GPUWIRE_GPU_DEVICE_H */

#endif /* GPUWIRE_GPU_DEVICE_H */
