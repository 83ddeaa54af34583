/*
 * The hierarchical collectives of the collective engine (ucx_glue/coll/hier):
 * Allreduce, Reduce, Bcast, Allgather and Allgatherv across several nodes,
 * composed of collectives at two levels. Allreduce:
 *
 *   step 0  Reduce inside each node to the node's first rank (its leader);
 *   step 1  Allreduce among the leaders, one per node, in place;
 *   step 2  Bcast inside each node from its leader.
 *
 * Reduce: inside each node to its leader (into a device temporary unless
 * the leader is the root), among the leaders to the root's node's, and from
 * there to the root by one message when the root is not its node's leader.
 * Bcast: inside the root's node from the root, among the leaders from the
 * root's node's, then inside every other node from its leader.
 *
 * Allgather(v): the blocks laid out node by node (each node's in its ranks'
 * order): inside each node into the node's run, among the leaders in place
 * (an Allgatherv of one run per node), then a Bcast of all of them inside
 * each node from its leader. Where that layout is the receive buffer's own
 * (every node's ranks consecutive and the blocks packed in rank order), the
 * steps run on the receive buffer; otherwise on a device temporary, and
 * step 3 copies each block to its place.
 *
 * The engine never touches the bytes: each step is at most one collective
 * or message on this rank (gw_ce_hier_sub_t), which the transport starts on
 * the level's ranks (under coll gpuwire: a collective on the node's or the
 * leaders' sub-communicator, so that the component's own dispatch picks its
 * algorithm there), plus step 3's copies. Only the leaders' traffic
 * crosses the network, once per node instead of once per rank. The ops a
 * caller brings are commutative and associative: the order of combination
 * does not matter.
 *
 * Layout (gw_ce_hier_call_t.where): for every rank q of the communicator,
 * where[2q] is its node's index (the rank of the node's leader among the
 * leaders; nodes are numbered 0..N-1) and where[2q+1] its rank inside its
 * node (0: the leader). Ranks of one node are numbered there in their
 * communicator order. Every rank must pass the same layout and the same
 * call (MPI's rules for a collective); then every rank starts the same
 * level's sub-collectives in the same steps, and the calls decline alike.
 *
 * Counts are in elements of the call's datatypes, which the engine names
 * (gw_ce_hier_type_t) and the caller resolves; displacements in extents of
 * the receive type. Byte ranges (temporary, copies) are computed from the
 * receive type's extent and size given in the call.
 *
 * Forms: the blocking one steps the job to its end (gw_ce_hier_step with
 * req NULL: every step blocks). The non-blocking one (call.turn set) is
 * driven by gw_ce_hier_poll from the caller's progress: each step's
 * collective is started in its non-blocking form once the step before has
 * completed, and the calls of a communicator start their first step only
 * once those initiated before them have started their last (their turns,
 * gpuwire/coll_turn.h), so every rank starts the levels' collectives in
 * one order whatever order the calls in flight complete in.
 *
 * Threads: a job is used by one thread at a time.
 * Errors: the transport's codes pass through unchanged; the engine's own
 * are GW_CE_ERR_NOMEM (host memory) and GW_CE_ERR_ARG (with a why line).
 */
#ifndef GPUWIRE_COLL_HIER_H
#define GPUWIRE_COLL_HIER_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuwire/coll_engine.h"
#include "gpuwire/coll_turn.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GW_CE_HIER_END = 1,      /* gw_ce_hier_step: no step left */
    GW_CE_HIER_DECLINED = 2, /* gw_ce_hier_start: every rank declines alike */
    GW_CE_HIER_COMM_STEPS = 3, /* steps 0..2 start collectives or messages; 3 copies */
};

typedef enum {
    GW_CE_HIER_ALLREDUCE,
    GW_CE_HIER_REDUCE,
    GW_CE_HIER_BCAST,
    GW_CE_HIER_ALLGATHER,
    GW_CE_HIER_ALLGATHERV,
} gw_ce_hier_coll_t;

