/*
 * The engine's data movement (gpuwire/coll_move.h) over the memory
 * transport: blocking calls with one thread per rank, non-blocking ones with
 * every rank's job driven from one thread in turn. Own-block copies go to
 * the simulated GPU of tests/mpi_coll/fake_device.c, whose copies land only
 * when their ticket is waited for or polled often enough: a call that
 * completes before its copy leaves the own block unwritten here.
 */
#include "gw_catch.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gpuwire/coll_move.h"
#include "mem_transport.hpp"

namespace {

using Bytes = std::vector<unsigned char>;
constexpr unsigned char kUnwritten = 0xEE;

unsigned char value(int src, int dst, size_t k)
{
    return static_cast<unsigned char>(src * 31 + dst * 17 + k * 7 + 3);
}

/* Runs body(rank) on one thread per rank. */
void on_threads(int n, const std::function<void(int)> &body)
{
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r) ts.emplace_back(body, r);
    for (auto &t : ts) t.join();
}

/* Every rank's blocking call on a thread of its own; the outcomes are
 * checked after the threads end (Catch2's assertions are not thread-safe). */
void run_blocking(gwtest::MemWorld &w, const std::vector<gw_ce_move_t> &calls)
{
    const int n = w.size();
    std::vector<int> rcs(n, GW_CE_OK);
    std::vector<std::string> whys(n);
    on_threads(n, [&](int r) {
        char why[256] = "";
        rcs[r] = gw_ce_move_run(&w.transport(r), &calls[r], why, sizeof(why));
        whys[r] = why;
    });
    for (int r = 0; r < n; ++r) {
        INFO("rank " << r << ": " << whys[r]);
        CHECK(GW_CE_OK == rcs[r]);
    }
}

/* Starts every rank's job (rank order) and polls them in turn until all are
 * done; each poll asks the GPU for errors now and then, as coll gpuwire
 * does. */
void drive(gwtest::MemWorld &w, const std::vector<gw_ce_move_t> &calls)
{
    const int n = w.size();
    std::vector<gw_ce_move_job_t *> jobs(n, nullptr);
    char why[256] = "";
    for (int r = 0; r < n; ++r) {
        INFO(why);
        REQUIRE(GW_CE_OK ==
                gw_ce_move_start(&w.transport(r), &calls[r], &jobs[r], why, sizeof(why)));
    }
    std::vector<bool> done(n, false);
    int left = n;
    for (int round = 0; left > 0 && round < 10000; ++round) {
        for (int r = 0; r < n; ++r) {
            if (done[r]) continue;
            bool d = false;
            REQUIRE(GW_CE_OK == gw_ce_move_poll(jobs[r], round % 16 == 15, &d, why, sizeof(why)));
            if (d) {
                done[r] = true;
                --left;
            }
        }
    }
    for (auto *j : jobs) gw_ce_move_free(j);
    REQUIRE(0 == left);
}

void check_clean(const gwtest::MemWorld &w)
{
    CHECK(0 == w.leaks());
    CHECK(0 == w.unreceived());
}

/* Per-rank blocks of n peers: bytes[j] each, a gap of one byte between
 * them (offsets must be honoured), in order. */
std::vector<gw_ce_block_t> blocks_of(const std::vector<size_t> &bytes)
{
    std::vector<gw_ce_block_t> b;
    ptrdiff_t at = 1;
    for (size_t x : bytes) {
        b.push_back({at, x});
        at += static_cast<ptrdiff_t>(x) + 1;
    }
    return b;
}

size_t extent_of(const std::vector<gw_ce_block_t> &b)
{
    return b.empty() ? 0 : static_cast<size_t>(b.back().offset) + b.back().bytes + 1;
}

/* ---------------------------------------------------------------- bcast */

void bcast_case(int n, int root, size_t elems, size_t seg, bool nonblocking)
{
    gwtest::MemWorld w(n);
    const size_t eb = 4;
    std::vector<Bytes> buf(n, Bytes(elems * eb, kUnwritten));
    for (size_t k = 0; k < buf[root].size(); ++k) buf[root][k] = value(root, 0, k);
    std::vector<gw_ce_move_t> calls(n);
    for (int r = 0; r < n; ++r) {
        calls[r] = gw_ce_move_t{};
        calls[r].kind = GW_CE_MOVE_BCAST;
        calls[r].tag = 11;
        calls[r].root = root;
        calls[r].buf = buf[r].data();
        calls[r].elems = elems;
        calls[r].elem_bytes = eb;
        calls[r].elem_stride = static_cast<ptrdiff_t>(eb);
        calls[r].segment_elems = seg;
    }
    if (nonblocking) {
        drive(w, calls);
    } else {
        run_blocking(w, calls);
    }
    for (int r = 0; r < n; ++r) CHECK(buf[r] == buf[root]);
    const bool chained = seg > 0 && seg < elems && n > 2;
    const long nseg = chained ? static_cast<long>((elems + seg - 1) / seg) : 1;
    CHECK(w.sends() == (elems ? (n - 1) * nseg : 0));
    check_clean(w);
}

} // namespace

