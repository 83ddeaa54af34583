/*
 * The regions of a collective call (gpuwire/coll_regions.h): MPI's rules on
 * significant arguments and MPI_IN_PLACE, over the layouts the caller
 * answers for its types.
 */
#include "gpuwire/coll_regions.h"

#include <cstring>

namespace {

struct Span {
    bool any = false;
    bool contiguous = false;
    ptrdiff_t lo = 0, hi = 0;
    size_t covered = 0; /* bytes the described elements occupy, summed over blocks */

    /* Adds count elements of a type laid out as l, starting disp bytes after
     * the buffer pointer. */
    void add(const gw_ce_type_layout_t &l, int count, ptrdiff_t disp)
    {
        if (count <= 0 || 0 == l.size) return;
        const ptrdiff_t last = static_cast<ptrdiff_t>(count - 1) * l.extent; /* may be negative */
        const ptrdiff_t first = disp + l.true_lb + (last < 0 ? last : 0);
        const ptrdiff_t end = disp + l.true_lb + l.true_extent + (last > 0 ? last : 0);
        if (!any) {
            any = true;
            contiguous = true;
            lo = first;
            hi = end;
        } else {
            lo = first < lo ? first : lo;
            hi = end > hi ? end : hi;
        }
        covered += l.size * static_cast<size_t>(count);
        if (!(1 == count ? l.contiguous : l.contiguous_run)) contiguous = false;
    }
};

/* Builds the spans of one call: the layouts asked for as the call needs them. */
class Spans {
public:
    explicit Spans(const gw_ce_regions_call_t &c) : c_(c) {}

    /* count elements of type at the buffer pointer. */
    void add(Span &s, const void *type, int count) const
    {
        if (count <= 0) return;
        s.add(layout(type), count, 0);
    }
    /* Blocks i of a v-form: counts[i] elements at displs[i] * extent of type. */
    void add_v(Span &s, const void *type, const int *counts, const int *displs) const
    {
        const gw_ce_type_layout_t l = layout(type);
        for (int i = 0; i < c_.size; ++i) {
            s.add(l, counts[i], static_cast<ptrdiff_t>(displs[i]) * l.extent);
        }
    }
    /* Blocks i of a w-form: counts[i] elements of types[i] at displs[i] bytes. */
    void add_w(Span &s, const void *const *types, const int *counts, const int *displs) const
    {
        for (int i = 0; i < c_.size; ++i) {
            if (counts[i] <= 0) continue;
            s.add(layout(types[i]), counts[i], static_cast<ptrdiff_t>(displs[i]));
        }
    }

private:
    gw_ce_type_layout_t layout(const void *type) const
    {
        gw_ce_type_layout_t l{};
        c_.layout(type, &l);
        return l;
    }
    const gw_ce_regions_call_t &c_;
};

void set_region(gw_ce_region_t *r, const void *user, const Span &s, unsigned flags)
{
    if (!s.any || s.hi <= s.lo) return; /* stays empty */
    r->user = user;
    r->lo = s.lo;
    r->hi = s.hi;
    r->flags = flags;
    /* Receive blocks never overlap (MPI forbids it), so covering the whole
     * span means there is no gap. */
    r->dense = s.contiguous && s.covered == static_cast<size_t>(s.hi - s.lo);
}

/* Reduce on an inter-communicator: the receiving root has a receive buffer
 * only, the rest of its group none, the other group a send buffer only. */
void inter_reduce(const gw_ce_regions_call_t &c, const Spans &sp, gw_ce_region_t *sr,
                  gw_ce_region_t *rr)
{
    Span s, t;
    if (GW_CE_ROOT_SELF == c.root) sp.add(t, c.type, c.count);
    if (GW_CE_ROOT_SELF != c.root && GW_CE_ROOT_NONE != c.root) sp.add(s, c.type, c.count);
    set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
    set_region(rr, c.rbuf, t, GW_CE_STAGE_OUT);
}

} // namespace

