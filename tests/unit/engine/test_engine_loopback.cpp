// Two engines in one process, talking over UCX (shared memory or TCP): the
// protocol end to end without MPI.
#include "gw_catch.hpp"

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "engine_pair.hpp"
#include "gpuwire/engine.h"

namespace {

using Pair = EnginePair;


std::vector<unsigned char> pattern(size_t n, unsigned seed)
{
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed * 7) ^ (i >> 9));
    return v;
}

} // namespace

TEST_CASE("messages of every size arrive intact", "[engine]")
{
    Pair p;
    for (size_t n : {size_t(0), size_t(1), size_t(8), size_t(4095), size_t(65536),
                     size_t(1) << 20, size_t(9) << 20}) {
        auto src = pattern(n, 3);
        std::vector<unsigned char> dst(n + 16, 0xEE);
        Req s, r;
        REQUIRE(gw_irecv(p.e[1], &r.r, 7, 0, 42, dst.data(), n) == GW_OK);
        REQUIRE(gw_isend(p.e[0], &s.r, 1, 7, 0, 42, src.data(), n, 0) == GW_OK);
        p.until([&] { return s.done && r.done; });
        CHECK(s.r.status == GW_OK);
        CHECK(r.r.status == GW_OK);
        CHECK(r.r.length == n);
        CHECK(r.r.source == 0);
        CHECK(r.r.tag == 42);
        CHECK((n == 0 || std::memcmp(dst.data(), src.data(), n) == 0)); // memcmp(NULL, ..., 0) is UB
        for (size_t i = n; i < n + 16; ++i) REQUIRE(dst[i] == 0xEE);
    }
}

TEST_CASE("messages from one sender are received in sending order", "[engine]")
{
    for (size_t threshold : {size_t(0), size_t(2048)}) {
        Pair p(threshold);
        const int n = 64;
        std::vector<std::vector<unsigned char>> bufs;
        std::vector<Req> sends(n), recvs(n);
        std::vector<std::vector<unsigned char>> out(n);
        for (int i = 0; i < n; ++i) {
            size_t len = (i % 4 == 0) ? (size_t(1) << 20) + i : size_t(17 * i);
            bufs.push_back(pattern(len, i));
            REQUIRE(gw_isend(p.e[0], &sends[i].r, 1, 1, 0, 5, bufs[i].data(), len, 0) == GW_OK);
        }
        // Receive half after the messages arrived (unexpected), half posted.
        for (int round = 0; round < 1000; ++round) p.progress();
        for (int i = 0; i < n; ++i) {
            out[i].assign((size_t(1) << 20) + n, 0);
            REQUIRE(gw_irecv(p.e[1], &recvs[i].r, 1, GW_ANY_SOURCE, GW_ANY_TAG, out[i].data(),
                             out[i].size()) == GW_OK);
        }
        p.until([&] {
            for (auto &r : recvs)
                if (!r.done) return false;
            for (auto &s : sends)
                if (!s.done) return false;
            return true;
        });
        for (int i = 0; i < n; ++i) {
            INFO("message " << i << " threshold " << threshold);
            REQUIRE(recvs[i].r.status == GW_OK);
            REQUIRE(recvs[i].r.length == bufs[i].size());
            REQUIRE(std::memcmp(out[i].data(), bufs[i].data(), bufs[i].size()) == 0);
        }
    }
}

TEST_CASE("a message larger than the receive is truncated, nothing written", "[engine]")
{
    Pair p;
    for (size_t n : {size_t(100), size_t(4) << 20}) {
        for (bool posted_first : {true, false}) {
            auto src = pattern(n, 9);
            std::vector<unsigned char> dst(n, 0x5A);
            Req s, r;
            if (posted_first) REQUIRE(gw_irecv(p.e[1], &r.r, 2, 0, 1, dst.data(), n / 2) == GW_OK);
            REQUIRE(gw_isend(p.e[0], &s.r, 1, 2, 0, 1, src.data(), n, 0) == GW_OK);
            if (!posted_first) {
                for (int i = 0; i < 2000; ++i) p.progress();
                REQUIRE(gw_irecv(p.e[1], &r.r, 2, 0, 1, dst.data(), n / 2) == GW_OK);
            }
            p.until([&] { return s.done && r.done; });
            CHECK(r.r.status == GW_ERR_TRUNCATE);
            CHECK(r.r.length == n);
            CHECK(s.r.status == GW_OK);
            for (size_t i = n / 2; i < n; ++i) REQUIRE(dst[i] == 0x5A);
        }
    }
    // The pair still works afterwards.
    int v = 7, w = 0;
    Req s, r;
    REQUIRE(gw_irecv(p.e[1], &r.r, 2, 0, 1, &w, sizeof(w)) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 2, 0, 1, &v, sizeof(v), 0) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(w == 7);
}