typedef enum {
    GW_CE_HIER_NODE,    /* the ranks of this rank's node */
    GW_CE_HIER_LEADERS, /* the nodes' leaders */
} gw_ce_hier_level_t;

typedef enum {
    GW_CE_HIER_SUB_REDUCE,
    GW_CE_HIER_SUB_ALLREDUCE,
    GW_CE_HIER_SUB_BCAST,
    GW_CE_HIER_SUB_ALLGATHER,
    GW_CE_HIER_SUB_ALLGATHERV,
    GW_CE_HIER_SUB_SEND, /* one message inside the node */
    GW_CE_HIER_SUB_RECV,
} gw_ce_hier_sub_kind_t;

/* Which of the call's datatypes a count is in. */
typedef enum {
    GW_CE_HIER_TYPE,  /* Allreduce, Reduce, Bcast: the call's type */
    GW_CE_HIER_STYPE, /* Allgather(v): the send type */
    GW_CE_HIER_RTYPE, /* Allgather(v): the receive type */
    GW_CE_HIER_NOTYPE, /* none (an in-place send of nothing: MPI_DATATYPE_NULL) */
} gw_ce_hier_type_t;

/* One collective or message of a step, on this rank, at one level; its
 * ranks are the level's (node rank, or node index among the leaders). */
typedef struct {
    gw_ce_hier_sub_kind_t kind;
    gw_ce_hier_level_t level;
    int op, type;            /* the call's (reductions) */
    bool in_place;           /* MPI_IN_PLACE: sbuf, scount and stype unused */
    const void *sbuf;
    int scount;              /* Allgather(v) */
    gw_ce_hier_type_t stype; /* Allgather(v) */
    void *rbuf;
    int count; /* Reduce, Allreduce, Bcast, Send, Recv: elements; Allgather: per rank */
    gw_ce_hier_type_t rtype;
    /* Allgatherv: one per rank of the level; valid until the step's request
     * has completed. */
    const int *counts, *displs;
    int root; /* Reduce, Bcast: the root's rank in the level; Send, Recv: the peer's */
} gw_ce_hier_sub_t;

/* One copy of step 3, on the call's GPU. */
typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} gw_ce_hier_copy_t;

typedef struct gw_ce_hier_transport {
    void *ctx; /* the caller's: passed back to every function */
    /* Starts sub: blocking when req is NULL, else its non-blocking form
     * with the request in *req (completed by the caller, not the engine). */
    int (*start)(void *ctx, const gw_ce_hier_sub_t *sub, void **req);
    /* A device temporary of bytes (at most one per job), held by the caller
     * until the job is freed. */
    int (*temp)(void *ctx, size_t bytes, void **ptr);
    /* Queues n copies (n > 0); wait: the blocking form, returns once they
     * have landed; otherwise the caller waits for them before the job's
     * next step. */
    int (*copy)(void *ctx, const gw_ce_hier_copy_t *copies, size_t n, bool wait);
    /* The non-blocking driver's (gw_ce_hier_poll, gw_ce_hier_free); the
     * blocking form never calls them. test: whether *req, a step's request,
     * has completed, without blocking; once it has, releases it, sets *req
     * to NULL and returns its status. wait: blocks until *req has completed
     * and releases it. copied: whether the copies queued without waiting
     * have landed (query: also ask the GPU whether its stream failed); with
     * wait, blocks until they have. ready: whether the levels may take the
     * job's next collective now (NULL: always). */
    int (*test)(void *ctx, void **req, bool *done);
    void (*wait)(void *ctx, void **req);
    int (*copied)(void *ctx, bool query, bool wait, bool *done);
    bool (*ready)(void *ctx);
} gw_ce_hier_transport_t;

