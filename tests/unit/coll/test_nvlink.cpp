/*
 * The NVLink team family (gpuwire/coll_nvlink.h) without mpirun: ranks over
 * the memory transport (mem_transport.hpp), the team on the simulated GPU of
 * tests/mpi_coll (fake_team.c: GW_FAKE_NVLINK=1 gives every rank a
 * workspace the others map, the one-shot "kernel" done by the CPU;
 * GW_FAKE_NVLINK_PARTIAL=1: odd ranks cannot open one;
 * fake_device_board.c: GW_FAKE_NVLINK_DELEGATE=1 puts the team "on one
 * GPU", with a board whose last poster does the whole call).
 *
 * Set-ups and non-blocking calls are driven from one thread, every rank in
 * turn (deterministic); blocking calls run on a thread per rank, checked
 * after the threads end (Catch2's assertions are not thread-safe).
 *
 * Checked: the set-up's outcome alike on every rank (ready, declined by one
 * rank, a communicator across nodes, a failed message); the blocking calls'
 * results and forms (one-shot, large declined, direct declined by the
 * agreement, delegated); the non-blocking calls' launch order and arrivals;
 * the delegated form's launch by the last rank to post and the completion
 * word every rank reads; the failures: a rank that cannot take part, a
 * rank that never posts (the timeout), a request that could not be made.
 */
#include "gw_catch.hpp"

#include <algorithm>
#include <initializer_list>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "gpuwire/coll_nvlink.h"
#include "gpuwire/cuda/reduce.h"

#include "dev_buf.hpp"
#include "mem_transport.hpp"

namespace {

constexpr int kSetupTag = -7, kArriveTag = -8;
constexpr int kFailStatus = 15; /* what an injected message failure completes with */
constexpr size_t kOneShot = 1024;

/* Environment variables of the simulated GPU, set for one test. */
class Env {
public:
    explicit Env(std::initializer_list<std::pair<const char *, const char *>> vars) : vars_(vars)
    {
        for (const auto &[k, v] : vars_) setenv(k, v, 1);
    }
    ~Env()
    {
        for (const auto &[k, v] : vars_) unsetenv(k);
    }

private:
    std::vector<std::pair<const char *, const char *>> vars_;
};

/* Blocking host collectives over the rank threads (the direct form's
 * allgather and agreement). */
class HostColl {
public:
    explicit HostColl(int n) : n_(n), slots_(n) {}
    void allgather(int rank, const void *mine, void *all, size_t bytes)
    {
        std::unique_lock<std::mutex> g(mu_);
        const char *p = static_cast<const char *>(mine);
        slots_[rank].assign(p, p + bytes);
        const unsigned long long gen = gen_;
        if (++arrived_ == n_) {
            res_.clear();
            for (const auto &s : slots_) res_.insert(res_.end(), s.begin(), s.end());
            arrived_ = 0;
            ++gen_;
            cv_.notify_all();
        } else {
            cv_.wait(g, [&] { return gen != gen_; });
        }
        std::memcpy(all, res_.data(), res_.size());
    }

private:
    int n_, arrived_ = 0;
    unsigned long long gen_ = 0;
    std::vector<std::vector<char>> slots_;
    std::vector<char> res_;
    std::mutex mu_;
    std::condition_variable cv_;
};

/* A non-blocking call's request, as gw_coll_nb_job makes it. */
struct Job {
    const gw_ce_job_ops_t *ops;
    void *job;
    bool ordered;
    bool finished = false;
    int status = 0;
};

struct World;

/* One rank: its team, its transport (the memory transport's, with failures
 * injected), its requests and log lines. */
struct Rank {
    World *w = nullptr;
    int rank = 0;
    gw_ce_transport_t base{};
    gw_ce_nvl_t nvl{};
    std::vector<Job> jobs;
    std::vector<std::pair<int, std::string>> log;
    int fail_tag = 0;          /* receives of this tag complete with kFailStatus */
    std::set<void *> failing;  /* those receives */
    bool fail_requests = false; /* nb_job cannot make a request */

    bool logged(const char *what) const
    {
        return std::any_of(log.begin(), log.end(),
                           [&](const auto &l) { return l.second.find(what) != std::string::npos; });
    }
};

struct World {
    gwtest::MemWorld mem;
    HostColl host;
    std::vector<Rank> ranks;
    bool local = true;
    std::string board;
    unsigned long long calls = 0, nb_calls = 0;

