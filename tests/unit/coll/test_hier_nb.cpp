/*
 * The hierarchical collectives' non-blocking driver (gw_ce_hier_poll,
 * gpuwire/coll_hier.h) and the turns it keeps (gpuwire/coll_turn.h),
 * without mpirun. Every rank's jobs run over a fake transport whose
 * sub-collectives complete only when the simulator plays them: a level's
 * collectives meet in the order each rank started them on that level (as
 * a communicator's do), so a rank that started them in another order
 * shows up as a group of different collectives. Ranks poll their calls in
 * different orders and see completions at different times; the results are
 * compared with a reference, and the driver's waits (requests, copies, the
 * levels' readiness, the turn) and its errors are checked one by one.
 */
#include "gw_catch.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include "gpuwire/coll_hier.h"
#include "gpuwire/coll_turn.h"
#include "gpuwire/cuda/reduce.h"
#include "hier_layout.hpp"

namespace {

using Ints = std::vector<int32_t>;

struct Req {
    int rank;
    bool played = false;
    int status = GW_CE_OK;
    int tested_done = 0, waited = 0;
};

struct Started {
    int rank, level_rank;
    gw_ce_hier_sub_t s;
    std::vector<int> counts, displs;
    Req *req;
};

class NbSim;
struct Ctx {
    NbSim *sim;
    int rank;
};

class NbSim {
public:
    explicit NbSim(const std::vector<int> &node)
        : where(hiertest::where_of(node)), n(static_cast<int>(node.size())), turns(n), held(n, false),
          temps_(n), ctx_(n), t_(n)
    {
        for (int r = 0; r < n; ++r) {
            ctx_[r] = {this, r};
            t_[r] = {&ctx_[r], start, temp, copy, test, wait, copied, ready};
        }
    }
    const gw_ce_hier_transport_t *transport(int r) const { return &t_[r]; }

    /* Carries out every collective all of whose ranks have started it. */
    void play()
    {
        for (auto it = pending_.begin(); it != pending_.end();) {
            auto &[key, g] = *it;
            if (g.size() != members(std::get<0>(key), std::get<1>(key)).size()) {
                ++it;
                continue;
            }
            carry_out(g);
            for (auto &p : g) {
                if (nullptr != p.req) p.req->played = true;
            }
            it = pending_.erase(it);
        }
    }
    bool idle() const { return pending_.empty(); }

    std::vector<int> where;
    int n;
    std::vector<gw_ce_turn_t> turns;
    std::vector<bool> held;  /* a rank whose requests do not complete yet */
    bool levels_ready = true;
    bool landed = true;      /* queued copies have landed */
    int fail_start_at = -1;  /* the start that fails (GW_CE_ERR), counted over all ranks */
    int ready_asked = 0, copied_asked = 0, copied_waited = 0, copies_queued = 0, starts = 0;
    bool queried = false;
    std::deque<Req> reqs; /* stable addresses: a request is one of them */

private:
    int level_rank(int level, int r) const { return hiertest::level_rank(where, level, r); }
    std::vector<int> members(int level, int key) const { return hiertest::members(where, level, key); }

    /* One collective of int32 SUM, checked alike on every rank of it. */
    static void carry_out(std::vector<Started> &g)
    {
        std::sort(g.begin(), g.end(),
                  [](const Started &a, const Started &b) { return a.level_rank < b.level_rank; });
        const gw_ce_hier_sub_t &s0 = g[0].s;
        for (auto &p : g) {
            REQUIRE(p.s.kind == s0.kind);
            REQUIRE(p.s.count == s0.count);
            REQUIRE(p.s.root == s0.root);
            REQUIRE(p.counts == g[0].counts);
            REQUIRE(p.displs == g[0].displs);
        }
        const size_t es = sizeof(int32_t), len = es * static_cast<size_t>(s0.count);
        switch (s0.kind) {
        case GW_CE_HIER_SUB_REDUCE:
        case GW_CE_HIER_SUB_ALLREDUCE: {
            Ints acc(static_cast<size_t>(s0.count), 0);
            for (auto &p : g) {
                const auto *in = static_cast<const int32_t *>(p.s.in_place ? p.s.rbuf : p.s.sbuf);
                for (int k = 0; k < s0.count; ++k) acc[k] += in[k];
            }
            for (auto &p : g) {
                if (GW_CE_HIER_SUB_ALLREDUCE == s0.kind || p.level_rank == s0.root) {
                    std::memcpy(p.s.rbuf, acc.data(), len);
                }
            }
            return;
        }
        case GW_CE_HIER_SUB_BCAST:
            for (auto &p : g) std::memcpy(p.s.rbuf, g[s0.root].s.rbuf, len);
            return;
        case GW_CE_HIER_SUB_ALLGATHER:
        case GW_CE_HIER_SUB_ALLGATHERV: {
            const bool v = GW_CE_HIER_SUB_ALLGATHERV == s0.kind;
            std::vector<Ints> blocks;
            std::vector<size_t> at;
            for (size_t i = 0; i < g.size(); ++i) {
                const size_t c = static_cast<size_t>(v ? g[0].counts[i] : s0.count);
                at.push_back(static_cast<size_t>(v ? g[0].displs[i] : s0.count * static_cast<int>(i)));
                const auto *from = g[i].s.in_place ? static_cast<const int32_t *>(g[i].s.rbuf) + at[i]
                                                   : static_cast<const int32_t *>(g[i].s.sbuf);
                blocks.emplace_back(from, from + c);
            }
            for (auto &p : g) {
                for (size_t i = 0; i < g.size(); ++i) {
                    std::copy(blocks[i].begin(), blocks[i].end(), static_cast<int32_t *>(p.s.rbuf) + at[i]);
                }
            }
            return;
        }
        default: FAIL("a sub-collective these tests do not run: " << s0.kind);
        }
    }

