/*
 * The device reduction algorithm: Allreduce, Reduce, Reduce_scatter(_block),
 * Scan and Exscan whose data stay on the GPU. Chunks move between ranks by
 * point-to-point on device buffers (the pml: pml gpuwire carries them over
 * CUDA IPC/NVLink), land in device scratch, and are combined by the kernels
 * of gpuwire/cuda/reduce.h on the copies' stream.
 *
 *   allreduce        ring reduce-scatter, then ring allgather, in rbuf
 *   reduce           ring reduce-scatter (into rbuf at the root, scratch
 *                    elsewhere), then every rank's reduced chunk to the root
 *   reduce_scatter   ring reduce-scatter over the caller's blocks, shifted
 *   (_block)         so that rank r ends with block r; two scratch slots
 *   scan, exscan     a chain: rank r receives the prefix of r-1, combines,
 *                    passes it on
 *
 * Each step is cut into segments of coll_gpuwire_reduce_segment_bytes: all
 * of a step's receives and sends are posted at once, and the kernel of
 * segment j runs while segment j+1 is still arriving (in the chain, the send
 * of segment j overlaps the kernel of j+1). A kernel's output is sent only
 * after its ticket is reached: the peer's copy engine is not ordered after
 * our stream.
 *
 * Order: the predefined ops in the table are commutative and associative
 * (MINLOC/MAXLOC too, with ties to the lowest index), so the ring may combine
 * in any order; user-defined ops never come here. Floating-point sums may
 * round differently from another algorithm's order, as with Open MPI's own
 * ring; every rank receives the same bits.
 *
 * Every rank of a call must take the same algorithm, or the call hangs. The
 * dispatch brings a rank here only when at least one of its significant
 * buffers is device memory; accepts() below then decides from what MPI
 * makes identical on every rank (the collective, blocking or not, op,
 * datatype, the algorithm parameter, the pml). So every rank that passes
 * device memory anywhere runs the ring, whatever its other buffer is: a
 * buffer the ring cannot use as it is (host memory, another GPU's memory)
 * is replaced by a temporary on this rank's GPU, copied in before the call
 * where the call reads it and copied out after it where the call writes it.
 * When it declines, every such rank goes on to the staged path.
 *
 * What stays inconsistent without communication: a rank whose significant
 * buffers are all host memory passes through to the host module while ranks
 * with device memory run the ring (an MPI_IN_PLACE root of MPI_Reduce with a
 * host buffer, non-roots of MPI_Reduce with host send buffers while the root
 * receives into device memory). Such programs need
 * coll_gpuwire_reduce_algorithm staged, which sends every rank to Open MPI's
 * host algorithm (docs/coll.md). An agreement between ranks would cost a
 * host collective on every host reduction, which the host path must not pay.
 * The ring's messages carry a tag of their own (GW_TAG_RING), never Open
 * MPI's tag for the collective: such a call waits, and the ring never takes
 * a message of Open MPI's algorithm for one of its own.
 *
 * Non-blocking forms (Iallreduce, Ireduce, Ireduce_scatter(_block), Iscan,
 * Iexscan): coll_gpuwire_devreduce_nb.c, over the steps below
 * (coll_gpuwire_devreduce.h).
 *
 * Regions with gaps never reach the ring: the datatypes it accepts are
 * predefined, without padding (table_ids), and the same on every rank
 * (MPI's rule for predefined ops; Open MPI refuses a predefined op on a
 * derived datatype), so every region of an accepted call is dense. A
 * derived datatype with gaps comes with a user-defined op, and a padded
 * pair (MPI_SHORT_INT) is declined by its type: every rank declines alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire/gpu_device.h"
#include "coll_gpuwire_devreduce.h"
#include "gpuwire/cuda/reduce.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/op/op.h"
#include "opal/runtime/opal_progress.h"

/* ------------------------------------------------------------------------
 * One call's context and the steps every algorithm is made of
 * ------------------------------------------------------------------------ */

int gw_coll_ring_fail(gw_coll_ring_ctx_t *c, const char *what)
{
    opal_output(0, "coll:gpuwire: device %s: %s: %s", gw_coll_name(c->a->id), what, c->why);
    return OMPI_ERROR;
}

static size_t nsegs(const gw_coll_ring_ctx_t *c, size_t count)
{
    return (count + c->seg_elems - 1) / c->seg_elems;
}

