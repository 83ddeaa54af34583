/*
 * The device reduction's non-blocking forms: the ring and the chain of
 * coll_gpuwire_devreduce.c as a job that MPI's progress moves on. Separate
 * from the blocking forms: a state machine over the same steps
 * (coll_gpuwire_devreduce.h), where the blocking forms wait in line.
 *
 * Non-blocking forms (Iallreduce, Ireduce, Ireduce_scatter(_block), Iscan,
 * Iexscan): the same ring or chain as a job that MPI's progress moves on
 * (gw_coll_nb_job): each poll posts a step's messages, combines the
 * segments that have arrived and moves to the next step once the step's
 * messages and kernels are done; nothing waits for another rank. Their
 * messages carry a tag of their own (GW_TAG_RING_NB, coll_gpuwire_dispatch.h)
 * that no blocking algorithm, Open MPI's included, uses on the
 * communicator, and on each rank the jobs of a communicator post their
 * messages one job after the other in initiation order (ring_nb_issued /
 * ring_nb_passed): every rank's messages of a job then meet the same job's
 * receives, as the blocking ring's do within one call.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire_devreduce.h"
#include "ompi/mca/pml/pml.h"

/* Allreduce: RS then AG; Reduce: RS then GATHER (every rank's reduced chunk
 * to the root); Reduce_scatter(_block): RS; Scan, Exscan: CHAIN (run_scan's
 * chain, a segment sent on once its kernels are done). */
enum { RING_WAIT_TURN, RING_RS, RING_AG, RING_GATHER, RING_CHAIN, RING_DONE };

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t eff; /* the buffers the ring works on */
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_coll_temps_t t;
    gw_coll_ring_ctx_t c;
    gw_coll_ring_t g;
    size_t *off, *cnt;
    gw_coll_dev_buf_t s;
    gw_coll_id_t id;
    bool in_place_rs; /* reduce-scatter in place: the result is copied from g.last */
    uint64_t seq;     /* 1 + how many ring jobs the module had before */
    bool passed;      /* ring_nb_passed counts this job */
    int phase, k;     /* RING_*, and the step in it */
    bool posted;      /* the step's messages are posted */
    size_t nrecv, j, done; /* the step's receives, the next to combine, elements combined */
    uint64_t ticket;  /* the step's last kernel */
    bool kernels;
    /* The chain: where the prefix arrives, where what goes on is written,
     * and whether segment j waits for its kernels before it is sent on. */
    char *prefix, *fwd;
    bool fwd_wait;
} ring_job_t;

/* Lets the next job of the module post its messages (once). */
static void ring_job_pass(ring_job_t *j)
{
    if (j->passed) return;
    j->passed = true;
    __atomic_fetch_add(&j->m->ring_nb_passed, 1, __ATOMIC_RELEASE);
}

static bool ring_job_idle(const ring_job_t *j)
{
    for (size_t i = 0; i < j->c.nreqs; ++i) {
        if (!REQUEST_COMPLETE(j->c.reqs[i])) return false;
    }
    return true;
}

/* Whether the job's last kernel (its ticket) has finished, without waiting. */
static int ring_job_ticket(ring_job_t *j, bool query, bool *reached)
{
    gw_coll_ring_ctx_t *c = &j->c;
    if (0 != gw_coll_copy_done(c->gpu, j->ticket, query, reached, c->why, sizeof(c->why))) {
        return gw_coll_ring_fail(c, "device stream");
    }
    return OMPI_SUCCESS;
}

/* Frees a step's requests, all complete; *step_done unless one failed. */
static int ring_job_reap(ring_job_t *j, bool *step_done)
{
    gw_coll_ring_ctx_t *c = &j->c;
    int err = OMPI_SUCCESS;
    for (size_t i = 0; i < c->nreqs; ++i) {
        if (OMPI_SUCCESS == err && MPI_SUCCESS != c->reqs[i]->req_status.MPI_ERROR) {
            err = c->reqs[i]->req_status.MPI_ERROR;
        }
        ompi_request_free(&c->reqs[i]);
    }
    c->nreqs = 0;
    j->posted = false;
    *step_done = OMPI_SUCCESS == err;
    return err;
}

