/*
 * The scheduler of non-blocking collectives (gpuwire/coll_sched.h) without
 * mpirun: a fake caller whose "host collective" is a countdown that, when it
 * completes, writes twice each int of its send buffer into its receive
 * buffer; jobs are countdowns too. Staging runs on the simulated GPU of
 * tests/mpi_coll (fake_device.c: copies land only after several polls of
 * their ticket; GWFAKE_FAIL_COPY_TO_DEVICE_BYTES makes a copy back fail).
 *
 * Checked: the order of starts on one communicator whatever order their
 * copies finish in, and no order across two; staged in -> host collective
 * -> staged out with the bytes; jobs (done, failing mid-way, an ordered one
 * declining into staging in its place); each request completes once, with
 * its status, and gives back its staging and job; the counters; freeing
 * before completion; the persistent life cycle and the spare requests.
 */
#include "gw_catch.hpp"

#include "sched_caller.hpp"

TEST_CASE("host collectives start in initiation order on one communicator", "[coll][sched]")
{
    Caller c;
    gw_ce_order_t comm{}, other{};
    const int n = 64;
    DevBuf dsend(n * sizeof(int)), drecv(n * sizeof(int));
    for (int i = 0; i < n; ++i) dsend.p<int>()[i] = i + 1;
    std::vector<int> h1(n, 5), h1r(n), h2(n, 7), h2r(n), h3(n, 9), h3r(n);

    /* 1: staged (its copies in take polls); 2 and 3: host buffers, ready
     * at once, initiated after it; 4: another communicator. */
    auto r1 = c.make(1, &comm, dsend.p<int>(), drecv.p<int>(), n);
    const gw_ce_region_t r[GW_CE_REGION_COUNT] = {
        dev_region(dsend.p<int>(), n, GW_CE_STAGE_IN), dev_region(drecv.p<int>(), n, GW_CE_STAGE_OUT)};
    char why[200];
    REQUIRE(GW_CE_OK == gw_ce_req_stage(r1->ce, r, why, sizeof(why)));
    REQUIRE(GW_CE_OK == gw_ce_req_enqueue(r1->ce));
    auto r2 = c.make(2, &comm, h1.data(), h1r.data(), n);
    REQUIRE(GW_CE_OK == gw_ce_req_enqueue(r2->ce));
    auto r3 = c.make(3, &comm, h2.data(), h2r.data(), n);
    REQUIRE(GW_CE_OK == gw_ce_req_enqueue(r3->ce));
    auto r4 = c.make(4, &other, h3.data(), h3r.data(), n);
    REQUIRE(GW_CE_OK == gw_ce_req_enqueue(r4->ce));
    /* Only the other communicator's started: nothing waits before it. */
    REQUIRE(c.started == std::vector<int>{4});
    CHECK(3 == c.deferred);
    CHECK(4 == c.pending);
    CHECK_FALSE(gw_ce_order_empty(&comm));
    CHECK(gw_ce_order_empty(&other));

    c.drain();
    CHECK(c.started == std::vector<int>{4, 1, 2, 3});
    CHECK(gw_ce_order_empty(&comm));
    CHECK(0 == c.pending);
    CHECK(c.fails.empty());
    for (Req *q : {r1.get(), r2.get(), r3.get(), r4.get()}) {
        CHECK(1 == q->completions);
        CHECK(0 == q->completed_status);
        CHECK(0 == q->releases);
    }
    for (int i = 0; i < n; ++i) {
        REQUIRE(drecv.p<int>()[i] == 2 * (i + 1));
        REQUIRE(h1r[i] == 10);
        REQUIRE(h2r[i] == 14);
    }
    CHECK(1 == c.staged_calls);
    CHECK(2 * n * sizeof(int) == c.staged_bytes);
    CHECK(0 == fake_staging_lent());
    for (Req *q : {r1.get(), r2.get(), r3.get(), r4.get()}) gw_ce_req_fini(q->ce);
}

