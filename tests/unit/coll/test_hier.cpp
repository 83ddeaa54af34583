/*
 * The hierarchical collectives (gpuwire/coll_hier.h) without mpirun: every
 * rank's job runs over a fake transport that plays the levels' collectives
 * in host memory. The ranks move in lockstep: each starts its step s, then
 * the simulator joins what they started into the collectives of each node
 * and of the leaders (checking that every rank of the level took part, with
 * the same count, root and counts) and carries them out, then step s + 1.
 * That is what the sub-communicators' collectives guarantee under coll
 * gpuwire, whatever order the ranks reach them in.
 *
 * Results are compared byte for byte with a reference computed here from
 * the inputs alone, and the bytes the call must not write (the receive
 * buffers of Reduce's other ranks, Allgatherv's gaps) must keep their
 * fill. Layouts: nodes × ranks per node, uneven, a node of one rank, nodes
 * interleaved in rank order (so that Allgather runs through a temporary);
 * roots that are leaders and that are not; in place; the blocking form
 * (req NULL) and the non-blocking one.
 */
#include "gw_catch.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gpuwire/coll_hier.h"
#include "gpuwire/cuda/reduce.h"
#include "hier_layout.hpp"

namespace {

using Bytes = std::vector<char>;
constexpr char kFill = 0x5A;
constexpr size_t kEs = sizeof(int32_t); /* every type of these tests: int32, dense */

using hiertest::where_of;

struct Posted {
    int rank;
    gw_ce_hier_sub_t s;
    std::vector<int> counts, displs;
};

class Sim;

struct RankCtx {
    Sim *sim;
    int rank;
};

/* The fake transport of every rank and the collectives it joins. */
class Sim {
public:
    explicit Sim(const std::vector<int> &node)
        : where(where_of(node)), size_(static_cast<int>(node.size())), ctx_(size_),
          temps_(size_), t_(size_)
    {
        for (int r = 0; r < size_; ++r) {
            ctx_[r] = {this, r};
            t_[r] = {&ctx_[r], start, temp, copy, nullptr, nullptr, nullptr, nullptr};
        }
    }
    const gw_ce_hier_transport_t *transport(int r) const { return &t_[r]; }
    int size() const { return size_; }

    /* Carries out what the ranks started in this step. */
    void play()
    {
        std::map<std::pair<int, int>, std::vector<Posted>> groups;
        for (auto &p : posted_) {
            const int key = GW_CE_HIER_NODE == p.s.level ? where[2 * p.rank] : -1;
            groups[{p.s.level, key}].push_back(p);
        }
        posted_.clear();
        for (auto &[k, g] : groups) play_group(k.first, k.second, g);
    }

    std::vector<int> where;
    int temps_asked = 0, copies_done = 0;

private:
    int level_rank(int level, int r) const { return hiertest::level_rank(where, level, r); }
    std::vector<int> members(int level, int key) const { return hiertest::members(where, level, key); }

