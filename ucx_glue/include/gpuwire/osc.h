/*
 * The one-sided engine (ucx_glue/osc, in the core): what osc gpuwire
 * (plugin/osc) does that needs no Open MPI type, in plain terms -- ranks of
 * the window's communicator, byte ranges, GPUs, counts.
 *
 *   wire format   every message of a window is one gw_osc_hdr_t, the
 *                 target's layout (gw_osc_block_t, when not contiguous),
 *                 then the payload
 *   sync state    a window's synchronisation bookkeeping (gw_osc_sync_t):
 *                 the completion counts per peer, the target's lock and its
 *                 queue of waiters, the origin's lock epochs; the handling
 *                 of every message that arrives (ucx_glue/osc/sync)
 *   origin        an operation's target layout built block by block
 *                 (ucx_glue/osc/origin)
 *   apply         an operation applied to the target's window, block by
 *                 block (ucx_glue/osc/apply)
 *   cma           the host windows of other processes on this node, read
 *                 and written by cross-memory attach (ucx_glue/osc/cma)
 *   device,       the door to the GPU and a window's same-node direct path
 *   direct        (gpuwire/osc_direct.h; ucx_glue/osc/device, /direct)
 *
 * Completion is by counts: an origin counts the operations it sent to each
 * target, the target counts those it applied from each origin; fence,
 * complete/wait, unlock and flush carry the origin's count and end once the
 * target has applied that many.
 *
 * What moves bytes and waits stays with the caller, given as callbacks: the
 * sends of control messages, the application of one operation and of one
 * reply, the copies to and from device memory and the reduction of an op on
 * a type (both named by the caller's own integer handles, which the engine
 * only carries).
 *
 * Threads: a gw_osc_sync_t is used under its caller's lock (osc gpuwire's
 * module lock); the callbacks are called with that lock held.
 */
#ifndef GPUWIRE_OSC_H
#define GPUWIRE_OSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- wire format ---------------------------------------------------------- */

/* Message kinds. */
enum {
    GW_OSC_PUT = 1,
    GW_OSC_GET,        /* reply: the target's data */
    GW_OSC_ACC,
    GW_OSC_GACC,       /* reply: the target's data before the op */
    GW_OSC_CAS,        /* payload: origin value then compare value; reply: old */
    GW_OSC_LOCK,       /* lock_type in aux */
    GW_OSC_UNLOCK,     /* count: the ops sent; acknowledged once applied */
    GW_OSC_FLUSH,      /* count: the ops sent; acknowledged once applied */
    GW_OSC_COMPLETE,   /* PSCW: the ops sent in the access epoch */
    GW_OSC_POST,       /* PSCW: the target's exposure epoch is open */
    GW_OSC_REPLY,      /* id: the origin's pending get; payload: data */
    GW_OSC_GRANT,      /* lock granted */
    GW_OSC_ACK,        /* unlock or flush done; count: the origin's ops applied;
                          aux 1: it acknowledges an unlock */
};

/* hdr aux of GW_OSC_ACC: the payload is the description of the origin's
 * device buffer, not its bytes. */
#define GW_OSC_BY_REF 1

/* Lock types, as GW_OSC_LOCK's aux carries them (MPI's values). */
#define GW_OSC_LOCK_EXCLUSIVE 1
#define GW_OSC_LOCK_SHARED 2

typedef struct {
    uint32_t kind;
    int32_t aux;      /* lock type; GW_OSC_BY_REF */
    int32_t op;       /* the caller's handle of the predefined op */
    int32_t type;     /* the caller's handle of the predefined element type */
    uint32_t nblocks; /* target layout blocks that follow; 0: contiguous */
    uint32_t pad;
    int64_t disp;     /* target displacement (units of the target's disp_unit) */
    uint64_t bytes;   /* bytes of the target layout (= payload of put/acc) */
    uint64_t count;   /* completion count; reply id */
} gw_osc_hdr_t;

typedef struct {
    int64_t off;      /* from the target address */
    uint64_t len;
} gw_osc_block_t;

