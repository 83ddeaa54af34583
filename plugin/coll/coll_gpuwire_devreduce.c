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
#include "coll_gpuwire_dispatch.h"
#include "gpuwire/cuda/reduce.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/op/op.h"
#include "opal/runtime/opal_progress.h"

/* ------------------------------------------------------------------------
 * Open MPI's ops and datatypes -> the table's ids
 * ------------------------------------------------------------------------ */

static int table_op(const struct ompi_op_t *op)
{
    switch (op->op_type) {
    case OMPI_OP_SUM: return GW_OP_SUM;
    case OMPI_OP_PROD: return GW_OP_PROD;
    case OMPI_OP_MIN: return GW_OP_MIN;
    case OMPI_OP_MAX: return GW_OP_MAX;
    case OMPI_OP_LAND: return GW_OP_LAND;
    case OMPI_OP_LOR: return GW_OP_LOR;
    case OMPI_OP_LXOR: return GW_OP_LXOR;
    case OMPI_OP_BAND: return GW_OP_BAND;
    case OMPI_OP_BOR: return GW_OP_BOR;
    case OMPI_OP_BXOR: return GW_OP_BXOR;
    case OMPI_OP_MINLOC: return GW_OP_MINLOC;
    case OMPI_OP_MAXLOC: return GW_OP_MAXLOC;
    default: return -1;
    }
}

#define GW_SIGNED_ID(bytes) \
    ((bytes) == 1 ? GW_TYPE_INT8 : (bytes) == 2 ? GW_TYPE_INT16 : (bytes) == 4 ? GW_TYPE_INT32 : GW_TYPE_INT64)
#define GW_UNSIGNED_ID(bytes)                                                               \
    ((bytes) == 1 ? GW_TYPE_UINT8 : (bytes) == 2 ? GW_TYPE_UINT16 : (bytes) == 4 ? GW_TYPE_UINT32 \
                                                                                : GW_TYPE_UINT64)

/* Open MPI's own op type (ompi_op_ddt_map, the index of its host functions)
 * -> the table's type. MPI_CHAR, MPI_INT, ... reach here as the fixed-width
 * type of their size; long and unsigned long and wchar_t by their size. */
static int table_type_of_base(int base)
{
    switch (base) {
    case OMPI_OP_BASE_TYPE_INT8_T: return GW_TYPE_INT8;
    case OMPI_OP_BASE_TYPE_UINT8_T: return GW_TYPE_UINT8;
    case OMPI_OP_BASE_TYPE_INT16_T: return GW_TYPE_INT16;
    case OMPI_OP_BASE_TYPE_UINT16_T: return GW_TYPE_UINT16;
    case OMPI_OP_BASE_TYPE_INT32_T: return GW_TYPE_INT32;
    case OMPI_OP_BASE_TYPE_UINT32_T: return GW_TYPE_UINT32;
    case OMPI_OP_BASE_TYPE_INT64_T: return GW_TYPE_INT64;
    case OMPI_OP_BASE_TYPE_UINT64_T: return GW_TYPE_UINT64;
    case OMPI_OP_BASE_TYPE_LONG: return GW_SIGNED_ID(sizeof(long));
    case OMPI_OP_BASE_TYPE_UNSIGNED_LONG: return GW_UNSIGNED_ID(sizeof(unsigned long));
    case OMPI_OP_BASE_TYPE_WCHAR: return ((wchar_t)-1 < 0) ? GW_SIGNED_ID(sizeof(wchar_t))
                                                            : GW_UNSIGNED_ID(sizeof(wchar_t));
    case OMPI_OP_BASE_TYPE_FLOAT: return GW_TYPE_FLOAT;
    case OMPI_OP_BASE_TYPE_DOUBLE: return GW_TYPE_DOUBLE;
    case OMPI_OP_BASE_TYPE_BOOL: return sizeof(bool) == 1 ? GW_TYPE_BOOL : -1;
    case OMPI_OP_BASE_TYPE_BYTE: return GW_TYPE_BYTE;
    case OMPI_OP_BASE_TYPE_FLOAT_INT: return GW_TYPE_FLOAT_INT;
    case OMPI_OP_BASE_TYPE_DOUBLE_INT: return GW_TYPE_DOUBLE_INT;
    case OMPI_OP_BASE_TYPE_LONG_INT: return sizeof(long) == 8 ? GW_TYPE_LONG_INT : -1;
    case OMPI_OP_BASE_TYPE_2INT: return GW_TYPE_2INT;
    case OMPI_OP_BASE_TYPE_SHORT_INT: return GW_TYPE_SHORT_INT;
    default: return -1; /* long double, complex, Fortran types: host */
    }
}