TEST_CASE("bcast reaches every rank from every root, chained or not", "[coll][move]")
{
    for (int n = 1; n <= 5; ++n) {
        for (int root = 0; root < n; ++root) {
            for (size_t seg : {size_t{0}, size_t{5}, size_t{8}, size_t{36}, size_t{37}}) {
                INFO("ranks " << n << " root " << root << " segment " << seg);
                bcast_case(n, root, 37, seg, false);
            }
            INFO("ranks " << n << " root " << root << " non-blocking");
            bcast_case(n, root, 37, 0, true);
            bcast_case(n, root, 0, 0, true);
        }
    }
}

TEST_CASE("a chained bcast has no non-blocking form", "[coll][move]")
{
    gwtest::MemWorld w(3);
    Bytes b(64);
    gw_ce_move_t m{};
    m.kind = GW_CE_MOVE_BCAST;
    m.buf = b.data();
    m.elems = 64;
    m.elem_bytes = 1;
    m.elem_stride = 1;
    m.segment_elems = 16;
    gw_ce_move_job_t *j = nullptr;
    char why[256] = "";
    CHECK(GW_CE_ERR_ARG == gw_ce_move_start(&w.transport(0), &m, &j, why, sizeof(why)));
    CHECK(std::string(why).find("chained") != std::string::npos);
    CHECK(nullptr == j);
    check_clean(w);
}

/* ------------------------------------------------------ allgather(v) */

namespace {

/* bytes[j]: rank j's block; local: the own block's mode on every rank. */
void allgather_case(const std::vector<size_t> &bytes, int local, bool nonblocking)
{
    const int n = static_cast<int>(bytes.size());
    gwtest::MemWorld w(n);
    const auto rb = blocks_of(bytes);
    std::vector<Bytes> send(n), recv(n, Bytes(extent_of(rb), kUnwritten));
    std::vector<std::vector<gw_ce_block_t>> sb(n);
    std::vector<gw_ce_move_t> calls(n);
    for (int r = 0; r < n; ++r) {
        gw_ce_move_t &m = calls[r];
        m = gw_ce_move_t{};
        m.kind = GW_CE_MOVE_ALLGATHER;
        m.tag = 12;
        m.rbuf = recv[r].data();
        m.rblocks = rb.data();
        m.local = local;
        m.gpu = 0;
        if (GW_CE_LOCAL_NONE == local) { /* in place: my block of the receive buffer */
            for (size_t k = 0; k < bytes[r]; ++k) recv[r][rb[r].offset + k] = value(r, 0, k);
            sb[r] = {rb[r]};
            m.sbuf = recv[r].data();
        } else {
            send[r].resize(bytes[r] + 2);
            for (size_t k = 0; k < bytes[r]; ++k) send[r][2 + k] = value(r, 0, k);
            sb[r] = {{2, bytes[r]}};
            m.sbuf = send[r].data();
        }
        m.sblocks = sb[r].data();
    }
    if (nonblocking) {
        drive(w, calls);
    } else {
        run_blocking(w, calls);
    }
    for (int r = 0; r < n; ++r) {
        Bytes want(extent_of(rb), kUnwritten);
        for (int j = 0; j < n; ++j) {
            for (size_t k = 0; k < bytes[j]; ++k) want[rb[j].offset + k] = value(j, 0, k);
        }
        INFO("rank " << r);
        CHECK(recv[r] == want);
    }
    check_clean(w);
}

const std::vector<size_t> kUneven = {5, 0, 3, 17, 0};

} // namespace

TEST_CASE("allgather(v) gathers uneven blocks, zero ones included", "[coll][move]")
{
    for (int n = 1; n <= 5; ++n) {
        std::vector<size_t> even(n, 9), uneven(kUneven.begin(), kUneven.begin() + n);
        for (int local : {GW_CE_LOCAL_COPY, GW_CE_LOCAL_MESSAGE, GW_CE_LOCAL_NONE}) {
            for (bool nb : {false, true}) {
                INFO("ranks " << n << " own block " << local << " non-blocking " << nb);
                allgather_case(even, local, nb);
                allgather_case(uneven, local, nb);
            }
        }
    }
}

/* ------------------------------------------------------- alltoall(v) */

namespace {

/* c(i, j): bytes rank i sends to rank j. */
void alltoall_case(int n, const std::function<size_t(int, int)> &c, int local, bool nonblocking)
{
    gwtest::MemWorld w(n);
    std::vector<std::vector<gw_ce_block_t>> sb(n), rb(n);
    std::vector<Bytes> send(n), recv(n);
    std::vector<gw_ce_move_t> calls(n);
    for (int i = 0; i < n; ++i) {
        std::vector<size_t> out, in;
        for (int j = 0; j < n; ++j) {
            out.push_back(c(i, j));
            in.push_back(c(j, i));
        }
        sb[i] = blocks_of(out);
        rb[i] = blocks_of(in);
        send[i].assign(extent_of(sb[i]), 0);
        recv[i].assign(extent_of(rb[i]), kUnwritten);
        for (int j = 0; j < n; ++j) {
            for (size_t k = 0; k < out[j]; ++k) send[i][sb[i][j].offset + k] = value(i, j, k);
        }
        gw_ce_move_t &m = calls[i];
        m = gw_ce_move_t{};
        m.kind = GW_CE_MOVE_ALLTOALL;
        m.tag = 13;
        m.sbuf = send[i].data();
        m.rbuf = recv[i].data();
        m.sblocks = sb[i].data();
        m.rblocks = rb[i].data();
        m.local = local;
        m.gpu = 1; /* the slow GPU: its copies need many polls */
    }
    if (nonblocking) {
        drive(w, calls);
    } else {
        run_blocking(w, calls);
    }
    for (int i = 0; i < n; ++i) {
        Bytes want(extent_of(rb[i]), kUnwritten);
        for (int j = 0; j < n; ++j) {
            for (size_t k = 0; k < c(j, i); ++k) want[rb[i][j].offset + k] = value(j, i, k);
        }
        INFO("rank " << i);
        CHECK(recv[i] == want);
    }
    check_clean(w);
}

} // namespace