/* What the engine's calls answer besides 0 (and a callback's own codes). */
enum {
    GW_OSC_ERR_SYNC = -101,   /* no such epoch, or one open already (MPI_ERR_RMA_SYNC) */
    GW_OSC_ERR_RANGE = -102,  /* a rank or bytes outside the window (MPI_ERR_RMA_RANGE) */
    GW_OSC_ERR_NOMEM = -103,
    GW_OSC_ERR_SHORT = -104,  /* a message shorter than its header: dropped */
    GW_OSC_ERR_KIND = -105,   /* a message of no known kind: dropped */
    GW_OSC_ERR_FAILED = -106, /* a copy or reduction failed (the callback said why) */
};

/* ---- synchronisation state ------------------------------------------------ */

typedef struct {
    /* Sends a control message (no blocks, no payload) to peer. */
    int (*send_ctl)(void *ctx, int peer, uint32_t kind, int aux, uint64_t count);
    /* Applies operation h (GW_OSC_PUT .. GW_OSC_CAS) from origin; body: the
     * blocks, then the payload. */
    void (*apply)(void *ctx, int origin, const gw_osc_hdr_t *h, const char *body);
    /* The reply (GW_OSC_REPLY) to this origin's pending get h->count. */
    void (*reply)(void *ctx, const gw_osc_hdr_t *h, const char *body);
    void *ctx;
} gw_osc_sync_ops_t;

typedef struct {
    int origin;
    int type;
} gw_osc_waiter_t;

/* A window's bookkeeping; arrays have one entry per rank. Read freely under
 * the caller's lock; written only by the calls below (and sent[], which the
 * origin counts as it sends operations). */
typedef struct {
    int size;
    gw_osc_sync_ops_t ops;

    uint64_t *sent;        /* ops sent to each target, ever */
    uint64_t *applied;     /* ops applied from each origin, ever */
    uint64_t *flush_want;  /* per origin: ack when applied reaches it */
    int *flush_kind;       /* GW_OSC_UNLOCK / GW_OSC_FLUSH of that request (0: none),
                              | 0x100 when the unlock releases a lock taken */
    uint64_t *complete_want; /* PSCW: count of the origin's COMPLETE, else UINT64_MAX */
    int *posts;            /* POSTs received from each rank, not yet consumed */
    int *grants;           /* grants received from each target, not consumed */
    uint64_t *acked;       /* per target: its operations applied, as last acknowledged */
    uint64_t *unlocks;     /* unlock acknowledgements from each target, ever */
    uint64_t *unlocks_sent; /* unlocks sent to each target, ever */

    /* Target lock state: > 0 shared holders, -1 exclusive, 0 free. lock_word
     * points at lock_state, or at this rank's word in shared memory, which
     * same-node origins take themselves (gw_osc_lock_try); the requests by
     * message waiting, first come first served (tried again by
     * gw_osc_sync_grant_waiters, which the target calls as it polls). */
    int lock_state;
    int *lock_word;
    gw_osc_waiter_t *waiters;
    int nwaiters, cap_waiters;

    /* Origin epochs: per target, 1 exclusive, 2 shared, | 4 when the target
     * really holds it (not MPI_MODE_NOCHECK), | 8 when it is taken in the
     * target's word (words[target]) rather than asked for; 0 none. */
    int *locked;
    bool lock_all;
    /* Per target: its lock word mapped here, NULL where locks go by message;
     * NULL: none (gw_osc_lockwords_table). */
    int **words;

    /* Per target: the count its acknowledgement must reach before the origin
     * buffers of the accumulates sent to it by reference are free again;
     * NULL until the first one (gw_osc_sync_ref_sent). */
    uint64_t *ref_want;
} gw_osc_sync_t;

/* 0, or GW_OSC_ERR_NOMEM (s is then empty: fini is safe). */
GW_CORE_API int gw_osc_sync_init(gw_osc_sync_t *s, int size, const gw_osc_sync_ops_t *ops);
GW_CORE_API void gw_osc_sync_fini(gw_osc_sync_t *s);

/* Handles one message received from peer, in arrival order: an operation is
 * applied (ops.apply), counted and may complete a flush or unlock; a control
 * message updates the state (and may grant locks, acknowledge). 0, or
 * GW_OSC_ERR_SHORT / GW_OSC_ERR_KIND (dropped) / GW_OSC_ERR_NOMEM. */
GW_CORE_API int gw_osc_sync_handle(gw_osc_sync_t *s, int peer, const char *buf, size_t len);

