/*
 * The device reduction ring of the collective engine (ucx_glue/coll/ring):
 * Allreduce, Reduce, Reduce_scatter(_block), Scan and Exscan whose data stay
 * on the GPU, over a gw_ce_transport_t (gpuwire/coll_engine.h). Chunks move
 * between ranks as messages of bytes on device buffers (under coll gpuwire,
 * the pml carries them over CUDA IPC/NVLink), land in device scratch, and
 * are combined by the kernels of gpuwire/cuda/reduce.h on the copies' stream
 * of the rank's GPU (gpuwire/gpu_device.h).
 *
 *   allreduce        ring reduce-scatter, then ring allgather, in rbuf
 *   reduce           ring reduce-scatter (into rbuf at the root, scratch
 *                    elsewhere), then every rank's reduced chunk to the root
 *   reduce_scatter   ring reduce-scatter over the caller's blocks, shifted
 *                    so that rank r ends with block r; two scratch slots
 *   scan, exscan     a chain: rank r receives the prefix of r-1, combines,
 *                    passes it on
 *
 * Each step is cut into segments of segment_bytes: all of a step's receives
 * and sends are posted at once, and the kernel of segment j runs while
 * segment j+1 is still arriving (in the chain, the send of segment j
 * overlaps the kernel of j+1). A kernel's output is sent only after its
 * ticket is reached: the peer's copy engine is not ordered after our
 * stream, so a message posted earlier would carry stale bytes.
 *
 * Order: the caller brings only ops that are commutative and associative
 * (the table's predefined ops, MINLOC/MAXLOC with ties to the lowest index
 * included), so the ring may combine in any order. Floating-point sums may
 * round differently from another algorithm's order; every rank receives the
 * same bits.
 *
 * Every rank of a call must run the same call (same coll, op, type, counts,
 * root, segment_bytes, tag), as MPI requires of a collective; the caller
 * decides that from what is identical on every rank. Messages use tag only:
 * give the ring a tag that no other algorithm uses on the same ranks at the
 * same time, so that it never takes another's message for one of its own.
 * Two jobs with one tag must post their messages one after the other (the
 * second started once the first's gw_ce_ring_poll has reported done) on
 * every rank, in the same order.
 *
 * One form: a job, moved on by gw_ce_ring_poll without ever waiting for
 * another rank. The blocking form, gw_ce_ring_run, is the same job polled
 * to its end with the transport's progress in between: it sends the same
 * messages in the same order, and one piece of code is tested for both.
 * (The blocking ring written on its own waited on each message in turn;
 * polling reaches the same point as soon as the message arrives, so nothing
 * is lost, and a second copy of every step is not kept in step.)
 *
 * Buffers: sbuf and rbuf are device memory of gpu (the caller replaces
 * whatever the ring cannot use as it is -- host memory, another GPU's --
 * by a temporary first), dense elements of es bytes. The caller's work
 * that writes sbuf/rbuf has finished before the job starts.
 *
 * Threads: a job is polled by one thread at a time; jobs on different
 * threads are independent.
 * Errors: GW_CE_* codes or the transport's own (passed through), with one
 * line in why naming what failed. A failed job is freed as any other.
 */
#ifndef GPUWIRE_COLL_RING_H
#define GPUWIRE_COLL_RING_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuwire/coll_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GW_CE_RING_ALLREDUCE,
    GW_CE_RING_REDUCE,
    GW_CE_RING_REDUCE_SCATTER, /* _block too: counts NULL */
    GW_CE_RING_SCAN,
    GW_CE_RING_EXSCAN,
} gw_ce_ring_coll_t;

/* One call on this rank. */
typedef struct {
    gw_ce_ring_coll_t coll;
    int op, type;         /* ids of gpuwire/cuda/reduce.h */
    size_t es;            /* bytes per element of type */
    /* Allreduce, Reduce, Scan, Exscan: the elements of the call.
     * Reduce_scatter: rank r's block is counts[r] elements (one per rank of
     * the transport), or count elements for every rank when counts is NULL
     * (Reduce_scatter_block). */
    size_t count;
    const int *counts;
    const void *sbuf;     /* the input; ignored when in_place */
    void *rbuf;           /* the result (Reduce: the root's only; Exscan: not rank 0's) */
    bool in_place;        /* the input is in rbuf */
    int root;             /* Reduce */
    int gpu;              /* the GPU whose stream and scratch the job uses */
    size_t segment_bytes; /* bytes per message (at least one element, at most 1 GiB) */
    int tag;
} gw_ce_ring_call_t;

typedef struct gw_ce_ring_job gw_ce_ring_job_t;

/* Creates the job: chunks, scratch, and this rank's first messages. The
 * call's description is copied (counts included); t must outlive the job.
 * On failure *job is NULL. */
GW_CORE_API int gw_ce_ring_start(const gw_ce_ring_call_t *call, const gw_ce_transport_t *t,
                                 gw_ce_ring_job_t **job, char *why, size_t why_len);
/* Moves the job on without waiting; *done once its result is in rbuf (every
 * message completed, every kernel and copy finished). query: also ask the
 * GPU whether its stream failed (costly; now and then, not on every poll). */
GW_CORE_API int gw_ce_ring_poll(gw_ce_ring_job_t *job, bool query, bool *done, char *why,
                                size_t why_len);
/* Frees the job (NULL is ignored). Returns true when nothing of it was in
 * flight any more: the caller may then reuse or give back the call's
 * buffers. False after a failure with messages still posted: they may yet
 * land in its buffers, so the job's scratch is not given back (the
 * program's use of the transport ends with the error anyway) and the
 * caller keeps its buffers too. Kernels still queued are waited for. */
GW_CORE_API bool gw_ce_ring_free(gw_ce_ring_job_t *job);
/* The blocking form: start, poll to the end (t->progress between polls),
 * free. */
GW_CORE_API int gw_ce_ring_run(const gw_ce_ring_call_t *call, const gw_ce_transport_t *t,
                               char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