TEST_CASE("a synchronous send completes only once matched", "[engine]")
{
    Pair p;
    int v = 11, w = 0;
    Req s, r;
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 3, 0, 9, &v, sizeof(v), GW_SEND_SYNC) == GW_OK);
    for (int i = 0; i < 5000; ++i) p.progress();
    CHECK_FALSE(s.done);
    REQUIRE(gw_irecv(p.e[1], &r.r, 3, 0, 9, &w, sizeof(w)) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(s.r.status == GW_OK);
    CHECK(w == 11);
}

TEST_CASE("probes report the payload; improbe takes the message out", "[engine]")
{
    Pair p;
    auto src = pattern(3000, 1);
    Req s;
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 4, 0, 77, src.data(), src.size(), 0) == GW_OK);
    gw_probe_info_t info{};
    p.until([&] { return gw_iprobe(p.e[1], 4, GW_ANY_SOURCE, GW_ANY_TAG, &info) == 1; });
    CHECK(info.length == 3000);
    CHECK(info.tag == 77);
    CHECK(info.source == 0);
    CHECK(gw_iprobe(p.e[1], 5, GW_ANY_SOURCE, GW_ANY_TAG, &info) == 0); // other context

    gw_message_t *msg = nullptr;
    REQUIRE(gw_improbe(p.e[1], 4, 0, 77, &info, &msg) == 1);
    CHECK(gw_iprobe(p.e[1], 4, GW_ANY_SOURCE, GW_ANY_TAG, &info) == 0);
    std::vector<unsigned char> dst(3000);
    Req r;
    REQUIRE(gw_imrecv(p.e[1], &r.r, msg, dst.data(), dst.size()) == GW_OK);
    p.until([&] { return r.done && s.done; });
    CHECK(r.r.status == GW_OK);
    CHECK(dst == src);
}

TEST_CASE("a posted receive can be cancelled until it matches", "[engine]")
{
    Pair p;
    int w = 0;
    Req r;
    REQUIRE(gw_irecv(p.e[1], &r.r, 6, 0, 1, &w, sizeof(w)) == GW_OK);
    CHECK(gw_cancel_recv(p.e[1], &r.r) == 1);
    CHECK(r.done);
    CHECK(r.r.status == GW_ERR_CANCELED);
    // A message sent later is not taken by the cancelled receive.
    int v = 3;
    Req s, r2;
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 6, 0, 1, &v, sizeof(v), 0) == GW_OK);
    REQUIRE(gw_irecv(p.e[1], &r2.r, 6, 0, 1, &w, sizeof(w)) == GW_OK);
    p.until([&] { return s.done && r2.done; });
    CHECK(w == 3);
    CHECK(gw_cancel_recv(p.e[1], &r2.r) == 0);
}

TEST_CASE("communicators do not see each other's messages", "[engine]")
{
    Pair p;
    int a = 1, b = 2, x = 0, y = 0;
    Req s1, s2, r1, r2;
    REQUIRE(gw_isend(p.e[0], &s1.r, 1, 100, 0, 0, &a, sizeof(a), 0) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s2.r, 1, 200, 0, 0, &b, sizeof(b), 0) == GW_OK);
    REQUIRE(gw_irecv(p.e[1], &r2.r, 200, GW_ANY_SOURCE, GW_ANY_TAG, &y, sizeof(y)) == GW_OK);
    REQUIRE(gw_irecv(p.e[1], &r1.r, 100, GW_ANY_SOURCE, GW_ANY_TAG, &x, sizeof(x)) == GW_OK);
    p.until([&] { return s1.done && s2.done && r1.done && r2.done; });
    CHECK(x == 1);
    CHECK(y == 2);
    gw_context_release(p.e[1], 100);
    gw_engine_stats_t st;
    gw_engine_stats(p.e[1], &st);
    CHECK(st.recvs == 2);
    CHECK(st.dropped_messages == 0);
}