/* The table's (op, type) for a call, or false: a user-defined op, a derived
 * datatype, a pair Open MPI itself has no function for (an invalid pair:
 * the host path raises MPI's error), or one the table lacks. */
bool gw_coll_table_ids(struct ompi_op_t *op, struct ompi_datatype_t *dt, int *gop, int *gtype)
{
    if (!ompi_op_is_intrinsic(op) || !ompi_op_is_commute(op)) return false;
    if (!ompi_datatype_is_predefined(dt)) return false;
    const int base = ompi_op_ddt_map[dt->id];
    if (base < 0 || NULL == op->o_func.intrinsic.fns[base]) return false;
    const int o = table_op(op), t = table_type_of_base(base);
    if (o < 0 || t < 0 || !gw_coll_reduce_supported(o, t)) return false;
    /* Elements are moved whole: no padding, trailing (MPI_DOUBLE_INT, ...)
     * or inside (MPI_SHORT_INT), whose bytes the call may not write, and
     * the table's layout. So every region of an accepted call is dense, on
     * every rank alike: density is the datatype's, not the buffer's. */
    ptrdiff_t lb, extent, true_lb, true_extent;
    size_t size = 0;
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
    ompi_datatype_type_size(dt, &size);
    if (lb != 0 || true_lb != 0 || true_extent != extent || (size_t)extent != size ||
        (size_t)extent != gw_reduce_type_size(t)) {
        return false;
    }
    *gop = o;
    *gtype = t;
    return true;
}

/* ------------------------------------------------------------------------
 * One call's context and the steps every algorithm is made of
 * ------------------------------------------------------------------------ */

typedef struct {
    const gw_coll_args_t *a;
    struct ompi_communicator_t *comm;
    int op, type;
    size_t es;        /* bytes per element */
    size_t seg_elems; /* elements per message */
    int gpu, me, n, tag;
    ompi_request_t **reqs; /* room for a step's requests */
    size_t nreqs, cap;
    char why[256];
} ctx_t;

static int fail(ctx_t *c, const char *what)
{
    opal_output(0, "coll:gpuwire: device %s: %s: %s", gw_coll_name(c->a->id), what, c->why);
    return OMPI_ERROR;
}

static size_t nsegs(const ctx_t *c, size_t count)
{
    return (count + c->seg_elems - 1) / c->seg_elems;
}

static int reserve(ctx_t *c, size_t more)
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
static int post(ctx_t *c, bool send, void *p, size_t count, int peer)
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

static int wait_all(ctx_t *c)
{
    int rc = c->nreqs ? ompi_request_wait_all(c->nreqs, c->reqs, MPI_STATUSES_IGNORE)
                      : OMPI_SUCCESS;
    c->nreqs = 0;
    return rc;
}

/* Waits for a ticket of the device stream, progressing messages meanwhile. */
static int wait_ticket(ctx_t *c, uint64_t ticket)
{
    unsigned polls = 0;
    for (;;) {
        bool done = false;
        if (0 != gw_coll_copy_done(c->gpu, ticket, 0 == (++polls & 1023), &done, c->why,
                                   sizeof(c->why))) {
            return fail(c, "device stream");
        }
        if (done) return OMPI_SUCCESS;
        opal_progress();
    }
}