/* A step's end, as far as it goes now: once its messages have completed and
 * its kernels have finished, its requests are freed and *step_done set. */
static int ring_job_settle(ring_job_t *j, bool query, bool *step_done)
{
    *step_done = false;
    if (!ring_job_idle(j)) return OMPI_SUCCESS;
    if (j->kernels) {
        bool d = false;
        const int err = ring_job_ticket(j, query, &d);
        if (OMPI_SUCCESS != err || !d) return err;
        j->kernels = false;
    }
    return ring_job_reap(j, step_done);
}

static void ring_job_release(void *p)
{
    ring_job_t *j = p;
    /* A failed job may leave messages in flight into its scratch and
     * temporaries: those are then never given back (an error ends the
     * program's use of MPI anyway), rather than reused under them. Its
     * kernels are waited for (locally) before they are given back. */
    const bool idle = ring_job_idle(j);
    if (idle && j->kernels) {
        char why[256];
        (void)gw_coll_copy_wait(j->c.gpu, j->ticket, why, sizeof(why));
    }
    for (size_t i = 0; i < j->c.nreqs; ++i) ompi_request_free(&j->c.reqs[i]);
    if (idle) {
        gw_coll_scratch_put(&j->s);
        gw_coll_temps_release(&j->t);
    }
    ring_job_pass(j);
    free(j->c.reqs);
    free(j->off);
    free(j);
}

/* The chain's set-up (run_scan's buffers): rank 0 starts its copy and sends
 * its input on; the others post the prefix's receives. */
static int ring_job_begin_chain(ring_job_t *j, const char *src)
{
    gw_coll_ring_ctx_t *c = &j->c;
    const gw_coll_args_t *a = c->a;
    const size_t count = (size_t)a->count, bytes = count * c->es;
    const bool exclusive = GW_COLL_EXSCAN == j->id, in_place = MPI_IN_PLACE == a->sbuf;
    const bool last = c->me == c->n - 1;
    j->phase = RING_CHAIN;
    j->g.src = src;
    if (0 == c->me) {
        int err = OMPI_SUCCESS;
        if (!exclusive && !in_place) {
            err = gw_coll_ring_copy_start(c, a->rbuf, src, count, &j->ticket);
            j->kernels = OMPI_SUCCESS == err;
        }
        if (OMPI_SUCCESS == err && !last) err = gw_coll_ring_post(c, true, (void *)src, count, 1);
        return err;
    }
    const bool need_fwd = exclusive && !last;
    const size_t need = exclusive ? (in_place ? bytes : 0) + (need_fwd ? bytes : 0) : bytes;
    int err = gw_coll_ring_scratch(c, need, &j->s);
    if (OMPI_SUCCESS != err) return err;
    j->prefix = (exclusive && !in_place) ? (char *)a->rbuf : (char *)j->s.ptr;
    j->fwd = exclusive ? (char *)j->s.ptr + (in_place ? bytes : 0) : (char *)a->rbuf;
    err = gw_coll_ring_post(c, false, j->prefix, count, c->me - 1);
    j->nrecv = c->nreqs;
    return err;
}

/* The chain, as far as it goes now: each segment of the prefix that has
 * landed is combined (scan: prefix op mine into rbuf; exscan: prefix op
 * mine into fwd, the prefix itself the result) and, once its kernels are
 * done, sent on to the next rank; *done once everything has. */