    static int start(void *ctx, const gw_ce_hier_sub_t *s, void **req)
    {
        auto *c = static_cast<Ctx *>(ctx);
        NbSim &sim = *c->sim;
        if (sim.starts++ == sim.fail_start_at) return GW_CE_ERR;
        REQUIRE(nullptr != req); /* the driver runs the non-blocking form */
        Started p{c->rank, sim.level_rank(s->level, c->rank), *s, {}, {}, nullptr};
        const int key = GW_CE_HIER_NODE == s->level ? sim.where[2 * c->rank] : -1;
        if (GW_CE_HIER_SUB_ALLGATHERV == s->kind) {
            const size_t m = sim.members(s->level, key).size();
            p.counts.assign(s->counts, s->counts + m);
            p.displs.assign(s->displs, s->displs + m);
        }
        sim.reqs.push_back(Req{c->rank});
        p.req = &sim.reqs.back();
        *req = p.req;
        /* The collectives of a level meet in the order its ranks start them. */
        const int seq = sim.seq_[{c->rank, s->level}]++;
        sim.pending_[{s->level, key, seq}].push_back(p);
        return GW_CE_OK;
    }
    static int temp(void *ctx, size_t bytes, void **ptr)
    {
        auto *c = static_cast<Ctx *>(ctx);
        c->sim->temps_[c->rank].assign(bytes, 0x5A);
        *ptr = c->sim->temps_[c->rank].data();
        return GW_CE_OK;
    }
    static int copy(void *ctx, const gw_ce_hier_copy_t *cp, size_t k, bool wait)
    {
        auto *c = static_cast<Ctx *>(ctx);
        REQUIRE(!wait);
        for (size_t i = 0; i < k; ++i) std::memcpy(cp[i].dst, cp[i].src, cp[i].bytes);
        c->sim->copies_queued += static_cast<int>(k);
        return GW_CE_OK;
    }
    static int test(void *ctx, void **req, bool *done)
    {
        auto *c = static_cast<Ctx *>(ctx);
        Req *r = static_cast<Req *>(*req);
        REQUIRE(r->rank == c->rank);
        *done = r->played && !c->sim->held[c->rank];
        if (!*done) return GW_CE_OK;
        ++r->tested_done;
        *req = nullptr;
        return r->status;
    }
    static void wait(void *ctx, void **req)
    {
        (void)ctx;
        ++static_cast<Req *>(*req)->waited;
        *req = nullptr;
    }
    static int copied(void *ctx, bool query, bool wait, bool *done)
    {
        auto *c = static_cast<Ctx *>(ctx);
        c->sim->queried |= query;
        ++(wait ? c->sim->copied_waited : c->sim->copied_asked);
        *done = wait || c->sim->landed;
        return GW_CE_OK;
    }
    static bool ready(void *ctx)
    {
        auto *c = static_cast<Ctx *>(ctx);
        ++c->sim->ready_asked;
        return c->sim->levels_ready;
    }