static int reduce_start(ctx_t *c, const void *x, const void *y, void *out, size_t count,
                        uint64_t *ticket)
{
    if (0 != gw_coll_reduce_start(c->op, c->type, x, y, out, count, c->gpu, ticket, c->why,
                                  sizeof(c->why))) {
        return fail(c, "reduction kernel");
    }
    return OMPI_SUCCESS;
}

static int copy_start(ctx_t *c, void *dst, const void *src, size_t count, uint64_t *ticket)
{
    if (0 != gw_coll_copy_start(dst, src, count * c->es, c->gpu, ticket, c->why, sizeof(c->why))) {
        return fail(c, "device copy");
    }
    return OMPI_SUCCESS;
}

static int copy_sync(ctx_t *c, void *dst, const void *src, size_t count)
{
    uint64_t t = 0;
    if (0 == count || dst == src) return OMPI_SUCCESS;
    int rc = copy_start(c, dst, src, count, &t);
    return OMPI_SUCCESS == rc ? wait_ticket(c, t) : rc;
}

static int mod(int x, int n) { return ((x % n) + n) % n; }

/* A ring reduce-scatter over n chunks (element offsets off[], counts cnt[]).
 * At step k this rank sends chunk (me - k + shift) and receives chunk
 * (me - k - 1 + shift) from its left neighbour, combining it with its own
 * input (src + off) into:
 *   acc + off[chunk]                     when acc is set (allreduce, reduce)
 *   slot[k & 1], or last at the end      otherwise (reduce_scatter)
 * What a step wrote is what the next step sends. At the end this rank holds
 * chunk (me + shift) mod n, completely reduced. */
typedef struct {
    const size_t *off, *cnt;
    int shift;
    const char *src;
    char *acc;
    char *slot[2], *last;
    char *rbuf; /* receive scratch: the largest chunk */
} ring_t;

static char *ring_out(const ctx_t *c, const ring_t *g, int k, int chunk)
{
    if (NULL != g->acc) return g->acc + g->off[chunk] * c->es;
    return k == c->n - 2 ? g->last : g->slot[k & 1];
}