extern "C" void gw_ce_regions(const gw_ce_regions_call_t *cp, gw_ce_region_t r[GW_CE_REGION_COUNT])
{
    std::memset(r, 0, sizeof(gw_ce_region_t) * GW_CE_REGION_COUNT);
    const gw_ce_regions_call_t &c = *cp;
    const Spans sp(c);
    gw_ce_region_t *sr = &r[GW_CE_REGION_SEND], *rr = &r[GW_CE_REGION_RECV];
    const int n = c.size;
    const int me = c.rank;
    const bool in_place = c.send_in_place;
    const bool is_root = c.root == me;
    /* With MPI_IN_PLACE the receive buffer also holds the input. */
    const unsigned recv_flags = in_place ? GW_CE_STAGE_IN | GW_CE_STAGE_OUT : GW_CE_STAGE_OUT;
    Span s, t;

    switch (c.id) {
    case GW_CE_COLL_ALLREDUCE:
    case GW_CE_COLL_SCAN:
        if (!in_place) sp.add(s, c.type, c.count);
        sp.add(t, c.type, c.count);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, recv_flags);
        break;
    case GW_CE_COLL_EXSCAN:
        /* Rank 0's receive buffer is undefined after the call: it is input
         * with MPI_IN_PLACE, otherwise host scratch, and never written back. */
        if (!in_place) sp.add(s, c.type, c.count);
        sp.add(t, c.type, c.count);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        if (0 == me) {
            set_region(rr, c.rbuf, t, in_place ? GW_CE_STAGE_IN : 0);
        } else {
            set_region(rr, c.rbuf, t, recv_flags);
        }
        break;
    case GW_CE_COLL_REDUCE:
        if (c.inter) {
            inter_reduce(c, sp, sr, rr);
            break;
        }
        /* MPI_IN_PLACE is valid at the root only; the receive buffer is
         * significant at the root only. */
        if (is_root) {
            if (!in_place) sp.add(s, c.type, c.count);
            sp.add(t, c.type, c.count);
            set_region(rr, c.rbuf, t, recv_flags);
        } else {
            sp.add(s, c.type, c.count);
        }
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        break;
    case GW_CE_COLL_BCAST:
        sp.add(t, c.type, c.count);
        set_region(rr, c.rbuf, t, is_root ? GW_CE_STAGE_IN : GW_CE_STAGE_OUT);
        break;
    case GW_CE_COLL_REDUCE_SCATTER:
    case GW_CE_COLL_REDUCE_SCATTER_BLOCK: {
        const bool v = GW_CE_COLL_REDUCE_SCATTER == c.id;
        const int mine = v ? c.rcounts[me] : c.rcount;
        int total = 0;
        if (v) {
            for (int i = 0; i < n; ++i) total += c.rcounts[i];
        } else {
            total = n * c.rcount;
        }
        if (in_place) {
            /* Input in the whole receive buffer, result in its first part. */
            sp.add(t, c.type, total);
        } else {
            sp.add(s, c.type, total);
            sp.add(t, c.type, mine);
        }
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, recv_flags);
        break;
    }
    case GW_CE_COLL_ALLGATHER:
        if (!in_place) sp.add(s, c.stype, c.scount);
        sp.add(t, c.rtype, n * c.rcount);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, recv_flags);
        break;
    case GW_CE_COLL_ALLGATHERV:
        if (!in_place) sp.add(s, c.stype, c.scount);
        sp.add_v(t, c.rtype, c.rcounts, c.rdispls);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, recv_flags);
        break;
    case GW_CE_COLL_ALLTOALL:
        if (!in_place) sp.add(s, c.stype, n * c.scount);
        sp.add(t, c.rtype, n * c.rcount);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, recv_flags);
        break;
    case GW_CE_COLL_ALLTOALLV:
        if (!in_place) sp.add_v(s, c.stype, c.scounts, c.sdispls);
        sp.add_v(t, c.rtype, c.rcounts, c.rdispls);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, recv_flags);
        break;
    case GW_CE_COLL_ALLTOALLW:
        if (!in_place) sp.add_w(s, c.stypes, c.scounts, c.sdispls);
        sp.add_w(t, c.rtypes, c.rcounts, c.rdispls);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, recv_flags);
        break;
    case GW_CE_COLL_GATHER:
    case GW_CE_COLL_GATHERV:
        /* The send side is ignored at a root that passes MPI_IN_PLACE; the
         * receive side is significant at the root only. */
        if (!(is_root && in_place)) sp.add(s, c.stype, c.scount);
        if (is_root) {
            if (GW_CE_COLL_GATHER == c.id) {
                sp.add(t, c.rtype, n * c.rcount);
            } else {
                sp.add_v(t, c.rtype, c.rcounts, c.rdispls);
            }
        }
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, recv_flags);
        break;
    case GW_CE_COLL_SCATTER:
    case GW_CE_COLL_SCATTERV:
        /* The send side is significant at the root only; a root that passes
         * MPI_IN_PLACE as receive buffer receives nothing. */
        if (is_root) {
            if (GW_CE_COLL_SCATTER == c.id) {
                sp.add(s, c.stype, n * c.scount);
            } else {
                sp.add_v(s, c.stype, c.scounts, c.sdispls);
            }
        }
        if (!c.recv_in_place) sp.add(t, c.rtype, c.rcount);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, GW_CE_STAGE_OUT);
        break;
    case GW_CE_COLL_REDUCE_LOCAL:
        /* The input, and the buffer read and written. */
        sp.add(s, c.type, c.count);
        sp.add(t, c.type, c.count);
        set_region(sr, c.sbuf, s, GW_CE_STAGE_IN);
        set_region(rr, c.rbuf, t, GW_CE_STAGE_IN | GW_CE_STAGE_OUT);
        break;
    case GW_CE_COLL_BARRIER:
    case GW_CE_COLL_COUNT: break;
    }
}

