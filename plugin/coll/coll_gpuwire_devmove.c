/*
 * The device data-movement algorithm: Bcast, Allgather(v) and Alltoall(v)
 * whose buffers stay where the application put them. The algorithms are the
 * collective engine's (gpuwire/coll_move.h: who posts what, in which order,
 * the chain, the own block's copy); this file decides whether they run the
 * call, describes it to them in blocks of bytes, and gives them a transport
 * in the call's datatypes (gw_coll_transport_init_typed): every block is one
 * message on the application's buffer and datatype, as before the engine
 * existed, and the pml moves device memory (pml gpuwire: CUDA IPC over
 * NVLink, any datatype packed on the GPU). The own block is one copy on the
 * GPU's stream where both sides are contiguous, else a message to itself.
 * Bcast runs as the chain to coll_gpuwire_bcast_chain_ranks ranks or more,
 * from coll_gpuwire_bcast_chain_bytes (or as the selection table says).
 * The NVLink kernels take the small calls first (coll_gpuwire_nvlink.c).
 *
 * Every rank of a call must take the same algorithm. As for the device
 * reductions (coll_gpuwire_devreduce.c), accepts() decides only from what is
 * the same on every rank; a rank whose significant buffers are all host
 * memory passes through to Open MPI's algorithm instead. The two do not send
 * the same messages: a receive here checks that it got its whole block, so
 * such a program ends with a one-line error naming
 * coll_gpuwire_move_algorithm staged rather than with wrong data; some
 * shapes of it can hang. Alltoall(v) with MPI_IN_PLACE stays staged: a block
 * would be overwritten while a peer still reads it.
 *
 * Non-blocking forms post everything at initiation, on a tag of their own
 * (GW_TAG_MOVE_NB), so calls on a communicator meet in initiation order; a
 * job (gw_coll_nb_job) polls the engine's from MPI's progress. Ibcast never
 * chains (its segments would go out after later calls' messages).
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpuwire/coll_move.h"
#include "coll_gpuwire_dispatch.h"
#include "coll_gpuwire_transport.h"
#include "ompi/datatype/ompi_datatype.h"

/* One call, blocking (on the stack) or not (the request's job): the
 * engine's transport in the call's datatypes, and its job. */
typedef struct {
    gw_ce_transport_t t;
    gw_coll_typed_tp_t tp;
    gw_ce_move_job_t *job;
    gw_coll_id_t id;
    int me;
} move_job_t;

static int move_fail(const move_job_t *j, int rc, const char *why)
{
    if (j->tp.shorted) {
        opal_output(0,
                    "coll:gpuwire: device %s: mismatched algorithms: rank %d received %zu of "
                    "%zu bytes from rank %d: ranks passed different memory kinds (host memory "
                    "only on some, device memory on others) or different coll_gpuwire_bcast_* "
                    "values; set coll_gpuwire_move_algorithm staged",
                    gw_coll_name(j->id), j->me, j->tp.short_got, j->tp.short_want, j->tp.short_src);
        return OMPI_ERROR;
    }
    opal_output(0, "coll:gpuwire: device %s: %s", gw_coll_name(j->id), why);
    return gw_coll_ce_to_ompi(rc);
}

static bool devmove_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                            gw_coll_note_t *note)
{
    (void)note;
    (void)r;
    const unsigned moves = GW_COLL_BIT(GW_COLL_BCAST) | GW_COLL_BIT(GW_COLL_ALLGATHER) |
                           GW_COLL_BIT(GW_COLL_ALLGATHERV) | GW_COLL_BIT(GW_COLL_ALLTOALL) |
                           GW_COLL_BIT(GW_COLL_ALLTOALLV);
    if (!gw_coll_p2p_accepts(a, moves, mca_coll_gpuwire.move_algorithm)) return false;
    if ((GW_COLL_ALLTOALL == a->id || GW_COLL_ALLTOALLV == a->id) && MPI_IN_PLACE == a->sbuf)
        return false;
    return true;
}

static size_t type_size(struct ompi_datatype_t *dt)
{
    size_t size = 0;
    ompi_datatype_type_size(dt, &size);
    return size;
}

