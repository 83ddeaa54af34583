/*
 * The device data-movement algorithm: blocking Bcast, Allgather(v) and
 * Alltoall(v) whose buffers stay where the application put them. Every block
 * is one point-to-point message on the application's buffer and datatype,
 * all posted at once: the pml moves device memory (pml gpuwire: CUDA IPC over
 * NVLink, the copy engines at link speed, any datatype packed on the GPU), so
 * nothing is staged through host memory and nothing here touches the bytes.
 * A rank's own block of Allgather(v)/Alltoall(v) is one copy on the GPU's
 * stream where both sides are contiguous, else a message to itself (the pml
 * packs and unpacks it).
 *
 *   bcast            the root sends to every rank (one message each); to
 *                    coll_gpuwire_bcast_chain_ranks ranks or more, from
 *                    coll_gpuwire_bcast_chain_bytes: a pipelined chain (below)
 *   allgather(v)     every rank sends its block to every rank
 *   alltoall(v)      block j to rank j, from every rank
 *
 * The NVLink kernels take the small calls first (coll_gpuwire_nvlink.c);
 * this is what follows them, above coll_gpuwire_nvlink_oneshot_bytes.
 *
 * Every rank of a call must take the same algorithm. As for the device
 * reductions (coll_gpuwire_devreduce.c), accepts() decides only from what is
 * the same on every rank; a rank whose significant buffers are all host
 * memory passes through to Open MPI's algorithm instead. The two do not send
 * the same messages: a receive here checks that it got its whole block, so
 * such a program ends with a one-line error naming
 * coll_gpuwire_move_algorithm staged (where every rank runs Open MPI's
 * algorithm) rather than with wrong data; some shapes of it can hang.
 *
 * Alltoall(v) with MPI_IN_PLACE (on every rank alike, as MPI requires) stays
 * staged: a block would be overwritten while a peer still reads it.
 *
 * Non-blocking forms (Ibcast, Iallgather(v), Ialltoall(v)): initiation posts
 * every message and the local copy as above, on a tag of their own
 * (GW_TAG_MOVE_NB), and returns; a job (gw_coll_nb_job) polls the requests
 * and the copy's ticket from MPI's progress. Every rank posts the messages
 * of its calls on a communicator in initiation order, all at initiation, so
 * a pair of ranks posts a call's sends and receives in the same order and
 * they meet. Ibcast is always the root's sends to every rank: the chain
 * sends each segment on when it arrives, later than calls initiated after
 * it post theirs.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpuwire/gpu_device.h"
#include "coll_gpuwire_dispatch.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/pml/pml.h"

typedef struct {
    const gw_coll_args_t *a;
    int me, n, tag;
    int gpu;          /* the stream of a local block copy */
    uint64_t ticket;  /* of the local block copy */
    bool copying;     /* a local block copy was started */
    ompi_request_t **reqs;
    ompi_status_public_t *st;
    size_t *want; /* bytes each receive must bring; SIZE_MAX: a send */
    size_t nreqs;
    char why[256];
} move_t;

static int move_fail(move_t *c, const char *what)
{
    opal_output(0, "coll:gpuwire: device %s: %s: %s", gw_coll_name(c->a->id), what, c->why);
    return OMPI_ERROR;
}

static bool devmove_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT])
{
    (void)r;
    const unsigned moves = GW_COLL_BIT(GW_COLL_BCAST) | GW_COLL_BIT(GW_COLL_ALLGATHER) |
                           GW_COLL_BIT(GW_COLL_ALLGATHERV) | GW_COLL_BIT(GW_COLL_ALLTOALL) |
                           GW_COLL_BIT(GW_COLL_ALLTOALLV);
    if (!gw_coll_p2p_accepts(a, moves, mca_coll_gpuwire.move_algorithm)) return false;
    if ((GW_COLL_ALLTOALL == a->id || GW_COLL_ALLTOALLV == a->id) && MPI_IN_PLACE == a->sbuf)
        return false;
    return true;
}