extern "C" const char *gw_ce_coll_name(gw_ce_coll_t id)
{
    switch (id) {
    case GW_CE_COLL_ALLGATHER: return "allgather";
    case GW_CE_COLL_ALLGATHERV: return "allgatherv";
    case GW_CE_COLL_ALLREDUCE: return "allreduce";
    case GW_CE_COLL_ALLTOALL: return "alltoall";
    case GW_CE_COLL_ALLTOALLV: return "alltoallv";
    case GW_CE_COLL_ALLTOALLW: return "alltoallw";
    case GW_CE_COLL_BCAST: return "bcast";
    case GW_CE_COLL_EXSCAN: return "exscan";
    case GW_CE_COLL_GATHER: return "gather";
    case GW_CE_COLL_GATHERV: return "gatherv";
    case GW_CE_COLL_REDUCE: return "reduce";
    case GW_CE_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case GW_CE_COLL_REDUCE_SCATTER_BLOCK: return "reduce_scatter_block";
    case GW_CE_COLL_SCAN: return "scan";
    case GW_CE_COLL_SCATTER: return "scatter";
    case GW_CE_COLL_SCATTERV: return "scatterv";
    case GW_CE_COLL_BARRIER: return "barrier";
    case GW_CE_COLL_REDUCE_LOCAL: return "reduce_local";
    case GW_CE_COLL_COUNT: break;
    }
    return "?";
}

extern "C" int gw_ce_regions_gpu(const gw_ce_region_t r[GW_CE_REGION_COUNT])
{
    const gw_ce_region_t *rr = &r[GW_CE_REGION_RECV], *sr = &r[GW_CE_REGION_SEND];
    if (rr->hi > rr->lo && rr->on_gpu) return rr->gpu;
    if (sr->hi > sr->lo && sr->on_gpu) return sr->gpu;
    return -1;
}