/* One call on this rank. */
typedef struct {
    gw_ce_hier_coll_t coll;
    int op, type;     /* passed to the sub-collectives; ids of gpuwire/cuda/reduce.h */
    int size, rank;   /* the communicator's */
    const int *where; /* 2 * size (the header's layout); outlives the job */
    bool in_place;    /* MPI_IN_PLACE as the send buffer */
    const void *sbuf;
    void *rbuf;       /* Bcast: the buffer */
    int count;        /* Allreduce, Reduce, Bcast: elements */
    size_t es;        /* Reduce: bytes per element (dense elements) */
    int root;         /* Reduce, Bcast */
    int scount;       /* Allgather(v): the send count */
    int rcount;       /* Allgather: per rank */
    const int *rcounts, *rdispls; /* Allgatherv: copied by gw_ce_hier_start */
    /* Allgather(v): the receive type's extent and size, and whether its
     * elements lie back to back (lower bound 0, extent = size). */
    size_t r_extent, r_size;
    bool r_dense;
    /* The non-blocking form: the turns of the communicator's non-blocking
     * hierarchical calls (gw_ce_hier_poll), which outlive the job; NULL:
     * stepped by gw_ce_hier_step (the blocking form with req NULL). */
    gw_ce_turn_t *turn;
} gw_ce_hier_call_t;

typedef struct gw_ce_hier_job gw_ce_hier_job_t;

/* Whether a call of size ranks has something to move and its counts fit
 * the steps' int counts; every rank decides alike (MPI makes the counts
 * the same on every rank). Allreduce, Reduce, Bcast: count elements, at
 * least one. Allgather: rcount per rank, at least one, and all size blocks
 * in one int count (its last step broadcasts them all). Allgatherv: some
 * rank's rcounts[q] is not 0 (rcounts: size of them; not read otherwise). */
GW_CORE_API bool gw_ce_hier_fits(gw_ce_hier_coll_t coll, int size, int count, int rcount,
                                 const int *rcounts);

/* Plans the call (layouts, temporary): GW_CE_OK, GW_CE_HIER_DECLINED (the
 * same on every rank), or an error. *job is set in every case but an
 * out-of-memory one, and freed with gw_ce_hier_free. t outlives the job.
 * The non-blocking form takes its ticket of call->turn on GW_CE_OK only. */
GW_CORE_API int gw_ce_hier_start(const gw_ce_hier_call_t *call, const gw_ce_hier_transport_t *t,
                                 gw_ce_hier_job_t **job, char *why, size_t why_len);
/* Starts the job's next step: GW_CE_OK (with *req set by the transport
 * when req is not NULL and the step starts a collective or message on this
 * rank, else NULL), GW_CE_HIER_END when none is left, or an error. With req
 * NULL, every step blocks. */
GW_CORE_API int gw_ce_hier_step(gw_ce_hier_job_t *job, void **req);
/* The index of the step gw_ce_hier_step starts next. */
GW_CORE_API int gw_ce_hier_next(const gw_ce_hier_job_t *job);
/* The non-blocking form's driver, from the caller's progress; never blocks.
 * The job's first step starts once every call initiated before it on the
 * turn has passed; each later one once the step before has completed (its
 * request: t->test; its copies: t->copied, with query) and, before a step
 * that starts a collective or message, the levels are ready (t->ready).
 * The job passes its turn once it has started its last collective or
 * message (or failed to). Returns GW_CE_OK, with *done set once the last
 * step has completed (and on every poll after), or the first error: a
 * request's status, a transport code unchanged, or the engine's own
 * (GW_CE_ERR_ARG for a job of the blocking form, call.turn NULL). */
GW_CORE_API int gw_ce_hier_poll(gw_ce_hier_job_t *job, bool query, bool *done);
/* Frees the job (NULL is ignored): first waits for a step still in flight
 * (its request, its copies) and passes the job's turn, so nothing the call
 * holds is given back under a step. The temporary is the caller's. */
GW_CORE_API void gw_ce_hier_free(gw_ce_hier_job_t *job);

#ifdef __cplusplus
}
#endif

#endif
