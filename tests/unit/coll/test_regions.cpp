/*
 * The regions of a collective call (gpuwire/coll_regions.h): for every
 * collective, on roots and other ranks, in place where MPI allows it, with
 * the v and w forms' displacements negative and out of order, and with
 * layouts as derived datatypes have them (gaps, a true lower bound away
 * from 0, negative extents, size 0), the exact bytes and directions.
 *
 * A type handle here is the address of its layout. Types a call must not
 * look at (MPI: not significant on this rank) are passed as NULL, and so
 * are counts and displacements: the engine must not ask for them.
 */
#include "gw_catch.hpp"

#include <cstring>
#include <string>

#include "gpuwire/coll_regions.h"

namespace {

constexpr int kN = 4; /* ranks */
constexpr unsigned IN = GW_CE_STAGE_IN, OUT = GW_CE_STAGE_OUT, INOUT = IN | OUT;

/* size, lb, extent, true_lb, true_extent, contiguous, contiguous_run */
const gw_ce_type_layout_t kInt{4, 0, 4, 0, 4, true, true};
/* MPI_Type_vector(2, 1, 2, MPI_INT): x . x */
const gw_ce_type_layout_t kVec{8, 0, 12, 0, 12, false, false};
/* MPI_INT resized to extent 8: x . | x . */
const gw_ce_type_layout_t kPadded{4, 0, 8, 0, 4, true, false};
/* 8 bytes at [4, 12) of a 16-byte extent that starts at -8 */
const gw_ce_type_layout_t kShifted{8, -8, 16, 4, 8, true, false};
/* MPI_INT resized to extent -4: element i at -4 i */
const gw_ce_type_layout_t kNeg{4, 0, -4, 0, 4, true, true};
/* MPI_INT resized to extent -8 */
const gw_ce_type_layout_t kNegPadded{4, 0, -8, 0, 4, true, false};
/* A type that moves nothing (an empty struct), whatever its extent */
const gw_ce_type_layout_t kNothing{0, 0, 4, 0, 4, true, true};
/* Elements that cover their extent, yet said to have gaps: one element
 * (kGappy), or a run of them (kNoRun). Only the layout's flags tell. */
const gw_ce_type_layout_t kGappy{4, 0, 4, 0, 4, false, false};
const gw_ce_type_layout_t kNoRun{4, 0, 4, 0, 4, true, false};

int g_null_layouts = 0;

void layout_of(const void *type, gw_ce_type_layout_t *out)
{
    if (nullptr == type) {
        ++g_null_layouts;
        *out = gw_ce_type_layout_t{};
        return;
    }
    *out = *static_cast<const gw_ce_type_layout_t *>(type);
}

char g_send[1], g_recv[1];
const void *const S = g_send;
const void *const R = g_recv;

struct Want {
    const void *user;
    ptrdiff_t lo, hi;
    unsigned flags;
    bool dense;
};
const Want kEmpty{nullptr, 0, 0, 0, false};

gw_ce_regions_call_t call(gw_ce_coll_t id, int rank, int root = 0)
{
    gw_ce_regions_call_t c{};
    c.id = id;
    c.sbuf = S;
    c.rbuf = R;
    c.rank = rank;
    c.size = kN;
    c.root = root;
    c.layout = layout_of;
    return c;
}

std::string side_name(int i) { return GW_CE_REGION_SEND == i ? "send" : "recv"; }

void check_region(const gw_ce_region_t &r, const Want &w, int i)
{
    INFO("region " << side_name(i));
    CHECK(r.user == w.user);
    CHECK(r.lo == w.lo);
    CHECK(r.hi == w.hi);
    CHECK(r.flags == w.flags);
    CHECK(r.dense == w.dense);
    CHECK_FALSE(r.on_gpu);
    CHECK(0 == r.gpu);
    CHECK_FALSE(r.unordered);
}

void expect(const gw_ce_regions_call_t &c, const Want &send, const Want &recv)
{
    INFO(gw_ce_coll_name(c.id) << " rank " << c.rank << " root " << c.root
                               << (c.send_in_place ? " in place" : "")
                               << (c.recv_in_place ? " recv in place" : "")
                               << (c.inter ? " inter" : ""));
    gw_ce_region_t r[GW_CE_REGION_COUNT];
    std::memset(r, 0xA5, sizeof r); /* every field must be written */
    g_null_layouts = 0;
    gw_ce_regions(&c, r);
    CHECK(0 == g_null_layouts);
    check_region(r[GW_CE_REGION_SEND], send, GW_CE_REGION_SEND);
    check_region(r[GW_CE_REGION_RECV], recv, GW_CE_REGION_RECV);
}

/* One type and count for both sides (the reductions, bcast). */
gw_ce_regions_call_t typed(gw_ce_coll_t id, int rank, const gw_ce_type_layout_t *t, int count,
                           int root = 0)
{
    gw_ce_regions_call_t c = call(id, rank, root);
    c.type = t;
    c.count = count;
    return c;
}

} // namespace