static int reserve(gw_coll_ring_ctx_t *c, size_t more)
{
    if (c->nreqs + more <= c->cap) return OMPI_SUCCESS;
    size_t cap = c->cap ? c->cap : 16;
    while (cap < c->nreqs + more) cap *= 2;
    ompi_request_t **r = realloc(c->reqs, cap * sizeof(*r));
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    c->reqs = r;
    c->cap = cap;
    return OMPI_SUCCESS;
}

/* Posts one message per segment of count elements at p; the requests go to
 * c->reqs from *first on. */
int gw_coll_ring_post(gw_coll_ring_ctx_t *c, bool send, void *p, size_t count, int peer)
{
    int rc = reserve(c, nsegs(c, count));
    if (OMPI_SUCCESS != rc) return rc;
    for (size_t done = 0; done < count; done += c->seg_elems) {
        const size_t k = count - done < c->seg_elems ? count - done : c->seg_elems;
        char *q = (char *)p + done * c->es;
        const int bytes = (int)(k * c->es);
        ompi_request_t **r = &c->reqs[c->nreqs];
        if (send) {
            rc = MCA_PML_CALL(isend(q, bytes, MPI_BYTE, peer, c->tag, MCA_PML_BASE_SEND_STANDARD,
                                    c->comm, r));
        } else {
            rc = MCA_PML_CALL(irecv(q, bytes, MPI_BYTE, peer, c->tag, c->comm, r));
        }
        if (OMPI_SUCCESS != rc) return rc;
        ++c->nreqs;
    }
    return OMPI_SUCCESS;
}

static int wait_all(gw_coll_ring_ctx_t *c)
{
    int rc = c->nreqs ? ompi_request_wait_all(c->nreqs, c->reqs, MPI_STATUSES_IGNORE)
                      : OMPI_SUCCESS;
    c->nreqs = 0;
    return rc;
}

/* Waits for a ticket of the device stream, progressing messages meanwhile. */
static int wait_ticket(gw_coll_ring_ctx_t *c, uint64_t ticket)
{
    unsigned polls = 0;
    for (;;) {
        bool done = false;
        if (0 != gw_coll_copy_done(c->gpu, ticket, 0 == (++polls & 1023), &done, c->why,
                                   sizeof(c->why))) {
            return gw_coll_ring_fail(c, "device stream");
        }
        if (done) return OMPI_SUCCESS;
        opal_progress();
    }
}

int gw_coll_ring_reduce_start(gw_coll_ring_ctx_t *c, const void *x, const void *y, void *out,
                              size_t count, uint64_t *ticket)
{
    if (0 != gw_coll_reduce_start(c->op, c->type, x, y, out, count, c->gpu, ticket, c->why,
                                  sizeof(c->why))) {
        return gw_coll_ring_fail(c, "reduction kernel");
    }
    return OMPI_SUCCESS;
}

int gw_coll_ring_copy_start(gw_coll_ring_ctx_t *c, void *dst, const void *src, size_t count,
                            uint64_t *ticket)
{
    if (0 != gw_coll_copy_start(dst, src, count * c->es, c->gpu, ticket, c->why, sizeof(c->why))) {
        return gw_coll_ring_fail(c, "device copy");
    }
    return OMPI_SUCCESS;
}

int gw_coll_ring_copy_sync(gw_coll_ring_ctx_t *c, void *dst, const void *src, size_t count)
{
    uint64_t t = 0;
    if (0 == count || dst == src) return OMPI_SUCCESS;
    int rc = gw_coll_ring_copy_start(c, dst, src, count, &t);
    return OMPI_SUCCESS == rc ? wait_ticket(c, t) : rc;
}

char *gw_coll_ring_out(const gw_coll_ring_ctx_t *c, const gw_coll_ring_t *g, int k, int chunk)
{
    if (NULL != g->acc) return g->acc + g->off[chunk] * c->es;
    return k == c->n - 2 ? g->last : g->slot[k & 1];
}