TEST_CASE("user bytes that read as a control message arrive as user bytes", "[engine]")
{
    // 32 bytes opening with the chunked header's magic, 152 with the IPC
    // blob's magic at byte 16: the sender sends them as a chunked transfer,
    // so the receiver never takes them for its own.
    // Without the magic they go as they are (a probe reads them to know),
    // unless synchronous.
    const uint32_t chunked_magic = 0x48435747u, blob_magic = 0x50495747u;
    for (size_t n : {size_t(32), size_t(152)})
    for (bool magic : {true, false})
    for (unsigned flags : {0u, unsigned(GW_SEND_SYNC)}) {
        auto src = pattern(n, 9);
        if (magic)
            std::memcpy(src.data() + (n == 32 ? 0 : 16), n == 32 ? &chunked_magic : &blob_magic, 4);
        {
            Pair p;
            gw_engine_stats_t before, after;
            gw_engine_stats(p.e[0], &before);
            // Posted first, found unexpected, and found by a probe first.
            for (int how = 0; how < 3; ++how) {
                std::vector<unsigned char> dst(n + 300, 0xEE);
                Req s, r;
                if (how == 0) REQUIRE(gw_irecv(p.e[1], &r.r, 4, 0, 8, dst.data(), dst.size()) == GW_OK);
                REQUIRE(gw_isend(p.e[0], &s.r, 1, 4, 0, 8, src.data(), n, flags) == GW_OK);
                if (how == 1) {
                    p.until([&] { return flags || s.done; });
                    REQUIRE(gw_irecv(p.e[1], &r.r, 4, 0, 8, dst.data(), dst.size()) == GW_OK);
                }
                if (how == 2) {
                    gw_probe_info_t info{};
                    p.until([&] { return gw_iprobe(p.e[1], 4, 0, 8, &info) == 1; });
                    CHECK(info.length == n);
                    // Probed is not received: a synchronous send waits on.
                    for (int i = 0; i < 2000; ++i) p.progress();
                    if (flags) CHECK_FALSE(s.done);
                    REQUIRE(gw_irecv(p.e[1], &r.r, 4, 0, 8, dst.data(), dst.size()) == GW_OK);
                }
                p.until([&] { return s.done && r.done; });
                CHECK(s.r.status == GW_OK);
                REQUIRE(r.r.status == GW_OK);
                CHECK(r.r.length == n);
                CHECK(std::memcmp(dst.data(), src.data(), n) == 0);
                for (size_t i = n; i < dst.size(); ++i) REQUIRE(dst[i] == 0xEE);
            }
            gw_engine_stats(p.e[0], &after);
            // Synchronous ones go escaped too: a probe reads a message of
            // these sizes from UCX, which must not complete a send.
            CHECK(after.chunked_sends - before.chunked_sends == (magic || flags ? 3u : 0u));
        }
    }
}

TEST_CASE("what a freed communicator left in UCX goes when its id comes back", "[engine]")
{
    Pair p;
    int stale = 1, fresh = 2, got = 0;
    Req s1;
    REQUIRE(gw_isend(p.e[0], &s1.r, 1, 300, 0, 0, &stale, sizeof(stale), 0) == GW_OK);
    gw_probe_info_t info{};
    p.until([&] { return s1.done && gw_iprobe(p.e[1], 300, 0, 0, &info) == 1; }); // in UCX's hands
    gw_context_release(p.e[1], 300);
    gw_engine_stats_t st;
    gw_engine_stats(p.e[1], &st);
    CHECK(st.dropped_messages == 0); // still UCX's: found only when the id comes back
    gw_context_open(p.e[1], 300);
    gw_engine_stats(p.e[1], &st);
    CHECK(st.dropped_messages == 1);
    Req s2, r;
    REQUIRE(gw_isend(p.e[0], &s2.r, 1, 300, 0, 0, &fresh, sizeof(fresh), 0) == GW_OK);
    REQUIRE(gw_irecv(p.e[1], &r.r, 300, GW_ANY_SOURCE, GW_ANY_TAG, &got, sizeof(got)) == GW_OK);
    p.until([&] { return s2.done && r.done; });
    CHECK(got == 2);
    // An id opened that was never released costs nothing and drops nothing.
    gw_context_open(p.e[1], 301);
    gw_engine_stats(p.e[1], &st);
    CHECK(st.dropped_messages == 1);
}

