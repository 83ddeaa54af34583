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
 * Here: accepts; the set-up's outcome alike on every rank (ready, declined
 * by one rank, a communicator across nodes, a failed message); the blocking
 * calls' results and forms (one-shot, large declined, direct declined by
 * the agreement). The non-blocking calls and the delegated form:
 * test_nvlink_nb.cpp.
 */
#include "gw_catch.hpp"

#include <memory>
#include <thread>
#include <vector>

#include "dev_buf.hpp"
#include "nvl_world.hpp"

using namespace nvltest;

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
    SECTION("a description fails while another is still coming")
    {
        Env env({{"GW_FAKE_NVLINK", "1"}});
        World w(3, 1);
        w.ranks[1].fail_tag = kSetupTag;
        w.ranks[1].fail_count = 1; /* the description of rank 0, posted first */
        for (int r : {0, 1}) REQUIRE(GW_CE_OK == gw_ce_nvl_setup_start(&w.ranks[r].nvl, 0));
        for (int i = 0; i < 10; ++i) gw_ce_nvl_setup_progress(&w.ranks[1].nvl);
        CHECK(GW_CE_NVL_SETTING_UP == w.ranks[1].nvl.state);
        REQUIRE(GW_CE_OK == gw_ce_nvl_setup_start(&w.ranks[2].nvl, 0));
        w.finish_setup();
        for (Rank &k : w.ranks) CHECK(GW_CE_NVL_UNUSABLE == k.nvl.state);
        CHECK(w.ranks[1].logged("NVLink: not used on UNIT_COMM: a description's message failed "
                                "(MPI error 15)"));
        CHECK(w.ranks[0].logged("another rank could not take part"));
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