    World(int n, int delegate, int timeout_s = 20) : mem(n), host(n), ranks(n)
    {
        static int boards;
        board = "/gwnvl-unit-" + std::to_string(getpid()) + "-" + std::to_string(++boards);
        gw_ce_nvl_params_t pa{};
        pa.oneshot_bytes = kOneShot;
        pa.timeout_s = timeout_s;
        pa.delegate = delegate;
        pa.calls = &calls;
        pa.nb_calls = &nb_calls;
        for (int r = 0; r < n; ++r) {
            Rank &k = ranks[r];
            k.w = this;
            k.rank = r;
            k.base = mem.transport(r);
            gw_ce_nvl_transport_t tp{};
            tp.p2p = k.base;
            tp.p2p.ctx = &k;
            tp.p2p.isend = isend;
            tp.p2p.irecv = irecv;
            tp.p2p.test = test;
            tp.p2p.cancel = cancel;
            tp.p2p.progress = progress;
            tp.setup_tag = kSetupTag;
            tp.arrive_tag = kArriveTag;
            tp.ctx = &k;
            tp.peers = peers;
            tp.allgather = allgather;
            tp.all_min = all_min;
            tp.nb_job = nb_job;
            tp.name = name;
            tp.log = log;
            gw_ce_nvl_init(&k.nvl, &tp, &pa);
        }
    }
    ~World()
    {
        for (Rank &k : ranks) {
            for (Job &j : k.jobs) {
                if (!j.finished) j.ops->release(j.job);
            }
            gw_ce_nvl_release(&k.nvl);
        }
    }
    int size() const { return (int)ranks.size(); }

    static Rank &of(void *ctx) { return *static_cast<Rank *>(ctx); }
    static int isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
    {
        Rank &k = of(ctx);
        return k.base.isend(k.base.ctx, buf, bytes, peer, tag, req);
    }
    static int irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
    {
        Rank &k = of(ctx);
        const int rc = k.base.irecv(k.base.ctx, buf, bytes, peer, tag, req);
        if (0 == rc && tag == k.fail_tag) k.failing.insert(*req);
        return rc;
    }
    static int test(void *ctx, void **req, bool *done)
    {
        Rank &k = of(ctx);
        void *r = *req;
        const int rc = k.base.test(k.base.ctx, req, done);
        if (*done && k.failing.erase(r)) return kFailStatus;
        return rc;
    }
    static void cancel(void *ctx, void **req)
    {
        Rank &k = of(ctx);
        k.failing.erase(*req);
        k.base.cancel(k.base.ctx, req);
    }
    static void progress(void *) { std::this_thread::yield(); }
    static int peers(void *ctx, gw_ce_nvl_peers_t *out)
    {
        Rank &k = of(ctx);
        out->local = k.w->local;
        for (int r = 0; r < k.w->size(); ++r) out->ids[r] = 100u + (uint32_t)r;
        std::snprintf(out->board, sizeof(out->board), "%s", k.w->board.c_str());
        return 0;
    }
    static int allgather(void *ctx, const void *mine, void *all, size_t bytes)
    {
        Rank &k = of(ctx);
        k.w->host.allgather(k.rank, mine, all, bytes);
        return 0;
    }
    static int all_min(void *ctx, int mine, int *min)
    {
        Rank &k = of(ctx);
        std::vector<int> all(k.w->size());
        k.w->host.allgather(k.rank, &mine, all.data(), sizeof(int));
        *min = *std::min_element(all.begin(), all.end());
        return 0;
    }
    static int nb_job(void *ctx, void *arg, const gw_ce_job_ops_t *ops, void *job, bool ordered)
    {
        (void)arg;
        Rank &k = of(ctx);
        if (k.fail_requests) {
            ops->release(job);
            return GW_CE_ERR_NOMEM;
        }
        k.jobs.push_back(Job{ops, job, ordered});
        return 0;
    }
    static const char *name(void *) { return "UNIT_COMM"; }
    static void log(void *ctx, int level, const char *line) { of(ctx).log.emplace_back(level, line); }

