// Two engines in one process created with thread_multiple: four threads per
// engine send, receive, probe and progress at the same time, on their own
// communicators or on one shared communicator told apart by tag, through
// eager and rendezvous sizes and synchronous sends. Every byte, source, tag
// and length is checked. Built as an ordinary unit test; ci/sanitize.sh also
// runs it under ThreadSanitizer.
#include "gw_catch.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine_pair.hpp"
#include "gpuwire/engine.h"

namespace {

constexpr int kThreads = 4;
// Sizes cycle through eager, the rendezvous threshold's neighbourhood and
// large rendezvous messages.
constexpr size_t kSizes[] = {0, 1, 8, 4095, 16383, 16384, 70000, 300000};
constexpr size_t kRndvThreshold = 16384;
constexpr int kRounds = 96;

struct Pair : EnginePair {
    Pair() : EnginePair(kRndvThreshold, true) {}
};

// A request whose completion any thread may observe: the callback runs on
// whichever thread progressed the engine.
struct ThreadReq {
    gw_request_t r{};
    std::atomic<bool> done{false};
    ThreadReq()
    {
        r.complete_cb = [](gw_request_t *g) {
            reinterpret_cast<ThreadReq *>(g)->done.store(true, std::memory_order_release);
        };
    }
    bool is_done() const { return done.load(std::memory_order_acquire); }
};
static_assert(offsetof(ThreadReq, r) == 0);

unsigned char pattern_byte(int side, int thread, int round, size_t i)
{
    return static_cast<unsigned char>((i * 131) ^ (i >> 8) ^ (side * 17 + thread * 29 + round * 7));
}

std::vector<unsigned char> pattern(size_t n, int side, int thread, int round)
{
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = pattern_byte(side, thread, round, i);
    return v;
}

// Progresses `e` until pred() holds. A hang is a failure of the whole run:
// the requests still point into this thread's stack, so it cannot return.
template <class Pred>
void wait_until(gw_engine_t *e, const char *what, int thread, int round, Pred pred)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (unsigned spin = 0; !pred(); ++spin) {
        gw_engine_progress(e);
        if ((spin & 255) == 255) {
            std::this_thread::yield();
            if (std::chrono::steady_clock::now() > deadline) {
                std::fprintf(stderr, "thread %d round %d: %s did not complete in 120 s\n", thread,
                             round, what);
                std::abort();
            }
        }
    }
}

enum class Layout {
    ContextPerThread, // thread t uses communicator 100 + t, tags = round
    SharedContext,    // all threads use communicator 7, tags = t * 1000 + round
};