static ptrdiff_t type_extent(struct ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    return extent;
}

/* n blocks of dt: counts[j] at displs[j] (v forms), else count at j * count. */
static void fill(gw_ce_block_t *b, int n, const int *counts, const int *displs, int count,
                 struct ompi_datatype_t *dt)
{
    const ptrdiff_t extent = type_extent(dt);
    const size_t size = type_size(dt);
    for (int j = 0; j < n; ++j) {
        b[j].offset = (counts ? (ptrdiff_t)displs[j] : (ptrdiff_t)j * count) * extent;
        b[j].bytes = size * (size_t)(counts ? counts[j] : count);
    }
}

/* The own block is one copy on the GPU where both sides are contiguous and
 * of one size, else a message to itself (the pml packs and unpacks it). */
static void own_block(gw_ce_move_t *m, int me, int gpu, int rcount, struct ompi_datatype_t *rdt,
                      int scount, struct ompi_datatype_t *sdt)
{
    const gw_ce_block_t *rb = &m->rblocks[me],
                        *sb = &m->sblocks[GW_CE_MOVE_ALLTOALL == m->kind ? me : 0];
    m->local = GW_CE_LOCAL_MESSAGE;
    if (0 == rb->bytes || gpu < 0 || rb->bytes != sb->bytes ||
        !ompi_datatype_is_contiguous_memory_layout(rdt, rcount) ||
        !ompi_datatype_is_contiguous_memory_layout(sdt, scount)) {
        return;
    }
    ptrdiff_t rlb, rext, slb, sext;
    ompi_datatype_get_true_extent(rdt, &rlb, &rext);
    ompi_datatype_get_true_extent(sdt, &slb, &sext);
    m->local = GW_CE_LOCAL_COPY;
    m->gpu = gpu;
    m->copy_dst_shift = rlb;
    m->copy_src_shift = slb;
}

/* Elements per segment of the chain (at least one). */
static int chain_segment(const gw_coll_args_t *a)
{
    const size_t size = type_size(a->dtype);
    size_t per = size ? mca_coll_gpuwire.bcast_segment_bytes / size : (size_t)a->count;
    if (per < 1) per = 1;
    return per > (size_t)a->count ? a->count : (int)per;
}

/* Whether a Bcast runs as the chain: decided from what is the same on every
 * rank (the type signature's bytes, the parameters). */
static bool bcast_chain(const gw_coll_args_t *a, int n)
{
    /* The selection table's choice first: chain, or not (device). */
    if (GW_SEL_CHAIN == a->sel || GW_SEL_DEVICE == a->sel) {
        return GW_SEL_CHAIN == a->sel && !a->nonblocking && n > 2 && chain_segment(a) < a->count;
    }
    return !a->nonblocking && mca_coll_gpuwire.bcast_chain_ranks > 0 &&
           n >= mca_coll_gpuwire.bcast_chain_ranks && n > 2 &&
           type_size(a->dtype) * (size_t)a->count >= mca_coll_gpuwire.bcast_chain_bytes &&
           chain_segment(a) < a->count;
}

/* The call in the engine's terms; blocks: 2 x size of them, the caller's
 * (allgather, alltoall). Returns the datatypes of the sends and receives. */
