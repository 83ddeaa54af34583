/*
 * The NVLink team family's unit tests' world (test_nvlink.cpp,
 * test_nvlink_nb.cpp): n ranks over the memory transport (mem_transport.hpp)
 * with failures injected, the direct form's host collectives over rank
 * threads, the requests the family makes, the log lines each rank got, and
 * calls on simulated device buffers.
 */
#ifndef GPUWIRE_TESTS_UNIT_COLL_NVL_WORLD_HPP
#define GPUWIRE_TESTS_UNIT_COLL_NVL_WORLD_HPP

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "gw_catch.hpp"
#include "gpuwire/coll_nvlink.h"
#include "gpuwire/cuda/reduce.h"

#include "mem_transport.hpp"

namespace nvltest {

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
    int fail_tag = 0;          /* receives of this tag complete with kFailStatus, */
    int fail_count = 1 << 30;  /* the first fail_count of them */
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
        if (0 == rc && tag == k.fail_tag && k.fail_count > 0) {
            --k.fail_count;
            k.failing.insert(*req);
        }
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
        finish_setup();
    }
    /* Moves the set-ups started on to the end and adopts the outcome. */
    void finish_setup()
    {
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

inline gw_ce_region_t region(const void *p, size_t bytes, unsigned flags)
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

inline Call allreduce(const int *in, int *out, size_t count, bool nb = false)
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

inline Call bcast(int *buf, size_t count, int root, bool nb = false)
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

inline Call allgather(const int *in, int *out, size_t count, int n, bool in_place)
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
inline std::vector<int> run_blocking(World &w, std::vector<Call> &calls)
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
inline void fill(int *p, size_t count, int r)
{
    for (size_t i = 0; i < count; ++i) p[i] = (r + 1) * 1000 + (int)i;
}

} // namespace nvltest

#endif
