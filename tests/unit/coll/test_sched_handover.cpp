/*
 * The scheduler's jobs that hand their call over (gw_ce_req_replace_job), as
 * a non-blocking call decided after its agreement does, and ordered jobs on
 * host buffers that decline: each keeps the call's place in the order.
 */
#include "gw_catch.hpp"

#include "sched_caller.hpp"

namespace {

/* A job that, once its turn has come (after `wait` polls), hands its call to
 * `next` (gw_ce_req_replace_job), as a call decided after its agreement
 * does. */
struct Handing {
    gw_ce_req_t *ce = nullptr;
    const gw_ce_job_ops_t *next_ops = nullptr;
    void *next = nullptr;
    int wait = 2;
    int polled = 0, released = 0;
};

int handing_poll(void *j, bool, bool *done)
{
    auto *job = static_cast<Handing *>(j);
    *done = false;
    if (++job->polled == job->wait) gw_ce_req_replace_job(job->ce, job->next_ops, job->next);
    return GW_CE_OK;
}
void handing_release(void *j) { ++static_cast<Handing *>(j)->released; }
bool handing_ordered(void *j)
{
    const auto *job = static_cast<const Handing *>(j);
    return job->polled < job->wait;
}
const gw_ce_job_ops_t kHandingOps = {handing_poll, handing_release, handing_ordered};
/* The same job with no ordered(): it never declines. */
const gw_ce_job_ops_t kPlainJobOps = {job_poll, job_release, nullptr};

} // namespace

TEST_CASE("a job hands its call to another job, which takes its place in the order",
          "[coll][sched]")
{
    Caller c;
    gw_ce_order_t comm{};
    const gw_ce_region_t none[GW_CE_REGION_COUNT] = {};
    const int n = 16;
    std::vector<int> hs(n, 4), hr(n, 0);
    for (const bool plain : {false, true}) {
        CAPTURE(plain);
        c.started.clear();
        Job next;
        next.polls = 4;
        next.may_decline = true; /* stays in the order until its last poll */
        Handing first;
        first.next_ops = plain ? &kPlainJobOps : &kJobOps;
        first.next = &next;
        auto j = c.make(1, &comm, nullptr, nullptr, 0);
        first.ce = j->ce;
        gw_ce_req_job(j->ce, &kHandingOps, &first, none, true);
        auto h = c.make(2, &comm, hs.data(), hr.data(), n);
        REQUIRE(GW_CE_OK == gw_ce_req_enqueue(h->ce));
        /* Until the handing job is done with its place, the later host
         * collective waits; the replacement is polled right after the hand
         * over, in the same pass. */
        gw_ce_sched_progress(c.s);
        CHECK(c.started.empty());
        gw_ce_sched_progress(c.s);
        CHECK(1 == first.released);
        CHECK(next.polled >= 1);
        if (!plain) CHECK(c.started.empty()); /* the ordered replacement keeps the place */
        c.drain();
        CHECK(c.started == std::vector<int>{2});
        CHECK(next.polls == next.polled);
        CHECK(1 == next.released);
        CHECK(1 == first.released);
        CHECK(1 == j->completions);
        CHECK(0 == j->completed_status);
        CHECK(1 == h->completions);
        CHECK(hr[0] == 8);
        CHECK(c.fails.empty());
        gw_ce_req_fini(j->ce);
        gw_ce_req_fini(h->ce);
    }
}

TEST_CASE("an ordered job of host buffers declines: started in its place, nothing counted staged",
          "[coll][sched]")
{
    Caller c;
    gw_ce_order_t comm{};
    const int n = 16;
    std::vector<int> as(n, 3), ar(n, 0), hs(n, 4), hr(n, 0);
    gw_ce_region_t r[GW_CE_REGION_COUNT] = {};
    r[GW_CE_REGION_SEND].user = as.data();
    r[GW_CE_REGION_SEND].hi = static_cast<ptrdiff_t>(n * sizeof(int));
    r[GW_CE_REGION_SEND].flags = GW_CE_STAGE_IN;
    r[GW_CE_REGION_RECV].user = ar.data();
    r[GW_CE_REGION_RECV].hi = static_cast<ptrdiff_t>(n * sizeof(int));
    r[GW_CE_REGION_RECV].flags = GW_CE_STAGE_OUT;
    Job dec;
    dec.polls = 2;
    dec.fail_rc = GW_CE_DECLINED;
    dec.may_decline = true;
    auto j = c.make(1, &comm, as.data(), ar.data(), n);
    gw_ce_req_job(j->ce, &kJobOps, &dec, r, true);
    auto h = c.make(2, &comm, hs.data(), hr.data(), n);
    REQUIRE(GW_CE_OK == gw_ce_req_enqueue(h->ce));
    c.drain();
    CHECK(c.started == std::vector<int>{1, 2});
    CHECK(ar[0] == 6);
    CHECK(hr[0] == 8);
    CHECK(0 == c.staged_calls);
    CHECK(0 == c.staged_bytes);
    CHECK(c.fails.empty());
    gw_ce_req_fini(j->ce);
    gw_ce_req_fini(h->ce);
}