static int ring_reduce_scatter(ctx_t *c, const ring_t *g)
{
    const int right = mod(c->me + 1, c->n), left = mod(c->me - 1, c->n);
    for (int k = 0; k < c->n - 1; ++k) {
        const int sc = mod(c->me - k + g->shift, c->n), rc = mod(c->me - k - 1 + g->shift, c->n);
        const char *sp = 0 == k ? g->src + g->off[sc] * c->es : ring_out(c, g, k - 1, sc);
        char *out = ring_out(c, g, k, rc);
        int err = post(c, false, g->rbuf, g->cnt[rc], left);
        const size_t nrecv = c->nreqs;
        if (OMPI_SUCCESS == err) err = post(c, true, (void *)sp, g->cnt[sc], right);
        uint64_t ticket = 0;
        bool kernels = false;
        for (size_t j = 0, done = 0; OMPI_SUCCESS == err && j < nrecv; ++j) {
            const size_t len = g->cnt[rc] - done < c->seg_elems ? g->cnt[rc] - done : c->seg_elems;
            err = ompi_request_wait(&c->reqs[j], MPI_STATUS_IGNORE);
            if (OMPI_SUCCESS != err) break;
            /* Received (the ranks before) op mine. */
            err = reduce_start(c, g->rbuf + done * c->es, g->src + (g->off[rc] + done) * c->es,
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
static void even_chunks(size_t count, int n, size_t *off, size_t *cnt)
{
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
        cnt[i] = count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
        off[i] = at;
        at += cnt[i];
    }
}

static size_t max_of(const size_t *v, int n)
{
    size_t m = 0;
    for (int i = 0; i < n; ++i) m = v[i] > m ? v[i] : m;
    return m;
}

static int scratch(ctx_t *c, size_t bytes, gw_coll_dev_buf_t *b)
{
    memset(b, 0, sizeof(*b));
    if (0 == bytes) return OMPI_SUCCESS;
    if (0 != gw_coll_scratch_get(bytes, c->gpu, b, c->why, sizeof(c->why))) {
        return fail(c, "device scratch");
    }
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------------------
 * The collectives
 * ------------------------------------------------------------------------ */

static int run_allreduce_or_reduce(ctx_t *c, bool is_reduce)
{
    const gw_coll_args_t *a = c->a;
    const size_t count = (size_t)a->count;
    const bool root = !is_reduce || c->me == a->root;
    const bool in_place = MPI_IN_PLACE == a->sbuf;
    const char *src = in_place ? (const char *)a->rbuf : (const char *)a->sbuf;
    if (1 == c->n) return copy_sync(c, a->rbuf, src, count);

    size_t *off = calloc(2 * (size_t)c->n, sizeof(size_t));
    if (NULL == off) return OMPI_ERR_OUT_OF_RESOURCE;
    size_t *cnt = off + c->n;
    even_chunks(count, c->n, off, cnt);
    const size_t chunk_bytes = max_of(cnt, c->n) * c->es;
    /* Receive scratch, and at a non-root of reduce the accumulator. */
    gw_coll_dev_buf_t s;
    int err = scratch(c, chunk_bytes + (root ? 0 : count * c->es), &s);
    if (OMPI_SUCCESS == err) {
        ring_t g = {.off = off, .cnt = cnt, .shift = 0, .src = src,
                    .acc = root ? (char *)a->rbuf : (char *)s.ptr + chunk_bytes,
                    .rbuf = s.ptr};
        err = ring_reduce_scatter(c, &g);
        /* Rank q now holds chunk q + 1, reduced. */
        if (OMPI_SUCCESS == err && !is_reduce) {
            const int right = mod(c->me + 1, c->n), left = mod(c->me - 1, c->n);
            for (int k = 0; OMPI_SUCCESS == err && k < c->n - 1; ++k) {
                const int sc = mod(c->me + 1 - k, c->n), rc = mod(c->me - k, c->n);
                err = post(c, false, g.acc + off[rc] * c->es, cnt[rc], left);
                if (OMPI_SUCCESS == err) err = post(c, true, g.acc + off[sc] * c->es, cnt[sc], right);
                int rc2 = wait_all(c);
                if (OMPI_SUCCESS == err) err = rc2;
            }
        } else if (OMPI_SUCCESS == err) {
            if (root) {
                for (int q = 0; OMPI_SUCCESS == err && q < c->n; ++q) {
                    const int chunk = mod(q + 1, c->n);
                    if (q != c->me) err = post(c, false, g.acc + off[chunk] * c->es, cnt[chunk], q);
                }
            } else {
                const int chunk = mod(c->me + 1, c->n);
                err = post(c, true, g.acc + off[chunk] * c->es, cnt[chunk], a->root);
            }
            int rc2 = wait_all(c);
            if (OMPI_SUCCESS == err) err = rc2;
        }
    }
    gw_coll_scratch_put(&s);
    free(off);
    return err;
}

static int run_reduce_scatter(ctx_t *c, bool block)
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
        err = copy_sync(c, a->rbuf, src, mine);
        free(off);
        return err;
    }
    const size_t chunk_bytes = max_of(cnt, c->n) * c->es;
    gw_coll_dev_buf_t s;
    err = scratch(c, 3 * chunk_bytes, &s);
    if (OMPI_SUCCESS == err) {
        char *base = s.ptr;
        ring_t g = {.off = off, .cnt = cnt, .shift = -1, .src = src, .acc = NULL,
                    .slot = {base + chunk_bytes, base + 2 * chunk_bytes},
                    .rbuf = base};
        /* In place, the result overlaps the input: finish in a slot. */
        g.last = in_place ? g.slot[(c->n - 2) & 1] : (char *)a->rbuf;
        err = ring_reduce_scatter(c, &g);
        if (OMPI_SUCCESS == err && in_place) err = copy_sync(c, a->rbuf, g.last, mine);
    }
    gw_coll_scratch_put(&s);
    free(off);
    return err;
}

/* Scan and exscan: a chain from rank 0 up. Rank r > 0 receives the prefix of
 * ranks 0..r-1 segment by segment; scan writes prefix op mine into rbuf and
 * passes that on, exscan keeps the prefix as its result and passes prefix op
 * mine on. */
static int run_scan(ctx_t *c, bool exclusive)
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
        if (copying) err = copy_start(c, a->rbuf, src, count, &t);
        if (OMPI_SUCCESS == err && !last) err = post(c, true, (void *)src, count, 1);
        int rc2 = wait_all(c);
        if (OMPI_SUCCESS == err && copying) err = wait_ticket(c, t);
        return OMPI_SUCCESS == err ? rc2 : err;
    }

    /* Where the prefix arrives, and where what is passed on is written. */
    const size_t bytes = count * c->es;
    const bool need_fwd = exclusive && !last;
    gw_coll_dev_buf_t s;
    err = scratch(c, (exclusive ? (in_place ? bytes : 0) + (need_fwd ? bytes : 0) : bytes), &s);
    if (OMPI_SUCCESS != err) return err;
    char *prefix = (exclusive && !in_place) ? (char *)a->rbuf : (char *)s.ptr;
    char *fwd = exclusive ? (char *)s.ptr + (in_place ? bytes : 0) : (char *)a->rbuf;

    err = post(c, false, prefix, count, c->me - 1);
    const size_t nrecv = c->nreqs;
    uint64_t ticket = 0;
    bool queued = false;
    for (size_t j = 0, done = 0; OMPI_SUCCESS == err && j < nrecv; ++j) {
        const size_t len = count - done < c->seg_elems ? count - done : c->seg_elems;
        const size_t at = done * c->es;
        err = ompi_request_wait(&c->reqs[j], MPI_STATUS_IGNORE);
        if (OMPI_SUCCESS != err) break;
        if (!exclusive || need_fwd) {
            err = reduce_start(c, prefix + at, src + at, fwd + at, len, &ticket);
            queued = true;
        }
        /* Exscan in place: the prefix is the result; the kernel above has
         * read this segment of rbuf before the copy (same stream) lands. */
        if (OMPI_SUCCESS == err && exclusive && in_place) {
            err = copy_start(c, (char *)a->rbuf + at, prefix + at, len, &ticket);
            queued = true;
        }
        if (OMPI_SUCCESS == err && !last && queued) err = wait_ticket(c, ticket);
        if (OMPI_SUCCESS == err && !last) err = post(c, true, fwd + at, len, c->me + 1);
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
static int temps_in(ctx_t *c, const gw_coll_region_t r[GW_REGION_COUNT], gw_coll_args_t *eff,
                    gw_coll_temps_t *t)
{
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (r[i].hi > r[i].lo && !r[i].dense) {
            memset(t, 0, sizeof(*t));
            snprintf(c->why, sizeof(c->why),
                     "a buffer with gaps reached the device reduction (a datatype check is "
                     "missing); set coll_gpuwire_reduce_algorithm staged");
            return fail(c, "layout");
        }
    }
    if (0 != gw_coll_temps_in(r, c->gpu, t, c->why, sizeof(c->why))) return fail(c, "device scratch");
    /* The datatype's displacements start at lo: the pointer the ring gets is
     * moved back by lo, as the staged path's host view. */
    if (NULL != t->tmp[GW_REGION_SEND]) eff->sbuf = t->tmp[GW_REGION_SEND] - r[GW_REGION_SEND].lo;
    if (NULL != t->tmp[GW_REGION_RECV]) eff->rbuf = t->tmp[GW_REGION_RECV] - r[GW_REGION_RECV].lo;
    return OMPI_SUCCESS;
}

/* A call's context (c->a points at its eff); fails on a dispatch error. */
static int ctx_init(ctx_t *c, const gw_coll_args_t *a, gw_coll_args_t *eff,
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
        return fail(c, "dispatch");
    }
    size_t seg = mca_coll_gpuwire.reduce_segment_bytes / c->es;
    const size_t max_seg = ((size_t)1 << 30) / c->es; /* int byte counts */
    c->seg_elems = seg < 1 ? 1 : seg > max_seg ? max_seg : seg;
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Non-blocking forms: the ring as a job (the file's header)
 * ------------------------------------------------------------------------ */

/* Allreduce: RS then AG; Reduce: RS then GATHER (every rank's reduced chunk
 * to the root); Reduce_scatter(_block): RS; Scan, Exscan: CHAIN (run_scan's
 * chain, a segment sent on once its kernels are done). */
enum { RING_WAIT_TURN, RING_RS, RING_AG, RING_GATHER, RING_CHAIN, RING_DONE };

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t eff; /* the buffers the ring works on */
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_coll_temps_t t;
    ctx_t c;
    ring_t g;
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
    ctx_t *c = &j->c;
    if (0 != gw_coll_copy_done(c->gpu, j->ticket, query, reached, c->why, sizeof(c->why))) {
        return fail(c, "device stream");
    }
    return OMPI_SUCCESS;
}

/* Frees a step's requests, all complete; *step_done unless one failed. */
static int ring_job_reap(ring_job_t *j, bool *step_done)
{
    ctx_t *c = &j->c;
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
    ctx_t *c = &j->c;
    const gw_coll_args_t *a = c->a;
    const size_t count = (size_t)a->count, bytes = count * c->es;
    const bool exclusive = GW_COLL_EXSCAN == j->id, in_place = MPI_IN_PLACE == a->sbuf;
    const bool last = c->me == c->n - 1;
    j->phase = RING_CHAIN;
    j->g.src = src;
    if (0 == c->me) {
        int err = OMPI_SUCCESS;
        if (!exclusive && !in_place) {
            err = copy_start(c, a->rbuf, src, count, &j->ticket);
            j->kernels = OMPI_SUCCESS == err;
        }
        if (OMPI_SUCCESS == err && !last) err = post(c, true, (void *)src, count, 1);
        return err;
    }
    const bool need_fwd = exclusive && !last;
    const size_t need = exclusive ? (in_place ? bytes : 0) + (need_fwd ? bytes : 0) : bytes;
    int err = scratch(c, need, &j->s);
    if (OMPI_SUCCESS != err) return err;
    j->prefix = (exclusive && !in_place) ? (char *)a->rbuf : (char *)j->s.ptr;
    j->fwd = exclusive ? (char *)j->s.ptr + (in_place ? bytes : 0) : (char *)a->rbuf;
    err = post(c, false, j->prefix, count, c->me - 1);
    j->nrecv = c->nreqs;
    return err;
}

/* The chain, as far as it goes now: each segment of the prefix that has
 * landed is combined (scan: prefix op mine into rbuf; exscan: prefix op
 * mine into fwd, the prefix itself the result) and, once its kernels are
 * done, sent on to the next rank; *done once everything has. */
static int ring_job_chain(ring_job_t *j, bool query, bool *done)
{
    ctx_t *c = &j->c;
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
                err = reduce_start(c, j->prefix + at, j->g.src + at, j->fwd + at, len, &j->ticket);
                j->kernels = true;
            }
            /* Exscan in place: the prefix is the result; the kernel above
             * has read this segment of rbuf before the copy (same stream). */
            if (OMPI_SUCCESS == err && exclusive && in_place) {
                err = copy_start(c, (char *)a->rbuf + at, j->prefix + at, len, &j->ticket);
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
            err = post(c, true, j->fwd + at, len, c->me + 1);
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
    ctx_t *c = &j->c;
    const gw_coll_args_t *a = c->a;
    int err = temps_in(c, j->r, &j->eff, &j->t);
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
        even_chunks((size_t)a->count, c->n, j->off, j->cnt);
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
        return copy_sync(c, a->rbuf, src, whole ? (size_t)a->count : j->cnt[0]);
    }
    const size_t chunk_bytes = max_of(j->cnt, c->n) * c->es;
    /* Receive scratch; at a non-root of Reduce the accumulator; two slots
     * for Reduce_scatter. */
    const bool root = GW_COLL_REDUCE != j->id || c->me == a->root;
    err = scratch(c, whole ? chunk_bytes + (root ? 0 : (size_t)a->count * c->es)
                              : 3 * chunk_bytes, &j->s);
    if (OMPI_SUCCESS != err) return err;
    char *base = j->s.ptr;
    j->g = (ring_t){.off = j->off, .cnt = j->cnt, .src = src, .rbuf = base};
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
    ctx_t *c = &j->c;
    const ring_t *g = &j->g;
    const int right = mod(c->me + 1, c->n), left = mod(c->me - 1, c->n), k = j->k;
    const bool rs = RING_RS == j->phase;
    const int sc = rs ? mod(c->me - k + g->shift, c->n) : mod(c->me + 1 - k, c->n);
    const int rc = rs ? mod(c->me - k - 1 + g->shift, c->n) : mod(c->me - k, c->n);
    *step_done = false;
    if (!j->posted) {
        /* The sends read what the step before wrote (its kernels are done). */
        const char *sp = rs ? (0 == k ? g->src + g->off[sc] * c->es : ring_out(c, g, k - 1, sc))
                            : g->acc + g->off[sc] * c->es;
        char *rp = rs ? g->rbuf : g->acc + g->off[rc] * c->es;
        j->posted = true;
        j->j = j->done = 0;
        j->kernels = false;
        int err = post(c, false, rp, g->cnt[rc], left);
        j->nrecv = c->nreqs;
        if (OMPI_SUCCESS == err) err = post(c, true, (void *)sp, g->cnt[sc], right);
        if (OMPI_SUCCESS != err) return err;
    }
    /* Received (the ranks before) op mine, segment by segment as they land. */
    while (rs && j->j < j->nrecv) {
        ompi_request_t *q = c->reqs[j->j];
        if (!REQUEST_COMPLETE(q)) return OMPI_SUCCESS;
        if (MPI_SUCCESS != q->req_status.MPI_ERROR) return q->req_status.MPI_ERROR;
        const size_t len = g->cnt[rc] - j->done < c->seg_elems ? g->cnt[rc] - j->done
                                                               : c->seg_elems;
        char *out = ring_out(c, g, k, rc);
        int err = reduce_start(c, g->rbuf + j->done * c->es,
                               g->src + (g->off[rc] + j->done) * c->es, out + j->done * c->es,
                               len, &j->ticket);
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
    ctx_t *c = &j->c;
    const ring_t *g = &j->g;
    const int root = c->a->root;
    *step_done = false;
    if (!j->posted) {
        j->posted = true;
        int err = OMPI_SUCCESS;
        if (c->me == root) {
            for (int q = 0; q < c->n && OMPI_SUCCESS == err; ++q) {
                const int chunk = mod(q + 1, c->n);
                if (q != c->me) {
                    err = post(c, false, g->acc + g->off[chunk] * c->es, g->cnt[chunk], q);
                }
            }
        } else {
            const int chunk = mod(c->me + 1, c->n);
            err = post(c, true, g->acc + g->off[chunk] * c->es, g->cnt[chunk], root);
        }
        if (OMPI_SUCCESS != err) return err;
    }
    return ring_job_settle(j, false, step_done);
}

static int ring_job_poll(void *p, bool query, bool *done)
{
    ring_job_t *j = p;
    ctx_t *c = &j->c;
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
        const int err = copy_sync(c, c->a->rbuf, j->g.last, j->cnt[c->me]);
        if (OMPI_SUCCESS != err) return err;
        j->in_place_rs = false;
    }
    if (0 != gw_coll_temps_out(j->r, c->gpu, &j->t, c->why, sizeof(c->why))) {
        return fail(c, "device copy");
    }
    *done = true;
    return OMPI_SUCCESS;
}