static char *block(const void *base, struct ompi_datatype_t *dt, ptrdiff_t elems)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    return (char *)base + elems * extent;
}

/* Blocks of no bytes are not sent, on either side (the type signatures of a
 * pair match, so both see zero), as Open MPI's linear algorithms skip them. */
static size_t bytes_of(struct ompi_datatype_t *dt, int count)
{
    size_t size = 0;
    ompi_datatype_type_size(dt, &size);
    return size * (size_t)count;
}

static int post_recv(move_t *c, void *buf, int count, struct ompi_datatype_t *dt, int peer)
{
    c->want[c->nreqs] = bytes_of(dt, count);
    if (0 == c->want[c->nreqs]) return OMPI_SUCCESS;
    int rc = MCA_PML_CALL(irecv(buf, count, dt, peer, c->tag, c->a->comm,
                                &c->reqs[c->nreqs]));
    if (OMPI_SUCCESS == rc) ++c->nreqs;
    return rc;
}

static int post_send(move_t *c, const void *buf, int count, struct ompi_datatype_t *dt, int peer)
{
    if (0 == bytes_of(dt, count)) return OMPI_SUCCESS;
    c->want[c->nreqs] = SIZE_MAX;
    int rc = MCA_PML_CALL(isend((void *)buf, count, dt, peer, c->tag,
                                MCA_PML_BASE_SEND_STANDARD, c->a->comm, &c->reqs[c->nreqs]));
    if (OMPI_SUCCESS == rc) ++c->nreqs;
    return rc;
}

/* This rank's own block, scount sdt at src to rcount rdt at dst. */
static int local_block(move_t *c, void *dst, int rcount, struct ompi_datatype_t *rdt,
                       const void *src, int scount, struct ompi_datatype_t *sdt)
{
    const size_t bytes = bytes_of(rdt, rcount);
    if (0 == bytes || c->gpu < 0 || bytes != bytes_of(sdt, scount) ||
        !ompi_datatype_is_contiguous_memory_layout(rdt, rcount) ||
        !ompi_datatype_is_contiguous_memory_layout(sdt, scount)) {
        int rc = post_recv(c, dst, rcount, rdt, c->me);
        return OMPI_SUCCESS == rc ? post_send(c, src, scount, sdt, c->me) : rc;
    }
    ptrdiff_t rlb, rext, slb, sext;
    ompi_datatype_get_true_extent(rdt, &rlb, &rext);
    ompi_datatype_get_true_extent(sdt, &slb, &sext);
    if (0 != gw_coll_copy_start((char *)dst + rlb, (const char *)src + slb, bytes, c->gpu,
                                &c->ticket, c->why, sizeof(c->why))) {
        return move_fail(c, "device copy");
    }
    c->copying = true;
    return OMPI_SUCCESS;
}

/* Waits for everything posted (also after a failed post: no request may be
 * left behind) and checks that every receive brought its whole block. */
/* Whether receive i brought its whole block (a send: nothing to check). */
static int check_block(move_t *c, size_t i, const ompi_status_public_t *st)
{
    if (SIZE_MAX == c->want[i] || st->_ucount == c->want[i]) return OMPI_SUCCESS;
    snprintf(c->why, sizeof(c->why),
             "rank %d received %zu of %zu bytes from rank %d: ranks passed different memory "
             "kinds (host memory only on some, device memory on others) or different "
             "coll_gpuwire_bcast_* values; set coll_gpuwire_move_algorithm staged",
             c->me, st->_ucount, c->want[i], st->MPI_SOURCE);
    return move_fail(c, "mismatched algorithms");
}

static int finish(move_t *c, int rc)
{
    ompi_status_public_t *st = c->st;
    int wrc = c->nreqs ? ompi_request_wait_all(c->nreqs, c->reqs, st) : OMPI_SUCCESS;
    if (c->copying && 0 != gw_coll_copy_wait(c->gpu, c->ticket, c->why, sizeof(c->why)) &&
        OMPI_SUCCESS == rc) {
        rc = move_fail(c, "device copy");
    }
    if (OMPI_SUCCESS == rc && OMPI_SUCCESS != wrc) {
        snprintf(c->why, sizeof(c->why), "a message failed (%d)", wrc);
        rc = move_fail(c, "point-to-point");
    }
    for (size_t i = 0; OMPI_SUCCESS == rc && i < c->nreqs; ++i) rc = check_block(c, i, &st[i]);
    return rc;
}