    /* Starts every rank's set-up, moves them on in turn to the end and
     * adopts the outcome. */
    void setup()
    {
        for (Rank &k : ranks) REQUIRE(GW_CE_OK == gw_ce_nvl_setup_start(&k.nvl, 0));
        for (int round = 0; round < 1000; ++round) {
            bool any = false;
            for (Rank &k : ranks) {
                gw_ce_nvl_setup_progress(&k.nvl);
                any = any || GW_CE_NVL_SETTING_UP == k.nvl.state;
            }
            if (!any) {
                /* Adopted, as at a blocking call. */
                for (Rank &k : ranks) gw_ce_nvl_settle(&k.nvl);
                return;
            }
        }
        FAIL("the set-up did not end");
    }
    /* Polls job i of rank r once; true once it has finished. */
    bool poll(int r, size_t i)
    {
        Job &j = ranks[r].jobs.at(i);
        if (j.finished) return true;
        bool done = false;
        j.status = j.ops->poll(j.job, true, &done);
        if (done || GW_CE_OK != j.status) {
            j.ops->release(j.job);
            j.finished = true;
        }
        return j.finished;
    }
    /* Polls every rank's job i until all have finished. */
    void finish(size_t i)
    {
        for (int round = 0; round < 100000; ++round) {
            bool all = true;
            for (int r = 0; r < size(); ++r) all = poll(r, i) && all;
            if (all) return;
        }
        FAIL("non-blocking calls did not finish");
    }
};

/* A call on this rank's simulated device buffers (GPU 0). */
struct Call {
    gw_ce_nvl_call_t c{};
    gw_ce_region_t r[GW_CE_REGION_COUNT]{};
};

gw_ce_region_t region(const void *p, size_t bytes, unsigned flags)
{
    gw_ce_region_t g{};
    g.user = p;
    g.lo = 0;
    g.hi = (ptrdiff_t)bytes;
    g.flags = flags;
    g.dense = true;
    g.on_gpu = bytes > 0;
    g.gpu = bytes > 0 ? 0 : -1;
    return g;
}

Call allreduce(const int *in, int *out, size_t count, bool nb = false)
{
    Call k;
    k.c.coll = GW_CE_NVL_ALLREDUCE;
    k.c.nonblocking = nb;
    k.c.op = GW_OP_SUM;
    k.c.type = GW_TYPE_INT32;
    k.c.ids_ok = k.c.count_ok = true;
    k.c.bytes = count * sizeof(int);
    k.c.gpu = 0;
    k.r[GW_CE_REGION_SEND] = region(in, k.c.bytes, GW_CE_STAGE_IN);
    k.r[GW_CE_REGION_RECV] = region(out, k.c.bytes, GW_CE_STAGE_OUT);
    return k;
}

Call bcast(int *buf, size_t count, int root, bool nb = false)
{
    Call k;
    k.c.coll = GW_CE_NVL_BCAST;
    k.c.nonblocking = nb;
    k.c.count_ok = k.c.layout_ok = true;
    k.c.bytes = count * sizeof(int);
    k.c.root = root;
    k.c.gpu = 0;
    k.r[GW_CE_REGION_RECV] = region(buf, k.c.bytes, GW_CE_STAGE_IN | GW_CE_STAGE_OUT);
    return k;
}

Call allgather(const int *in, int *out, size_t count, int n, bool in_place)
{
    Call k;
    k.c.coll = GW_CE_NVL_ALLGATHER;
    k.c.count_ok = k.c.layout_ok = true;
    k.c.bytes = count * sizeof(int);
    k.c.in_place = in_place;
    k.c.gpu = 0;
    if (!in_place) k.r[GW_CE_REGION_SEND] = region(in, k.c.bytes, GW_CE_STAGE_IN);
    k.r[GW_CE_REGION_RECV] = region(out, n * k.c.bytes, GW_CE_STAGE_IN | GW_CE_STAGE_OUT);
    return k;
}

/* Every rank's blocking call on a thread of its own; their return codes. */
std::vector<int> run_blocking(World &w, std::vector<Call> &calls)
{
    std::vector<int> rcs(w.size(), -100);
    std::vector<std::thread> ts;
    for (int r = 0; r < w.size(); ++r) {
        ts.emplace_back([&, r] { rcs[r] = gw_ce_nvl_run(&w.ranks[r].nvl, &calls[r].c, calls[r].r); });
    }
    for (auto &t : ts) t.join();
    return rcs;
}

/* Rank r's input: count ints. */
void fill(int *p, size_t count, int r)
{
    for (size_t i = 0; i < count; ++i) p[i] = (r + 1) * 1000 + (int)i;
}

} // namespace