TEST_CASE("staged in, host collective, staged out: the bytes, and a failed copy back",
          "[coll][sched]")
{
    const int n = 37;
    DevBuf dsend(n * sizeof(int)), drecv(n * sizeof(int));
    for (int i = 0; i < n; ++i) dsend.p<int>()[i] = 3 * i;
    for (int i = 0; i < n; ++i) drecv.p<int>()[i] = -1;
    const gw_ce_region_t r[GW_CE_REGION_COUNT] = {
        dev_region(dsend.p<int>(), n, GW_CE_STAGE_IN), dev_region(drecv.p<int>(), n, GW_CE_STAGE_OUT)};
    char why[200];

    SECTION("the result lands in device memory")
    {
        Caller c;
        gw_ce_order_t comm{};
        auto q = c.make(1, &comm, dsend.p<int>(), drecv.p<int>(), n);
        REQUIRE(GW_CE_OK == gw_ce_req_stage(q->ce, r, why, sizeof(why)));
        /* The host collective sees host copies, not the device buffers. */
        REQUIRE(GW_CE_OK == gw_ce_req_enqueue(q->ce));
        c.drain();
        CHECK(1 == q->completions);
        CHECK(0 == q->completed_status);
        for (int i = 0; i < n; ++i) REQUIRE(drecv.p<int>()[i] == 6 * i);
        CHECK(0 == fake_staging_lent());
        gw_ce_req_fini(q->ce);
    }
    SECTION("a copy back fails: reported once, completes with the error, staging released")
    {
        Caller c;
        gw_ce_order_t comm{};
        auto q = c.make(1, &comm, dsend.p<int>(), drecv.p<int>(), n);
        auto next = c.make(2, &comm, nullptr, nullptr, 0);
        setenv("GWFAKE_FAIL_COPY_TO_DEVICE_BYTES", std::to_string(n * sizeof(int)).c_str(), 1);
        REQUIRE(GW_CE_OK == gw_ce_req_stage(q->ce, r, why, sizeof(why)));
        REQUIRE(GW_CE_OK == gw_ce_req_enqueue(q->ce));
        REQUIRE(GW_CE_OK == gw_ce_req_enqueue(next->ce));
        c.drain();
        unsetenv("GWFAKE_FAIL_COPY_TO_DEVICE_BYTES");
        REQUIRE(1 == c.fails.size());
        CHECK(GW_CE_FAIL_COPY == c.fails[0].kind);
        CHECK(c.fails[0].why.find("copy to device") == 0);
        CHECK(1 == q->completions);
        CHECK(kFailStatus == q->completed_status);
        CHECK(1 == next->completions);
        CHECK(0 == next->completed_status);
        CHECK(0 == fake_staging_lent());
        CHECK(0 == c.pending);
        gw_ce_req_fini(q->ce);
        gw_ce_req_fini(next->ce);
    }
}

