/*
 * The fake caller of the scheduler's unit tests (gpuwire/coll_sched.h): its
 * "host collective" is a countdown that, when it completes, writes twice
 * each int of its send buffer into its receive buffer; jobs are countdowns
 * too. Staging runs on the simulated GPU of tests/mpi_coll (fake_device.c).
 */
#ifndef GPUWIRE_TESTS_COLL_SCHED_CALLER_HPP
#define GPUWIRE_TESTS_COLL_SCHED_CALLER_HPP

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpuwire/coll_sched.h"
#include "gpuwire/gpu_device.h"

#include "dev_buf.hpp"
extern "C" {
#include "fake_device.h"
}

namespace {

constexpr int kFailStatus = 99; /* what the fake caller maps any failure to */

struct Inner {
    int id, polls_left, status;
    const int *sbuf;
    int *rbuf;
    int n;
};

/* One request of the fake caller: its scheduler request in its own memory. */
struct Req {
    int id = 0;
    int n = 0; /* ints the host collective doubles */
    int start_status = 0;
    int inner_polls = 2, inner_status = 0;
    int completions = 0, completed_status = -1, releases = 0;
    void *mem = nullptr;
    gw_ce_req_t *ce = nullptr;
    ~Req() { std::free(mem); }
};

struct Fail {
    gw_ce_fail_t kind;
    int rc;
    std::string why;
};

struct Caller {
    std::vector<int> started; /* ids, in the order their host collectives started */
    std::vector<Fail> fails;
    unsigned long long pending = 0, deferred = 0, staged_calls = 0, staged_bytes = 0;
    gw_ce_sched_t *s = nullptr;

    Caller()
    {
        gw_ce_sched_ops_t ops{};
        ops.ctx = this;
        ops.start = start;
        ops.test = test;
        ops.error = error;
        ops.complete = complete;
        ops.release = release;
        ops.pending = &pending;
        ops.deferred_starts = &deferred;
        ops.staged_calls = &staged_calls;
        ops.staged_bytes = &staged_bytes;
        s = gw_ce_sched_new(&ops);
        REQUIRE(nullptr != s);
    }
    ~Caller() { gw_ce_sched_free(s); }

    std::unique_ptr<Req> make(int id, gw_ce_order_t *order, const void *sbuf, void *rbuf, int n)
    {
        auto r = std::make_unique<Req>();
        r->id = id;
        r->n = n;
        r->mem = std::aligned_alloc(16, (gw_ce_req_size() + 15) / 16 * 16);
        REQUIRE(nullptr != r->mem);
        r->ce = gw_ce_req_init(r->mem, s, order, r.get(), sbuf, rbuf);
        return r;
    }

    /* Progress until every request has finished (bounded: a hang fails). */
    int drain(int max_polls = 5000)
    {
        int polls = 0;
        while (gw_ce_sched_busy(s) && polls < max_polls) {
            gw_ce_sched_progress(s);
            ++polls;
        }
        return polls;
    }

    static Caller *of(void *ctx) { return static_cast<Caller *>(ctx); }
    static Req *req(gw_ce_req_t *ce) { return static_cast<Req *>(gw_ce_req_owner(ce)); }

    static int start(void *ctx, gw_ce_req_t *ce, const void *sbuf, void *rbuf, void **inner)
    {
        Req *r = req(ce);
        if (0 != r->start_status) return r->start_status;
        of(ctx)->started.push_back(r->id);
        *inner = new Inner{r->id, r->inner_polls, r->inner_status, static_cast<const int *>(sbuf),
                           static_cast<int *>(rbuf), r->n};
        return 0;
    }
    static int test(void *, void **inner, bool *done)
    {
        auto *in = static_cast<Inner *>(*inner);
        *done = --in->polls_left <= 0;
        if (!*done) return 0;
        for (int i = 0; i < in->n; ++i) in->rbuf[i] = 2 * in->sbuf[i];
        const int status = in->status;
        delete in;
        *inner = nullptr;
        return status;
    }
    static int error(void *ctx, gw_ce_req_t *, gw_ce_fail_t kind, int rc, const char *why)
    {
        of(ctx)->fails.push_back({kind, rc, nullptr != why ? why : ""});
        return kFailStatus;
    }
    static void complete(void *, gw_ce_req_t *ce, int status)
    {
        Req *r = req(ce);
        ++r->completions;
        r->completed_status = status;
    }
    static void release(void *, gw_ce_req_t *ce)
    {
        Req *r = req(ce);
        gw_ce_req_fini(ce);
        ++r->releases;
    }
};

/* A device region of n ints (what the call reads or writes). */
inline gw_ce_region_t dev_region(const int *p, int n, unsigned flags)
{
    gw_ce_region_t r{};
    r.user = p;
    r.lo = 0;
    r.hi = static_cast<ptrdiff_t>(n * sizeof(int));
    r.flags = flags;
    r.dense = true;
    r.on_gpu = true;
    r.gpu = 0;
    return r;
}

/* A job that is done after `polls` polls, or fails with fail_rc then
 * (declines with GW_CE_DECLINED). */
struct Job {
    int polls = 3;
    int fail_rc = 0;
    bool may_decline = false;
    int polled = 0, released = 0;
};

inline int job_poll(void *j, bool, bool *done)
{
    auto *job = static_cast<Job *>(j);
    ++job->polled;
    *done = false;
    if (job->polled < job->polls) return GW_CE_OK;
    if (0 != job->fail_rc) return job->fail_rc;
    *done = true;
    return GW_CE_OK;
}
inline void job_release(void *j) { ++static_cast<Job *>(j)->released; }
/* It may decline until its last poll has answered. */
inline bool job_ordered(void *j)
{
    const auto *job = static_cast<const Job *>(j);
    return job->may_decline && job->polled < job->polls;
}
const gw_ce_job_ops_t kJobOps = {job_poll, job_release, job_ordered};

} // namespace

#endif