TEST_CASE("regions: allreduce and scan, every rank alike", "[coll][regions]")
{
    for (gw_ce_coll_t id : {GW_CE_COLL_ALLREDUCE, GW_CE_COLL_SCAN}) {
        for (int rank : {0, 2}) {
            gw_ce_regions_call_t c = typed(id, rank, &kInt, 3);
            expect(c, {S, 0, 12, IN, true}, {R, 0, 12, OUT, true});
            c.send_in_place = true;
            expect(c, kEmpty, {R, 0, 12, INOUT, true});
            expect(typed(id, rank, &kInt, 0), kEmpty, kEmpty);
            expect(typed(id, rank, &kNothing, 5), kEmpty, kEmpty);
        }
    }
}

TEST_CASE("regions: spans over the types' true extents", "[coll][regions]")
{
    const gw_ce_coll_t A = GW_CE_COLL_ALLREDUCE;
    /* gaps inside an element */
    expect(typed(A, 0, &kVec, 1), {S, 0, 12, IN, false}, {R, 0, 12, OUT, false});
    expect(typed(A, 0, &kVec, 2), {S, 0, 24, IN, false}, {R, 0, 24, OUT, false});
    /* gaps between elements only */
    expect(typed(A, 0, &kPadded, 1), {S, 0, 4, IN, true}, {R, 0, 4, OUT, true});
    expect(typed(A, 0, &kPadded, 3), {S, 0, 20, IN, false}, {R, 0, 20, OUT, false});
    /* the true lower bound, not the lower bound */
    expect(typed(A, 0, &kShifted, 1), {S, 4, 12, IN, true}, {R, 4, 12, OUT, true});
    expect(typed(A, 0, &kShifted, 2), {S, 4, 28, IN, false}, {R, 4, 28, OUT, false});
    /* negative extents: the elements lie below the pointer */
    expect(typed(A, 0, &kNeg, 1), {S, 0, 4, IN, true}, {R, 0, 4, OUT, true});
    expect(typed(A, 0, &kNeg, 3), {S, -8, 4, IN, true}, {R, -8, 4, OUT, true});
    expect(typed(A, 0, &kNegPadded, 2), {S, -8, 4, IN, false}, {R, -8, 4, OUT, false});
    /* the layout's flags: one element, and a run of them */
    expect(typed(A, 0, &kGappy, 1), {S, 0, 4, IN, false}, {R, 0, 4, OUT, false});
    expect(typed(A, 0, &kNoRun, 1), {S, 0, 4, IN, true}, {R, 0, 4, OUT, true});
    expect(typed(A, 0, &kNoRun, 2), {S, 0, 8, IN, false}, {R, 0, 8, OUT, false});
    /* negative counts add nothing */
    expect(typed(A, 0, &kInt, -1), kEmpty, kEmpty);
}

TEST_CASE("regions: exscan's rank 0 receives nothing back", "[coll][regions]")
{
    const gw_ce_coll_t E = GW_CE_COLL_EXSCAN;
    gw_ce_regions_call_t c = typed(E, 0, &kInt, 3);
    expect(c, {S, 0, 12, IN, true}, {R, 0, 12, 0, true}); /* scratch */
    c.send_in_place = true;
    expect(c, kEmpty, {R, 0, 12, IN, true});
    c = typed(E, 3, &kInt, 3);
    expect(c, {S, 0, 12, IN, true}, {R, 0, 12, OUT, true});
    c.send_in_place = true;
    expect(c, kEmpty, {R, 0, 12, INOUT, true});
    expect(typed(E, 0, &kInt, 0), kEmpty, kEmpty);
}