/* Never declines: outside the FIFO of staged calls (not ordered). */
static const gw_coll_job_ops_t ring_job_ops = {ring_job_poll, ring_job_release, NULL};

static int devreduce_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                           gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    ring_job_t *j = calloc(1, sizeof(*j));
    if (NULL == j) return OMPI_ERR_OUT_OF_RESOURCE;
    j->m = m;
    memcpy(j->r, r, sizeof(j->r));
    j->id = a->id;
    j->phase = RING_WAIT_TURN;
    int err = ctx_init(&j->c, a, &j->eff, j->r, GW_TAG_RING_NB);
    /* The application's work on the default stream of every GPU the call
     * reads or writes before its initiation comes first. */
    if (OMPI_SUCCESS == err && 0 != gw_coll_wait_user_regions(r, j->c.why, sizeof(j->c.why))) {
        err = fail(&j->c, "device sync");
    }
    if (OMPI_SUCCESS != err) {
        free(j);
        return err;
    }
    j->seq = __atomic_add_fetch(&m->ring_nb_issued, 1, __ATOMIC_ACQ_REL);
    /* On failure the job is released, which passes its turn. */
    return gw_coll_nb_job(m, a, r, &ring_job_ops, j, false, request);
}

static int devreduce_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    if (NULL != request) return devreduce_start(m, a, r, request);
    gw_coll_args_t eff; /* the buffers the ring works on */
    ctx_t c;
    int err = ctx_init(&c, a, &eff, r, GW_TAG_RING);
    if (OMPI_SUCCESS != err) return err;

    /* The application's work on the default stream of every GPU the call
     * reads or writes comes first. */
    if (0 != gw_coll_wait_user_regions(r, c.why, sizeof(c.why))) return fail(&c, "device sync");
    __atomic_fetch_add(&gw_core_counters()->coll_device_calls, 1, __ATOMIC_RELAXED);
    gw_coll_temps_t t;
    err = temps_in(&c, r, &eff, &t);
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
        err = fail(&c, "device copy");
    }
    gw_coll_temps_release(&t);
    free(c.reqs);
    return err;
}