    void play_group(int level, int key, std::vector<Posted> &g)
    {
        /* Messages (Reduce's last step) pair up inside the node. */
        if (GW_CE_HIER_SUB_SEND == g[0].s.kind || GW_CE_HIER_SUB_RECV == g[0].s.kind) {
            REQUIRE(2 == g.size());
            const Posted &snd = GW_CE_HIER_SUB_SEND == g[0].s.kind ? g[0] : g[1];
            const Posted &rcv = GW_CE_HIER_SUB_SEND == g[0].s.kind ? g[1] : g[0];
            REQUIRE(GW_CE_HIER_SUB_SEND == snd.s.kind);
            REQUIRE(GW_CE_HIER_SUB_RECV == rcv.s.kind);
            REQUIRE(snd.s.root == level_rank(level, rcv.rank));
            REQUIRE(rcv.s.root == level_rank(level, snd.rank));
            REQUIRE(snd.s.count == rcv.s.count);
            std::memcpy(rcv.s.rbuf, snd.s.sbuf, kEs * static_cast<size_t>(snd.s.count));
            return;
        }
        /* A collective: every rank of the level, in level-rank order, alike. */
        const std::vector<int> m = members(level, key);
        REQUIRE(g.size() == m.size());
        std::sort(g.begin(), g.end(), [&](const Posted &a, const Posted &b) {
            return level_rank(level, a.rank) < level_rank(level, b.rank);
        });
        for (size_t i = 0; i < g.size(); ++i) {
            REQUIRE(level_rank(level, g[i].rank) == static_cast<int>(i));
            REQUIRE(g[i].s.kind == g[0].s.kind);
            REQUIRE(g[i].s.count == g[0].s.count);
            REQUIRE(g[i].s.root == g[0].s.root);
            REQUIRE(g[i].counts == g[0].counts);
            REQUIRE(g[i].displs == g[0].displs);
        }
        const auto &s0 = g[0].s;
        const size_t n = g.size(), bytes = kEs * static_cast<size_t>(s0.count);
        switch (s0.kind) {
        case GW_CE_HIER_SUB_REDUCE:
        case GW_CE_HIER_SUB_ALLREDUCE: {
            REQUIRE(s0.root >= 0);
            std::vector<int32_t> acc(static_cast<size_t>(s0.count), 0);
            for (size_t i = 0; i < n; ++i) {
                const auto &s = g[i].s;
                REQUIRE(GW_CE_HIER_TYPE == s.rtype);
                /* In place only at the root (or everywhere: Allreduce). */
                REQUIRE((!s.in_place || GW_CE_HIER_SUB_ALLREDUCE == s.kind ||
                         static_cast<int>(i) == s.root));
                /* MPI's rule: where the result lands, a send buffer that is
                 * the receive buffer is MPI_IN_PLACE, never both. */
                const bool receives = GW_CE_HIER_SUB_ALLREDUCE == s.kind ||
                                      static_cast<int>(i) == s.root;
                REQUIRE((s.in_place || !receives || s.sbuf != s.rbuf));
                const auto *in = static_cast<const int32_t *>(s.in_place ? s.rbuf : s.sbuf);
                for (int k = 0; k < s0.count; ++k) {
                    if (0 == i) acc[k] = in[k];
                    else if (GW_OP_SUM == s.op) acc[k] += in[k];
                    else acc[k] = std::max(acc[k], in[k]);
                }
            }
            for (size_t i = 0; i < n; ++i) {
                if (GW_CE_HIER_SUB_ALLREDUCE == s0.kind || static_cast<int>(i) == s0.root) {
                    std::memcpy(g[i].s.rbuf, acc.data(), bytes);
                }
            }
            return;
        }
        case GW_CE_HIER_SUB_BCAST: {
            REQUIRE(s0.root >= 0);
            REQUIRE(s0.root < static_cast<int>(n));
            const Bytes data(static_cast<char *>(g[s0.root].s.rbuf),
                             static_cast<char *>(g[s0.root].s.rbuf) + bytes);
            for (auto &p : g) std::memcpy(p.s.rbuf, data.data(), bytes);
            return;
        }
        case GW_CE_HIER_SUB_ALLGATHER:
        case GW_CE_HIER_SUB_ALLGATHERV: {
            const bool v = GW_CE_HIER_SUB_ALLGATHERV == s0.kind;
            std::vector<Bytes> blocks(n);
            std::vector<size_t> at(n);
            for (size_t i = 0; i < n; ++i) {
                const auto &s = g[i].s;
                REQUIRE(GW_CE_HIER_RTYPE == s.rtype);
                const size_t len = kEs * static_cast<size_t>(v ? g[0].counts[i] : s0.count);
                at[i] = kEs * static_cast<size_t>(v ? g[0].displs[i] : s0.count * static_cast<int>(i));
                const char *from = s.in_place ? static_cast<const char *>(s.rbuf) + at[i]
                                              : static_cast<const char *>(s.sbuf);
                if (!s.in_place) REQUIRE(kEs * static_cast<size_t>(s.scount) == len);
                blocks[i].assign(from, from + len);
            }
            for (auto &p : g) {
                for (size_t i = 0; i < n; ++i) {
                    std::memcpy(static_cast<char *>(p.s.rbuf) + at[i], blocks[i].data(),
                                blocks[i].size());
                }
            }
            return;
        }
        default: FAIL("unknown sub-collective " << s0.kind);
        }
    }