/* Waits for request i, a receive, and checks that it brought its block. */
static int wait_recv(move_t *c, size_t i)
{
    ompi_status_public_t st;
    int rc = ompi_request_wait(&c->reqs[i], &st);
    if (OMPI_SUCCESS != rc) {
        snprintf(c->why, sizeof(c->why), "a message failed (%d)", rc);
        return move_fail(c, "point-to-point");
    }
    rc = check_block(c, i, &st);
    c->want[i] = SIZE_MAX; /* checked: finish() has nothing left to check */
    return rc;
}

/* Elements per segment of the chain (at least one). */
static int chain_segment(const gw_coll_args_t *a)
{
    size_t size = 0;
    ompi_datatype_type_size(a->dtype, &size);
    size_t per = size ? mca_coll_gpuwire.bcast_segment_bytes / size : (size_t)a->count;
    if (per < 1) per = 1;
    return per > (size_t)a->count ? a->count : (int)per;
}

static int chain_segments(const gw_coll_args_t *a)
{
    const int seg = chain_segment(a);
    return (a->count + seg - 1) / seg;
}

/* Whether a Bcast runs as the chain: decided from what is the same on every
 * rank (the type signature's bytes, the parameters). */
static bool bcast_chain(const move_t *c)
{
    const gw_coll_args_t *a = c->a;
    /* The selection table's choice first: chain, or not (device). */
    if (GW_SEL_CHAIN == a->sel || GW_SEL_DEVICE == a->sel) {
        return GW_SEL_CHAIN == a->sel && !a->nonblocking && c->n > 2 &&
               chain_segment(a) < a->count;
    }
    return !a->nonblocking && mca_coll_gpuwire.bcast_chain_ranks > 0 &&
           c->n >= mca_coll_gpuwire.bcast_chain_ranks && c->n > 2 &&
           bytes_of(a->dtype, a->count) >= mca_coll_gpuwire.bcast_chain_bytes &&
           chain_segment(a) < a->count;
}

/* The chain root -> root+1 -> ... -> root-1 (ranks in communicator order
 * from the root): every segment is received from the previous rank into the
 * application's buffer and sent on to the next one as soon as it is there,
 * so every rank receives and sends the message once and the segments
 * overlap along the chain. Segments from one rank with one tag match in
 * order (MPI's non-overtaking rule). */
static int run_bcast_chain(move_t *c)
{
    const gw_coll_args_t *a = c->a;
    const int v = (c->me - a->root + c->n) % c->n; /* place in the chain */
    const int prev = (c->me - 1 + c->n) % c->n, next = (c->me + 1) % c->n;
    const int seg = chain_segment(a), nseg = chain_segments(a);
    int rc = OMPI_SUCCESS;
    const size_t first = c->nreqs;
    if (v > 0) {
        for (int s = 0; s < nseg && OMPI_SUCCESS == rc; ++s) {
            const int cnt = s == nseg - 1 ? a->count - s * seg : seg;
            rc = post_recv(c, block(a->rbuf, a->dtype, (ptrdiff_t)s * seg), cnt, a->dtype, prev);
        }
    }
    for (int s = 0; s < nseg && OMPI_SUCCESS == rc; ++s) {
        const int cnt = s == nseg - 1 ? a->count - s * seg : seg;
        if (v > 0) rc = wait_recv(c, first + (size_t)s);
        if (OMPI_SUCCESS == rc && v < c->n - 1) {
            rc = post_send(c, block(a->rbuf, a->dtype, (ptrdiff_t)s * seg), cnt, a->dtype, next);
        }
    }
    return rc;
}