TEST_CASE("accepts decides from what every rank shares", "[coll][nvlink]")
{
    Call k = allreduce(nullptr, nullptr, 4);
    CHECK(gw_ce_nvl_accepts(&k.c, 3));
    CHECK_FALSE(gw_ce_nvl_accepts(&k.c, 1));
    CHECK_FALSE(gw_ce_nvl_accepts(&k.c, GW_CE_NVL_MAX_TEAM + 1));
    k.c.ids_ok = false;
    CHECK_FALSE(gw_ce_nvl_accepts(&k.c, 3));
    k.c.ids_ok = true;
    k.c.count_ok = false;
    CHECK_FALSE(gw_ce_nvl_accepts(&k.c, 3));
    Call b = bcast(nullptr, 4, 0);
    CHECK(gw_ce_nvl_accepts(&b.c, 2));
    b.c.layout_ok = false;
    CHECK_FALSE(gw_ce_nvl_accepts(&b.c, 2));
}

TEST_CASE("the set-up makes a team on every rank alike", "[coll][nvlink]")
{
    Env env({{"GW_FAKE_NVLINK", "1"}});
    World w(3, 1);
    w.setup();
    for (Rank &k : w.ranks) {
        CHECK(GW_CE_NVL_READY == k.nvl.state);
        CHECK(nullptr != k.nvl.team);
        CHECK(nullptr == k.nvl.setup);
        CHECK_FALSE(k.nvl.dl); /* a GPU per rank: no board */
        CHECK(k.logged("NVLink: team of 3 ranks on UNIT_COMM"));
    }
    CHECK(0u == w.mem.unreceived());
    CHECK(0 == w.mem.leaks());
    /* Descriptions and answers: 2 each to each of the 2 others. */
    CHECK(3 * 2 * 2 == w.mem.sends());
}

TEST_CASE("the set-up declines alike where a rank cannot take part", "[coll][nvlink]")
{
    SECTION("odd ranks cannot open a team")
    {
        Env env({{"GW_FAKE_NVLINK_PARTIAL", "1"}});
        World w(3, 1);
        w.setup();
        for (Rank &k : w.ranks) {
            CHECK(GW_CE_NVL_UNUSABLE == k.nvl.state);
            CHECK(nullptr == k.nvl.team);
        }
        CHECK(w.ranks[1].logged("NVLink: not used on UNIT_COMM: the simulated GPU has no NVLink peers"));
        CHECK(w.ranks[0].logged("another rank could not take part"));
        CHECK(0 == w.mem.leaks());
    }
    SECTION("a communicator across nodes: nothing exchanged")
    {
        Env env({{"GW_FAKE_NVLINK", "1"}});
        World w(2, 1);
        w.local = false;
        for (Rank &k : w.ranks) {
            CHECK(GW_CE_OK == gw_ce_nvl_setup_start(&k.nvl, 0));
            CHECK(GW_CE_NVL_UNUSABLE == k.nvl.state);
        }
        CHECK(0 == w.mem.sends());
    }
    SECTION("a description's message fails on one rank")
    {
        Env env({{"GW_FAKE_NVLINK", "1"}});
        World w(3, 1);
        w.ranks[1].fail_tag = kSetupTag;
        w.setup();
        for (Rank &k : w.ranks) CHECK(GW_CE_NVL_UNUSABLE == k.nvl.state);
        CHECK(w.ranks[1].logged("NVLink team of UNIT_COMM: a set-up message failed (MPI error 15)"));
        CHECK(w.ranks[0].logged("NVLink: not used on UNIT_COMM: another rank could not take part"));
        CHECK(0 == w.mem.leaks());
    }
}