TEST_CASE("alltoall(v) exchanges uneven blocks, zero ones included", "[coll][move]")
{
    auto even = [](int, int) { return size_t{6}; };
    auto uneven = [](int i, int j) { return static_cast<size_t>((i + 2 * j) % 4 * 5); };
    for (int n = 1; n <= 5; ++n) {
        for (int local : {GW_CE_LOCAL_COPY, GW_CE_LOCAL_MESSAGE}) {
            for (bool nb : {false, true}) {
                INFO("ranks " << n << " own block " << local << " non-blocking " << nb);
                alltoall_case(n, even, local, nb);
                alltoall_case(n, uneven, local, nb);
            }
        }
    }
}

TEST_CASE("alltoall has no in-place form", "[coll][move]")
{
    gwtest::MemWorld w(2);
    gw_ce_block_t b[2] = {{0, 4}, {4, 4}};
    Bytes buf(8);
    gw_ce_move_t m{};
    m.kind = GW_CE_MOVE_ALLTOALL;
    m.sbuf = m.rbuf = buf.data();
    m.sblocks = m.rblocks = b;
    m.local = GW_CE_LOCAL_NONE;
    char why[256] = "";
    CHECK(GW_CE_ERR_ARG == gw_ce_move_run(&w.transport(0), &m, why, sizeof(why)));
    check_clean(w);
}

TEST_CASE("a job freed before it is done leaves no request behind", "[coll][move]")
{
    gwtest::MemWorld w(3);
    gw_ce_block_t rb[3] = {{0, 4}, {4, 4}, {8, 4}}, sb[1] = {{0, 4}};
    Bytes send(4, 1), recv(12, 0);
    gw_ce_move_t m{};
    m.kind = GW_CE_MOVE_ALLGATHER;
    m.sbuf = send.data();
    m.rbuf = recv.data();
    m.sblocks = sb;
    m.rblocks = rb;
    m.local = GW_CE_LOCAL_COPY;
    m.gpu = 0;
    gw_ce_move_job_t *j = nullptr;
    char why[256] = "";
    REQUIRE(GW_CE_OK == gw_ce_move_start(&w.transport(0), &m, &j, why, sizeof(why)));
    bool done = true;
    REQUIRE(GW_CE_OK == gw_ce_move_poll(j, false, &done, why, sizeof(why)));
    CHECK_FALSE(done); /* ranks 1 and 2 never sent */
    gw_ce_move_free(j);
    CHECK(0 == w.leaks());
    CHECK(2 == w.unreceived());                                  /* its sends to ranks 1 and 2 */
    CHECK(Bytes(recv.begin(), recv.begin() + 4) == Bytes(4, 1)); /* the copy landed before free */
}

TEST_CASE("a block that does not fit its receive fails the call on that rank", "[coll][move]")
{
    gwtest::MemWorld w(2);
    /* Rank 0 sends 8 bytes, rank 1 has room for 4 of them: both forms. */
    gw_ce_block_t rb[2] = {{0, 4}, {8, 8}}, sb0[1] = {{0, 8}}, sb1[1] = {{0, 8}};
    Bytes send(8, 7), recv0(16, 0), recv1(16, 0);
    gw_ce_move_t m[2]{};
    for (int r = 0; r < 2; ++r) {
        m[r].kind = GW_CE_MOVE_ALLGATHER;
        m[r].sbuf = send.data();
        m[r].rbuf = r ? recv1.data() : recv0.data();
        m[r].sblocks = r ? sb1 : sb0;
        m[r].rblocks = rb;
        m[r].local = GW_CE_LOCAL_MESSAGE;
    }
    int rc[2] = {GW_CE_OK, GW_CE_OK};
    std::string why[2];
    on_threads(2, [&](int r) {
        char w1[256] = "";
        rc[r] = gw_ce_move_run(&w.transport(r), &m[r], w1, sizeof(w1));
        why[r] = w1;
    });
    CHECK(GW_CE_OK != rc[0]); /* its own block: 8 bytes into 4 */
    CHECK(GW_CE_OK != rc[1]);
    CHECK(why[1].rfind("point-to-point: ", 0) == 0);
    CHECK(0 == w.leaks());
}