/* Target side: a lock request (granted at once or queued; 0 or
 * GW_OSC_ERR_NOMEM); grants what the queue's head allows; acknowledges
 * origin's flush or unlock once its count is applied. */
GW_CORE_API int gw_osc_sync_lock_request(gw_osc_sync_t *s, int origin, int type);
GW_CORE_API void gw_osc_sync_grant_waiters(gw_osc_sync_t *s);
GW_CORE_API void gw_osc_sync_check_flushes(gw_osc_sync_t *s, int origin);

/* PSCW, target side: opens the exposure epoch to ranks[0..n) (POST to each);
 * the first failing send's code, else 0. Whether every origin of it has
 * completed and its operations are applied. */
GW_CORE_API int gw_osc_sync_post(gw_osc_sync_t *s, const int *ranks, int n);
GW_CORE_API bool gw_osc_sync_exposure_done(const gw_osc_sync_t *s, const int *ranks, int n);
/* PSCW, origin side: ends the access epoch to ranks[0..n) (COMPLETE with
 * the count sent to each); the first failing send's code, else 0. */
GW_CORE_API int gw_osc_sync_complete(gw_osc_sync_t *s, const int *ranks, int n);

/* Passive target, origin side. lock: opens an epoch on target (check: ask
 * the target, then wait for grants[target]; where words[target] is mapped,
 * nothing is sent and the caller takes the word with gw_osc_lock_try);
 * GW_OSC_ERR_RANGE/_SYNC. lock_all: every target, shared. */
GW_CORE_API int gw_osc_sync_lock(gw_osc_sync_t *s, int type, int target, bool check);
GW_CORE_API int gw_osc_sync_lock_all(gw_osc_sync_t *s, bool check);
/* Whether an unlock of target (lock_all: all) may go; GW_OSC_ERR_SYNC if not. */
GW_CORE_API int gw_osc_sync_unlock_check(const gw_osc_sync_t *s, int target, bool all);
/* Sends target's unlock; returns the count unlocks[target] must reach
 * before the unlock returns (0: no need to wait, no operation went as a
 * message since the last acknowledgement). A lock taken in the target's word
 * (gw_osc_sync_in_word): sends a flush instead where operations went as
 * messages, and returns the count acked[target] must reach before the caller
 * releases the word (gw_osc_lock_release). */
GW_CORE_API uint64_t gw_osc_sync_unlock_send(gw_osc_sync_t *s, int target);
GW_CORE_API bool gw_osc_sync_in_word(const gw_osc_sync_t *s, int target);
/* The epoch on target (lock_all: every target) is over. */
GW_CORE_API void gw_osc_sync_unlocked(gw_osc_sync_t *s, int target, bool all);
/* Whether target may be flushed: 0, GW_OSC_ERR_RANGE or GW_OSC_ERR_SYNC. */
GW_CORE_API int gw_osc_sync_flush_check(const gw_osc_sync_t *s, int target);
/* Returns the count acked[target] must reach; sends a flush only when
 * operations are unacknowledged. */
GW_CORE_API uint64_t gw_osc_sync_flush_send(gw_osc_sync_t *s, int target);

/* Origin side: the operation just counted in sent[target] went by reference
 * (GW_OSC_BY_REF): its origin buffer is in use until target acknowledges it.
 * 0 or GW_OSC_ERR_NOMEM. */
GW_CORE_API int gw_osc_sync_ref_sent(gw_osc_sync_t *s, int target);
/* The count acked[target] must reach before the origin buffers of the
 * accumulates sent to target by reference are free; sends a flush (for that
 * count) when it has not been reached. 0: nothing to wait for. */
GW_CORE_API uint64_t gw_osc_sync_ref_flush(gw_osc_sync_t *s, int target);

/* ---- lock words: passive-target locks in shared memory ---------------------- */

/* Takes the lock in *word when type allows it (exclusive: free; shared: not
 * held exclusively); atomic, never waits. */
GW_CORE_API bool gw_osc_lock_try(int *word, int type);
/* Releases the caller's hold on *word. */
GW_CORE_API void gw_osc_lock_release(int *word);

/* The lock words of a window's ranks as this rank maps them
 * (ucx_glue/osc/lockword): each rank's word heads a segment of POSIX shared
 * memory, which may hold its window's bytes after the word's page. */
