/*
 * Which bytes of which buffer each collective may read or write on this
 * rank: MPI's rules on significant arguments and MPI_IN_PLACE, written down
 * once. Everything that stages or classifies buffers follows this table.
 *
 * A region spans the datatype's true extent stepped by count * extent (and
 * by the displacements of the v/w forms); bytes in the gaps of a derived
 * datatype are inside the span. A receive region that has gaps is read
 * before the call as well (GW_STAGE_IN), so writing the span back after the
 * call leaves the gap bytes as they were.
 */
#include <string.h>

#include "coll_gpuwire_dispatch.h"
#include "ompi/datatype/ompi_datatype.h"

typedef struct {
    bool any;
    bool contiguous;
    ptrdiff_t lo, hi;
    size_t covered; /* bytes the described elements occupy, summed over blocks */
} span_t;

/* Adds count elements of dt starting disp bytes after the buffer pointer. */
static void span_add(span_t *s, struct ompi_datatype_t *dt, int count, ptrdiff_t disp)
{
    size_t size = 0;
    ptrdiff_t lb, extent, true_lb, true_extent;
    if (count <= 0) return;
    ompi_datatype_type_size(dt, &size);
    if (0 == size) return;
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
    const ptrdiff_t last = (ptrdiff_t)(count - 1) * extent; /* extent may be negative */
    const ptrdiff_t lo = disp + true_lb + (last < 0 ? last : 0);
    const ptrdiff_t hi = disp + true_lb + true_extent + (last > 0 ? last : 0);
    if (!s->any) {
        s->any = true;
        s->contiguous = true;
        s->lo = lo;
        s->hi = hi;
    } else {
        s->lo = lo < s->lo ? lo : s->lo;
        s->hi = hi > s->hi ? hi : s->hi;
    }
    s->covered += size * (size_t)count;
    if (!ompi_datatype_is_contiguous_memory_layout(dt, count)) s->contiguous = false;
}

/* Blocks i of a v-form: counts[i] elements at displs[i] * extent of dt. */
static void span_add_v(span_t *s, struct ompi_datatype_t *dt, const int *counts,
                       const int *displs, int n)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    for (int i = 0; i < n; ++i) span_add(s, dt, counts[i], (ptrdiff_t)displs[i] * extent);
}

/* Blocks i of a w-form: counts[i] elements of dts[i] at displs[i] bytes. */
static void span_add_w(span_t *s, struct ompi_datatype_t *const *dts, const int *counts,
                       const int *displs, int n)
{
    for (int i = 0; i < n; ++i) span_add(s, dts[i], counts[i], (ptrdiff_t)displs[i]);
}

static void set_region(gw_coll_region_t *r, const void *user, const span_t *s, unsigned flags)
{
    if (!s->any || s->hi <= s->lo) return; /* stays empty */
    r->user = user;
    r->lo = s->lo;
    r->hi = s->hi;
    r->flags = flags;
    /* Receive blocks never overlap (MPI forbids it), so covering the whole
     * span means there is no gap. */
    r->dense = s->contiguous && s->covered == (size_t)(s->hi - s->lo);
}