static int ring_reduce_scatter(gw_coll_ring_ctx_t *c, const gw_coll_ring_t *g)
{
    const int right = gw_coll_ring_mod(c->me + 1, c->n), left = gw_coll_ring_mod(c->me - 1, c->n);
    for (int k = 0; k < c->n - 1; ++k) {
        const int sc = gw_coll_ring_mod(c->me - k + g->shift, c->n),
                  rc = gw_coll_ring_mod(c->me - k - 1 + g->shift, c->n);
        const char *sp = 0 == k ? g->src + g->off[sc] * c->es : gw_coll_ring_out(c, g, k - 1, sc);
        char *out = gw_coll_ring_out(c, g, k, rc);
        int err = gw_coll_ring_post(c, false, g->rbuf, g->cnt[rc], left);
        const size_t nrecv = c->nreqs;
        if (OMPI_SUCCESS == err) err = gw_coll_ring_post(c, true, (void *)sp, g->cnt[sc], right);
        uint64_t ticket = 0;
        bool kernels = false;
        for (size_t j = 0, done = 0; OMPI_SUCCESS == err && j < nrecv; ++j) {
            const size_t len = g->cnt[rc] - done < c->seg_elems ? g->cnt[rc] - done : c->seg_elems;
            err = ompi_request_wait(&c->reqs[j], MPI_STATUS_IGNORE);
            if (OMPI_SUCCESS != err) break;
            /* Received (the ranks before) op mine. */
            err = gw_coll_ring_reduce_start(c, g->rbuf + done * c->es,
                                            g->src + (g->off[rc] + done) * c->es,
                                            out + done * c->es, len, &ticket);
            kernels = true;
            done += len;
        }
        /* The sends read what the previous step's kernels wrote (waited
         * for); this step's kernels must end before their output is sent. */
        int rc2 = wait_all(c);
        if (OMPI_SUCCESS == err && kernels) err = wait_ticket(c, ticket);
        if (OMPI_SUCCESS == err) err = rc2;
        if (OMPI_SUCCESS != err) return err;
    }
    return OMPI_SUCCESS;
}

/* Element offsets and counts of n chunks of count: the first count % n
 * chunks one element longer. */
void gw_coll_ring_even_chunks(size_t count, int n, size_t *off, size_t *cnt)
{
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
        cnt[i] = count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
        off[i] = at;
        at += cnt[i];
    }
}

size_t gw_coll_ring_max_of(const size_t *v, int n)
{
    size_t m = 0;
    for (int i = 0; i < n; ++i) m = v[i] > m ? v[i] : m;
    return m;
}