typedef struct gw_osc_lockwords gw_osc_lockwords_t;
/* Makes this rank's segment (its word free, then bytes of window, reserved
 * in full; 0: the word alone) in a table of nranks; its word is taken for
 * locks when word. *id, for the peers (0 when shared memory refused it: why
 * says why, and the rank's locks go by message); 0, GW_OSC_ERR_RANGE or
 * GW_OSC_ERR_NOMEM (*out NULL). */
GW_CORE_API int gw_osc_lockwords_create(int nranks, int rank, uint64_t bytes, bool word,
                                        gw_osc_lockwords_t **out, uint64_t *id, char *why,
                                        size_t why_len);
/* Maps rank t's segment from its id (0: none, nothing done) and the bytes
 * of window it holds; its word is a lock word here when word. 0, or -1 with
 * why (locks on t then go by message, its window is reached otherwise). */
GW_CORE_API int gw_osc_lockwords_open(gw_osc_lockwords_t *l, int t, uint64_t id,
                                      uint64_t bytes, bool word, char *why, size_t why_len);
/* Rank t's window bytes as mapped here; NULL where its segment holds none or
 * is not mapped (and for l NULL). */
GW_CORE_API void *gw_osc_lockwords_data(gw_osc_lockwords_t *l, int t);
/* Rank t's accumulate word, in its segment's first page: held while an
 * accumulate-kind operation (GW_OSC_ACC, _GACC, _CAS) changes t's window,
 * by the same-node origins that apply it themselves (gw_osc_direct_acc)
 * and by the target for those that come as messages, which gives MPI's
 * per-element atomicity across both. NULL where t's segment is not mapped
 * (and for l NULL). */
GW_CORE_API int *gw_osc_lockwords_acc(gw_osc_lockwords_t *l, int t);
/* Takes an accumulate word in at most tries attempts (>= 1; yielding the
 * CPU now and then); false when another holds it still. Nobody waits for
 * the word without bound: an origin sends the operation as a message
 * instead, the target applies it at a later poll, so a holder waiting for
 * its GPU stream never waits for a rank spinning on the word. */
GW_CORE_API bool gw_osc_acc_trylock(int *word, unsigned tries);
GW_CORE_API void gw_osc_acc_unlock(int *word);
/* A barrier of ranks 0..n-1 whose segments are all mapped here (every rank
 * of a window on one node): each segment's first page holds its rank's
 * fence count (a cache line of its own). fence_arrive raises this rank's
 * count, after every store this rank made (release), and returns the count
 * every rank must reach; fence_reached tells whether all n have (acquire:
 * their stores before it are seen). 0 / false where a segment is not
 * mapped, which fence_ready tells beforehand. */
GW_CORE_API bool gw_osc_fence_ready(gw_osc_lockwords_t *l, int n);
GW_CORE_API uint64_t gw_osc_fence_arrive(gw_osc_lockwords_t *l, int rank);
GW_CORE_API bool gw_osc_fence_reached(gw_osc_lockwords_t *l, int n, uint64_t count);
/* Removes this rank's word's name once every peer has opened it. */
GW_CORE_API void gw_osc_lockwords_unlink(gw_osc_lockwords_t *l);
/* The lock words per rank (this rank's own among them), for gw_osc_sync_t. */
GW_CORE_API int **gw_osc_lockwords_table(gw_osc_lockwords_t *l);
/* Unmaps every segment (and removes the name if still there). NULL is ignored. */
GW_CORE_API void gw_osc_lockwords_close(gw_osc_lockwords_t *l);

/* ---- buffers of window messages ------------------------------------------ */

/* len bytes for a message or reply (NULL: out of memory); give it back with
 * gw_osc_buf_put and the same len. From 64 KiB a few are kept for the whole
 * process and handed out again (a fresh large buffer faults on every page);
 * thread-safe. */
GW_CORE_API void *gw_osc_buf_get(size_t len);
GW_CORE_API void gw_osc_buf_put(void *buf, size_t len);

/* ---- origin: an operation's target layout --------------------------------- */

/* The target layout of an operation as it is built, block by block. */
typedef struct {
    gw_osc_block_t *b;
    uint32_t n, cap;
} gw_osc_blocks_t;

/* Empty, with room for a few blocks; 0 or GW_OSC_ERR_NOMEM. */
GW_CORE_API int gw_osc_blocks_init(gw_osc_blocks_t *l);
/* Appends [off, + len): merged into the last block when it continues it,
 * nothing when len is 0. 0, or GW_OSC_ERR_NOMEM (l unchanged). */