TEST_CASE("a process sends to itself", "[engine]")
{
    Pair p;
    auto src = pattern(2 << 20, 4);
    std::vector<unsigned char> dst(src.size());
    Req s, r;
    REQUIRE(gw_isend(p.e[0], &s.r, 0, 9, 0, 3, src.data(), src.size(), 0) == GW_OK);
    REQUIRE(gw_irecv(p.e[0], &r.r, 9, 0, 3, dst.data(), dst.size()) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(dst == src);
}

TEST_CASE("bad parameters are refused with a reason", "[engine]")
{
    gw_engine_params_t p;
    gw_engine_params_init(&p);
    p.npeers = 0;
    gw_engine_t *e = nullptr;
    char why[128] = "";
    CHECK(gw_engine_create(&p, &e, why, sizeof(why)) == GW_ERR_INVALID);
    CHECK(std::strlen(why) > 0);
    CHECK(e == nullptr);
}

TEST_CASE("empty messages wait as unexpected and are received", "[engine]")
{
    // An empty message that arrives before its receive owns no bytes; a
    // regression once freed UCX's transient pointer for it.
    Pair p;
    const int n = 8;
    std::vector<Req> sends(n), recvs(n);
    for (int i = 0; i < n; ++i)
        REQUIRE(gw_isend(p.e[0], &sends[i].r, 1, 11, 0, i, nullptr, 0, 0) == GW_OK);
    gw_probe_info_t info{};
    // All of them have arrived once the last one has (same sender: in order).
    p.until([&] { return gw_iprobe(p.e[1], 11, 0, n - 1, &info) == 1; });
    REQUIRE(gw_iprobe(p.e[1], 11, 0, 3, &info) == 1);
    CHECK(info.length == 0);
    for (int i = n - 1; i >= 0; --i)
        REQUIRE(gw_irecv(p.e[1], &recvs[i].r, 11, 0, i, nullptr, 0) == GW_OK);
    p.until([&] {
        for (auto &r : recvs)
            if (!r.done) return false;
        return true;
    });
    for (int i = 0; i < n; ++i) {
        CHECK(recvs[i].r.status == GW_OK);
        CHECK(recvs[i].r.length == 0);
        CHECK(recvs[i].r.tag == i);
    }
}

TEST_CASE("internal tags below the tag field travel end to end", "[engine]")
{
    Pair p;
    // libnbc's tags reach -INT_MAX/2: each meets its own receive, and a
    // receive for any tag posted first takes none of them.
    const int32_t tags[] = {-27, -(1 << 23), -(1 << 23) - 1, -(1 << 24) - 5, -(INT32_MAX / 2) + 1};
    const size_t n = sizeof(tags) / sizeof(tags[0]);
    int any = -1, user = 77;
    Req wild, us;
    REQUIRE(gw_irecv(p.e[1], &wild.r, 3, GW_ANY_SOURCE, GW_ANY_TAG, &any, sizeof(any)) == GW_OK);
    std::vector<Req> sends(n), recvs(n);
    std::vector<int> got(n, -1), vals(n);
    for (size_t i = 0; i < n; ++i) {
        vals[i] = int(100 + i);
        REQUIRE(gw_irecv(p.e[1], &recvs[i].r, 3, 0, tags[i], &got[i], sizeof(int)) == GW_OK);
    }
    for (size_t i = 0; i < n; ++i) {
        REQUIRE(gw_isend(p.e[0], &sends[i].r, 1, 3, 0, tags[i], &vals[i], sizeof(int), 0) == GW_OK);
    }
    p.until([&] {
        for (size_t i = 0; i < n; ++i) {
            if (!sends[i].done || !recvs[i].done) return false;
        }
        return true;
    });
    for (size_t i = 0; i < n; ++i) {
        CHECK(recvs[i].r.status == GW_OK);
        CHECK(got[i] == vals[i]);
    }
    CHECK_FALSE(wild.done);
    REQUIRE(gw_isend(p.e[0], &us.r, 1, 3, 0, 5, &user, sizeof(user), 0) == GW_OK);
    p.until([&] { return wild.done && us.done; });
    CHECK(any == 77);
    CHECK(wild.r.tag == 5);
}

TEST_CASE("another component's IPC mapping is refused with a reason where it cannot be made", "[engine]")
{
    Pair p;
    char why[256] = "";
    void *ptr = nullptr, *lease = nullptr;
    unsigned char blob[136] = {};
    // A malformed description, whatever the machine.
    CHECK(gw_ipc_map(p.e[1], 0, blob, sizeof(blob), 0, &ptr, &lease, why, sizeof(why)) ==
          GW_ERR_INVALID);
    CHECK(std::strlen(why) > 0);
    CHECK(lease == nullptr);
    // The wrong size.
    why[0] = '\0';
    CHECK(gw_ipc_map(p.e[1], 0, blob, 12, 0, &ptr, &lease, why, sizeof(why)) == GW_ERR_INVALID);
    CHECK(std::strlen(why) > 0);
    gw_ipc_unmap(p.e[1], nullptr); // nothing held: nothing happens
}