    std::vector<std::vector<char>> temps_;
    std::vector<Ctx> ctx_;
    std::vector<gw_ce_hier_transport_t> t_;
    std::map<std::tuple<int, int, int>, std::vector<Started>> pending_;
    std::map<std::pair<int, int>, int> seq_;
};

gw_ce_hier_call_t call_of(NbSim &sim, gw_ce_hier_coll_t coll, int rank)
{
    gw_ce_hier_call_t c{};
    c.coll = coll;
    c.op = GW_OP_SUM;
    c.type = GW_TYPE_INT32;
    c.size = sim.n;
    c.rank = rank;
    c.where = sim.where.data();
    c.es = c.r_extent = c.r_size = sizeof(int32_t);
    c.r_dense = true;
    c.turn = &sim.turns[rank];
    return c;
}

gw_ce_hier_job_t *start_job(NbSim &sim, const gw_ce_hier_call_t &c)
{
    gw_ce_hier_job_t *job = nullptr;
    char why[256] = "";
    const int rc = gw_ce_hier_start(&c, sim.transport(c.rank), &job, why, sizeof(why));
    INFO(why);
    REQUIRE(GW_CE_OK == rc);
    return job;
}

/* An in-place Allreduce of buf's elements on rank. */
gw_ce_hier_call_t allreduce_in_place(NbSim &sim, int rank, Ints &buf)
{
    auto c = call_of(sim, GW_CE_HIER_ALLREDUCE, rank);
    c.in_place = true;
    c.rbuf = buf.data();
    c.count = static_cast<int>(buf.size());
    return c;
}

int32_t value(int r, int k) { return 1000 * r + 3 * k + 1; }

} // namespace

TEST_CASE("hier turn: a call goes once those before it have passed", "[coll][hier]")
{
    gw_ce_turn_t t{};
    gw_ce_turn_ticket_t a{}, b{}, never{};
    CHECK(gw_ce_turn_idle(&t));
    gw_ce_turn_take(&t, &a);
    gw_ce_turn_take(&t, &b);
    CHECK(gw_ce_turn_mine(&t, &a));
    CHECK_FALSE(gw_ce_turn_mine(&t, &b));
    CHECK_FALSE(gw_ce_turn_idle(&t));
    gw_ce_turn_pass(&t, &a);
    gw_ce_turn_pass(&t, &a); /* once per ticket */
    gw_ce_turn_pass(&t, &never);
    CHECK(1u == t.passed);
    CHECK(gw_ce_turn_mine(&t, &b));
    gw_ce_turn_pass(&t, &b);
    CHECK(gw_ce_turn_idle(&t));
}

TEST_CASE("hier poll: calls in flight start their levels' collectives in one order on every rank",
          "[coll][hier]")
{
    /* Two nodes of two ranks and one of three, interleaved: Allgather runs
     * through a temporary and ends with copies. */
    NbSim sim({0, 1, 0, 2, 1, 2, 2});
    const int n = sim.n, count = 11;
    std::vector<Ints> as(n), ar(n, Ints(count, -1)), bb(n, Ints(count, -1)), gs(n), gr(n, Ints(2 * n, -1));
    std::vector<std::vector<gw_ce_hier_job_t *>> jobs(n);
    const int root = 3;
    for (int r = 0; r < n; ++r) {
        for (int k = 0; k < count; ++k) as[r].push_back(value(r, k));
        if (r == root) for (int k = 0; k < count; ++k) bb[r][k] = value(50, k);
        gs[r] = {value(r, 0), value(r, 1)};
        auto a = call_of(sim, GW_CE_HIER_ALLREDUCE, r);
        a.sbuf = as[r].data();
        a.rbuf = ar[r].data();
        a.count = count;
        auto b = call_of(sim, GW_CE_HIER_BCAST, r);
        b.rbuf = bb[r].data();
        b.count = count;
        b.root = root;
        auto g = call_of(sim, GW_CE_HIER_ALLGATHER, r);
        g.sbuf = gs[r].data();
        g.scount = g.rcount = 2;
        g.rbuf = gr[r].data();
        jobs[r] = {start_job(sim, a), start_job(sim, b), start_job(sim, g)};
        CHECK(3u == sim.turns[r].issued);
    }
    /* Even ranks poll their latest call first; rank 0 sees its completions
     * late. */
    std::vector<std::vector<bool>> done(n, std::vector<bool>(3, false));
    int round = 0;
    for (bool all = false; !all && round < 60; ++round) {
        sim.held[0] = round < 10;
        all = true;
        for (int r = 0; r < n; ++r) {
            for (int i = 0; i < 3; ++i) {
                const int j = 0 == r % 2 ? 2 - i : i;
                bool d = false;
                REQUIRE(GW_CE_OK == gw_ce_hier_poll(jobs[r][j], 0 == round % 4, &d));
                done[r][j] = d;
                all = all && d;
            }
        }
        sim.play();
    }
    REQUIRE(round < 60);
    CHECK(sim.idle());
    CHECK(sim.copied_asked > 0);
    for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        Ints want_a(count, 0), want_b(count), want_g;
        for (int k = 0; k < count; ++k) {
            for (int q = 0; q < n; ++q) want_a[k] += value(q, k);
            want_b[k] = value(50, k);
        }
        for (int q = 0; q < n; ++q) want_g.insert(want_g.end(), {value(q, 0), value(q, 1)});
        CHECK(ar[r] == want_a);
        CHECK(bb[r] == want_b);
        CHECK(gr[r] == want_g);
        CHECK(gw_ce_turn_idle(&sim.turns[r]));
        for (auto *j : jobs[r]) gw_ce_hier_free(j);
    }
    for (const Req &q : sim.reqs) CHECK(1 == q.tested_done + q.waited);
}