TEST_CASE("blocking calls run one-shot on the team", "[coll][nvlink]")
{
    Env env({{"GW_FAKE_NVLINK", "1"}});
    constexpr int n = 3;
    constexpr size_t count = 64;
    World w(n, 1);
    w.setup();
    std::vector<std::unique_ptr<DevBuf>> in, out;
    for (int r = 0; r < n; ++r) {
        in.push_back(std::make_unique<DevBuf>(n * count * sizeof(int)));
        out.push_back(std::make_unique<DevBuf>(n * count * sizeof(int)));
        fill(in[r]->p<int>(), count, r);
    }
    SECTION("allreduce")
    {
        std::vector<Call> calls;
        for (int r = 0; r < n; ++r) calls.push_back(allreduce(in[r]->p<int>(), out[r]->p<int>(), count));
        for (int rc : run_blocking(w, calls)) CHECK(GW_CE_OK == rc);
        for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < count; ++i) {
                REQUIRE(out[r]->p<int>()[i] == (1000 + 2000 + 3000) + 3 * (int)i);
            }
        }
        CHECK(3u == w.calls);
    }
    SECTION("bcast from rank 1")
    {
        std::vector<Call> calls;
        for (int r = 0; r < n; ++r) calls.push_back(bcast(in[r]->p<int>(), count, 1));
        for (int rc : run_blocking(w, calls)) CHECK(GW_CE_OK == rc);
        for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < count; ++i) REQUIRE(in[r]->p<int>()[i] == 2000 + (int)i);
        }
        CHECK(3u == w.calls);
    }
    SECTION("allgather, in place and not")
    {
        for (bool in_place : {false, true}) {
            std::vector<Call> calls;
            for (int r = 0; r < n; ++r) {
                if (in_place) fill(out[r]->p<int>() + r * count, count, r);
                calls.push_back(allgather(in[r]->p<int>(), out[r]->p<int>(), count, n, in_place));
            }
            for (int rc : run_blocking(w, calls)) CHECK(GW_CE_OK == rc);
            for (int r = 0; r < n; ++r) {
                for (int q = 0; q < n; ++q) {
                    for (size_t i = 0; i < count; ++i) {
                        REQUIRE(out[r]->p<int>()[q * count + i] == (q + 1) * 1000 + (int)i);
                    }
                }
            }
        }
        CHECK(6u == w.calls);
    }
    SECTION("above the one-shot size: declined, or direct and declined by the agreement")
    {
        const size_t big = 2 * kOneShot / sizeof(int);
        auto a = std::make_unique<DevBuf>(big * sizeof(int) * n);
        std::vector<Call> calls;
        for (int r = 0; r < n; ++r) calls.push_back(allreduce(a->p<int>(), a->p<int>(), big));
        for (int rc : run_blocking(w, calls)) CHECK(GW_CE_DECLINED == rc);
        for (Call &k : calls) k.c.sel_nvlink = true;
        for (int rc : run_blocking(w, calls)) CHECK(GW_CE_DECLINED == rc);
        for (Rank &k : w.ranks) CHECK(k.logged("NVLink: allreduce of 2048 bytes declined"));
        CHECK(0u == w.calls);
    }
}