    static int start(void *ctx, const gw_ce_hier_sub_t *s, void **req)
    {
        auto *c = static_cast<RankCtx *>(ctx);
        Posted p{c->rank, *s, {}, {}};
        if (GW_CE_HIER_SUB_ALLGATHERV == s->kind) {
            /* One per rank of the level; copied, as the engine reuses its arrays. */
            const int n = GW_CE_HIER_NODE == s->level
                              ? static_cast<int>(c->sim->members(GW_CE_HIER_NODE,
                                                                 c->sim->where[2 * c->rank]).size())
                              : static_cast<int>(c->sim->members(GW_CE_HIER_LEADERS, -1).size());
            p.counts.assign(s->counts, s->counts + n);
            p.displs.assign(s->displs, s->displs + n);
        }
        c->sim->posted_.push_back(p);
        /* Blocking or not, the collective is carried out once every rank
         * of the step has started its part (play). */
        if (nullptr != req) *req = &c->sim->posted_.back();
        return GW_CE_OK;
    }
    static int temp(void *ctx, size_t bytes, void **ptr)
    {
        auto *c = static_cast<RankCtx *>(ctx);
        c->sim->temps_[c->rank].assign(bytes, kFill);
        *ptr = c->sim->temps_[c->rank].data();
        ++c->sim->temps_asked;
        return GW_CE_OK;
    }
    static int copy(void *ctx, const gw_ce_hier_copy_t *cp, size_t n, bool)
    {
        auto *c = static_cast<RankCtx *>(ctx);
        for (size_t i = 0; i < n; ++i) std::memcpy(cp[i].dst, cp[i].src, cp[i].bytes);
        c->sim->copies_done += static_cast<int>(n);
        return GW_CE_OK;
    }

    int size_;
    std::vector<RankCtx> ctx_;
    std::vector<Bytes> temps_;
    std::vector<gw_ce_hier_transport_t> t_;
    std::vector<Posted> posted_;
};

/* Runs every rank's call in lockstep: GW_CE_OK, or what all of them
 * returned from gw_ce_hier_start (they must agree). */
int run(Sim &sim, std::vector<gw_ce_hier_call_t> calls, bool blocking)
{
    const int n = sim.size();
    std::vector<gw_ce_hier_job_t *> jobs(n, nullptr);
    std::vector<int> rcs(n);
    for (int r = 0; r < n; ++r) {
        char why[256] = "";
        calls[r].where = sim.where.data();
        rcs[r] = gw_ce_hier_start(&calls[r], sim.transport(r), &jobs[r], why, sizeof(why));
        INFO("rank " << r << ": " << why);
        REQUIRE(rcs[r] == rcs[0]);
    }
    if (GW_CE_OK == rcs[0]) {
        std::vector<bool> ended(n, false);
        for (int step = 0; step < 8 && !ended[0]; ++step) {
            for (int r = 0; r < n; ++r) {
                void *req = nullptr;
                REQUIRE(step == gw_ce_hier_next(jobs[r]));
                const int rc = gw_ce_hier_step(jobs[r], blocking ? nullptr : &req);
                ended[r] = GW_CE_HIER_END == rc;
                if (!ended[r]) REQUIRE(GW_CE_OK == rc);
                /* Every rank's steps end together: they line up. */
                REQUIRE(ended[r] == ended[0]);
            }
            sim.play();
        }
        REQUIRE(ended[0]);
    }
    for (auto *j : jobs) gw_ce_hier_free(j);
    return rcs[0];
}

int32_t value(int r, int k) { return r * 1000 + k * 7 + 1; }

Bytes block(int r, int count)
{
    Bytes b(kEs * static_cast<size_t>(count));
    for (int k = 0; k < count; ++k) {
        const int32_t v = value(r, k);
        std::memcpy(b.data() + kEs * static_cast<size_t>(k), &v, kEs);
    }
    return b;
}

gw_ce_hier_call_t base(gw_ce_hier_coll_t coll, int size, int rank)
{
    gw_ce_hier_call_t c{};
    c.coll = coll;
    c.op = GW_OP_SUM;
    c.type = GW_TYPE_INT32;
    c.size = size;
    c.rank = rank;
    c.es = kEs;
    c.r_extent = c.r_size = kEs;
    c.r_dense = true;
    return c;
}

struct LayoutCase {
    const char *name;
    std::vector<int> node;
};
const LayoutCase kLayouts[] = {
    {"2 nodes x 2", {0, 0, 1, 1}},
    {"2 nodes x 3", {0, 0, 0, 1, 1, 1}},
    {"3 nodes, 3+2+1", {0, 0, 0, 1, 1, 2}},
    {"3 nodes, 1+4+2", {0, 1, 1, 1, 1, 2, 2}},
    {"interleaved 3+2+2", {0, 1, 0, 1, 2, 2, 0}},
    {"one rank per node", {0, 1, 2}},
};

std::vector<int> roots_of(int size) { return size > 3 ? std::vector<int>{0, 1, size - 1} : std::vector<int>{0, size - 1}; }

} // namespace

