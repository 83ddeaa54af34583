/*
 * The NVLink team family's non-blocking calls and delegated form
 * (gpuwire/coll_nvlink.h) without mpirun, in the world of nvl_world.hpp
 * (test_nvlink.cpp describes the simulated team): the launch order and
 * arrivals through a set-up under way; the delegated form's launch by the
 * last rank to post and the completion word every rank reads, blocking and
 * not; the failures: an arrival, a request that could not be made, a rank
 * that cannot take part, a rank that never posts (the timeout).
 */
#include "gw_catch.hpp"

#include <memory>
#include <thread>
#include <vector>

#include "dev_buf.hpp"
#include "nvl_world.hpp"

using namespace nvltest;

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
    /* Rank r initiates both calls: an in-place allreduce, then a bcast
     * from rank 2. */
    auto initiate = [&](int r) {
        Call x = allreduce(a[r]->p<int>(), a[r]->p<int>(), count, true);
        x.c.in_place = true;
        x.r[GW_CE_REGION_SEND] = gw_ce_region_t{};
        Call y = bcast(b[r]->p<int>(), count, 2, true);
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[r].nvl, &x.c, x.r, nullptr));
        REQUIRE(GW_CE_OK == gw_ce_nvl_start(&w.ranks[r].nvl, &y.c, y.r, nullptr));
    };
    /* Ranks 0 and 1 initiate them, starting the set-up; rank 2 has not
     * initiated yet. */
    for (int r = 0; r < 2; ++r) {
        initiate(r);
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
    initiate(2);
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
