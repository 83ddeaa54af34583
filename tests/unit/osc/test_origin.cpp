// The origin's side of an operation (gpuwire/osc.h): its target layout
// built block by block, and the accumulates sent by reference, whose origin
// buffers stay in use until the target acknowledges them.
#include "gw_catch.hpp"

#include <cstring>
#include <vector>

#include "fake_window.hpp"

using gwtest::Ctl;
using gwtest::FakeWindow;

namespace {

std::vector<std::pair<int64_t, uint64_t>> of(const gw_osc_blocks_t &l)
{
    std::vector<std::pair<int64_t, uint64_t>> v;
    for (uint32_t i = 0; i < l.n; i++) v.emplace_back(l.b[i].off, l.b[i].len);
    return v;
}

}  // namespace

TEST_CASE("origin: a target layout merges the pieces that continue each other",
          "[osc][origin]")
{
    gw_osc_blocks_t l;
    REQUIRE(0 == gw_osc_blocks_init(&l));
    CHECK(l.n == 0);
    REQUIRE(0 == gw_osc_blocks_add(&l, 8, 4));
    REQUIRE(0 == gw_osc_blocks_add(&l, 12, 4));  // continues [8, 12)
    REQUIRE(0 == gw_osc_blocks_add(&l, 16, 0));  // empty: nothing
    REQUIRE(0 == gw_osc_blocks_add(&l, 24, 4));  // a gap
    REQUIRE(0 == gw_osc_blocks_add(&l, -8, 4));  // before the target address
    REQUIRE(0 == gw_osc_blocks_add(&l, -4, 4));
    CHECK(of(l) == std::vector<std::pair<int64_t, uint64_t>>{{8, 8}, {24, 4}, {-8, 8}});
    gw_osc_blocks_fini(&l);
    CHECK(l.b == nullptr);
    CHECK(l.n == 0);

    // Many blocks, more than the first allocation holds: every one kept, in order.
    REQUIRE(0 == gw_osc_blocks_init(&l));
    for (int i = 0; i < 100; i++) REQUIRE(0 == gw_osc_blocks_add(&l, 16 * i, 8));
    REQUIRE(l.n == 100);
    CHECK(l.cap >= 100);
    bool all = true;
    for (uint32_t i = 0; i < l.n; i++) all = all && l.b[i].off == 16 * i && l.b[i].len == 8;
    CHECK(all);
    gw_osc_blocks_fini(&l);
}

TEST_CASE("origin: accumulates by reference are waited for by their own count",
          "[osc][origin]")
{
    FakeWindow w(3);
    CHECK(w.s.ref_want == nullptr);
    CHECK(0 == gw_osc_sync_ref_flush(&w.s, 1));  // none sent: nothing to wait for
    CHECK(w.take().empty());

    w.s.sent[1] = 2;  // two operations as messages
    w.s.sent[1]++;    // then one by reference
    REQUIRE(0 == gw_osc_sync_ref_sent(&w.s, 1));
    REQUIRE(w.s.ref_want != nullptr);
    w.s.sent[1]++;    // and one more as a message
    CHECK(3 == gw_osc_sync_ref_flush(&w.s, 1));  // the count of the one by reference
    CHECK(w.take() == std::vector<Ctl>{Ctl{1, GW_OSC_FLUSH, 0, 3}});
    CHECK(0 == gw_osc_sync_ref_flush(&w.s, 2));  // none to rank 2
    CHECK(w.take().empty());
    REQUIRE(0 == w.deliver(1, GW_OSC_ACK, 0, 3));
    CHECK(0 == gw_osc_sync_ref_flush(&w.s, 1));  // acknowledged: its buffer is free
    CHECK(w.take().empty());
}

TEST_CASE("message buffers: large ones kept and handed out again", "[osc][bufs]")
{
    // A large buffer given back is the next one handed out that fits.
    void *a = gw_osc_buf_get(100 << 10);
    REQUIRE(a != nullptr);
    std::memset(a, 0x5a, 100 << 10);  // all of it is there
    gw_osc_buf_put(a, 100 << 10);
    void *b = gw_osc_buf_get(90 << 10);
    CHECK(b == a);
    // One that does not fit in it: another buffer; both kept after.
    void *c = gw_osc_buf_get(1 << 20);
    REQUIRE(c != nullptr);
    CHECK(c != b);
    std::memset(c, 0, 1 << 20);
    gw_osc_buf_put(c, 1 << 20);
    gw_osc_buf_put(b, 90 << 10);
    void *d = gw_osc_buf_get(1 << 20);
    CHECK(d == c);
    gw_osc_buf_put(d, 1 << 20);
    // Small ones and empty ones come from malloc and go back to it.
    void *s = gw_osc_buf_get(0);
    CHECK(s != nullptr);
    gw_osc_buf_put(s, 0);
    gw_osc_buf_put(nullptr, 1 << 20);
}