TEST_CASE("non-blocking calls launch in order, once every rank has initiated", "[coll][nvlink]")
{
    Env env({{"GW_FAKE_NVLINK", "1"}});
    constexpr int n = 3;
    constexpr size_t count = 16;
    World w(n, 1);
    std::vector<std::unique_ptr<DevBuf>> a, b;
    for (int r = 0; r < n; ++r) {
        a.push_back(std::make_unique<DevBuf>(count * sizeof(int)));
        b.push_back(std::make_unique<DevBuf>(count * sizeof(int)));
        fill(a[r]->p<int>(), count, r);
        fill(b[r]->p<int>(), count, r + 10);
    }
    /* Ranks 0 and 1 initiate both calls (in place allreduce, then bcast from
     * rank 2), starting the set-up; rank 2 has not initiated yet. */
    for (int r = 0; r < 2; ++r) {
        Call x = allreduce(a[r]->p<int>(), a[r]->p<int>(), count, true);
        x.c.in_place = true;
        x.r[GW_CE_REGION_SEND] = gw_ce_region_t{};
        Call y = bcast(b[r]->p<int>(), count, 2, true);
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[r].nvl, &x.c, x.r, nullptr));
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[r].nvl, &y.c, y.r, nullptr));
        CHECK(GW_CE_NVL_SETTING_UP == w.ranks[r].nvl.seen);
        /* Initiated during the set-up: they keep their places among the
         * staged calls. */
        REQUIRE(2u == w.ranks[r].jobs.size());
        CHECK(w.ranks[r].jobs[0].ordered);
        CHECK(w.ranks[r].jobs[1].ordered);
        CHECK(2u == w.ranks[r].nvl.nb_issued);
    }
    for (int i = 0; i < 50; ++i) {
        for (int r = 0; r < 2; ++r) {
            CHECK_FALSE(w.poll(r, 1));
            CHECK_FALSE(w.poll(r, 0));
        }
    }
    /* The set-up waits for rank 2; nothing launched. */
    for (int r = 0; r < 2; ++r) CHECK(0u == w.ranks[r].nvl.nb_launched);
    for (int r = 2; r < 3; ++r) {
        Call x = allreduce(a[r]->p<int>(), a[r]->p<int>(), count, true);
        x.c.in_place = true;
        x.r[GW_CE_REGION_SEND] = gw_ce_region_t{};
        Call y = bcast(b[r]->p<int>(), count, 2, true);
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[r].nvl, &x.c, x.r, nullptr));
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[r].nvl, &y.c, y.r, nullptr));
    }
    /* Only the second call polled: the set-up ends, but it may not launch
     * before the first. */
    for (int i = 0; i < 200; ++i) {
        for (int r = 0; r < n; ++r) CHECK_FALSE(w.poll(r, 1));
    }
    for (Rank &k : w.ranks) {
        CHECK(GW_CE_NVL_READY == k.nvl.state);
        CHECK(0u == k.nvl.nb_launched);
    }
    w.finish(0);
    w.finish(1);
    for (Rank &k : w.ranks) {
        for (const Job &j : k.jobs) CHECK(GW_CE_OK == j.status);
        CHECK(2u == k.nvl.nb_launched);
    }
    for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) {
            REQUIRE(a[r]->p<int>()[i] == 6000 + 3 * (int)i);
            REQUIRE(b[r]->p<int>()[i] == 13000 + (int)i);
        }
    }
    CHECK(6u == w.nb_calls);
    /* A later call on the ready team is not ordered; a larger one declines. */
    Call z = allreduce(a[0]->p<int>(), a[0]->p<int>(), kOneShot, true);
    CHECK(GW_CE_DECLINED == gw_ce_nvl_start(&w.ranks[0].nvl, &z.c, z.r, nullptr));
    CHECK(2u == w.ranks[0].nvl.nb_issued);
    CHECK(1u == w.ranks[0].nvl.nb_early);
}

TEST_CASE("non-blocking calls fail in one line and give their place back", "[coll][nvlink]")
{
    Env env({{"GW_FAKE_NVLINK", "1"}});
    constexpr size_t count = 8;
    World w(2, 1);
    w.setup();
    DevBuf a(count * sizeof(int)), b(count * sizeof(int));
    SECTION("an arrival fails")
    {
        w.ranks[1].fail_tag = kArriveTag;
        Call x = allreduce(a.p<int>(), a.p<int>(), count, true);
        Call y = allreduce(b.p<int>(), b.p<int>(), count, true);
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[0].nvl, &x.c, x.r, nullptr));
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[1].nvl, &y.c, y.r, nullptr));
        CHECK_FALSE(w.ranks[0].jobs[0].ordered);
        w.poll(1, 0);
        CHECK(w.ranks[1].jobs[0].finished);
        CHECK(GW_CE_ERR == w.ranks[1].jobs[0].status);
        CHECK(w.ranks[1].logged("iallreduce over NVLink: an arrival message failed (MPI error 15)"));
        /* Failed, it no longer holds later calls back. */
        CHECK(1u == w.ranks[1].nvl.nb_launched);
    }
    SECTION("no request could be made")
    {
        w.ranks[0].fail_requests = true;
        Call x = allreduce(a.p<int>(), a.p<int>(), count, true);
        CHECK(GW_CE_ERR_NOMEM == gw_ce_nvl_start(&w.ranks[0].nvl, &x.c, x.r, nullptr));
        CHECK(0u == w.ranks[0].nvl.nb_issued);
        CHECK(5 == w.mem.sends()); /* the set-up's 4, and the arrival sent */
    }
}