TEST_CASE("regions: reduce's receive buffer at the root only", "[coll][regions]")
{
    const gw_ce_coll_t D = GW_CE_COLL_REDUCE;
    gw_ce_regions_call_t c = typed(D, 2, &kInt, 3, 2);
    expect(c, {S, 0, 12, IN, true}, {R, 0, 12, OUT, true});
    c.send_in_place = true;
    expect(c, kEmpty, {R, 0, 12, INOUT, true});
    c = typed(D, 0, &kInt, 3, 0);
    expect(c, {S, 0, 12, IN, true}, {R, 0, 12, OUT, true});
    c = typed(D, 1, &kInt, 3, 2);
    expect(c, {S, 0, 12, IN, true}, kEmpty);
    /* MPI_IN_PLACE means nothing on another rank: the send side stays */
    c.send_in_place = true;
    expect(c, {S, 0, 12, IN, true}, kEmpty);
    c = typed(D, 1, &kVec, 2, 2);
    expect(c, {S, 0, 24, IN, false}, kEmpty);
    expect(typed(D, 2, &kInt, 0, 2), kEmpty, kEmpty);
}

TEST_CASE("regions: reduce on an inter-communicator", "[coll][regions]")
{
    gw_ce_regions_call_t c = typed(GW_CE_COLL_REDUCE, 0, &kInt, 3, GW_CE_ROOT_SELF);
    c.inter = true;
    expect(c, kEmpty, {R, 0, 12, OUT, true});
    c.root = GW_CE_ROOT_NONE;
    expect(c, kEmpty, kEmpty);
    /* the sending group: root is a rank of the other group, even this
     * rank's own number */
    c.root = 0;
    expect(c, {S, 0, 12, IN, true}, kEmpty);
    c.rank = 1;
    c.root = 3;
    expect(c, {S, 0, 12, IN, true}, kEmpty);
    c.count = 0;
    expect(c, kEmpty, kEmpty);
}

TEST_CASE("regions: bcast reads at the root and writes elsewhere", "[coll][regions]")
{
    const gw_ce_coll_t B = GW_CE_COLL_BCAST;
    expect(typed(B, 1, &kInt, 3, 1), kEmpty, {R, 0, 12, IN, true});
    gw_ce_regions_call_t c = typed(B, 0, &kInt, 3, 1);
    expect(c, kEmpty, {R, 0, 12, OUT, true});
    c.send_in_place = true; /* no send side: nothing to say */
    expect(c, kEmpty, {R, 0, 12, OUT, true});
    expect(typed(B, 0, &kVec, 2, 1), kEmpty, {R, 0, 24, OUT, false});
    expect(typed(B, 1, &kVec, 2, 1), kEmpty, {R, 0, 24, IN, false});
    expect(typed(B, 0, &kInt, 0, 1), kEmpty, kEmpty);
}

TEST_CASE("regions: reduce_scatter and reduce_scatter_block", "[coll][regions]")
{
    const int rcounts[kN] = {1, 2, 3, 0};
    gw_ce_regions_call_t c = typed(GW_CE_COLL_REDUCE_SCATTER, 1, &kInt, 0);
    c.rcounts = rcounts;
    expect(c, {S, 0, 24, IN, true}, {R, 0, 8, OUT, true});
    c.send_in_place = true; /* input in the whole buffer, result in its start */
    expect(c, kEmpty, {R, 0, 24, INOUT, true});
    c = typed(GW_CE_COLL_REDUCE_SCATTER, 3, &kInt, 0);
    c.rcounts = rcounts;
    expect(c, {S, 0, 24, IN, true}, kEmpty);
    c = typed(GW_CE_COLL_REDUCE_SCATTER, 0, &kPadded, 0);
    c.rcounts = rcounts;
    expect(c, {S, 0, 44, IN, false}, {R, 0, 4, OUT, true});

    c = typed(GW_CE_COLL_REDUCE_SCATTER_BLOCK, 2, &kInt, 0);
    c.rcount = 2;
    expect(c, {S, 0, 32, IN, true}, {R, 0, 8, OUT, true});
    c.send_in_place = true;
    expect(c, kEmpty, {R, 0, 32, INOUT, true});
    c.rcount = 0;
    expect(c, kEmpty, kEmpty);
}