TEST_CASE("hier poll: each wait of the driver holds the next step back", "[coll][hier]")
{
    NbSim sim({0, 0, 1, 1, 0});
    const int n = sim.n;
    std::vector<Ints> buf(n, Ints(4, 0));
    buf[0] = {1, 2, 3, 4};
    std::vector<gw_ce_hier_job_t *> jobs(n);
    for (int r = 0; r < n; ++r) {
        auto c = call_of(sim, GW_CE_HIER_BCAST, r);
        c.rbuf = buf[r].data();
        c.count = 4;
        jobs[r] = start_job(sim, c);
    }
    auto poll_all = [&] {
        int finished = 0;
        for (int r = 0; r < n; ++r) {
            bool d = false;
            REQUIRE(GW_CE_OK == gw_ce_hier_poll(jobs[r], false, &d));
            finished += d;
        }
        return finished;
    };
    /* The levels are not ready: nothing starts, and the turn is kept. */
    sim.levels_ready = false;
    CHECK(0 == poll_all());
    CHECK(0 == sim.starts);
    CHECK(sim.ready_asked >= n);
    CHECK(0u == sim.turns[0].passed);
    sim.levels_ready = true;
    /* The root's node starts step 0; the other node, with nothing to do
     * there, starts the leaders' step (its leader) and its own (the other
     * rank); then every rank waits for what it started. */
    CHECK(0 == poll_all());
    const int after_first = sim.starts;
    CHECK(5 == after_first);
    CHECK(0 == poll_all());
    CHECK(after_first == sim.starts);
    for (int round = 0; round < 10 && poll_all() < n; ++round) sim.play();
    CHECK(n == poll_all());
    CHECK(n == poll_all()); /* done stays done */
    for (int r = 0; r < n; ++r) {
        CHECK(buf[r] == Ints{1, 2, 3, 4});
        CHECK(gw_ce_turn_idle(&sim.turns[r]));
        gw_ce_hier_free(jobs[r]);
    }
}

TEST_CASE("hier poll: the copies of Allgather's last step are waited for", "[coll][hier]")
{
    NbSim sim({0, 1, 0, 1});
    std::vector<Ints> rb(4, Ints(4, -1));
    std::vector<gw_ce_hier_job_t *> jobs(4);
    for (int r = 0; r < 4; ++r) {
        auto c = call_of(sim, GW_CE_HIER_ALLGATHER, r);
        c.in_place = true;
        rb[r][r] = value(r, 0);
        c.rbuf = rb[r].data();
        c.rcount = 1;
        jobs[r] = start_job(sim, c);
    }
    sim.landed = false;
    std::vector<bool> done(4, false);
    for (int round = 0; round < 12; ++round) {
        for (int r = 0; r < 4; ++r) {
            bool d = false;
            REQUIRE(GW_CE_OK == gw_ce_hier_poll(jobs[r], true, &d));
            done[r] = d;
        }
        sim.play();
    }
    CHECK(16 == sim.copies_queued); /* every rank's four blocks */
    CHECK(sim.queried);
    CHECK(std::count(done.begin(), done.end(), true) == 0);
    for (int r = 0; r < 4; ++r) CHECK(gw_ce_turn_idle(&sim.turns[r])); /* copies are this rank's */
    sim.landed = true;
    for (int r = 0; r < 4; ++r) {
        bool d = false;
        REQUIRE(GW_CE_OK == gw_ce_hier_poll(jobs[r], false, &d));
        CHECK(d);
        CHECK(rb[r] == Ints{value(0, 0), value(1, 0), value(2, 0), value(3, 0)});
        gw_ce_hier_free(jobs[r]);
    }
    CHECK(0 == sim.copied_waited);
}