static int ring_job_chain(ring_job_t *j, bool query, bool *done)
{
    gw_coll_ring_ctx_t *c = &j->c;
    const gw_coll_args_t *a = c->a;
    const size_t count = (size_t)a->count;
    const bool exclusive = GW_COLL_EXSCAN == j->id, in_place = MPI_IN_PLACE == a->sbuf;
    const bool last = c->me == c->n - 1;
    *done = false;
    while (0 != c->me && j->j < j->nrecv) {
        const size_t len = count - j->done < c->seg_elems ? count - j->done : c->seg_elems;
        const size_t at = j->done * c->es;
        if (!j->fwd_wait) {
            ompi_request_t *q = c->reqs[j->j];
            if (!REQUEST_COMPLETE(q)) return OMPI_SUCCESS;
            if (MPI_SUCCESS != q->req_status.MPI_ERROR) return q->req_status.MPI_ERROR;
            int err = OMPI_SUCCESS;
            if (!exclusive || !last) {
                err = gw_coll_ring_reduce_start(c, j->prefix + at, j->g.src + at, j->fwd + at, len,
                                                &j->ticket);
                j->kernels = true;
            }
            /* Exscan in place: the prefix is the result; the kernel above
             * has read this segment of rbuf before the copy (same stream). */
            if (OMPI_SUCCESS == err && exclusive && in_place) {
                err = gw_coll_ring_copy_start(c, (char *)a->rbuf + at, j->prefix + at, len,
                                              &j->ticket);
                j->kernels = true;
            }
            if (OMPI_SUCCESS != err) return err;
            j->fwd_wait = !last;
        }
        if (j->fwd_wait) {
            bool d = false;
            int err = ring_job_ticket(j, query, &d);
            if (OMPI_SUCCESS != err || !d) return err;
            j->fwd_wait = false;
            err = gw_coll_ring_post(c, true, j->fwd + at, len, c->me + 1);
            if (OMPI_SUCCESS != err) return err;
        }
        j->done += len;
        ++j->j;
    }
    return ring_job_settle(j, query, done);
}

/* Its turn: temporaries, chunks and scratch, as the blocking forms set them up. */
static int ring_job_begin(ring_job_t *j)
{
    gw_coll_ring_ctx_t *c = &j->c;
    const gw_coll_args_t *a = c->a;
    int err = gw_coll_ring_temps_in(c, j->r, &j->eff, &j->t);
    if (OMPI_SUCCESS != err) return err;
    const bool in_place = MPI_IN_PLACE == a->sbuf;
    const char *src = in_place ? (const char *)a->rbuf : (const char *)a->sbuf;
    if (GW_COLL_SCAN == j->id || GW_COLL_EXSCAN == j->id) return ring_job_begin_chain(j, src);
    /* Allreduce, Reduce: even chunks of count elements. */
    const bool whole = GW_COLL_ALLREDUCE == j->id || GW_COLL_REDUCE == j->id;
    j->off = calloc(2 * (size_t)c->n, sizeof(size_t));
    if (NULL == j->off) return OMPI_ERR_OUT_OF_RESOURCE;
    j->cnt = j->off + c->n;
    if (whole) {
        gw_coll_ring_even_chunks((size_t)a->count, c->n, j->off, j->cnt);
    } else {
        for (int i = 0, at = 0; i < c->n; ++i) {
            j->cnt[i] = (size_t)(GW_COLL_REDUCE_SCATTER_BLOCK == a->id ? a->rcount : a->rcounts[i]);
            j->off[i] = (size_t)at;
            at += (int)j->cnt[i];
        }
    }
    j->phase = RING_RS;
    if (1 == c->n) {
        j->phase = RING_DONE;
        return gw_coll_ring_copy_sync(c, a->rbuf, src, whole ? (size_t)a->count : j->cnt[0]);
    }
    const size_t chunk_bytes = gw_coll_ring_max_of(j->cnt, c->n) * c->es;
    /* Receive scratch; at a non-root of Reduce the accumulator; two slots
     * for Reduce_scatter. */
    const bool root = GW_COLL_REDUCE != j->id || c->me == a->root;
    err = gw_coll_ring_scratch(c, whole ? chunk_bytes + (root ? 0 : (size_t)a->count * c->es)
                                        : 3 * chunk_bytes, &j->s);
    if (OMPI_SUCCESS != err) return err;
    char *base = j->s.ptr;
    j->g = (gw_coll_ring_t){.off = j->off, .cnt = j->cnt, .src = src, .rbuf = base};
    if (whole) {
        j->g.acc = root ? (char *)a->rbuf : base + chunk_bytes;
    } else {
        j->g.shift = -1;
        j->g.slot[0] = base + chunk_bytes;
        j->g.slot[1] = base + 2 * chunk_bytes;
        j->in_place_rs = in_place;
        j->g.last = in_place ? j->g.slot[(c->n - 2) & 1] : (char *)a->rbuf;
    }
    return OMPI_SUCCESS;
}

