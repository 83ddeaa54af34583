/* Agreements without blocking (gpuwire/coll_agree.h) over the memory
 * transport: one thread drives every rank, polling them in orders that
 * differ from rank to rank. */
#include "gw_catch.hpp"

#include <cstdint>
#include <random>
#include <vector>

#include "gpuwire/coll_agree.h"
#include "mem_transport.hpp"

namespace {

struct Rank {
    gw_ce_agree_line_t line{};
    std::vector<gw_ce_agree_t *> ags;
    std::vector<bool> over;
    std::vector<uint32_t> all;
};

/* k agreements per rank on n ranks; rank r's flags for agreement i are
 * mine(r, i). Polls in a seeded random order until every one is over;
 * returns the outcomes rank by rank. */
template <class Mine>
std::vector<std::vector<uint32_t>> run(int n, int k, Mine mine, unsigned seed, long *leaks)
{
    gwtest::MemWorld w(n);
    std::vector<Rank> ranks(n);
    std::mt19937 rng(seed);
    /* Rank r starts its agreements one by one, interleaved with polls. */
    std::vector<int> started(n, 0);
    long steps = 0;
    for (bool busy = true; busy; ++steps) {
        if (steps > 1000000) FAIL("agreements not over after a million steps");
        busy = false;
        const int r = static_cast<int>(rng() % n);
        Rank &R = ranks[r];
        if (started[r] < k && 0 == rng() % 2) {
            gw_ce_agree_t *a = nullptr;
            char why[128];
            if (GW_CE_OK != gw_ce_agree_start(&w.transport(r), &R.line, -4, mine(r, started[r]), &a,
                                              why, sizeof(why))) {
                FAIL(why);
            }
            R.ags.push_back(a);
            R.over.push_back(false);
            R.all.push_back(0);
            ++started[r];
        }
        /* Poll this rank's agreements, newest first: the line keeps them in order. */
        for (int i = static_cast<int>(R.ags.size()) - 1; i >= 0; --i) {
            if (R.over[i]) continue;
            bool done = false;
            uint32_t all = 0;
            char why[128];
            if (GW_CE_OK != gw_ce_agree_poll(R.ags[i], &done, &all, why, sizeof(why))) FAIL(why);
            if (done) {
                R.over[i] = true;
                R.all[i] = all;
            }
        }
        for (int q = 0; q < n; ++q) {
            if (started[q] < k) busy = true;
            for (size_t i = 0; i < ranks[q].over.size(); ++i) busy = busy || !ranks[q].over[i];
        }
    }
    std::vector<std::vector<uint32_t>> out(n);
    for (int r = 0; r < n; ++r) {
        /* Acted on in initiation order only. */
        for (size_t i = 0; i < ranks[r].ags.size(); ++i) {
            for (size_t j = i + 1; j < ranks[r].ags.size(); ++j) {
                CHECK_FALSE(gw_ce_agree_my_turn(ranks[r].ags[j]));
            }
            CHECK(gw_ce_agree_my_turn(ranks[r].ags[i]));
            gw_ce_agree_decided(ranks[r].ags[i]);
        }
        CHECK(gw_ce_agree_line_idle(&ranks[r].line));
        for (auto *a : ranks[r].ags) gw_ce_agree_free(a);
        out[r] = ranks[r].all;
    }
    CHECK(0 == w.unreceived());
    *leaks = w.leaks();
    return out;
}

} // namespace

TEST_CASE("every rank learns the OR of every rank's flags, several agreements in flight",
          "[coll][agree]")
{
    /* Up to 16 ranks: one round (direct); from 17: dissemination. */
    for (int n : {1, 2, 3, 5, 8, 13, 16, 17, 24}) {
        for (unsigned seed : {1u, 2u, 3u}) {
            const int k = 6;
            /* Agreement i: rank (i mod n) sets bit 1, every rank bit 0 on
             * even i, rank n-1 bit 2 on i = 3. */
            auto mine = [n](int r, int i) -> uint32_t {
                uint32_t f = 0;
                if (r == i % n) f |= 2u;
                if (0 == i % 2) f |= 1u;
                if (3 == i && r == n - 1) f |= 4u;
                return f;
            };
            long leaks = -1;
            const auto out = run(n, k, mine, seed, &leaks);
            CAPTURE(n, seed);
            CHECK(0 == leaks);
            for (int i = 0; i < k; ++i) {
                uint32_t want = 0;
                for (int r = 0; r < n; ++r) want |= mine(r, i);
                for (int r = 0; r < n; ++r) CHECK(out[r][i] == want);
            }
        }
    }
}

TEST_CASE("a known outcome sends nothing and takes its turn", "[coll][agree]")
{
    gwtest::MemWorld w(3);
    gw_ce_agree_line_t line{};
    gw_ce_agree_t *a = nullptr, *b = nullptr;
    char why[128];
    REQUIRE(GW_CE_OK == gw_ce_agree_start(&w.transport(0), &line, -4, 1u, &a, why, sizeof(why)));
    REQUIRE(GW_CE_OK == gw_ce_agree_known(&line, 1u, &b));
    bool done = true;
    uint32_t all = 0;
    REQUIRE(GW_CE_OK == gw_ce_agree_poll(b, &done, &all, why, sizeof(why)));
    CHECK(done);
    CHECK(1u == all);
    CHECK_FALSE(gw_ce_agree_my_turn(b));
    CHECK_FALSE(gw_ce_agree_line_idle(&line));
    /* Freed before it is over (its peers never started): its messages are
     * cancelled and its turn passes. */
    gw_ce_agree_free(a);
    CHECK(gw_ce_agree_my_turn(b));
    gw_ce_agree_decided(b);
    CHECK(gw_ce_agree_line_idle(&line));
    gw_ce_agree_free(b);
    CHECK(0 == w.leaks());
}