const gw_coll_algorithm_t gw_coll_devreduce = {"device", devreduce_accepts, devreduce_run};

/* ------------------------------------------------------------------------
 * MPI_Reduce_local: one kernel where both buffers are on one GPU
 * ------------------------------------------------------------------------ */

static bool local_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT])
{
    const gw_coll_region_t *in = &r[GW_REGION_SEND], *inout = &r[GW_REGION_RECV];
    int op, type;
    return GW_COLL_REDUCE_LOCAL == a->id &&
           GW_REDUCE_ALGO_STAGED != mca_coll_gpuwire.reduce_algorithm && in->on_gpu &&
           inout->on_gpu && in->gpu == inout->gpu && gw_coll_table_ids(a->op, a->dtype, &op, &type);
}

/* inoutbuf = inbuf op inoutbuf: the table's ops are commutative. */
static int local_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                     gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    (void)m;
    (void)request; /* blocking only */
    const int gpu = r[GW_REGION_RECV].gpu;
    int op = 0, type = 0;
    uint64_t ticket = 0;
    char why[256];
    (void)gw_coll_table_ids(a->op, a->dtype, &op, &type); /* true: accepts */
    if (0 != gw_coll_wait_user_regions(r, why, sizeof(why)) ||
        0 != gw_coll_reduce_start(op, type, a->sbuf, a->rbuf, a->rbuf, (size_t)a->count, gpu,
                                  &ticket, why, sizeof(why)) ||
        0 != gw_coll_copy_wait(gpu, ticket, why, sizeof(why))) {
        opal_output(0, "coll:gpuwire: reduce_local of %d elements on the GPU: %s", a->count, why);
        return OMPI_ERROR;
    }
    __atomic_fetch_add(&gw_core_counters()->coll_device_calls, 1, __ATOMIC_RELAXED);
    return OMPI_SUCCESS;
}

const gw_coll_algorithm_t gw_coll_local = {"local", local_accepts, local_run};