void gw_coll_regions(const gw_coll_args_t *a, gw_coll_region_t r[GW_REGION_COUNT])
{
    memset(r, 0, sizeof(gw_coll_region_t) * GW_REGION_COUNT);
    gw_coll_region_t *sr = &r[GW_REGION_SEND], *rr = &r[GW_REGION_RECV];
    const int n = ompi_comm_size(a->comm);
    const int me = ompi_comm_rank(a->comm);
    const bool in_place = MPI_IN_PLACE == a->sbuf;
    const bool is_root = a->root == me;
    /* With MPI_IN_PLACE the receive buffer also holds the input. */
    const unsigned recv_flags = in_place ? GW_STAGE_IN | GW_STAGE_OUT : GW_STAGE_OUT;
    span_t s = {0}, t = {0};

    switch (a->id) {
    case GW_COLL_ALLREDUCE:
    case GW_COLL_SCAN:
        if (!in_place) span_add(&s, a->dtype, a->count, 0);
        span_add(&t, a->dtype, a->count, 0);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, recv_flags);
        break;
    case GW_COLL_EXSCAN:
        /* Rank 0's receive buffer is undefined after the call: it is input
         * with MPI_IN_PLACE, otherwise host scratch, and never written back. */
        if (!in_place) span_add(&s, a->dtype, a->count, 0);
        span_add(&t, a->dtype, a->count, 0);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        if (0 == me) {
            set_region(rr, a->rbuf, &t, in_place ? GW_STAGE_IN : 0);
        } else {
            set_region(rr, a->rbuf, &t, recv_flags);
        }
        break;
    case GW_COLL_REDUCE:
        /* On an inter-communicator the receiving root (MPI_ROOT) has a
         * receive buffer only, the rest of its group (MPI_PROC_NULL) none,
         * the other group a send buffer only. */
        if (OMPI_COMM_IS_INTER(a->comm)) {
            if (MPI_ROOT == a->root) span_add(&t, a->dtype, a->count, 0);
            if (MPI_ROOT != a->root && MPI_PROC_NULL != a->root) {
                span_add(&s, a->dtype, a->count, 0);
            }
            set_region(sr, a->sbuf, &s, GW_STAGE_IN);
            set_region(rr, a->rbuf, &t, GW_STAGE_OUT);
            break;
        }
        /* MPI_IN_PLACE is valid at the root only; the receive buffer is
         * significant at the root only. */
        if (is_root) {
            if (!in_place) span_add(&s, a->dtype, a->count, 0);
            span_add(&t, a->dtype, a->count, 0);
            set_region(rr, a->rbuf, &t, recv_flags);
        } else {
            span_add(&s, a->dtype, a->count, 0);
        }
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        break;
    case GW_COLL_BCAST:
        span_add(&t, a->dtype, a->count, 0);
        set_region(rr, a->rbuf, &t, is_root ? GW_STAGE_IN : GW_STAGE_OUT);
        break;
    case GW_COLL_REDUCE_SCATTER:
    case GW_COLL_REDUCE_SCATTER_BLOCK: {
        int mine = GW_COLL_REDUCE_SCATTER == a->id ? a->rcounts[me] : a->rcount;
        int total = 0;
        if (GW_COLL_REDUCE_SCATTER == a->id) {
            for (int i = 0; i < n; ++i) total += a->rcounts[i];
        } else {
            total = n * a->rcount;
        }
        if (in_place) {
            /* Input in the whole receive buffer, result in its first part. */
            span_add(&t, a->dtype, total, 0);
        } else {
            span_add(&s, a->dtype, total, 0);
            span_add(&t, a->dtype, mine, 0);
        }
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, recv_flags);
        break;
    }
    case GW_COLL_ALLGATHER:
        if (!in_place) span_add(&s, a->sdtype, a->scount, 0);
        span_add(&t, a->rdtype, n * a->rcount, 0);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, recv_flags);
        break;
    case GW_COLL_ALLGATHERV:
        if (!in_place) span_add(&s, a->sdtype, a->scount, 0);
        span_add_v(&t, a->rdtype, a->rcounts, a->rdispls, n);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, recv_flags);
        break;
    case GW_COLL_ALLTOALL:
        if (!in_place) span_add(&s, a->sdtype, n * a->scount, 0);
        span_add(&t, a->rdtype, n * a->rcount, 0);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, recv_flags);
        break;
    case GW_COLL_ALLTOALLV:
        if (!in_place) span_add_v(&s, a->sdtype, a->scounts, a->sdispls, n);
        span_add_v(&t, a->rdtype, a->rcounts, a->rdispls, n);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, recv_flags);
        break;
    case GW_COLL_ALLTOALLW:
        if (!in_place) span_add_w(&s, a->sdtypes, a->scounts, a->sdispls, n);
        span_add_w(&t, a->rdtypes, a->rcounts, a->rdispls, n);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, recv_flags);
        break;
    case GW_COLL_GATHER:
    case GW_COLL_GATHERV:
        /* The send side is ignored at a root that passes MPI_IN_PLACE; the
         * receive side is significant at the root only. */
        if (!(is_root && in_place)) span_add(&s, a->sdtype, a->scount, 0);
        if (is_root) {
            if (GW_COLL_GATHER == a->id) {
                span_add(&t, a->rdtype, n * a->rcount, 0);
            } else {
                span_add_v(&t, a->rdtype, a->rcounts, a->rdispls, n);
            }
        }
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, recv_flags);
        break;
    case GW_COLL_SCATTER:
    case GW_COLL_SCATTERV:
        /* The send side is significant at the root only; a root that passes
         * MPI_IN_PLACE as receive buffer receives nothing. */
        if (is_root) {
            if (GW_COLL_SCATTER == a->id) {
                span_add(&s, a->sdtype, n * a->scount, 0);
            } else {
                span_add_v(&s, a->sdtype, a->scounts, a->sdispls, n);
            }
        }
        if (MPI_IN_PLACE != a->rbuf) span_add(&t, a->rdtype, a->rcount, 0);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, GW_STAGE_OUT);
        break;
    case GW_COLL_REDUCE_LOCAL:
        /* The input, and the buffer read and written. */
        span_add(&s, a->dtype, a->count, 0);
        span_add(&t, a->dtype, a->count, 0);
        set_region(sr, a->sbuf, &s, GW_STAGE_IN);
        set_region(rr, a->rbuf, &t, GW_STAGE_IN | GW_STAGE_OUT);
        break;
    case GW_COLL_BARRIER:
    case GW_COLL_COUNT:
        break;
    }
}

const char *gw_coll_name(gw_coll_id_t id)
{
    static const char *const names[GW_COLL_COUNT] = {
        [GW_COLL_ALLGATHER] = "allgather",
        [GW_COLL_ALLGATHERV] = "allgatherv",
        [GW_COLL_ALLREDUCE] = "allreduce",
        [GW_COLL_ALLTOALL] = "alltoall",
        [GW_COLL_ALLTOALLV] = "alltoallv",
        [GW_COLL_ALLTOALLW] = "alltoallw",
        [GW_COLL_BCAST] = "bcast",
        [GW_COLL_EXSCAN] = "exscan",
        [GW_COLL_GATHER] = "gather",
        [GW_COLL_GATHERV] = "gatherv",
        [GW_COLL_REDUCE] = "reduce",
        [GW_COLL_REDUCE_SCATTER] = "reduce_scatter",
        [GW_COLL_REDUCE_SCATTER_BLOCK] = "reduce_scatter_block",
        [GW_COLL_SCAN] = "scan",
        [GW_COLL_SCATTER] = "scatter",
        [GW_COLL_SCATTERV] = "scatterv",
        [GW_COLL_BARRIER] = "barrier",
        [GW_COLL_REDUCE_LOCAL] = "reduce_local",
    };
    return id < GW_COLL_COUNT ? names[id] : "?";
}

int gw_coll_regions_gpu(const gw_coll_region_t r[GW_REGION_COUNT])
{
    const gw_coll_region_t *rr = &r[GW_REGION_RECV], *sr = &r[GW_REGION_SEND];
    if (rr->hi > rr->lo && rr->on_gpu) return rr->gpu;
    if (sr->hi > sr->lo && sr->on_gpu) return sr->gpu;
    return -1;
}