static int run_bcast(move_t *c)
{
    const gw_coll_args_t *a = c->a;
    if (bcast_chain(c)) return run_bcast_chain(c);
    if (c->me != a->root) return post_recv(c, a->rbuf, a->count, a->dtype, a->root);
    int rc = OMPI_SUCCESS;
    for (int k = 1; k < c->n && OMPI_SUCCESS == rc; ++k) {
        rc = post_send(c, a->rbuf, a->count, a->dtype, (a->root + k) % c->n);
    }
    return rc;
}

/* Receives first (a message finds its receive posted), then sends, both
 * starting with the next rank so that not every rank sends to rank 0 first. */
static int run_allgather(move_t *c, bool v)
{
    const gw_coll_args_t *a = c->a;
    const bool in_place = MPI_IN_PLACE == a->sbuf;
    int rc = OMPI_SUCCESS;
    for (int k = 1; k < c->n && OMPI_SUCCESS == rc; ++k) {
        const int j = (c->me + k) % c->n;
        rc = post_recv(c, block(a->rbuf, a->rdtype, v ? a->rdispls[j] : (ptrdiff_t)j * a->rcount),
                       v ? a->rcounts[j] : a->rcount, a->rdtype, j);
    }
    const void *sbuf = a->sbuf;
    int scount = a->scount;
    struct ompi_datatype_t *sdt = a->sdtype;
    if (in_place) { /* my block of the receive buffer */
        sbuf = block(a->rbuf, a->rdtype, v ? a->rdispls[c->me] : (ptrdiff_t)c->me * a->rcount);
        scount = v ? a->rcounts[c->me] : a->rcount;
        sdt = a->rdtype;
    }
    for (int k = 1; k < c->n && OMPI_SUCCESS == rc; ++k) {
        rc = post_send(c, sbuf, scount, sdt, (c->me + k) % c->n);
    }
    if (OMPI_SUCCESS == rc && !in_place) {
        const int j = c->me;
        rc = local_block(c, block(a->rbuf, a->rdtype, v ? a->rdispls[j] : (ptrdiff_t)j * a->rcount),
                         v ? a->rcounts[j] : a->rcount, a->rdtype, sbuf, scount, sdt);
    }
    return rc;
}

static int run_alltoall(move_t *c, bool v)
{
    const gw_coll_args_t *a = c->a;
    int rc = OMPI_SUCCESS;
#define RBLOCK(j) block(a->rbuf, a->rdtype, v ? a->rdispls[j] : (ptrdiff_t)(j) * a->rcount), \
                  v ? a->rcounts[j] : a->rcount, a->rdtype
#define SBLOCK(j) block(a->sbuf, a->sdtype, v ? a->sdispls[j] : (ptrdiff_t)(j) * a->scount), \
                  v ? a->scounts[j] : a->scount, a->sdtype
    for (int k = 1; k < c->n && OMPI_SUCCESS == rc; ++k) {
        const int j = (c->me + k) % c->n;
        rc = post_recv(c, RBLOCK(j), j);
    }
    for (int k = 1; k < c->n && OMPI_SUCCESS == rc; ++k) {
        const int j = (c->me + k) % c->n;
        rc = post_send(c, SBLOCK(j), j);
    }
    if (OMPI_SUCCESS == rc) rc = local_block(c, RBLOCK(c->me), SBLOCK(c->me));
#undef RBLOCK
#undef SBLOCK
    return rc;
}

/* A non-blocking call: its messages and local copy, posted at initiation. */
typedef struct {
    gw_coll_args_t args; /* c.a points here */
    move_t c;
} move_job_t;

static void move_job_release(void *p)
{
    move_job_t *j = p;
    for (size_t i = 0; i < j->c.nreqs; ++i) {
        if (MPI_REQUEST_NULL != j->c.reqs[i]) ompi_request_free(&j->c.reqs[i]);
    }
    free(j->c.want);
    free(j->c.st);
    free(j->c.reqs);
    free(j);
}