TEST_CASE("jobs: done, failing mid-way, declining into staging in their place", "[coll][sched]")
{
    Caller c;
    gw_ce_order_t comm{};
    const gw_ce_region_t none[GW_CE_REGION_COUNT] = {};
    const int n = 16;
    std::vector<int> hs(n, 4), hr(n, 0);

    SECTION("an unordered job runs outside the order; a failing one reports once")
    {
        Job ok, bad;
        bad.polls = 4;
        bad.fail_rc = -7;
        auto a = c.make(1, &comm, nullptr, nullptr, 0);
        auto b = c.make(2, &comm, nullptr, nullptr, 0);
        gw_ce_req_job(a->ce, &kJobOps, &ok, none, false);
        gw_ce_req_job(b->ce, &kJobOps, &bad, none, false);
        CHECK(gw_ce_order_empty(&comm));
        CHECK(0 == c.deferred);
        c.drain();
        CHECK(1 == a->completions);
        CHECK(0 == a->completed_status);
        CHECK(1 == ok.released);
        CHECK(ok.polls == ok.polled);
        REQUIRE(1 == c.fails.size());
        CHECK(GW_CE_FAIL_JOB == c.fails[0].kind);
        CHECK(-7 == c.fails[0].rc);
        CHECK(1 == b->completions);
        CHECK(kFailStatus == b->completed_status);
        CHECK(1 == bad.released);
        CHECK(bad.polls == bad.polled); /* not polled after it failed */
        gw_ce_req_fini(a->ce);
        gw_ce_req_fini(b->ce);
        CHECK(1 == bad.released); /* fini again releases nothing twice */
    }
    SECTION("an ordered job keeps its place; failing, it leaves the order in its turn")
    {
        Job bad;
        bad.polls = 3;
        bad.fail_rc = -5;
        bad.may_decline = true;
        auto j = c.make(1, &comm, nullptr, nullptr, 0);
        gw_ce_req_job(j->ce, &kJobOps, &bad, none, true);
        auto h = c.make(2, &comm, hs.data(), hr.data(), n);
        REQUIRE(GW_CE_OK == gw_ce_req_enqueue(h->ce));
        CHECK(2 == c.deferred);
        CHECK(c.started.empty());
        c.drain();
        CHECK(c.started == std::vector<int>{2});
        REQUIRE(1 == c.fails.size());
        CHECK(-5 == c.fails[0].rc);
        CHECK(1 == j->completions);
        CHECK(kFailStatus == j->completed_status);
        CHECK(1 == bad.released);
        CHECK(1 == h->completions);
        CHECK(hr[0] == 8);
        gw_ce_req_fini(j->ce);
        gw_ce_req_fini(h->ce);
    }
    SECTION("an ordered job that declines is staged in its place, before later calls")
    {
        DevBuf dsend(n * sizeof(int)), drecv(n * sizeof(int));
        for (int i = 0; i < n; ++i) dsend.p<int>()[i] = i;
        const gw_ce_region_t r[GW_CE_REGION_COUNT] = {
            dev_region(dsend.p<int>(), n, GW_CE_STAGE_IN), dev_region(drecv.p<int>(), n, GW_CE_STAGE_OUT)};
        Job dec;
        dec.polls = 2;
        dec.fail_rc = GW_CE_DECLINED;
        dec.may_decline = true;
        auto j = c.make(1, &comm, dsend.p<int>(), drecv.p<int>(), n);
        gw_ce_req_job(j->ce, &kJobOps, &dec, r, true);
        auto h = c.make(2, &comm, hs.data(), hr.data(), n);
        REQUIRE(GW_CE_OK == gw_ce_req_enqueue(h->ce));
        c.drain();
        CHECK(c.started == std::vector<int>{1, 2});
        CHECK(c.fails.empty());
        CHECK(1 == dec.released);
        CHECK(1 == j->completions);
        CHECK(0 == j->completed_status);
        for (int i = 0; i < n; ++i) REQUIRE(drecv.p<int>()[i] == 2 * i);
        CHECK(1 == c.staged_calls);
        CHECK(0 == fake_staging_lent());
        gw_ce_req_fini(j->ce);
        gw_ce_req_fini(h->ce);
    }
    SECTION("a host collective that does not start fails its request once")
    {
        auto a = c.make(1, &comm, hs.data(), hr.data(), n);
        a->start_status = -3;
        /* Ready with nothing before it: started here, the code returned. */
        CHECK(-3 == gw_ce_req_enqueue(a->ce));
        CHECK(0 == c.pending);
        Job slow;
        slow.may_decline = true;
        auto j = c.make(2, &comm, nullptr, nullptr, 0);
        gw_ce_req_job(j->ce, &kJobOps, &slow, none, true);
        auto b = c.make(3, &comm, hs.data(), hr.data(), n);
        b->start_status = -4;
        REQUIRE(GW_CE_OK == gw_ce_req_enqueue(b->ce));
        c.drain();
        REQUIRE(1 == c.fails.size());
        CHECK(GW_CE_FAIL_START == c.fails[0].kind);
        CHECK(-4 == c.fails[0].rc);
        CHECK(1 == b->completions);
        CHECK(kFailStatus == b->completed_status);
        CHECK(gw_ce_order_empty(&comm));
        for (Req *q : {a.get(), j.get(), b.get()}) gw_ce_req_fini(q->ce);
    }
}

TEST_CASE("freed before it finished: released once, never completed", "[coll][sched]")
{
    Caller c;
    gw_ce_order_t comm{};
    const int n = 8;
    std::vector<int> hs(n, 1), hr(n);
    auto q = c.make(1, &comm, hs.data(), hr.data(), n);
    q->inner_polls = 5;
    REQUIRE(GW_CE_OK == gw_ce_req_enqueue(q->ce));
    CHECK_FALSE(gw_ce_req_free(q->ce));
    c.drain();
    CHECK(0 == q->completions);
    CHECK(1 == q->releases);

    auto d = c.make(2, &comm, hs.data(), hr.data(), n);
    REQUIRE(GW_CE_OK == gw_ce_req_enqueue(d->ce));
    c.drain();
    CHECK(1 == d->completions);
    CHECK(gw_ce_req_free(d->ce)); /* finished: the caller releases it now */
    CHECK(0 == d->releases);
    gw_ce_req_fini(d->ce);
}