int gw_coll_ring_scratch(gw_coll_ring_ctx_t *c, size_t bytes, gw_coll_dev_buf_t *b)
{
    memset(b, 0, sizeof(*b));
    if (0 == bytes) return OMPI_SUCCESS;
    if (0 != gw_coll_scratch_get(bytes, c->gpu, b, c->why, sizeof(c->why))) {
        return gw_coll_ring_fail(c, "device scratch");
    }
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------------------
 * The collectives
 * ------------------------------------------------------------------------ */

static int run_allreduce_or_reduce(gw_coll_ring_ctx_t *c, bool is_reduce)
{
    const gw_coll_args_t *a = c->a;
    const size_t count = (size_t)a->count;
    const bool root = !is_reduce || c->me == a->root;
    const bool in_place = MPI_IN_PLACE == a->sbuf;
    const char *src = in_place ? (const char *)a->rbuf : (const char *)a->sbuf;
    if (1 == c->n) return gw_coll_ring_copy_sync(c, a->rbuf, src, count);

    size_t *off = calloc(2 * (size_t)c->n, sizeof(size_t));
    if (NULL == off) return OMPI_ERR_OUT_OF_RESOURCE;
    size_t *cnt = off + c->n;
    gw_coll_ring_even_chunks(count, c->n, off, cnt);
    const size_t chunk_bytes = gw_coll_ring_max_of(cnt, c->n) * c->es;
    /* Receive scratch, and at a non-root of reduce the accumulator. */
    gw_coll_dev_buf_t s;
    int err = gw_coll_ring_scratch(c, chunk_bytes + (root ? 0 : count * c->es), &s);
    if (OMPI_SUCCESS == err) {
        gw_coll_ring_t g = {.off = off, .cnt = cnt, .shift = 0, .src = src,
                            .acc = root ? (char *)a->rbuf : (char *)s.ptr + chunk_bytes,
                            .rbuf = s.ptr};
        err = ring_reduce_scatter(c, &g);
        /* Rank q now holds chunk q + 1, reduced. */
        if (OMPI_SUCCESS == err && !is_reduce) {
            const int right = gw_coll_ring_mod(c->me + 1, c->n),
                      left = gw_coll_ring_mod(c->me - 1, c->n);
            for (int k = 0; OMPI_SUCCESS == err && k < c->n - 1; ++k) {
                const int sc = gw_coll_ring_mod(c->me + 1 - k, c->n),
                          rc = gw_coll_ring_mod(c->me - k, c->n);
                err = gw_coll_ring_post(c, false, g.acc + off[rc] * c->es, cnt[rc], left);
                if (OMPI_SUCCESS == err) {
                    err = gw_coll_ring_post(c, true, g.acc + off[sc] * c->es, cnt[sc], right);
                }
                int rc2 = wait_all(c);
                if (OMPI_SUCCESS == err) err = rc2;
            }
        } else if (OMPI_SUCCESS == err) {
            if (root) {
                for (int q = 0; OMPI_SUCCESS == err && q < c->n; ++q) {
                    const int chunk = gw_coll_ring_mod(q + 1, c->n);
                    if (q != c->me) {
                        err = gw_coll_ring_post(c, false, g.acc + off[chunk] * c->es, cnt[chunk],
                                                q);
                    }
                }
            } else {
                const int chunk = gw_coll_ring_mod(c->me + 1, c->n);
                err = gw_coll_ring_post(c, true, g.acc + off[chunk] * c->es, cnt[chunk], a->root);
            }
            int rc2 = wait_all(c);
            if (OMPI_SUCCESS == err) err = rc2;
        }
    }
    gw_coll_scratch_put(&s);
    free(off);
    return err;
}

static int run_reduce_scatter(gw_coll_ring_ctx_t *c, bool block)
{
    const gw_coll_args_t *a = c->a;
    const bool in_place = MPI_IN_PLACE == a->sbuf;
    const char *src = in_place ? (const char *)a->rbuf : (const char *)a->sbuf;
    size_t *off = calloc(2 * (size_t)c->n, sizeof(size_t));
    if (NULL == off) return OMPI_ERR_OUT_OF_RESOURCE;
    size_t *cnt = off + c->n, at = 0;
    for (int i = 0; i < c->n; ++i) {
        cnt[i] = (size_t)(block ? a->rcount : a->rcounts[i]);
        off[i] = at;
        at += cnt[i];
    }
    const size_t mine = cnt[c->me];
    int err = OMPI_SUCCESS;
    if (1 == c->n) {
        err = gw_coll_ring_copy_sync(c, a->rbuf, src, mine);
        free(off);
        return err;
    }
    const size_t chunk_bytes = gw_coll_ring_max_of(cnt, c->n) * c->es;
    gw_coll_dev_buf_t s;
    err = gw_coll_ring_scratch(c, 3 * chunk_bytes, &s);
    if (OMPI_SUCCESS == err) {
        char *base = s.ptr;
        gw_coll_ring_t g = {.off = off, .cnt = cnt, .shift = -1, .src = src, .acc = NULL,
                            .slot = {base + chunk_bytes, base + 2 * chunk_bytes},
                            .rbuf = base};
        /* In place, the result overlaps the input: finish in a slot. */
        g.last = in_place ? g.slot[(c->n - 2) & 1] : (char *)a->rbuf;
        err = ring_reduce_scatter(c, &g);
        if (OMPI_SUCCESS == err && in_place) err = gw_coll_ring_copy_sync(c, a->rbuf, g.last, mine);
    }
    gw_coll_scratch_put(&s);
    free(off);
    return err;
}

/* Scan and exscan: a chain from rank 0 up. Rank r > 0 receives the prefix of
 * ranks 0..r-1 segment by segment; scan writes prefix op mine into rbuf and
 * passes that on, exscan keeps the prefix as its result and passes prefix op
 * mine on. */
static int run_scan(gw_coll_ring_ctx_t *c, bool exclusive)
{
    const gw_coll_args_t *a = c->a;
    const size_t count = (size_t)a->count;
    const bool in_place = MPI_IN_PLACE == a->sbuf;
    const char *src = in_place ? (const char *)a->rbuf : (const char *)a->sbuf;
    const bool last = c->me == c->n - 1;
    int err = OMPI_SUCCESS;

    if (0 == c->me) {
        uint64_t t = 0;
        bool copying = !exclusive && !in_place;
        if (copying) err = gw_coll_ring_copy_start(c, a->rbuf, src, count, &t);
        if (OMPI_SUCCESS == err && !last) err = gw_coll_ring_post(c, true, (void *)src, count, 1);
        int rc2 = wait_all(c);
        if (OMPI_SUCCESS == err && copying) err = wait_ticket(c, t);
        return OMPI_SUCCESS == err ? rc2 : err;
    }

    /* Where the prefix arrives, and where what is passed on is written. */
    const size_t bytes = count * c->es;
    const bool need_fwd = exclusive && !last;
    gw_coll_dev_buf_t s;
    err = gw_coll_ring_scratch(
        c, (exclusive ? (in_place ? bytes : 0) + (need_fwd ? bytes : 0) : bytes), &s);
    if (OMPI_SUCCESS != err) return err;
    char *prefix = (exclusive && !in_place) ? (char *)a->rbuf : (char *)s.ptr;
    char *fwd = exclusive ? (char *)s.ptr + (in_place ? bytes : 0) : (char *)a->rbuf;

    err = gw_coll_ring_post(c, false, prefix, count, c->me - 1);
    const size_t nrecv = c->nreqs;
    uint64_t ticket = 0;
    bool queued = false;
    for (size_t j = 0, done = 0; OMPI_SUCCESS == err && j < nrecv; ++j) {
        const size_t len = count - done < c->seg_elems ? count - done : c->seg_elems;
        const size_t at = done * c->es;
        err = ompi_request_wait(&c->reqs[j], MPI_STATUS_IGNORE);
        if (OMPI_SUCCESS != err) break;
        if (!exclusive || need_fwd) {
            err = gw_coll_ring_reduce_start(c, prefix + at, src + at, fwd + at, len, &ticket);
            queued = true;
        }
        /* Exscan in place: the prefix is the result; the kernel above has
         * read this segment of rbuf before the copy (same stream) lands. */
        if (OMPI_SUCCESS == err && exclusive && in_place) {
            err = gw_coll_ring_copy_start(c, (char *)a->rbuf + at, prefix + at, len, &ticket);
            queued = true;
        }
        if (OMPI_SUCCESS == err && !last && queued) err = wait_ticket(c, ticket);
        if (OMPI_SUCCESS == err && !last) {
            err = gw_coll_ring_post(c, true, fwd + at, len, c->me + 1);
        }
        done += len;
    }
    int rc2 = wait_all(c);
    if (OMPI_SUCCESS == err && queued) err = wait_ticket(c, ticket);
    if (OMPI_SUCCESS == err) err = rc2;
    gw_coll_scratch_put(&s);
    return err;
}

/* ------------------------------------------------------------------------
 * The algorithm: accepts and run
 * ------------------------------------------------------------------------ */

/* The dispatch asks only when a significant buffer of this rank is device
 * memory. Nothing here may depend on this rank's buffers: other ranks of the
 * call decide from the same arguments (see the comment at the top). */
static bool devreduce_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT])
{
    (void)r;
    const unsigned reductions = GW_COLL_BIT(GW_COLL_ALLREDUCE) | GW_COLL_BIT(GW_COLL_REDUCE) |
                                GW_COLL_BIT(GW_COLL_REDUCE_SCATTER) |
                                GW_COLL_BIT(GW_COLL_REDUCE_SCATTER_BLOCK) |
                                GW_COLL_BIT(GW_COLL_SCAN) | GW_COLL_BIT(GW_COLL_EXSCAN);
    if (!gw_coll_p2p_accepts(a, reductions, mca_coll_gpuwire.reduce_algorithm)) {
        return false;
    }
    int op, type;
    return gw_coll_table_ids(a->op, a->dtype, &op, &type) && !gw_coll_reduce_small(a);
}

