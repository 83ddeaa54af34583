// A peer process fails (UCX peer failure detection, pml_gpuwire_err_handling
// 1): what only it could complete ends with GW_ERR_UNREACHABLE, never hangs
// and never completes as if data had come; wildcard receives stay posted.
// Engine 0 is destroyed as a killed process would vanish: its sockets close,
// and engine 1's endpoint to it reports the failure. The pairs are made
// thread-multiple: EnginePair::kill progresses engine 1 from a second thread.
#include "gw_catch.hpp"

#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "engine_pair.hpp"
#include "gpuwire/engine.h"

namespace {

// Every communicator: rank r is process r.
int rank_is_peer(void *, uint32_t, int32_t rank, uint32_t *peer)
{
    if (rank < 0 || rank > 1) return -1;
    *peer = uint32_t(rank);
    return 0;
}

void peer_failure_mode(gw_engine_params_t &p)
{
    p.err_mode_peer = 1;
    p.peer_of_rank = &rank_is_peer;
    p.device_support = 0;
    p.pace_auto = 0;
}

// Progresses what is left of the pair until pred() holds or 20 s pass.
bool within_20s(EnginePair &p, const std::function<bool()> &pred)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!pred() && std::chrono::steady_clock::now() < end) p.progress();
    return pred();
}

// One message each way, so each engine has its endpoint to the other.
void connect_both(EnginePair &p)
{
    for (int from = 0; from < 2; ++from) {
        int v = 10 + from, w = 0;
        Req s, r;
        REQUIRE(gw_irecv(p.e[1 - from], &r.r, 1, from, 0, &w, sizeof(w)) == GW_OK);
        REQUIRE(gw_isend(p.e[from], &s.r, 1 - from, 1, from, 0, &v, sizeof(v), 0) == GW_OK);
        p.until([&] { return s.done && r.done; });
        REQUIRE(w == v);
    }
}

} // namespace

TEST_CASE("receives only a failed process could satisfy end with an error", "[engine][peer-failure]")
{
    EnginePair p(0, true, peer_failure_mode);
    connect_both(p);
    std::vector<unsigned char> buf(64, 0xEE), any_buf(64, 0xEE);
    Req specific, any, layout_like;
    REQUIRE(gw_irecv(p.e[1], &specific.r, 3, 0, 5, buf.data(), buf.size()) == GW_OK);
    REQUIRE(gw_irecv(p.e[1], &any.r, 3, GW_ANY_SOURCE, 5, any_buf.data(), any_buf.size()) ==
            GW_OK);
    p.progress();
    REQUIRE_FALSE(specific.done);

    p.kill(0);
    REQUIRE(within_20s(p, [&] { return specific.done; }));
    CHECK(specific.r.status == GW_ERR_UNREACHABLE);
    CHECK(specific.r.length == 0);
    CHECK(specific.r.source == 0);
    for (unsigned char c : buf) REQUIRE(c == 0xEE); // nothing was written
    // Another process may still send to a wildcard receive.
    CHECK_FALSE(any.done);

    // A receive posted afterwards for the failed process ends at once.
    Req later;
    REQUIRE(gw_irecv(p.e[1], &later.r, 3, 0, 6, buf.data(), buf.size()) == GW_OK);
    CHECK(later.done);
    CHECK(later.r.status == GW_ERR_UNREACHABLE);
    // So does a send to it.
    int v = 1;
    Req s;
    CHECK(gw_isend(p.e[1], &s.r, 0, 3, 1, 5, &v, sizeof(v), 0) == GW_ERR_UNREACHABLE);

    CHECK(gw_cancel_recv(p.e[1], &any.r) == 1);
    CHECK(any.r.status == GW_ERR_CANCELED);
}

TEST_CASE("a chunked transfer from a failed process ends with an error", "[engine][peer-failure]")
{
    // Paced at 1 Mb/s in 4 KiB chunks: 4 MiB would take half a minute, so
    // the sender is killed while chunks are still owed. (Eager chunks: a
    // chunk in rendezvous would still be UCX's at the sender's teardown,
    // which only a real kill gets away with.)
    EnginePair p(0, true, [](gw_engine_params_t &e) {
        peer_failure_mode(e);
        e.pace_gbps = 0.001;
        e.pace_min_bytes = 65536;
        e.chunk_bytes = 4096;
    });
    connect_both(p);
    const size_t n = size_t(4) << 20;
    std::vector<unsigned char> src(n, 0x5A), dst(n, 0xEE);
    Req s, r;
    REQUIRE(gw_irecv(p.e[1], &r.r, 3, 0, 9, dst.data(), n) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 3, 0, 9, src.data(), n, 0) == GW_OK);
    gw_engine_stats_t st{};
    REQUIRE(within_20s(p, [&] {
        gw_engine_stats(p.e[1], &st);
        return st.chunked_recvs == 1;
    }));
    REQUIRE_FALSE(r.done);

    p.kill(0);
    REQUIRE(within_20s(p, [&] { return r.done; }));
    CHECK(r.r.status == GW_ERR_UNREACHABLE);
}