static int move_job_poll(void *p, bool query, bool *done)
{
    move_job_t *j = p;
    move_t *c = &j->c;
    *done = false;
    for (size_t i = 0; i < c->nreqs; ++i) {
        if (!REQUEST_COMPLETE(c->reqs[i])) return OMPI_SUCCESS;
    }
    if (c->copying) {
        bool d = false;
        if (0 != gw_coll_copy_done(c->gpu, c->ticket, query, &d, c->why, sizeof(c->why))) {
            c->copying = false;
            return move_fail(c, "device copy");
        }
        if (!d) return OMPI_SUCCESS;
        c->copying = false;
    }
    int rc = OMPI_SUCCESS;
    for (size_t i = 0; i < c->nreqs; ++i) {
        c->st[i] = c->reqs[i]->req_status;
        if (OMPI_SUCCESS == rc && MPI_SUCCESS != c->st[i].MPI_ERROR) {
            snprintf(c->why, sizeof(c->why), "a message failed (%d)", c->st[i].MPI_ERROR);
            rc = move_fail(c, "point-to-point");
        }
        ompi_request_free(&c->reqs[i]);
    }
    for (size_t i = 0; OMPI_SUCCESS == rc && i < c->nreqs; ++i) rc = check_block(c, i, &c->st[i]);
    c->nreqs = 0;
    *done = OMPI_SUCCESS == rc;
    return rc;
}

/* Never declines: outside the FIFO of staged calls (not ordered). */
static const gw_coll_job_ops_t move_job_ops = {move_job_poll, move_job_release, NULL};

static int devmove_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    move_job_t *j = NULL;
    if (NULL != request) {
        j = calloc(1, sizeof(*j));
        if (NULL == j) return OMPI_ERR_OUT_OF_RESOURCE;
        j->args = *a;
        a = &j->args;
    }
    move_t c = {.a = a, .me = ompi_comm_rank(a->comm), .n = ompi_comm_size(a->comm),
                .tag = j ? GW_TAG_MOVE_NB : gw_coll_tag(a->id), .gpu = gw_coll_regions_gpu(r)};
    if (0 != gw_coll_wait_user_regions(r, c.why, sizeof(c.why))) {
        const int rc = move_fail(&c, "device sync");
        free(j);
        return rc;
    }
    size_t cap = 2 * (size_t)c.n;
    if (GW_COLL_BCAST == a->id && bcast_chain(&c)) {
        cap = 2 * (size_t)chain_segments(a); /* a receive and a send per segment */
    }
    c.reqs = malloc(cap * sizeof(*c.reqs));
    c.st = malloc(cap * sizeof(*c.st));
    c.want = malloc(cap * sizeof(*c.want));
    if (NULL == c.reqs || NULL == c.st || NULL == c.want) {
        free(c.reqs);
        free(c.st);
        free(c.want);
        free(j);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    __atomic_fetch_add(j ? &mca_coll_gpuwire.device_nb_calls
                         : &gw_core_counters()->coll_device_calls,
                       1, __ATOMIC_RELAXED);
    int rc;
    switch (a->id) {
    case GW_COLL_BCAST: rc = run_bcast(&c); break;
    case GW_COLL_ALLGATHER: rc = run_allgather(&c, false); break;
    case GW_COLL_ALLGATHERV: rc = run_allgather(&c, true); break;
    case GW_COLL_ALLTOALL: rc = run_alltoall(&c, false); break;
    case GW_COLL_ALLTOALLV: rc = run_alltoall(&c, true); break;
    default: rc = OMPI_ERR_NOT_SUPPORTED; break;
    }
    if (NULL != j && OMPI_SUCCESS == rc) {
        j->c = c;
        return gw_coll_nb_job(m, a, r, &move_job_ops, j, false, request); /* j is the request's */
    }
    rc = finish(&c, rc); /* after a failed post: waits for what was posted */
    free(j);
    free(c.want);
    free(c.st);
    free(c.reqs);
    return rc;
}

const gw_coll_algorithm_t gw_coll_devmove = {"device-move", devmove_accepts, devmove_run};