/* ------------------------------------------------------------------------
 * Buffers the ring cannot use as they are
 * ------------------------------------------------------------------------ */

/* Points eff's buffers at temporaries where the ring cannot use the
 * application's (gw_coll_temps_in: copied in and waited for, since the pml
 * may read a temporary as soon as the ring starts). The ring treats every
 * buffer as dense elements. */
int gw_coll_ring_temps_in(gw_coll_ring_ctx_t *c, const gw_coll_region_t r[GW_REGION_COUNT],
                          gw_coll_args_t *eff, gw_coll_temps_t *t)
{
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (r[i].hi > r[i].lo && !r[i].dense) {
            memset(t, 0, sizeof(*t));
            snprintf(c->why, sizeof(c->why),
                     "a buffer with gaps reached the device reduction (a datatype check is "
                     "missing); set coll_gpuwire_reduce_algorithm staged");
            return gw_coll_ring_fail(c, "layout");
        }
    }
    if (0 != gw_coll_temps_in(r, c->gpu, t, c->why, sizeof(c->why))) {
        return gw_coll_ring_fail(c, "device scratch");
    }
    /* The datatype's displacements start at lo: the pointer the ring gets is
     * moved back by lo, as the staged path's host view. */
    if (NULL != t->tmp[GW_REGION_SEND]) eff->sbuf = t->tmp[GW_REGION_SEND] - r[GW_REGION_SEND].lo;
    if (NULL != t->tmp[GW_REGION_RECV]) eff->rbuf = t->tmp[GW_REGION_RECV] - r[GW_REGION_RECV].lo;
    return OMPI_SUCCESS;
}