static void describe(const gw_coll_args_t *a, int me, int n, int gpu, bool nb,
                     gw_ce_block_t *blocks, gw_ce_move_t *m, struct ompi_datatype_t **sdt,
                     struct ompi_datatype_t **rdt)
{
    *m = (gw_ce_move_t){.tag = nb ? GW_TAG_MOVE_NB : gw_coll_tag(a->id), .gpu = gpu};
    if (GW_COLL_BCAST == a->id) {
        m->kind = GW_CE_MOVE_BCAST;
        m->root = a->root;
        m->buf = a->rbuf;
        m->elems = (size_t)a->count;
        m->elem_bytes = type_size(a->dtype);
        m->elem_stride = type_extent(a->dtype);
        m->segment_elems = bcast_chain(a, n) ? (size_t)chain_segment(a) : 0;
        *sdt = *rdt = a->dtype;
        return;
    }
    const bool v = GW_COLL_ALLGATHERV == a->id || GW_COLL_ALLTOALLV == a->id;
    const bool all = GW_COLL_ALLTOALL == a->id || GW_COLL_ALLTOALLV == a->id;
    gw_ce_block_t *sb = blocks, *rb = blocks + n;
    m->kind = all ? GW_CE_MOVE_ALLTOALL : GW_CE_MOVE_ALLGATHER;
    m->rbuf = a->rbuf;
    m->rblocks = rb;
    m->sblocks = sb;
    fill(rb, n, v ? a->rcounts : NULL, a->rdispls, a->rcount, a->rdtype);
    *rdt = a->rdtype;
    if (!all && MPI_IN_PLACE == a->sbuf) { /* my block of the receive buffer */
        m->sbuf = a->rbuf;
        sb[0] = rb[me];
        m->local = GW_CE_LOCAL_NONE;
        *sdt = a->rdtype;
        return;
    }
    m->sbuf = a->sbuf;
    *sdt = a->sdtype;
    fill(sb, all ? n : 1, all && v ? a->scounts : NULL, a->sdispls, a->scount, a->sdtype);
    own_block(m, me, gpu, v ? a->rcounts[me] : a->rcount, a->rdtype,
              all && v ? a->scounts[me] : a->scount, a->sdtype);
}

static int move_job_poll(void *p, bool query, bool *done)
{
    move_job_t *j = p;
    char why[256];
    *done = false;
    const int rc = gw_ce_move_poll(j->job, query, done, why, sizeof(why));
    return GW_CE_OK == rc ? OMPI_SUCCESS : move_fail(j, rc, why);
}

static void move_job_release(void *p)
{
    move_job_t *j = p;
    if (NULL != j->job) gw_ce_move_free(j->job);
    free(j);
}

/* Never declines: outside the FIFO of staged calls (not ordered). */
static const gw_coll_job_ops_t move_job_ops = {move_job_poll, move_job_release, NULL};

static int devmove_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       gw_coll_region_t r[GW_REGION_COUNT], gw_coll_note_t *note,
                       ompi_request_t **request)
{
    (void)note;
    move_job_t blocking = {.id = a->id, .me = ompi_comm_rank(a->comm)};
    move_job_t *j = &blocking;
    char why[256];
    if (0 != gw_coll_wait_user_regions(r, why, sizeof(why))) {
        opal_output(0, "coll:gpuwire: device %s: device sync: %s", gw_coll_name(a->id), why);
        return OMPI_ERROR;
    }
    const int n = ompi_comm_size(a->comm);
    gw_ce_block_t *blocks = malloc(2 * (size_t)n * sizeof(*blocks));
    if (NULL != request && NULL != blocks) {
        j = calloc(1, sizeof(*j));
        if (NULL != j) *j = blocking;
    }
    if (NULL == blocks || NULL == j) {
        free(blocks);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    gw_ce_move_t mv;
    struct ompi_datatype_t *sdt, *rdt;
    describe(a, j->me, n, gw_coll_regions_gpu(r), NULL != request, blocks, &mv, &sdt, &rdt);
    gw_coll_transport_init_typed(&j->t, &j->tp, a->comm, sdt, rdt);
    __atomic_fetch_add(request ? &mca_coll_gpuwire.device_nb_calls
                               : &gw_core_counters()->coll_device_calls,
                       1, __ATOMIC_RELAXED);
    int rc = request ? gw_ce_move_start(&j->t, &mv, &j->job, why, sizeof(why))
                     : gw_ce_move_run(&j->t, &mv, why, sizeof(why));
    free(blocks);
    if (GW_CE_OK != rc) {
        rc = move_fail(j, rc, why);
        if (j != &blocking) free(j);
        return rc;
    }
    /* j is the request's from here */
    return request ? gw_coll_nb_job(m, a, r, &move_job_ops, j, false, request) : OMPI_SUCCESS;
}

const gw_coll_algorithm_t gw_coll_devmove = {"device-move", devmove_accepts, devmove_run};