TEST_CASE("regions: allgather and alltoall", "[coll][regions]")
{
    for (int rank : {0, 3}) {
        gw_ce_regions_call_t c = call(GW_CE_COLL_ALLGATHER, rank);
        c.stype = &kInt;
        c.scount = 2;
        c.rtype = &kInt;
        c.rcount = 2;
        expect(c, {S, 0, 8, IN, true}, {R, 0, 32, OUT, true});
        c.stype = &kVec;
        c.scount = 1;
        c.rtype = &kPadded;
        c.rcount = 1;
        expect(c, {S, 0, 12, IN, false}, {R, 0, 28, OUT, false});
        c.stype = nullptr;
        c.scount = 0;
        c.send_in_place = true;
        expect(c, kEmpty, {R, 0, 28, INOUT, false});

        c = call(GW_CE_COLL_ALLTOALL, rank);
        c.stype = &kInt;
        c.scount = 2;
        c.rtype = &kInt;
        c.rcount = 3;
        expect(c, {S, 0, 32, IN, true}, {R, 0, 48, OUT, true});
        c.rtype = &kNothing;
        expect(c, {S, 0, 32, IN, true}, kEmpty);
        c.rtype = &kInt;
        c.stype = nullptr;
        c.send_in_place = true;
        expect(c, kEmpty, {R, 0, 48, INOUT, true});
    }
}

TEST_CASE("regions: allgatherv over displacements", "[coll][regions]")
{
    gw_ce_regions_call_t c = call(GW_CE_COLL_ALLGATHERV, 2);
    c.stype = &kInt;
    c.scount = 1;
    c.rtype = &kInt;
    const int counts[kN] = {2, 0, 1, 3}, displs[kN] = {6, 0, -2, 10};
    c.rcounts = counts;
    c.rdispls = displs;
    /* blocks [24, 32), [-8, -4), [40, 52) */
    expect(c, {S, 0, 4, IN, true}, {R, -8, 52, OUT, false});
    /* out of order, packed; a block of 0 far away adds nothing */
    const int counts2[kN] = {2, 1, 1, 0}, displs2[kN] = {2, 0, 1, 7};
    c.rcounts = counts2;
    c.rdispls = displs2;
    expect(c, {S, 0, 4, IN, true}, {R, 0, 16, OUT, true});
    c.stype = nullptr;
    c.send_in_place = true;
    expect(c, kEmpty, {R, 0, 16, INOUT, true});
    /* displacements in extents of the type: [24,28) [16,20) [8,12) [0,4) */
    const int ones[kN] = {1, 1, 1, 1}, down[kN] = {3, 2, 1, 0};
    c.rtype = &kPadded;
    c.rcounts = ones;
    c.rdispls = down;
    expect(c, kEmpty, {R, 0, 28, INOUT, false});
    /* a negative extent turns the displacements round */
    c.rtype = &kNeg;
    expect(c, kEmpty, {R, -12, 4, INOUT, true});
    const int zeros[kN] = {0, 0, 0, 0};
    c.rcounts = zeros;
    expect(c, kEmpty, kEmpty);
}

