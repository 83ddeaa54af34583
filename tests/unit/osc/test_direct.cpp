// The one-sided engine's same-node direct path (gpuwire/osc_direct.h,
// ucx_glue/osc/direct) over a stand-in for the core's device API
// (fake_gpu.hpp): window descriptions, targets mapped or not, direct Put and
// Get and their tickets and batches, host windows by cross-memory attach
// and in shared memory, accumulates by reference.
#include "gw_catch.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "direct_fixture.hpp"
#include "fake_gpu.hpp"
#include "gpuwire/cuda/reduce.h"
#include "gpuwire/osc_direct.h"

using namespace osctest;

TEST_CASE("direct: each rank's description of its window", "[osc][direct]")
{
    Opened o;
    char host[64], dev[64], pool[64];
    o.g.device(dev, sizeof(dev), 1);
    o.g.device(pool, sizeof(pool), 0, false, false);  // cannot be exported

    CHECK(describe(self_of(0, host, 64, -1), false).kind == GW_OSC_WIN_MESSAGES);
    CHECK(describe(self_of(0, host, 0, -1)).kind == GW_OSC_WIN_MESSAGES);
    gw_osc_win_desc_t h = describe(self_of(0, host, 64, -1, 8));
    CHECK(h.kind == GW_OSC_WIN_HOST);
    CHECK(h.pid == getpid());
    CHECK(h.base == reinterpret_cast<uintptr_t>(host));
    CHECK(h.disp_unit == 8);
    CHECK(h.size == 64);
    CHECK(o.g.user_waits.empty());

    gw_osc_win_desc_t d = describe(self_of(2, dev, 64, 1));
    CHECK(d.kind == GW_OSC_WIN_DEVICE);
    CHECK(o.g.user_waits == std::vector<int>{1});  // the application's work lands first

    CHECK(describe(self_of(2, pool, 64, 0)).kind == GW_OSC_WIN_MESSAGES);
    CHECK(logged(1, "rank 2's window cannot be mapped by its peers (fake describe failed): "
                    "their Put and Get go as messages"));
    o.g.fail_user = true;
    CHECK(describe(self_of(2, dev, 64, 1)).kind == GW_OSC_WIN_MESSAGES);
}