GW_CORE_API int gw_osc_blocks_add(gw_osc_blocks_t *l, int64_t off, uint64_t len);
GW_CORE_API void gw_osc_blocks_fini(gw_osc_blocks_t *l);

/* ---- apply: an operation on the target's window ---------------------------- */

/* A region of a dynamic window. */
typedef struct {
    char *base;
    size_t len;
    int gpu; /* -1: host memory */
} gw_osc_region_t;

/* The target's window as an operation sees it. */
typedef struct {
    bool dynamic;     /* disp is an address, in one of regions[0..nregions) */
    char *base;       /* otherwise: [base, base + size), disp in disp_units */
    uint64_t size;
    int disp_unit;
    int gpu;          /* where base lies; -1: host memory */
    const gw_osc_region_t *regions;
    int nregions;
} gw_osc_window_t;

/* Where [disp + off, + len) lies in w, and on which GPU (*gpu, -1: host);
 * NULL when not wholly inside it (for a dynamic window: one region, or host
 * regions attached end to end). */
GW_CORE_API char *gw_osc_locate(const gw_osc_window_t *w, int64_t disp, int64_t off,
                                uint64_t len, int *gpu);

/* Whether operations of kind are answered with the target's bytes
 * (GW_OSC_GET, GW_OSC_GACC, GW_OSC_CAS). */
GW_CORE_API bool gw_osc_fetches(uint32_t kind);

/* What apply cannot do on plain host memory. 0 or nonzero (failed; the
 * callback says why). */
typedef struct {
    /* dst = src, len bytes, one end in gpu's memory, the other host memory. */
    int (*copy)(void *ctx, void *dst, const void *src, size_t len, int gpu);
    /* dst = src op dst over len bytes of type elements, dst in gpu's memory
     * (-1: host), src host memory. op, type: the header's handles (op
     * includes REPLACE and NO_OP). */
    int (*combine)(void *ctx, void *dst, const void *src, size_t len, int32_t type, int32_t op,
                   int gpu);
    void *ctx;
} gw_osc_mem_ops_t;

/* The first block that missed the window: [at, + len) from disp's address
 * (or the window's first byte). */
typedef struct {
    int64_t at;
    uint64_t len;
} gw_osc_miss_t;

/* Applies operation h (GW_OSC_PUT .. GW_OSC_CAS, not one sent by reference)
 * to w, block by block in order; body: h->nblocks blocks, then the payload
 * (PUT, ACC, GACC: h->bytes; CAS: the new value, then the compare value).
 * The fetching kinds read each block into reply (h->bytes) before they
 * change it. Stops at the first block that fails: 0, GW_OSC_ERR_RANGE (*miss
 * says which block) or GW_OSC_ERR_FAILED. */
GW_CORE_API int gw_osc_apply_blocks(const gw_osc_window_t *w, const gw_osc_hdr_t *h,
                                    const char *body, char *reply, const gw_osc_mem_ops_t *ops,
                                    gw_osc_miss_t *miss);
/* One block of an operation of kind at at (gpu's memory, -1: host), len
 * bytes: a fetching kind reads the old bytes into reply first; then PUT
 * copies payload, ACC and GACC combine it (type, op: the caller's handles,
 * given to ops->combine), CAS copies it where the old bytes equal compare.
 * 0 or GW_OSC_ERR_FAILED. */
GW_CORE_API int gw_osc_apply_at(const gw_osc_mem_ops_t *ops, uint32_t kind, int32_t type,
                                int32_t op, char *at, int gpu, const char *payload,
                                const char *compare, char *reply, size_t len);

/* ---- cma: host windows on this node (ucx_glue/osc/cma) -------------------- */

/* 0 when this process may read process pid's memory at addr (cross-memory
 * attach), else -1 with why. */
GW_CORE_API int gw_osc_cma_probe(int pid, uint64_t addr, char *why, size_t why_len);
/* Copies len bytes between local memory and process pid's memory at remote
 * (put: local to remote), synchronously. 0, or -1 with why (some bytes may
 * have moved). */
GW_CORE_API int gw_osc_cma_copy(int pid, bool put, void *local, uint64_t remote, size_t len,
                                char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