// One thread of one side: every round it receives the peer's matching
// thread's message and sends its own. The receive is posted first, found by a
// probe, or posted with wildcards, by round.
void worker(Pair &pair, Layout layout, int side, int thread, std::string &error)
{
    gw_engine_t *e = pair.e[side];
    const int peer = 1 - side;
    const uint32_t ctx = layout == Layout::ContextPerThread ? 100 + thread : 7;
    const auto fail = [&](int round, const std::string &what) {
        if (error.empty())
            error = "side " + std::to_string(side) + " thread " + std::to_string(thread) +
                    " round " + std::to_string(round) + ": " + what;
    };
    for (int round = 0; round < kRounds && error.empty(); ++round) {
        const size_t n = kSizes[(round + thread) % std::size(kSizes)];
        const int32_t tag =
            layout == Layout::ContextPerThread ? round : thread * 1000 + round;
        const auto out = pattern(n, side, thread, round);
        std::vector<unsigned char> in(n + 8, 0xEE);
        const unsigned flags = round % 5 == 4 ? GW_SEND_SYNC : 0;
        const int mode = round % 3; // 0 posted first, 1 probed, 2 wildcards

        ThreadReq s, r;
        if (mode == 0 &&
            gw_irecv(e, &r.r, ctx, peer, tag, in.data(), n) != GW_OK) {
            fail(round, "gw_irecv refused");
            return;
        }
        if (mode == 2 && layout == Layout::ContextPerThread &&
            gw_irecv(e, &r.r, ctx, GW_ANY_SOURCE, GW_ANY_TAG, in.data(), n) != GW_OK) {
            fail(round, "wildcard gw_irecv refused");
            return;
        }
        if (mode == 2 && layout == Layout::SharedContext &&
            gw_irecv(e, &r.r, ctx, GW_ANY_SOURCE, tag, in.data(), n) != GW_OK) {
            fail(round, "any-source gw_irecv refused");
            return;
        }
        if (gw_isend(e, &s.r, peer, ctx, side, tag, out.data(), n, flags) != GW_OK) {
            fail(round, "gw_isend refused");
            return;
        }
        if (mode == 1) {
            gw_probe_info_t info{};
            gw_message_t *msg = nullptr;
            wait_until(e, "probe", thread, round,
                       [&] { return gw_improbe(e, ctx, peer, tag, &info, &msg) == 1; });
            if (info.length != n || info.tag != tag || info.source != peer)
                fail(round, "probe reported length " + std::to_string(info.length) + " tag " +
                                std::to_string(info.tag));
            if (gw_imrecv(e, &r.r, msg, in.data(), n) != GW_OK) {
                fail(round, "gw_imrecv refused");
                return;
            }
        }
        wait_until(e, "send and receive", thread, round,
                   [&] { return s.is_done() && r.is_done(); });

        if (s.r.status != GW_OK) fail(round, std::string("send: ") + gw_status_string(s.r.status));
        if (r.r.status != GW_OK)
            fail(round, std::string("receive: ") + gw_status_string(r.r.status));
        if (r.r.length != n) fail(round, "received " + std::to_string(r.r.length) + " bytes");
        if (r.r.source != peer) fail(round, "source " + std::to_string(r.r.source));
        if (r.r.tag != tag) fail(round, "tag " + std::to_string(r.r.tag));
        for (size_t i = 0; i < n && error.empty(); ++i) {
            if (in[i] != pattern_byte(peer, thread, round, i))
                fail(round, "byte " + std::to_string(i) + " of " + std::to_string(n) + " differs");
        }
        for (size_t i = n; i < n + 8; ++i) {
            if (in[i] != 0xEE) fail(round, "written past the receive buffer");
        }
    }
}

// With read_stats, one more thread reads both engines' statistics the whole
// time (gw_engine_stats is documented as callable from any thread).
void run(Layout layout, bool read_stats = false)
{
    Pair pair;
    std::vector<std::string> errors(2 * kThreads);
    std::vector<std::thread> threads;
    for (int side = 0; side < 2; ++side)
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back(worker, std::ref(pair), layout, side, t,
                                 std::ref(errors[side * kThreads + t]));
    std::atomic<bool> stop{false};
    std::thread reader;
    uint64_t reads = 0;
    if (read_stats) {
        reader = std::thread([&] {
            while (!stop.load()) {
                gw_engine_stats_t st;
                gw_engine_stats(pair.e[reads % 2], &st);
                ++reads;
            }
        });
    }
    for (auto &t : threads) t.join();
    stop = true;
    if (reader.joinable()) reader.join();
    for (const auto &err : errors) CHECK(err == "");

    for (int side = 0; side < 2; ++side) {
        gw_engine_stats_t st;
        gw_engine_stats(pair.e[side], &st);
        CHECK(st.sends == uint64_t(kThreads) * kRounds);
        CHECK(st.recvs == uint64_t(kThreads) * kRounds);
        CHECK(st.dropped_messages == 0);
    }
}

} // namespace

TEST_CASE("four threads per engine, each on its own communicator", "[engine][threads]")
{
    run(Layout::ContextPerThread);
}

TEST_CASE("four threads per engine on one communicator, told apart by tag",
          "[engine][threads]")
{
    run(Layout::SharedContext);
}

// Engine::stats() reads the counters that progress() updates: it takes the
// engine lock (ThreadSanitizer reported the race before it did).
TEST_CASE("statistics are read while four threads per engine progress",
          "[engine][threads][stats-race]")
{
    run(Layout::ContextPerThread, true);
}