TEST_CASE("hier: the layout numbers nodes by their first rank", "[coll][hier]")
{
    CHECK(where_of({5, 3, 5, 3}) == std::vector<int>{0, 0, 1, 0, 0, 1, 1, 1});
}

TEST_CASE("hier: Allreduce and Reduce match the reference byte for byte", "[coll][hier]")
{
    const int count = 37;
    for (const auto &L : kLayouts) {
        for (const bool blocking : {true, false}) {
            for (const bool in_place : {false, true}) {
                for (const int op : {GW_OP_SUM, GW_OP_MAX}) {
                    Sim sim(L.node);
                    const int n = sim.size();
                    Bytes want(kEs * count);
                    for (int k = 0; k < count; ++k) {
                        int32_t acc = value(0, k);
                        for (int r = 1; r < n; ++r) {
                            acc = GW_OP_SUM == op ? acc + value(r, k) : std::max(acc, value(r, k));
                        }
                        std::memcpy(want.data() + kEs * k, &acc, kEs);
                    }
                    DYNAMIC_SECTION(L.name << (blocking ? " blocking" : " non-blocking")
                                    << (in_place ? " in place" : "") << " op " << op)
                    {
                        /* Allreduce. */
                        std::vector<Bytes> sb(n), rb(n, Bytes(kEs * count, kFill));
                        std::vector<gw_ce_hier_call_t> calls;
                        for (int r = 0; r < n; ++r) {
                            sb[r] = block(r, count);
                            if (in_place) rb[r] = sb[r];
                            auto c = base(GW_CE_HIER_ALLREDUCE, n, r);
                            c.op = op;
                            c.in_place = in_place;
                            c.sbuf = in_place ? nullptr : sb[r].data();
                            c.rbuf = rb[r].data();
                            c.count = count;
                            calls.push_back(c);
                        }
                        REQUIRE(GW_CE_OK == run(sim, calls, blocking));
                        for (int r = 0; r < n; ++r) {
                            INFO("Allreduce, rank " << r);
                            CHECK(rb[r] == want);
                        }
                        /* Reduce, to leaders and to other ranks. */
                        for (const int root : roots_of(n)) {
                            Sim rsim(L.node);
                            const int temps_expected = [&] {
                                int t = 0; /* the leaders but the root */
                                for (int q = 0; q < n; ++q) {
                                    t += 0 == rsim.where[2 * q + 1] && q != root;
                                }
                                return t;
                            }();
                            std::vector<Bytes> rrb(n, Bytes(kEs * count, kFill));
                            std::vector<gw_ce_hier_call_t> rcalls;
                            for (int r = 0; r < n; ++r) {
                                auto c = base(GW_CE_HIER_REDUCE, n, r);
                                c.op = op;
                                c.root = root;
                                c.count = count;
                                c.in_place = in_place && r == root;
                                if (c.in_place) rrb[r] = sb[r];
                                c.sbuf = c.in_place ? nullptr : sb[r].data();
                                c.rbuf = rrb[r].data();
                                rcalls.push_back(c);
                            }
                            REQUIRE(GW_CE_OK == run(rsim, rcalls, blocking));
                            CHECK(temps_expected == rsim.temps_asked);
                            for (int r = 0; r < n; ++r) {
                                INFO("Reduce to " << root << ", rank " << r);
                                CHECK(rrb[r] == (r == root ? want : Bytes(kEs * count, kFill)));
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("hier: Bcast from every kind of root reaches every rank", "[coll][hier]")
{
    const int count = 29;
    for (const auto &L : kLayouts) {
        for (const bool blocking : {true, false}) {
            Sim probe(L.node);
            const int n = probe.size();
            for (int root = 0; root < n; ++root) {
                DYNAMIC_SECTION(L.name << (blocking ? " blocking" : " non-blocking") << " root "
                                       << root)
                {
                    Sim sim(L.node);
                    std::vector<Bytes> b(n, Bytes(kEs * count, kFill));
                    b[root] = block(root, count);
                    std::vector<gw_ce_hier_call_t> calls;
                    for (int r = 0; r < n; ++r) {
                        auto c = base(GW_CE_HIER_BCAST, n, r);
                        c.rbuf = b[r].data();
                        c.count = count;
                        c.root = root;
                        calls.push_back(c);
                    }
                    REQUIRE(GW_CE_OK == run(sim, calls, blocking));
                    for (int r = 0; r < n; ++r) {
                        INFO("rank " << r);
                        CHECK(b[r] == block(root, count));
                    }
                }
            }
        }
    }
}

namespace {

/* Allgatherv with rank q's block of counts[q] elements at displs[q]: runs
 * it and checks every rank's receive buffer of rlen elements, the gaps
 * included; Allgather when v is false (counts all rcount, packed). */
void check_allgather(const LayoutCase &L, bool v, const std::vector<int> &counts,
                     const std::vector<int> &displs, int rlen, bool in_place, bool blocking,
                     bool expect_temp)
{
    Sim sim(L.node);
    const int n = sim.size();
    Bytes want(kEs * static_cast<size_t>(rlen), kFill);
    std::vector<Bytes> sb(n), rb(n, want);
    for (int q = 0; q < n; ++q) {
        sb[q] = block(q, counts[q]);
        std::copy(sb[q].begin(), sb[q].end(), want.begin() + kEs * displs[q]);
    }
    std::vector<gw_ce_hier_call_t> calls;
    for (int r = 0; r < n; ++r) {
        auto c = base(v ? GW_CE_HIER_ALLGATHERV : GW_CE_HIER_ALLGATHER, n, r);
        if (in_place) std::copy(sb[r].begin(), sb[r].end(), rb[r].begin() + kEs * displs[r]);
        c.in_place = in_place;
        c.sbuf = in_place ? nullptr : sb[r].data();
        c.scount = counts[r];
        c.rbuf = rb[r].data();
        c.rcount = counts[0];
        c.rcounts = counts.data();
        c.rdispls = displs.data();
        calls.push_back(c);
    }
    REQUIRE(GW_CE_OK == run(sim, calls, blocking));
    CHECK((expect_temp ? n : 0) == sim.temps_asked);
    if (!expect_temp) CHECK(0 == sim.copies_done);
    for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        CHECK(rb[r] == want);
    }
}

bool consecutive(const std::vector<int> &node)
{
    for (size_t q = 1; q < node.size(); ++q) {
        if (node[q] != node[q - 1] &&
            std::find(node.begin(), node.begin() + q, node[q]) != node.begin() + q) {
            return false;
        }
    }
    return true;
}

} // namespace

TEST_CASE("hier: Allgather and Allgatherv, on the receive buffer or through a temporary",
          "[coll][hier]")
{
    for (const auto &L : kLayouts) {
        const int n = static_cast<int>(L.node.size());
        for (const bool blocking : {true, false}) {
            for (const bool in_place : {false, true}) {
                DYNAMIC_SECTION(L.name << (blocking ? " blocking" : " non-blocking")
                                       << (in_place ? " in place" : ""))
                {
                    /* Allgather: packed in rank order; the receive buffer is
                     * the node-by-node layout where every node's ranks are
                     * consecutive. */
                    const int rc = 5;
                    std::vector<int> counts(n, rc), displs(n);
                    for (int q = 0; q < n; ++q) displs[q] = q * rc;
                    check_allgather(L, false, counts, displs, n * rc, in_place, blocking,
                                    !consecutive(L.node));
                    /* Allgatherv: uneven counts (a zero among them), packed. */
                    int at = 0;
                    for (int q = 0; q < n; ++q) {
                        counts[q] = 1 == q ? 0 : 2 + (q * 3) % 5;
                        displs[q] = at;
                        at += counts[q];
                    }
                    check_allgather(L, true, counts, displs, at, in_place, blocking,
                                    !consecutive(L.node));
                    /* Allgatherv: blocks in reverse order with gaps between. */
                    at = 1;
                    for (int q = n - 1; q >= 0; --q) {
                        displs[q] = at;
                        at += counts[q] + 2;
                    }
                    check_allgather(L, true, counts, displs, at, in_place, blocking, true);
                }
            }
        }
    }
}

TEST_CASE("hier: Allgather through a temporary declines a receive type with holes alike",
          "[coll][hier]")
{
    Sim sim({0, 1, 0, 1});
    std::vector<Bytes> rb(4, Bytes(64, kFill));
    std::vector<gw_ce_hier_call_t> calls;
    for (int r = 0; r < 4; ++r) {
        auto c = base(GW_CE_HIER_ALLGATHER, 4, r);
        c.in_place = true;
        c.rbuf = rb[r].data();
        c.rcount = 2;
        c.r_extent = 8; /* elements of 4 bytes every 8 */
        c.r_dense = false;
        calls.push_back(c);
    }
    CHECK(GW_CE_HIER_DECLINED == run(sim, calls, true));
    CHECK(0 == sim.temps_asked);
}

TEST_CASE("hier: a layout out of range is refused with a reason", "[coll][hier]")
{
    Sim sim({0, 0, 1});
    std::vector<int> bad = {0, 0, 0, 1, 7, 0};
    auto c = base(GW_CE_HIER_BCAST, 3, 0);
    c.where = bad.data();
    gw_ce_hier_job_t *job = nullptr;
    char why[256] = "";
    CHECK(GW_CE_ERR_ARG == gw_ce_hier_start(&c, sim.transport(0), &job, why, sizeof(why)));
    CHECK(std::string(why).find("rank 2") != std::string::npos);
    gw_ce_hier_free(job);
}

TEST_CASE("hier: a call runs composed only with something to move, in int counts", "[coll][hier]")
{
    const std::vector<int> none = {0, 0, 0, 0}, one = {0, 0, 3, 0};
    for (const auto coll : {GW_CE_HIER_ALLREDUCE, GW_CE_HIER_REDUCE, GW_CE_HIER_BCAST}) {
        CHECK(gw_ce_hier_fits(coll, 4, 1, 0, nullptr));
        CHECK_FALSE(gw_ce_hier_fits(coll, 4, 0, 9, one.data()));
    }
    CHECK(gw_ce_hier_fits(GW_CE_HIER_ALLGATHER, 4, 0, INT32_MAX / 4, nullptr));
    CHECK_FALSE(gw_ce_hier_fits(GW_CE_HIER_ALLGATHER, 4, 9, INT32_MAX / 4 + 1, nullptr));
    CHECK_FALSE(gw_ce_hier_fits(GW_CE_HIER_ALLGATHER, 4, 9, 0, one.data()));
    CHECK(gw_ce_hier_fits(GW_CE_HIER_ALLGATHERV, 4, 0, 0, one.data()));
    CHECK_FALSE(gw_ce_hier_fits(GW_CE_HIER_ALLGATHERV, 4, 9, 9, none.data()));
    CHECK_FALSE(gw_ce_hier_fits(GW_CE_HIER_ALLGATHERV, 2, 9, 9, one.data())); /* size counts only */
}