TEST_CASE("regions: alltoallv and alltoallw", "[coll][regions]")
{
    gw_ce_regions_call_t c = call(GW_CE_COLL_ALLTOALLV, 1);
    const int sc[kN] = {1, 1, 0, 2}, sd[kN] = {3, -1, 100, 0};
    const int rc[kN] = {1, 2, 1, 0}, rd[kN] = {3, 1, 0, -50};
    c.stype = &kPadded;
    c.scounts = sc;
    c.sdispls = sd;
    c.rtype = &kInt;
    c.rcounts = rc;
    c.rdispls = rd;
    /* send: [24,28) [-8,-4) [0,12); receive: [12,16) [4,12) [0,4) */
    expect(c, {S, -8, 28, IN, false}, {R, 0, 16, OUT, true});
    c.stype = nullptr;
    c.scounts = c.sdispls = nullptr;
    c.send_in_place = true;
    expect(c, kEmpty, {R, 0, 16, INOUT, true});

    c = call(GW_CE_COLL_ALLTOALLW, 0);
    const void *st[kN] = {&kInt, &kVec, &kNeg, &kNothing};
    const int wsc[kN] = {2, 1, 3, 5}, wsd[kN] = {100, 0, 40, -1000};
    const void *rt[kN] = {&kInt, &kInt, &kInt, nullptr}; /* count 0: never asked */
    const int wrc[kN] = {1, 1, 1, 0}, wrd[kN] = {8, 4, 0, -7};
    c.stypes = st;
    c.scounts = wsc;
    c.sdispls = wsd;
    c.rtypes = rt;
    c.rcounts = wrc;
    c.rdispls = wrd;
    /* send (bytes): [100,108) [0,12) [32,44), the type of size 0 nothing */
    expect(c, {S, 0, 108, IN, false}, {R, 0, 12, OUT, true});
    const void *rt2[kN] = {&kShifted, &kInt, &kInt, nullptr};
    const int wrd2[kN] = {-4, 8, 12, 0};
    c.rtypes = rt2;
    c.rdispls = wrd2;
    /* [0,8) [8,12) [12,16): packed, though through a true lower bound */
    expect(c, {S, 0, 108, IN, false}, {R, 0, 16, OUT, true});
    c.stypes = nullptr;
    c.scounts = c.sdispls = nullptr;
    c.send_in_place = true;
    expect(c, kEmpty, {R, 0, 16, INOUT, true});
}

TEST_CASE("regions: gather(v)'s receive side at the root only", "[coll][regions]")
{
    gw_ce_regions_call_t c = call(GW_CE_COLL_GATHER, 1, 1);
    c.stype = &kInt;
    c.scount = 2;
    c.rtype = &kInt;
    c.rcount = 2;
    expect(c, {S, 0, 8, IN, true}, {R, 0, 32, OUT, true});
    c.stype = nullptr; /* ignored at a root in place */
    c.scount = 0;
    c.send_in_place = true;
    expect(c, kEmpty, {R, 0, 32, INOUT, true});

    c = call(GW_CE_COLL_GATHER, 0, 1);
    c.stype = &kVec;
    c.scount = 1;
    expect(c, {S, 0, 12, IN, false}, kEmpty);
    c.send_in_place = true; /* means nothing off the root */
    expect(c, {S, 0, 12, IN, false}, kEmpty);

    c = call(GW_CE_COLL_GATHERV, 0, 0);
    c.stype = &kInt;
    c.scount = 2;
    c.rtype = &kInt;
    const int rc[kN] = {1, 0, 2, 1}, rd[kN] = {-3, 9, 4, 0};
    c.rcounts = rc;
    c.rdispls = rd;
    /* [-12,-8) [16,24) [0,4) */
    expect(c, {S, 0, 8, IN, true}, {R, -12, 24, OUT, false});
    c.send_in_place = true;
    c.stype = nullptr;
    expect(c, kEmpty, {R, -12, 24, INOUT, false});
    c = call(GW_CE_COLL_GATHERV, 2, 0);
    c.stype = &kInt;
    c.scount = 2;
    expect(c, {S, 0, 8, IN, true}, kEmpty);
    c.scount = 0;
    expect(c, kEmpty, kEmpty);
}