/* One step of the reduce-scatter (ring_reduce_scatter) or of Allreduce's
 * allgather, as far as it goes now; *step_done once its messages and kernels
 * are. */
static int ring_job_step(ring_job_t *j, bool query, bool *step_done)
{
    gw_coll_ring_ctx_t *c = &j->c;
    const gw_coll_ring_t *g = &j->g;
    const int right = gw_coll_ring_mod(c->me + 1, c->n), left = gw_coll_ring_mod(c->me - 1, c->n),
              k = j->k;
    const bool rs = RING_RS == j->phase;
    const int sc =
        rs ? gw_coll_ring_mod(c->me - k + g->shift, c->n) : gw_coll_ring_mod(c->me + 1 - k, c->n);
    const int rc =
        rs ? gw_coll_ring_mod(c->me - k - 1 + g->shift, c->n) : gw_coll_ring_mod(c->me - k, c->n);
    *step_done = false;
    if (!j->posted) {
        /* The sends read what the step before wrote (its kernels are done). */
        const char *sp =
            rs ? (0 == k ? g->src + g->off[sc] * c->es : gw_coll_ring_out(c, g, k - 1, sc))
               : g->acc + g->off[sc] * c->es;
        char *rp = rs ? g->rbuf : g->acc + g->off[rc] * c->es;
        j->posted = true;
        j->j = j->done = 0;
        j->kernels = false;
        int err = gw_coll_ring_post(c, false, rp, g->cnt[rc], left);
        j->nrecv = c->nreqs;
        if (OMPI_SUCCESS == err) err = gw_coll_ring_post(c, true, (void *)sp, g->cnt[sc], right);
        if (OMPI_SUCCESS != err) return err;
    }
    /* Received (the ranks before) op mine, segment by segment as they land. */
    while (rs && j->j < j->nrecv) {
        ompi_request_t *q = c->reqs[j->j];
        if (!REQUEST_COMPLETE(q)) return OMPI_SUCCESS;
        if (MPI_SUCCESS != q->req_status.MPI_ERROR) return q->req_status.MPI_ERROR;
        const size_t len = g->cnt[rc] - j->done < c->seg_elems ? g->cnt[rc] - j->done
                                                               : c->seg_elems;
        char *out = gw_coll_ring_out(c, g, k, rc);
        int err = gw_coll_ring_reduce_start(c, g->rbuf + j->done * c->es,
                                            g->src + (g->off[rc] + j->done) * c->es,
                                            out + j->done * c->es, len, &j->ticket);
        if (OMPI_SUCCESS != err) return err;
        j->kernels = true;
        j->done += len;
        ++j->j;
    }
    /* The receive scratch is written again by the next step, and the
     * kernels' output is what it sends: they must have finished. */
    return ring_job_settle(j, query, step_done);
}

/* Reduce's last step: every rank's reduced chunk (rank q holds chunk q + 1)
 * to the root, as the blocking form sends it. */