TEST_CASE("the delegated form: the last rank to post launches, every rank reads the word",
          "[coll][nvlink]")
{
    Env env({{"GW_FAKE_NVLINK", "1"}, {"GW_FAKE_NVLINK_DELEGATE", "1"}});
    constexpr int n = 3;
    constexpr size_t count = 32;
    World w(n, 2);
    w.setup();
    for (Rank &k : w.ranks) REQUIRE(k.nvl.dl);
    std::vector<std::unique_ptr<DevBuf>> in, out;
    for (int r = 0; r < n; ++r) {
        in.push_back(std::make_unique<DevBuf>(2 * kOneShot));
        out.push_back(std::make_unique<DevBuf>(2 * kOneShot));
        fill(in[r]->p<int>(), 2 * kOneShot / sizeof(int), r);
    }
    SECTION("non-blocking")
    {
        const long sends = w.mem.sends();
        for (int r = 0; r < n - 1; ++r) {
            Call x = allreduce(in[r]->p<int>(), out[r]->p<int>(), count, true);
            REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[r].nvl, &x.c, x.r, nullptr));
            CHECK_FALSE(w.ranks[r].jobs[0].ordered);
        }
        for (int i = 0; i < 20; ++i) {
            for (int r = 0; r < n - 1; ++r) CHECK_FALSE(w.poll(r, 0));
        }
        CHECK(out[0]->p<int>()[0] == 0x6B6B6B6B); /* untouched */
        Call x = allreduce(in[n - 1]->p<int>(), out[n - 1]->p<int>(), count, true);
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[n - 1].nvl, &x.c, x.r, nullptr));
        /* Launched by the last rank's post: one poll each reads it done. */
        for (int r = 0; r < n; ++r) CHECK(w.poll(r, 0));
        for (Rank &k : w.ranks) CHECK(GW_CE_OK == k.jobs[0].status);
        for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < count; ++i) REQUIRE(out[r]->p<int>()[i] == 6000 + 3 * (int)i);
        }
        CHECK(3u == w.nb_calls);
        CHECK(sends == w.mem.sends()); /* no message per call */
        for (Rank &k : w.ranks) CHECK(1u == k.nvl.dl_seq);
    }
    SECTION("blocking above the one-shot size (delegate 2)")
    {
        const size_t big = 2 * kOneShot / sizeof(int);
        std::vector<Call> calls;
        for (int r = 0; r < n; ++r) calls.push_back(bcast(in[r]->p<int>(), big, 0));
        for (int rc : run_blocking(w, calls)) CHECK(GW_CE_OK == rc);
        for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < big; ++i) REQUIRE(in[r]->p<int>()[i] == 1000 + (int)i);
        }
        CHECK(3u == w.calls);
    }
    SECTION("a rank that cannot take part fails the call on every rank")
    {
        for (int r = 0; r < n; ++r) {
            Call x = allreduce(in[r]->p<int>(), out[r]->p<int>(), count, true);
            if (1 == r) setenv("GW_FAKE_BOARD_REFUSE", "1", 1);
            const int rc = gw_ce_nvl_start(&w.ranks[r].nvl, &x.c, x.r, nullptr);
            unsetenv("GW_FAKE_BOARD_REFUSE");
            CHECK((0 == r ? GW_CE_OK : GW_CE_ERR) == rc);
        }
        CHECK(w.ranks[1].logged("iallreduce over NVLink (delegated):"));
        /* Rank 2 posted last: its launch failed, and so did its call. */
        CHECK(w.ranks[2].logged("a rank could not take part"));
        CHECK(w.poll(0, 0));
        CHECK(GW_CE_ERR == w.ranks[0].jobs[0].status);
        CHECK(w.ranks[0].logged("the launching rank failed"));
        CHECK(1u == w.nb_calls); /* counted when rank 0's call got its request */
    }
}

TEST_CASE("the delegated form gives up on a rank that never posts", "[coll][nvlink]")
{
    Env env({{"GW_FAKE_NVLINK", "1"}, {"GW_FAKE_NVLINK_DELEGATE", "1"}});
    World w(2, 1, 1);
    w.setup();
    DevBuf a(64), b(64);
    Call x = allreduce(a.p<int>(), b.p<int>(), 4, true);
    REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[0].nvl, &x.c, x.r, nullptr));
    for (int i = 0; i < 5000 && !w.ranks[0].jobs[0].finished; ++i) {
        w.poll(0, 0);
        usleep(1000);
    }
    CHECK(w.ranks[0].jobs[0].finished);
    CHECK(GW_CE_ERR == w.ranks[0].jobs[0].status);
    CHECK(w.ranks[0].logged("not every rank initiated the call within"));
}