TEST_CASE("regions: scatter(v)'s send side at the root only", "[coll][regions]")
{
    gw_ce_regions_call_t c = call(GW_CE_COLL_SCATTER, 3, 3);
    c.stype = &kInt;
    c.scount = 2;
    c.rtype = &kInt;
    c.rcount = 2;
    expect(c, {S, 0, 32, IN, true}, {R, 0, 8, OUT, true});
    c.rtype = nullptr; /* ignored where the root receives in place */
    c.recv_in_place = true;
    expect(c, {S, 0, 32, IN, true}, kEmpty);

    c = call(GW_CE_COLL_SCATTER, 0, 3);
    c.rtype = &kPadded;
    c.rcount = 2;
    expect(c, kEmpty, {R, 0, 12, OUT, false});
    c.send_in_place = true; /* the receive side never reads */
    expect(c, kEmpty, {R, 0, 12, OUT, false});

    c = call(GW_CE_COLL_SCATTERV, 0, 0);
    c.stype = &kInt;
    const int sc[kN] = {2, 1, 0, 1}, sd[kN] = {0, 5, 1, -2};
    c.scounts = sc;
    c.sdispls = sd;
    c.rtype = &kInt;
    c.rcount = 1;
    /* [0,8) [20,24) [-8,-4) */
    expect(c, {S, -8, 24, IN, false}, {R, 0, 4, OUT, true});
    c.recv_in_place = true;
    c.rtype = nullptr;
    expect(c, {S, -8, 24, IN, false}, kEmpty);
    c = call(GW_CE_COLL_SCATTERV, 1, 0);
    c.rtype = &kInt;
    c.rcount = 3;
    expect(c, kEmpty, {R, 0, 12, OUT, true});
    c.rcount = 0;
    expect(c, kEmpty, kEmpty);
}

TEST_CASE("regions: reduce_local, barrier and no collective", "[coll][regions]")
{
    expect(typed(GW_CE_COLL_REDUCE_LOCAL, 0, &kInt, 3), {S, 0, 12, IN, true},
           {R, 0, 12, INOUT, true});
    expect(typed(GW_CE_COLL_REDUCE_LOCAL, 0, &kVec, 1), {S, 0, 12, IN, false},
           {R, 0, 12, INOUT, false});
    expect(typed(GW_CE_COLL_REDUCE_LOCAL, 0, &kInt, 0), kEmpty, kEmpty);
    expect(call(GW_CE_COLL_BARRIER, 1), kEmpty, kEmpty);
    expect(call(GW_CE_COLL_COUNT, 1), kEmpty, kEmpty);
}

TEST_CASE("regions: every collective's name", "[coll][regions]")
{
    const char *const names[] = {"allgather",
                                 "allgatherv",
                                 "allreduce",
                                 "alltoall",
                                 "alltoallv",
                                 "alltoallw",
                                 "bcast",
                                 "exscan",
                                 "gather",
                                 "gatherv",
                                 "reduce",
                                 "reduce_scatter",
                                 "reduce_scatter_block",
                                 "scan",
                                 "scatter",
                                 "scatterv",
                                 "barrier",
                                 "reduce_local"};
    static_assert(sizeof names / sizeof names[0] == GW_CE_COLL_COUNT);
    for (int i = 0; i < GW_CE_COLL_COUNT; ++i) {
        CHECK(std::string(gw_ce_coll_name(static_cast<gw_ce_coll_t>(i))) == names[i]);
    }
    CHECK(std::string(gw_ce_coll_name(GW_CE_COLL_COUNT)) == "?");
    CHECK(std::string(gw_ce_coll_name(static_cast<gw_ce_coll_t>(GW_CE_COLL_COUNT + 1))) == "?");
}

TEST_CASE("regions: the call's GPU", "[coll][regions]")
{
    gw_ce_region_t r[GW_CE_REGION_COUNT] = {};
    gw_ce_region_t &s = r[GW_CE_REGION_SEND], &v = r[GW_CE_REGION_RECV];
    CHECK(-1 == gw_ce_regions_gpu(r));
    s = {S, 0, 8, IN, true, true, 1, false};
    v = {R, 0, 8, OUT, true, true, 2, false};
    CHECK(2 == gw_ce_regions_gpu(r)); /* the receive side first */
    v.on_gpu = false;
    CHECK(1 == gw_ce_regions_gpu(r));
    v.on_gpu = true;
    v.hi = v.lo; /* empty: not looked at */
    CHECK(1 == gw_ce_regions_gpu(r));
    s.hi = s.lo;
    CHECK(-1 == gw_ce_regions_gpu(r));
    s.hi = 8;
    s.on_gpu = false;
    CHECK(-1 == gw_ce_regions_gpu(r));
}