TEST_CASE("a process that only received from the failed one hears of it too", "[engine][peer-failure]")
{
    EnginePair p(0, true, peer_failure_mode);
    // Engine 1 has never sent to engine 0: its endpoint to it is made for
    // the receive (UCX reports a failure only on the user's endpoints).
    int v = 3, w = 0;
    Req s0, r0;
    REQUIRE(gw_irecv(p.e[1], &r0.r, 2, 0, 1, &w, sizeof(w)) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s0.r, 1, 2, 0, 1, &v, sizeof(v), 0) == GW_OK);
    p.until([&] { return s0.done && r0.done; });
    REQUIRE(w == 3);
    std::vector<unsigned char> buf(64, 0xEE);
    Req specific;
    REQUIRE(gw_irecv(p.e[1], &specific.r, 2, 0, 5, buf.data(), buf.size()) == GW_OK);
    p.kill(0);
    REQUIRE(within_20s(p, [&] { return specific.done; }));
    CHECK(specific.r.status == GW_ERR_UNREACHABLE);
    for (unsigned char c : buf) REQUIRE(c == 0xEE);
}

TEST_CASE("probes for a failed process report it, after what it sent before", "[engine][peer-failure][probe]")
{
    EnginePair p(0, true, peer_failure_mode);
    // Engine 0 sends; engine 1 only probes (no receive posted, no send): the
    // probe makes its endpoint to engine 0, else it would never hear of the
    // failure.
    const int a = 0x1234567, b = 0x7654321;
    Req s1, s2;
    REQUIRE(gw_isend(p.e[0], &s1.r, 1, 4, 0, 7, &a, sizeof(a), 0) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s2.r, 1, 4, 0, 8, &b, sizeof(b), 0) == GW_OK);
    gw_probe_info_t info{};
    p.until([&] { return s1.done && s2.done && gw_iprobe(p.e[1], 4, 0, 8, &info) == 1; });
    CHECK(gw_iprobe(p.e[1], 4, 0, 99, &info) == 0); // alive: nothing yet
    for (int i = 0; i < 1000; ++i) p.progress(); // (the endpoint's wire-up)

    p.kill(0);
    // Nothing of tag 99 will ever come: the probe says so instead of 0 for good.
    REQUIRE(within_20s(p, [&] { return gw_iprobe(p.e[1], 4, 0, 99, &info) != 0; }));
    CHECK(gw_iprobe(p.e[1], 4, 0, 99, &info) == -1);
    gw_message_t *msg = nullptr;
    CHECK(gw_improbe(p.e[1], 4, 0, 99, &info, &msg) == -1);
    CHECK(msg == nullptr);
    // Another process could still send to a wildcard source.
    CHECK(gw_iprobe(p.e[1], 4, GW_ANY_SOURCE, 99, &info) == 0);
    CHECK(gw_improbe(p.e[1], 4, GW_ANY_SOURCE, 99, &info, &msg) == 0);

    // What it sent before it failed is still there, in order, and received
    // intact.
    info = gw_probe_info_t{};
    REQUIRE(gw_iprobe(p.e[1], 4, 0, GW_ANY_TAG, &info) == 1);
    CHECK(info.source == 0);
    CHECK(info.tag == 7);
    CHECK(info.length == sizeof(a));
    REQUIRE(gw_improbe(p.e[1], 4, 0, 7, &info, &msg) == 1);
    int got = 0;
    Req r1;
    REQUIRE(gw_imrecv(p.e[1], &r1.r, msg, &got, sizeof(got)) == GW_OK);
    REQUIRE(within_20s(p, [&] { return r1.done; }));
    CHECK(r1.r.status == GW_OK);
    CHECK(got == a);
    got = 0;
    Req r2;
    REQUIRE(gw_irecv(p.e[1], &r2.r, 4, 0, 8, &got, sizeof(got)) == GW_OK);
    REQUIRE(within_20s(p, [&] { return r2.done; }));
    CHECK(r2.r.status == GW_OK);
    CHECK(r2.r.tag == 8);
    CHECK(got == b);
    // Then nothing of it is left.
    CHECK(gw_iprobe(p.e[1], 4, 0, GW_ANY_TAG, &info) == -1);
    CHECK(gw_improbe(p.e[1], 4, 0, GW_ANY_TAG, &info, &msg) == -1);
}