static int ring_job_gather(ring_job_t *j, bool *step_done)
{
    gw_coll_ring_ctx_t *c = &j->c;
    const gw_coll_ring_t *g = &j->g;
    const int root = c->a->root;
    *step_done = false;
    if (!j->posted) {
        j->posted = true;
        int err = OMPI_SUCCESS;
        if (c->me == root) {
            for (int q = 0; q < c->n && OMPI_SUCCESS == err; ++q) {
                const int chunk = gw_coll_ring_mod(q + 1, c->n);
                if (q != c->me) {
                    err = gw_coll_ring_post(c, false, g->acc + g->off[chunk] * c->es, g->cnt[chunk],
                                            q);
                }
            }
        } else {
            const int chunk = gw_coll_ring_mod(c->me + 1, c->n);
            err = gw_coll_ring_post(c, true, g->acc + g->off[chunk] * c->es, g->cnt[chunk], root);
        }
        if (OMPI_SUCCESS != err) return err;
    }
    return ring_job_settle(j, false, step_done);
}

static int ring_job_poll(void *p, bool query, bool *done)
{
    ring_job_t *j = p;
    gw_coll_ring_ctx_t *c = &j->c;
    *done = false;
    if (RING_WAIT_TURN == j->phase) {
        if (__atomic_load_n(&j->m->ring_nb_passed, __ATOMIC_ACQUIRE) + 1 != j->seq) {
            return OMPI_SUCCESS;
        }
        __atomic_fetch_add(&mca_coll_gpuwire.device_nb_calls, 1, __ATOMIC_RELAXED);
        const int err = ring_job_begin(j);
        if (OMPI_SUCCESS != err) return err;
    }
    while (RING_DONE != j->phase) {
        bool step_done = false;
        const int err = RING_GATHER == j->phase  ? ring_job_gather(j, &step_done)
                        : RING_CHAIN == j->phase ? ring_job_chain(j, query, &step_done)
                                                 : ring_job_step(j, query, &step_done);
        if (OMPI_SUCCESS != err) return err;
        if (!step_done) return OMPI_SUCCESS;
        if (RING_GATHER == j->phase || RING_CHAIN == j->phase) {
            j->phase = RING_DONE;
        } else if (++j->k == c->n - 1) {
            j->k = 0;
            if (RING_RS == j->phase && GW_COLL_ALLREDUCE == j->id) {
                j->phase = RING_AG;
            } else if (RING_RS == j->phase && GW_COLL_REDUCE == j->id) {
                j->phase = RING_GATHER;
            } else {
                j->phase = RING_DONE;
            }
        }
    }
    ring_job_pass(j);
    if (j->in_place_rs) {
        const int err = gw_coll_ring_copy_sync(c, c->a->rbuf, j->g.last, j->cnt[c->me]);
        if (OMPI_SUCCESS != err) return err;
        j->in_place_rs = false;
    }
    if (0 != gw_coll_temps_out(j->r, c->gpu, &j->t, c->why, sizeof(c->why))) {
        return gw_coll_ring_fail(c, "device copy");
    }
    *done = true;
    return OMPI_SUCCESS;
}

/* Never declines: outside the FIFO of staged calls (not ordered). */
static const gw_coll_job_ops_t ring_job_ops = {ring_job_poll, ring_job_release, NULL};

int gw_coll_ring_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    ring_job_t *j = calloc(1, sizeof(*j));
    if (NULL == j) return OMPI_ERR_OUT_OF_RESOURCE;
    j->m = m;
    memcpy(j->r, r, sizeof(j->r));
    j->id = a->id;
    j->phase = RING_WAIT_TURN;
    int err = gw_coll_ring_ctx_init(&j->c, a, &j->eff, j->r, GW_TAG_RING_NB);
    /* The application's work on the default stream of every GPU the call
     * reads or writes before its initiation comes first. */
    if (OMPI_SUCCESS == err && 0 != gw_coll_wait_user_regions(r, j->c.why, sizeof(j->c.why))) {
        err = gw_coll_ring_fail(&j->c, "device sync");
    }
    if (OMPI_SUCCESS != err) {
        free(j);
        return err;
    }
    j->seq = __atomic_add_fetch(&m->ring_nb_issued, 1, __ATOMIC_ACQ_REL);
    /* On failure the job is released, which passes its turn. */
    return gw_coll_nb_job(m, a, r, &ring_job_ops, j, false, request);
}