TEST_CASE("direct: same-node device windows mapped, Put and Get as copies", "[osc][direct]")
{
    Opened o;
    char mine[64] = {}, near[64] = {}, far[64] = {}, other[64] = {};
    o.g.device(mine, sizeof(mine), 0);
    o.g.device(near, sizeof(near), 0);
    o.g.device(far, sizeof(far), 1);
    const gw_osc_win_self_t self = self_of(0, mine, 64, 0);
    std::vector<gw_osc_win_desc_t> all = {describe(self), describe(self_of(1, near, 64, 0, 4)),
                                          describe(self_of(2, far, 64, 1)),
                                          describe(self_of(3, other, 64, -1), false)};
    Peers peers{{true, true, false, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = -1;
    REQUIRE(gw_osc_direct_open(&self, 4, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    REQUIRE(d != nullptr);
    CHECK(mapped == 2);   // this rank and rank 1; rank 2 is on another node, 3 has messages
    CHECK(o.g.maps == 1); // this rank's own window is not mapped

    const char data[8] = {'p', 'u', 't', ' ', 'd', 'a', 't', 'a'};
    int rc = -1;
    // Rank 1's disp_unit is 4: displacement 2 is byte 8.
    CHECK(gw_osc_direct_rma(d, true, const_cast<char *>(data), 8, 1, 2, 0, false, &rc) ==
          GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);
    CHECK(std::memcmp(near + 8, data, 8) == 0);
    CHECK_FALSE(o.g.copies.back().both_device);  // a host origin buffer
    CHECK(o.g.waits.empty());                    // nothing waits per operation
    char back[8] = {};
    CHECK(gw_osc_direct_rma(d, false, back, 8, 1, 2, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(std::memcmp(back, data, 8) == 0);
    const size_t before = o.g.copies.size();
    CHECK(gw_osc_direct_rma(d, true, mine, 8, 0, 0, 16, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(o.g.copies.size() == before);  // the origin on the window's GPU: batched
    REQUIRE(gw_osc_direct_wait(d) == 0);  // the synchronisation launches it
    CHECK(o.g.batches == std::vector<int>{1});
    CHECK(o.g.copies.back().both_device);
    CHECK(o.g.copies.back().dst == mine + 16);

    // Other nodes, windows that are messages, no such rank: the message path.
    CHECK(gw_osc_direct_rma(d, true, back, 8, 2, 0, 0, false, &rc) == GW_OSC_DIRECT_NO);
    CHECK(gw_osc_direct_rma(d, true, back, 8, 3, 0, 0, false, &rc) == GW_OSC_DIRECT_NO);
    CHECK(gw_osc_direct_rma(d, true, back, 8, 4, 0, 0, false, &rc) == GW_OSC_DIRECT_NO);
    CHECK(gw_osc_direct_rma(nullptr, true, back, 8, 1, 0, 0, false, &rc) == GW_OSC_DIRECT_NO);

    // Outside the window: refused, nothing moved.
    size_t copies = o.g.copies.size();
    rc = 0;
    CHECK(gw_osc_direct_rma(d, true, back, 8, 1, 15, 0, false, &rc) == GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_RANGE);
    CHECK(logged(0, "rank 0 accessed [60, +8) outside rank 1's window of 64 bytes"));
    CHECK(o.g.copies.size() == copies);
    rc = -1;
    CHECK(gw_osc_direct_rma(d, true, back, 8, 1, 14, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);  // [56, 64): the window's last bytes
    copies = o.g.copies.size();
    rc = 0;
    CHECK(gw_osc_direct_rma(d, true, back, 8, 1, 0, -1, false, &rc) == GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_RANGE);
    CHECK(o.g.copies.size() == copies);
    // Nothing to move: taken, no copy.
    rc = -1;
    CHECK(gw_osc_direct_rma(d, true, back, 0, 1, 99, 0, false, &rc) == GW_OSC_DIRECT_DONE);
    CHECK(rc == 0);
    CHECK(o.g.copies.size() == copies);

    // The synchronisation waits for the last ticket of the GPU copied on.
    o.g.waits.clear();
    REQUIRE(gw_osc_direct_wait(d) == 0);
    REQUIRE(o.g.waits.size() == 1);
    CHECK(o.g.waits[0] == std::make_pair(0, o.g.tickets[0]));
    gw_osc_direct_close(d);
    CHECK(o.g.unmaps == 1);
    CHECK(o.g.waits.size() == 2);  // close waits too
}

TEST_CASE("direct: tickets per GPU, waits on request, failures", "[osc][direct]")
{
    Opened o;
    char a[64] = {}, b[64] = {}, src[16] = "0123456789abcde";
    o.g.device(a, sizeof(a), 0);
    o.g.device(b, sizeof(b), 1);
    char mine[8];
    const gw_osc_win_self_t self = self_of(0, mine, 8, -1);
    std::vector<gw_osc_win_desc_t> all = {describe(self, false), describe(self_of(1, a, 64, 0)),
                                          describe(self_of(2, b, 64, 1))};
    Peers peers{{true, true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = 0, rc = -1;
    REQUIRE(gw_osc_direct_open(&self, 3, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    CHECK(mapped == 2);
    // Copies on both GPUs, several on GPU 1: the wait covers the last of each.
    CHECK(gw_osc_direct_rma(d, true, src, 8, 2, 0, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(gw_osc_direct_rma(d, true, src, 8, 1, 0, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(gw_osc_direct_rma(d, true, src + 8, 8, 2, 8, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(o.g.tickets[0] == 1);
    CHECK(o.g.tickets[1] == 2);
    REQUIRE(gw_osc_direct_wait(d) == 0);
    REQUIRE(o.g.waits.size() == 2);
    CHECK(o.g.waits[0] == std::make_pair(0, uint64_t{1}));
    CHECK(o.g.waits[1] == std::make_pair(1, uint64_t{2}));
    CHECK(std::memcmp(b, src, 16) == 0);

    // An Rput completes with its copy: waited for at once.
    o.g.waits.clear();
    CHECK(gw_osc_direct_rma(d, true, src, 4, 1, 0, 0, true, &rc) == GW_OSC_DIRECT_MOVED);
    REQUIRE(o.g.waits.size() == 1);
    CHECK(o.g.waits[0] == std::make_pair(0, o.g.tickets[0]));
    o.g.fail_wait = true;
    CHECK(gw_osc_direct_rma(d, true, src, 4, 1, 0, 0, true, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == GW_OSC_ERR_FAILED);
    CHECK(gw_osc_direct_wait(d) == GW_OSC_ERR_FAILED);
    CHECK(logged(0, "direct copies on GPU 0 failed: fake copy_wait failed"));
    o.g.fail_wait = false;

    // A copy that cannot start: taken, failed, not counted as moved.
    o.g.fail_copy = true;
    rc = 0;
    CHECK(gw_osc_direct_rma(d, true, src, 4, 1, 0, 0, false, &rc) == GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_FAILED);
    CHECK(logged(0, "direct copy of 4 bytes on GPU 0 failed: fake copy failed"));
    o.g.fail_copy = false;

    // An origin buffer the application may still be writing: its work first.
    char late[8] = "late!!!";
    o.g.device(late, sizeof(late), 0, true);
    o.g.user_waits.clear();
    CHECK(gw_osc_direct_rma(d, true, late, 8, 1, 0, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(o.g.user_waits == std::vector<int>{0});
    o.g.fail_user = true;
    const size_t copies = o.g.copies.size();
    CHECK(gw_osc_direct_rma(d, true, late, 8, 1, 0, 0, false, &rc) == GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_FAILED);
    CHECK(o.g.copies.size() == copies);
    o.g.fail_user = false;
    gw_osc_direct_close(d);
    CHECK(o.g.unmaps == o.g.maps);
}

TEST_CASE("direct: targets that cannot be mapped keep the message path", "[osc][direct]")
{
    Opened o;
    char mine[8], a[64], b[64];
    o.g.device(a, sizeof(a), 0);
    o.g.device(b, sizeof(b), 1);
    const gw_osc_win_self_t self = self_of(0, mine, 8, -1);
    std::vector<gw_osc_win_desc_t> all = {describe(self, false), describe(self_of(1, a, 64, 0)),
                                          describe(self_of(2, b, 64, 1))};
    Peers peers{{true, true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = -1;
    o.g.fail_map = true;
    REQUIRE(gw_osc_direct_open(&self, 3, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    CHECK(d == nullptr);  // no target direct: nothing held
    CHECK(mapped == 0);
    CHECK(logged(1, "rank 0 cannot map rank 2's window (fake map failed): messages instead"));
    o.g.fail_map = false;
    // Mapped on a GPU this process cannot copy with: given back at once.
    o.g.map_gpu = 16;
    REQUIRE(gw_osc_direct_open(&self, 3, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    CHECK(d == nullptr);
    CHECK(o.g.maps == 2);
    CHECK(o.g.unmaps == 2);
}

TEST_CASE("direct: same-node host windows by cross-memory attach", "[osc][direct]")
{
    Opened o;
    char win[64] = {}, dev[8] = "device";
    o.g.device(dev, sizeof(dev), 0);
    const gw_osc_win_self_t self = self_of(0, win, 64, -1, 8);
    // Rank 1 is this process's own window, seen as a peer's: cross-memory
    // attach works on one process too.
    std::vector<gw_osc_win_desc_t> all = {describe(self), describe(self)};
    Peers peers{{true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = 0, rc = -1;
    REQUIRE(gw_osc_direct_open(&self, 2, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    CHECK(mapped == 2);
    CHECK(o.g.maps == 0);
    char data[8] = "by CMA";
    CHECK(gw_osc_direct_rma(d, true, data, 8, 1, 2, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);
    CHECK(std::memcmp(win + 16, "by CMA", 7) == 0);
    char back[8] = {};
    CHECK(gw_osc_direct_rma(d, false, back, 8, 0, 2, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(std::memcmp(back, "by CMA", 7) == 0);
    CHECK(o.g.copies.empty());  // no GPU copy
    // A device origin buffer keeps the message path.
    CHECK(gw_osc_direct_rma(d, true, dev, 8, 1, 0, 0, false, &rc) == GW_OSC_DIRECT_NO);
    // So does memory the kernel will not copy.
    CHECK(gw_osc_direct_rma(d, true, nullptr, 8, 1, 0, 0, false, &rc) == GW_OSC_DIRECT_NO);
    CHECK(lines.back().first == 1);
    CHECK(lines.back().second.find("sent as a message instead") != std::string::npos);
    gw_osc_direct_close(d);

    // Not on this node: not reached.
    peers.local = {true, false};
    REQUIRE(gw_osc_direct_open(&self, 2, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    CHECK(mapped == 1);
    CHECK(gw_osc_direct_rma(d, true, data, 8, 1, 0, 0, false, &rc) == GW_OSC_DIRECT_NO);
    gw_osc_direct_close(d);
}

TEST_CASE("direct: which accumulates may go by reference", "[osc][direct]")
{
    Opened o;
    char mine[64], a[64], host[64];
    int32_t origin[4] = {1, 2, 3, 4}, other[4] = {}, late[4] = {}, pool[4] = {};
    o.g.device(mine, sizeof(mine), 0);
    o.g.device(a, sizeof(a), 0);
    o.g.device(origin, sizeof(origin), 0);
    o.g.device(other, sizeof(other), 1);
    o.g.device(late, sizeof(late), 0, true);
    o.g.device(pool, sizeof(pool), 0, false, false);
    const gw_osc_win_self_t self = self_of(0, mine, 64, 0);
    std::vector<gw_osc_win_desc_t> all = {describe(self), describe(self_of(1, a, 64, 0)),
                                          describe(self_of(2, host, 64, -1))};
    Peers peers{{true, true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = 0;
    REQUIRE(gw_osc_direct_open(&self, 3, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    CHECK(mapped == 3);
    char desc[GW_OSC_DESC_BYTES] = {};
    const auto ref = [&](int t, const void *p, uint64_t bytes, int op) {
        return gw_osc_direct_acc_ref(d, t, p, bytes, op, GW_TYPE_INT32, desc);
    };
    REQUIRE(ref(1, origin, 16, GW_OP_SUM));
    const void *described = nullptr;
    std::memcpy(&described, desc, sizeof(described));  // the fake's description
    CHECK(described == origin);
    CHECK(ref(1, origin, 16, GW_OSC_OP_REPLACE));
    CHECK_FALSE(ref(1, origin, 16, GW_OP_MAX));  // no kernel
    CHECK_FALSE(ref(1, origin, 0, GW_OP_SUM));   // nothing to reduce
    CHECK_FALSE(ref(0, origin, 16, GW_OP_SUM));  // this rank's own window
    CHECK_FALSE(ref(2, origin, 16, GW_OP_SUM));  // a host window
    CHECK_FALSE(ref(1, other, 16, GW_OP_SUM));   // the origin on another GPU
    CHECK_FALSE(ref(1, pool, 16, GW_OP_SUM));    // cannot be exported
    int32_t on_host[4] = {};
    CHECK_FALSE(ref(1, on_host, 16, GW_OP_SUM));
    CHECK_FALSE(gw_osc_direct_acc_ref(nullptr, 1, origin, 16, GW_OP_SUM, GW_TYPE_INT32, desc));
    o.g.user_waits.clear();
    CHECK(ref(1, late, 16, GW_OP_SUM));
    CHECK(o.g.user_waits == std::vector<int>{0});
    o.g.fail_user = true;
    CHECK_FALSE(ref(1, late, 16, GW_OP_SUM));
    gw_osc_direct_close(d);
}

TEST_CASE("direct: host windows mapped in shared memory, Put and Get as memory copies",
          "[osc][direct]")
{
    Opened o;
    // Rank 1's window as this rank maps it (the bytes of its segment), rank
    // 2's reached by cross-memory attach, rank 0's (this rank's) its own.
    int64_t mine[8] = {}, theirs[8] = {}, other[8] = {};
    const gw_osc_win_self_t self = self_of(0, mine, sizeof(mine), -1, 8);
    std::vector<gw_osc_win_desc_t> all = {describe(self),
                                          describe(self_of(1, theirs, sizeof(theirs), -1, 8)),
                                          describe(self_of(2, other, sizeof(other), -1, 8))};
    all[1].pid = 1;  // not this process: never touched through its address
    all[1].base = 64;
    void *data[3] = {mine, theirs, nullptr};
    Peers peers{{true, true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = 0, rc = -1;
    REQUIRE(gw_osc_direct_open(&self, 3, all.data(), data, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    CHECK(mapped == 3);
    const int64_t v[2] = {41, 42};
    CHECK(gw_osc_direct_rma(d, true, const_cast<int64_t *>(v), 16, 1, 3, 0, false, &rc) ==
          GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);
    CHECK(theirs[3] == 41);
    CHECK(theirs[4] == 42);
    int64_t back[2] = {};
    CHECK(gw_osc_direct_rma(d, false, back, 16, 1, 3, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(back[1] == 42);
    CHECK(gw_osc_direct_rma(d, true, const_cast<int64_t *>(v), 8, 0, 7, 0, false, &rc) ==
          GW_OSC_DIRECT_MOVED);
    CHECK(mine[7] == 41);
    CHECK(o.g.copies.empty());  // no GPU involved
    CHECK(gw_osc_direct_wait(d) == 0);
    CHECK(o.g.waits.empty());

    // Past the window's end: refused, nothing written.
    rc = 0;
    CHECK(gw_osc_direct_rma(d, true, const_cast<int64_t *>(v), 16, 1, 7, 0, false, &rc) ==
          GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_RANGE);
    CHECK(theirs[7] == 0);

    // A device origin buffer: one blocking copy on its GPU into and out of
    // the mapping, behind the application's work; no accumulate by reference.
    int64_t dev[2] = {77, 78}, dev_back[2] = {};
    o.g.device(dev, sizeof(dev), 1);
    o.g.device(dev_back, sizeof(dev_back), 1);
    o.g.user_waits.clear();
    rc = -1;
    CHECK(gw_osc_direct_rma(d, true, dev, 16, 1, 5, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);
    CHECK(theirs[5] == 77);
    CHECK(theirs[6] == 78);
    REQUIRE(o.g.copies.size() == 1);
    CHECK(o.g.copies[0].gpu == 1);
    CHECK(o.g.copies[0].dst == &theirs[5]);
    CHECK(o.g.user_waits == std::vector<int>{1});
    CHECK(o.g.waits.size() == 1);  // complete on return
    CHECK(gw_osc_direct_rma(d, false, dev_back, 16, 1, 5, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(dev_back[1] == 78);
    o.g.fail_copy = true;
    CHECK(gw_osc_direct_rma(d, true, dev, 16, 1, 5, 0, false, &rc) == GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_FAILED);
    o.g.fail_copy = false;
    char desc[GW_OSC_DESC_BYTES];
    CHECK_FALSE(gw_osc_direct_acc_ref(d, 1, dev, 16, 0, 0, desc));
    gw_osc_direct_close(d);
}

TEST_CASE("direct: Puts between device buffers go as batches, one kernel each", "[osc][direct]")
{
    Opened o;
    char win[128] = {}, other[64] = {}, origin[128], host[8] = "hostbuf";
    for (int i = 0; i < 128; i++) origin[i] = static_cast<char>(i + 1);
    o.g.device(win, sizeof(win), 0);
    o.g.device(other, sizeof(other), 1);
    o.g.device(origin, sizeof(origin), 0);
    char mine[8];
    const gw_osc_win_self_t self = self_of(0, mine, 8, -1);
    std::vector<gw_osc_win_desc_t> all = {describe(self, false), describe(self_of(1, win, 128, 0)),
                                          describe(self_of(2, other, 64, 1))};
    Peers peers{{true, true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = 0, rc = -1;
    REQUIRE(gw_osc_direct_open(&self, 3, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    // 70 one-byte Puts: the 64th launches a batch of 64; the wait the other 6.
    for (int i = 0; i < 70; i++) {
        CHECK(gw_osc_direct_rma(d, true, origin + i, 1, 1, i, 0, false, &rc) ==
              GW_OSC_DIRECT_MOVED);
        CHECK(rc == 0);
        CHECK(o.g.batches.size() == (i >= 63 ? 1u : 0u));
    }
    CHECK(win[63] == origin[63]);
    CHECK(win[64] == 0);  // not launched yet
    REQUIRE(gw_osc_direct_wait(d) == 0);
    CHECK(o.g.batches == std::vector<int>{64, 6});
    CHECK(o.g.waits.back() == std::make_pair(0, o.g.tickets[0]));
    CHECK(std::memcmp(win, origin, 70) == 0);

    // Progress launches without waiting; none queued: nothing.
    CHECK(gw_osc_direct_rma(d, true, origin, 4, 1, 100, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    o.g.waits.clear();
    CHECK(gw_osc_direct_kick(d) == 0);
    CHECK(o.g.batches.size() == 3);
    CHECK(o.g.waits.empty());
    CHECK(gw_osc_direct_kick(d) == 0);
    CHECK(gw_osc_direct_kick(nullptr) == 0);
    CHECK(o.g.batches.size() == 3);

    // Any other copy on that GPU launches the batch first (the stream's
    // order); an Rput is not batched.
    CHECK(gw_osc_direct_rma(d, true, origin, 2, 1, 110, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(gw_osc_direct_rma(d, true, host, 2, 1, 110, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(o.g.batches.size() == 4);
    CHECK(std::memcmp(win + 110, "ho", 2) == 0);  // the later Put landed last
    CHECK(gw_osc_direct_rma(d, true, origin, 2, 1, 112, 0, true, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(o.g.batches.size() == 4);
    CHECK(o.g.waits.back() == std::make_pair(0, o.g.tickets[0]));
    // Another GPU's batch is its own.
    CHECK(gw_osc_direct_rma(d, true, origin, 2, 2, 0, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    CHECK(gw_osc_direct_rma(d, true, origin, 2, 1, 114, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    REQUIRE(gw_osc_direct_wait(d) == 0);
    CHECK(o.g.batches.size() == 5);  // GPU 0's batch; the copy to GPU 1 was not batched
    CHECK(o.g.copies.back().both_device);

    // A batch that cannot start fails the next wait, once.
    CHECK(gw_osc_direct_rma(d, true, origin, 2, 1, 116, 0, false, &rc) == GW_OSC_DIRECT_MOVED);
    o.g.fail_copy = true;
    CHECK(gw_osc_direct_wait(d) == GW_OSC_ERR_FAILED);
    CHECK(logged(0, "direct copies (1, 2 bytes) on GPU 0 failed: fake copy failed"));
    o.g.fail_copy = false;
    CHECK(gw_osc_direct_wait(d) == 0);
    gw_osc_direct_close(d);
}