/* A call's context (c->a points at its eff); fails on a dispatch error. */
int gw_coll_ring_ctx_init(gw_coll_ring_ctx_t *c, const gw_coll_args_t *a, gw_coll_args_t *eff,
                          const gw_coll_region_t r[GW_REGION_COUNT], int tag)
{
    *eff = *a;
    memset(c, 0, sizeof(*c));
    c->a = eff;
    c->comm = a->comm;
    c->tag = tag;
    if (!gw_coll_table_ids(a->op, a->dtype, &c->op, &c->type)) return OMPI_ERR_NOT_SUPPORTED;
    c->es = gw_reduce_type_size(c->type);
    c->me = ompi_comm_rank(a->comm);
    c->n = ompi_comm_size(a->comm);
    c->gpu = gw_coll_regions_gpu(r);
    if (c->gpu < 0) {
        snprintf(c->why, sizeof(c->why), "no buffer of this rank is device memory (a dispatch "
                 "error); set coll_gpuwire_reduce_algorithm staged");
        return gw_coll_ring_fail(c, "dispatch");
    }
    size_t seg = mca_coll_gpuwire.reduce_segment_bytes / c->es;
    const size_t max_seg = ((size_t)1 << 30) / c->es; /* int byte counts */
    c->seg_elems = seg < 1 ? 1 : seg > max_seg ? max_seg : seg;
    return OMPI_SUCCESS;
}


static int devreduce_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    if (NULL != request) return gw_coll_ring_start(m, a, r, request);
    gw_coll_args_t eff; /* the buffers the ring works on */
    gw_coll_ring_ctx_t c;
    int err = gw_coll_ring_ctx_init(&c, a, &eff, r, GW_TAG_RING);
    if (OMPI_SUCCESS != err) return err;

    /* The application's work on the default stream of every GPU the call
     * reads or writes comes first. */
    if (0 != gw_coll_wait_user_regions(r, c.why, sizeof(c.why))) {
        return gw_coll_ring_fail(&c, "device sync");
    }
    __atomic_fetch_add(&gw_core_counters()->coll_device_calls, 1, __ATOMIC_RELAXED);
    gw_coll_temps_t t;
    err = gw_coll_ring_temps_in(&c, r, &eff, &t);
    if (OMPI_SUCCESS == err) {
        switch (a->id) {
        case GW_COLL_ALLREDUCE: err = run_allreduce_or_reduce(&c, false); break;
        case GW_COLL_REDUCE: err = run_allreduce_or_reduce(&c, true); break;
        case GW_COLL_REDUCE_SCATTER: err = run_reduce_scatter(&c, false); break;
        case GW_COLL_REDUCE_SCATTER_BLOCK: err = run_reduce_scatter(&c, true); break;
        case GW_COLL_SCAN: err = run_scan(&c, false); break;
        case GW_COLL_EXSCAN: err = run_scan(&c, true); break;
        default: err = OMPI_ERR_NOT_SUPPORTED; break;
        }
    }
    if (OMPI_SUCCESS == err && 0 != gw_coll_temps_out(r, c.gpu, &t, c.why, sizeof(c.why))) {
        err = gw_coll_ring_fail(&c, "device copy");
    }
    gw_coll_temps_release(&t);
    free(c.reqs);
    return err;
}

const gw_coll_algorithm_t gw_coll_devreduce = {"device", devreduce_accepts, devreduce_run};
