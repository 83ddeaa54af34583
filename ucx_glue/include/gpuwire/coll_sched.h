/*
 * The scheduler of non-blocking collectives (ucx_glue/coll/sched): each
 * non-blocking call a caller (coll gpuwire) runs itself becomes a request
 * of the scheduler, which moves it on from the caller's progress:
 *
 *   COPY_IN    copies to host staging queued (gpuwire/coll_stage.h): polls
 *   READY      nothing left to copy in: waits for its turn in its order,
 *              then starts the caller's host collective (ops.start) on the
 *              host copies
 *   INNER      polls that collective (ops.test); when it is complete,
 *              queues the copies back
 *   COPY_OUT   polls the copies back; then the request finishes
 *   FAILED     an error before the start: leaves the order in its turn and
 *              finishes with the error
 *   JOB        an algorithm's own steps (a poll/release pair, gw_ce_job_ops_t)
 *              polled until done. Outside the order, unless the job may
 *              still decline (ordered): it keeps its place until it is the
 *              head and no longer may; one that declines is staged in its
 *              place (COPY_IN or READY)
 *
 * Order (gw_ce_order_t, one per communicator): every rank starts the
 * collectives of a communicator in the same order, and the host module
 * matches their messages by a tag taken when one starts. So host
 * collectives start in initiation order whatever order their copies finish
 * in: only the head of the order starts.
 *
 * A request lives in memory the caller provides (gw_ce_req_size bytes,
 * 16-byte aligned), next to the caller's own request; owner points back to
 * it. When a request finishes, the scheduler gives back its staging and job
 * and then, outside its lock, completes it through ops.complete -- unless
 * the caller freed it first (gw_ce_req_free), in which case ops.release
 * gives the caller's object back. Either way a request finishes once.
 *
 * Threads: any thread may initiate; the progress function is not entered
 * again (a job's poll may initiate and free requests on other orders).
 * Status codes are the caller's: ops.error maps the scheduler's failures
 * into the status a request completes with.
 */
#ifndef GPUWIRE_COLL_SCHED_H
#define GPUWIRE_COLL_SCHED_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuwire/coll_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gw_ce_req gw_ce_req_t;
typedef struct gw_ce_sched gw_ce_sched_t;

/* One communicator's requests not started yet, oldest first. The head is
 * read without the lock; only the thread initiating on the communicator
 * makes it non-NULL. Zeroed: empty. */
typedef struct gw_ce_order {
    gw_ce_req_t *first, *last;
} gw_ce_order_t;

/* What a job's poll returns besides GW_CE_OK and the caller's errors. */
enum { GW_CE_DECLINED = 1 };

typedef struct {
    /* Moves the job on without waiting; *done when it has finished. A code
     * other than GW_CE_OK fails the request (ops.error, GW_CE_FAIL_JOB);
     * GW_CE_DECLINED from an ordered job (alike on every rank) stages the
     * call instead, in its place in the order. */
    int (*poll)(void *job, bool query, bool *done);
    /* Gives back what the job holds; called once, when it is done, failed,
     * declined, or never got a request. */
    void (*release)(void *job);
    /* Whether an ordered job may still decline; NULL for a kind of job that
     * never is ordered. */
    bool (*ordered)(void *job);
} gw_ce_job_ops_t;

typedef enum {
    GW_CE_FAIL_COPY,  /* a copy or the staging failed (why says which) */
    GW_CE_FAIL_START, /* ops.start returned rc */
    GW_CE_FAIL_JOB,   /* a job's poll returned rc (GW_CE_DECLINED: not ordered) */
} gw_ce_fail_t;

typedef struct {
    void *ctx; /* the caller's: passed back to every function */
    /* Starts the host collective of req (owner) on sbuf and rbuf: 0 with
     * *inner set, or the caller's error code. */
    int (*start)(void *ctx, gw_ce_req_t *req, const void *sbuf, void *rbuf, void **inner);
    /* Whether *inner has completed, without blocking; when it has, releases
     * it, sets *inner to NULL and returns its status. */
    int (*test)(void *ctx, void **inner, bool *done);
    /* The status a request completes with after a failure of kind (why:
     * one line, for GW_CE_FAIL_COPY). Called under the scheduler's lock or
     * from the initiating thread, once per failure. */
    int (*error)(void *ctx, gw_ce_req_t *req, gw_ce_fail_t kind, int rc, const char *why);
    /* Completes the caller's request with status (outside the lock). */
    void (*complete)(void *ctx, gw_ce_req_t *req, int status);
    /* Gives the caller's object back: finished and freed. */
    void (*release)(void *ctx, gw_ce_req_t *req);
    /* Waits for the application's default stream before staging. */
    bool device_sync;
    /* Counters the scheduler adds to (relaxed atomics; NULL: not kept). */
    unsigned long long *pending;         /* requests not finished (a level) */
    unsigned long long *deferred_starts; /* calls not started when initiated */
    unsigned long long *staged_calls, *staged_bytes;
} gw_ce_sched_ops_t;