TEST_CASE("hier poll: errors come back, and a job freed mid-way waits and passes", "[coll][hier]")
{
    SECTION("a request's status")
    {
        NbSim sim({0, 0, 1});
        Ints buf(2, 7);
        gw_ce_hier_job_t *job = start_job(sim, allreduce_in_place(sim, 0, buf));
        bool d = false;
        REQUIRE(GW_CE_OK == gw_ce_hier_poll(job, false, &d));
        REQUIRE(1 == sim.starts);
        sim.reqs.back().played = true;
        sim.reqs.back().status = -77;
        CHECK(-77 == gw_ce_hier_poll(job, false, &d));
        CHECK_FALSE(d);
        CHECK(0u == sim.turns[0].passed); /* its last collective is not started */
        gw_ce_hier_free(job);
        CHECK(gw_ce_turn_idle(&sim.turns[0]));
        CHECK(0 == sim.reqs.back().waited);
    }
    SECTION("a step that fails to start")
    {
        NbSim sim({0, 0, 1});
        Ints buf(2, 7);
        gw_ce_hier_job_t *job = start_job(sim, allreduce_in_place(sim, 2, buf));
        sim.fail_start_at = 0; /* the node's Reduce */
        bool d = false;
        CHECK(GW_CE_ERR == gw_ce_hier_poll(job, false, &d));
        CHECK(sim.reqs.empty());
        gw_ce_hier_free(job);
        CHECK(gw_ce_turn_idle(&sim.turns[2]));
    }
    SECTION("freed with a step in flight")
    {
        NbSim sim({0, 0, 1});
        Ints buf(2, 7);
        gw_ce_hier_job_t *job = start_job(sim, allreduce_in_place(sim, 1, buf));
        gw_ce_hier_job_t *later = start_job(sim, allreduce_in_place(sim, 1, buf));
        bool d = false;
        REQUIRE(GW_CE_OK == gw_ce_hier_poll(job, false, &d));
        REQUIRE(GW_CE_OK == gw_ce_hier_poll(later, false, &d));
        REQUIRE(1 == sim.starts); /* the later call waits for its turn */
        gw_ce_hier_free(job);
        CHECK(1 == sim.reqs.front().waited);
        CHECK(1u == sim.turns[1].passed);
        REQUIRE(GW_CE_OK == gw_ce_hier_poll(later, false, &d));
        CHECK(2 == sim.starts);
        gw_ce_hier_free(later);
        CHECK(gw_ce_turn_idle(&sim.turns[1]));
    }
    SECTION("the blocking form's job and a driver without its functions")
    {
        NbSim sim({0, 0, 1});
        Ints buf(2, 7);
        auto c = call_of(sim, GW_CE_HIER_BCAST, 0);
        c.rbuf = buf.data();
        c.count = 2;
        c.turn = nullptr;
        gw_ce_hier_job_t *job = start_job(sim, c);
        bool d = true;
        CHECK(GW_CE_ERR_ARG == gw_ce_hier_poll(job, false, &d));
        CHECK_FALSE(d);
        gw_ce_hier_free(job);
        gw_ce_hier_transport_t bare = *sim.transport(0);
        bare.test = nullptr;
        c.turn = &sim.turns[0];
        char why[256] = "";
        job = nullptr;
        CHECK(GW_CE_ERR_ARG == gw_ce_hier_start(&c, &bare, &job, why, sizeof(why)));
        CHECK(0u == sim.turns[0].issued);
        gw_ce_hier_free(job);
    }
    SECTION("a call that declines takes no turn")
    {
        NbSim sim({0, 1, 0, 1});
        Ints rb(16, 0);
        auto c = call_of(sim, GW_CE_HIER_ALLGATHER, 0);
        c.in_place = true;
        c.rbuf = rb.data();
        c.rcount = 2;
        c.r_extent = 8;
        c.r_dense = false;
        gw_ce_hier_job_t *job = nullptr;
        char why[256] = "";
        CHECK(GW_CE_HIER_DECLINED == gw_ce_hier_start(&c, sim.transport(0), &job, why, sizeof(why)));
        CHECK(0u == sim.turns[0].issued);
        gw_ce_hier_free(job);
    }
}