TEST_CASE("persistent requests: start, restart, free while active, spares", "[coll][sched]")
{
    Caller c;
    gw_ce_order_t comm{};
    auto p = c.make(1, &comm, nullptr, nullptr, 0);
    gw_ce_req_set_active(p->ce, false); /* inactive after init */

    /* Start, complete, restart, complete: not freed, so completed each time. */
    for (int round = 0; round < 2; ++round) {
        gw_ce_req_set_active(p->ce, true);
        CHECK_FALSE(gw_ce_req_finish(p->ce));
    }
    /* Inactive: freeing releases now. */
    CHECK(gw_ce_req_free(p->ce));

    /* Active: freeing defers the release to its completion. */
    auto q = c.make(2, &comm, nullptr, nullptr, 0);
    gw_ce_req_set_active(q->ce, true);
    CHECK_FALSE(gw_ce_req_free(q->ce));
    CHECK(gw_ce_req_finish(q->ce));

    /* A start that failed: inactive again, freed at once. */
    auto f = c.make(3, &comm, nullptr, nullptr, 0);
    gw_ce_req_set_active(f->ce, true);
    gw_ce_req_set_active(f->ce, false);
    CHECK(gw_ce_req_free(f->ce));

    /* Spares: last in, first out; re-initialized as new. */
    CHECK(nullptr == gw_ce_sched_spare_take(c.s));
    gw_ce_sched_spare_put(c.s, p->ce);
    gw_ce_sched_spare_put(c.s, q->ce);
    CHECK(q->ce == gw_ce_sched_spare_take(c.s));
    gw_ce_req_t *again = gw_ce_sched_spare_take(c.s);
    REQUIRE(p->ce == again);
    CHECK(nullptr == gw_ce_sched_spare_take(c.s));
    again = gw_ce_req_init(p->mem, c.s, &comm, p.get(), nullptr, nullptr);
    gw_ce_req_set_active(again, true);
    CHECK_FALSE(gw_ce_req_finish(again)); /* the earlier free does not stick */
    CHECK(gw_ce_order_empty(&comm));
    CHECK_FALSE(gw_ce_sched_busy(c.s));
}

namespace {

/* A job whose poll, as the hierarchical ones do, initiates a collective on
 * another communicator and progresses the caller from inside the
 * scheduler's progress. */
struct NestedJob {
    Caller *c;
    gw_ce_order_t *other;
    std::vector<int> *hs, *hr;
    std::unique_ptr<Req> inner;
    int reentered = -1;
    int released = 0;
};

int nested_poll(void *j, bool, bool *done)
{
    auto *job = static_cast<NestedJob *>(j);
    if (nullptr == job->inner) {
        job->inner = job->c->make(9, job->other, job->hs->data(), job->hr->data(),
                                  static_cast<int>(job->hs->size()));
        if (GW_CE_OK != gw_ce_req_enqueue(job->inner->ce)) return -1;
        job->reentered = gw_ce_sched_progress(job->c->s); /* not entered again: 0 */
    }
    *done = 1 == job->inner->completions;
    return GW_CE_OK;
}
void nested_release(void *j) { ++static_cast<NestedJob *>(j)->released; }
const gw_ce_job_ops_t kNestedOps = {nested_poll, nested_release, nullptr};

} // namespace

TEST_CASE("a job's poll may initiate and progress from inside the progress", "[coll][sched]")
{
    Caller c;
    gw_ce_order_t comm{}, other{};
    std::vector<int> hs(4, 3), hr(4, 0);
    NestedJob nj{&c, &other, &hs, &hr, nullptr};
    const gw_ce_region_t none[GW_CE_REGION_COUNT] = {};
    auto j = c.make(1, &comm, nullptr, nullptr, 0);
    gw_ce_req_job(j->ce, &kNestedOps, &nj, none, false);
    c.drain();
    CHECK(0 == nj.reentered);
    REQUIRE(nullptr != nj.inner);
    CHECK(1 == nj.inner->completions);
    CHECK(hr[3] == 6);
    CHECK(1 == j->completions);
    CHECK(1 == nj.released);
    CHECK(0 == c.pending);
    gw_ce_req_fini(j->ce);
    gw_ce_req_fini(nj.inner->ce);
}