/* A scheduler with the caller's ops (copied); NULL: out of memory. */
GW_CORE_API gw_ce_sched_t *gw_ce_sched_new(const gw_ce_sched_ops_t *ops);
/* Frees the scheduler; the spare requests must have been taken out. */
GW_CORE_API void gw_ce_sched_free(gw_ce_sched_t *s);
/* Moves every request on; returns how many finished. */
GW_CORE_API int gw_ce_sched_progress(gw_ce_sched_t *s);
/* Whether the calling thread is inside s's progress (a job's poll). */
GW_CORE_API bool gw_ce_sched_in_progress(const gw_ce_sched_t *s);
/* Whether a request has not finished yet (read without the lock). */
GW_CORE_API bool gw_ce_sched_busy(const gw_ce_sched_t *s);
/* Requests kept for reuse (the caller's persistent ones): one in, and one
 * out (NULL: none). */
GW_CORE_API void gw_ce_sched_spare_put(gw_ce_sched_t *s, gw_ce_req_t *req);
GW_CORE_API gw_ce_req_t *gw_ce_sched_spare_take(gw_ce_sched_t *s);

/* Whether nothing waits for its start in order. */
GW_CORE_API bool gw_ce_order_empty(const gw_ce_order_t *order);

/* Bytes (and alignment 16) of a request's memory. */
GW_CORE_API size_t gw_ce_req_size(void);
/* Makes mem a READY request of s on order whose host collective runs on
 * sbuf and rbuf; owner is the caller's. */
GW_CORE_API gw_ce_req_t *gw_ce_req_init(void *mem, gw_ce_sched_t *s, gw_ce_order_t *order,
                                        void *owner, const void *sbuf, void *rbuf);
GW_CORE_API void *gw_ce_req_owner(const gw_ce_req_t *req);
/* The request's staging (its regions, host copies); the caller may set a
 * region it does not stage (to copy it itself in ops.start). */
GW_CORE_API gw_ce_staging_t *gw_ce_req_staging(gw_ce_req_t *req);
/* Stages the request's call: takes host memory, queues the copies in of r
 * and points the host collective at the host copies (COPY_IN or READY).
 * On failure (why), the caller releases the request. */
GW_CORE_API int gw_ce_req_stage(gw_ce_req_t *req, const gw_ce_region_t r[GW_CE_REGION_COUNT],
                                char *why, size_t why_len);
/* Hands a READY or COPY_IN request to the scheduler: a READY one with
 * nothing before it in its order starts here (ops.start); the others join
 * the order. On a failed start here, the start's code is returned and the
 * request is the caller's to release. */
GW_CORE_API int gw_ce_req_enqueue(gw_ce_req_t *req);
/* Hands the request to the scheduler as a job (r: the call's regions, for
 * staging it instead should the ordered job decline). */
GW_CORE_API void gw_ce_req_job(gw_ce_req_t *req, const gw_ce_job_ops_t *ops, void *job,
                               const gw_ce_region_t r[GW_CE_REGION_COUNT], bool ordered);
/* From the poll of req's job only: once the poll returns, the scheduler
 * releases that job and polls job (ops) in its place, in the order too
 * while req is in it (the new job's ordered() says when it leaves). */
GW_CORE_API void gw_ce_req_replace_job(gw_ce_req_t *req, const gw_ce_job_ops_t *ops, void *job);
/* The caller frees the request: true when it has finished (release it now);
 * false: the scheduler releases it when it finishes (ops.release). */
GW_CORE_API bool gw_ce_req_free(gw_ce_req_t *req);
/* Marks a request the caller runs itself (a persistent one) finished;
 * returns whether it was freed first (release it then). */
GW_CORE_API bool gw_ce_req_finish(gw_ce_req_t *req);
/* Marks such a request active again (a restart), or finished (inactive). */
GW_CORE_API void gw_ce_req_set_active(gw_ce_req_t *req, bool active);
/* Gives back the request's staging and job (its memory stays the
 * caller's); again is harmless. */
GW_CORE_API void gw_ce_req_fini(gw_ce_req_t *req);

#ifdef __cplusplus
}
#endif

#endif
