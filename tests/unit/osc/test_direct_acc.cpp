// The accumulate family done by a same-node origin in a host window mapped in
// shared memory (gw_osc_direct_acc), under the window's accumulate word
// (gw_osc_lockwords_acc): what it does, what it declines, and that the word
// is held while the window changes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "direct_fixture.hpp"
#include "gpuwire/cuda/reduce.h"
#include "gpuwire/osc.h"

using namespace osctest;

namespace {

constexpr int32_t kSum = 1, kReplace = 2, kNoOp = 3;

// int64 elements: dst = src op dst; records whether the word was held.
struct Combine {
    int *word = nullptr;
    int held = 0, calls = 0;
    static int fn(void *ctx, void *dst, const void *src, size_t len, int32_t, int32_t op, int gpu)
    {
        auto *c = static_cast<Combine *>(ctx);
        c->calls++;
        if (c->word != nullptr && __atomic_load_n(c->word, __ATOMIC_RELAXED) == 1) c->held++;
        if (gpu >= 0 || len % 8) return -1;
        auto *d = static_cast<int64_t *>(dst);
        const auto *s = static_cast<const int64_t *>(src);
        for (size_t i = 0; i < len / 8; i++) {
            if (op == kSum) d[i] += s[i];
            if (op == kReplace) d[i] = s[i];
        }
        return 0;
    }
    static int copy(void *, void *, const void *, size_t, int) { return -1; }
    gw_osc_mem_ops_t ops() { return gw_osc_mem_ops_t{&Combine::copy, &Combine::fn, this}; }
};

}  // namespace

TEST_CASE("accumulate word: in every rank's segment, held by one at a time",
          "[osc][lockword]")
{
    gw_osc_lockwords_t *with = nullptr, *without = nullptr;
    uint64_t id = 0, id2 = 0;
    char why[256] = "";
    REQUIRE(0 == gw_osc_lockwords_create(2, 0, 64, true, &with, &id, why, sizeof(why)));
    REQUIRE(0 == gw_osc_lockwords_create(2, 1, 0, true, &without, &id2, why, sizeof(why)));
    int *word = gw_osc_lockwords_acc(with, 0);
    REQUIRE(word != nullptr);
    CHECK(word != gw_osc_lockwords_table(with)[0]);  // not the passive-target lock word
    // A segment of the lock word alone (a device window, a private one) has
    // it too.
    CHECK(gw_osc_lockwords_acc(without, 1) != nullptr);
    CHECK(gw_osc_lockwords_acc(without, 1) != gw_osc_lockwords_table(without)[1]);
    CHECK(gw_osc_lockwords_acc(with, 1) == nullptr);     // not mapped
    CHECK(gw_osc_lockwords_acc(nullptr, 0) == nullptr);
    CHECK(gw_osc_lockwords_acc(with, 5) == nullptr);
    // A peer's mapping of it is the same word.
    REQUIRE(0 == gw_osc_lockwords_open(without, 0, id, 64, false, why, sizeof(why)));
    int *theirs = gw_osc_lockwords_acc(without, 0);
    REQUIRE(theirs != nullptr);
    REQUIRE(gw_osc_acc_trylock(word, 1));
    CHECK(*theirs == 1);
    CHECK_FALSE(gw_osc_acc_trylock(theirs, 200));  // held: refused after its tries
    gw_osc_acc_unlock(word);
    CHECK(*theirs == 0);

    // Two threads, each through its own mapping: a plain counter stays exact.
    int64_t *counter = static_cast<int64_t *>(gw_osc_lockwords_data(with, 0));
    REQUIRE(counter != nullptr);
    *counter = 0;
    auto bump = [](int *w, int64_t *c) {
        for (int i = 0; i < 200000; i++) {
            while (!gw_osc_acc_trylock(w, 64)) {
            }
            int64_t v = *reinterpret_cast<volatile int64_t *>(c);
            *reinterpret_cast<volatile int64_t *>(c) = v + 1;
            gw_osc_acc_unlock(w);
        }
    };
    std::thread a(bump, word, counter);
    std::thread b(bump, theirs, static_cast<int64_t *>(gw_osc_lockwords_data(without, 0)));
    a.join();
    b.join();
    CHECK(*counter == 400000);
    gw_osc_lockwords_unlink(with);
    gw_osc_lockwords_unlink(without);
    gw_osc_lockwords_close(without);
    gw_osc_lockwords_close(with);
}

TEST_CASE("direct accumulates on a shared host window: done under its word", "[osc][direct]")
{
    Opened o;
    // Rank 1's window mapped here (shared memory), rank 2's reached by
    // cross-memory attach, rank 3's on a GPU.
    int64_t mine[8] = {}, theirs[8] = {}, other[8] = {};
    char dev[64] = {};
    o.g.device(dev, sizeof(dev), 0);
    const gw_osc_win_self_t self = self_of(0, mine, sizeof(mine), -1, 8);
    std::vector<gw_osc_win_desc_t> all = {describe(self),
                                          describe(self_of(1, theirs, sizeof(theirs), -1, 8)),
                                          describe(self_of(2, other, sizeof(other), -1, 8)),
                                          describe(self_of(3, dev, sizeof(dev), 0, 8))};
    void *data[4] = {mine, theirs, nullptr, nullptr};
    Peers peers{{true, true, true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = 0, rc = -1, word = 0;
    REQUIRE(gw_osc_direct_open(&self, 4, all.data(), data, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    CHECK(mapped == 4);
    Combine c;
    c.word = &word;
    const gw_osc_mem_ops_t ops = c.ops();
    auto acc = [&](uint32_t kind, int target, int64_t disp, const void *origin,
                   const void *compare, void *result, int32_t op, uint64_t bytes = 8) {
        rc = -1;
        return gw_osc_direct_acc(d, &word, kind, target, disp, 0, bytes, origin, compare, result,
                                 0, op, &ops, &rc);
    };

    const int64_t two[2] = {5, 6};
    CHECK(acc(GW_OSC_ACC, 1, 2, two, nullptr, nullptr, kSum, 16) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);
    CHECK(acc(GW_OSC_ACC, 1, 2, two, nullptr, nullptr, kSum, 16) == GW_OSC_DIRECT_MOVED);
    CHECK(theirs[2] == 10);
    CHECK(theirs[3] == 12);
    CHECK(c.calls == 2);
    CHECK(c.held == 2);  // the word held around each change
    CHECK(word == 0);    // and released

    int64_t before[2] = {-1, -1};
    CHECK(acc(GW_OSC_GACC, 1, 2, two, nullptr, before, kReplace, 16) == GW_OSC_DIRECT_MOVED);
    CHECK(before[0] == 10);
    CHECK(before[1] == 12);
    CHECK(theirs[2] == 5);
    // NO_OP: a read, origin NULL.
    CHECK(acc(GW_OSC_GACC, 1, 3, nullptr, nullptr, before, kNoOp) == GW_OSC_DIRECT_MOVED);
    CHECK(before[0] == 6);
    CHECK(theirs[3] == 6);

    // Compare-and-swap: swaps on equal only, answers the old value.
    int64_t nv = 99, cmp = 5, old = -1;
    CHECK(acc(GW_OSC_CAS, 1, 2, &nv, &cmp, &old, 0) == GW_OSC_DIRECT_MOVED);
    CHECK(old == 5);
    CHECK(theirs[2] == 99);
    CHECK(acc(GW_OSC_CAS, 1, 2, &nv, &cmp, &old, 0) == GW_OSC_DIRECT_MOVED);  // 99 != 5
    CHECK(old == 99);
    CHECK(theirs[2] == 99);
    // This rank's own window, in its own segment: the same.
    CHECK(acc(GW_OSC_ACC, 0, 7, two, nullptr, nullptr, kSum) == GW_OSC_DIRECT_MOVED);
    CHECK(mine[7] == 5);
    CHECK(word == 0);

    // The word held by another (the target applying a message, another
    // origin): after its tries, busy: the message path; unchanged.
    word = 1;
    CHECK(acc(GW_OSC_ACC, 1, 2, two, nullptr, nullptr, kSum, 16) == GW_OSC_DIRECT_BUSY);
    CHECK(theirs[2] == 99);
    word = 0;
    // Past the end: refused, nothing changed, the word not taken.
    const int calls = c.calls;
    CHECK(acc(GW_OSC_ACC, 1, 7, two, nullptr, nullptr, kSum, 16) == GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_RANGE);
    CHECK(theirs[7] == 0);
    CHECK(c.calls == calls);
    // A failing combine: done, and said.
    int64_t odd[1] = {1};
    CHECK(acc(GW_OSC_ACC, 1, 0, odd, nullptr, nullptr, kSum, 4) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == GW_OSC_ERR_FAILED);
    CHECK(word == 0);
    // Nothing to move: done.
    CHECK(acc(GW_OSC_ACC, 1, 0, two, nullptr, nullptr, kSum, 0) == GW_OSC_DIRECT_DONE);
    CHECK(rc == 0);

    // Declined, for the message path: no word, a Put, a device origin or
    // result.
    CHECK(gw_osc_direct_acc(d, nullptr, GW_OSC_ACC, 1, 0, 0, 8, two, nullptr, nullptr, 0, kSum,
                            &ops, &rc) == GW_OSC_DIRECT_NO);
    CHECK(acc(GW_OSC_PUT, 1, 0, two, nullptr, nullptr, kSum) == GW_OSC_DIRECT_NO);
    CHECK(acc(GW_OSC_ACC, 1, 0, dev, nullptr, nullptr, kSum) == GW_OSC_DIRECT_NO);
    CHECK(acc(GW_OSC_GACC, 1, 0, two, nullptr, dev, kSum) == GW_OSC_DIRECT_NO);
    CHECK(gw_osc_direct_acc(nullptr, &word, GW_OSC_ACC, 1, 0, 0, 8, two, nullptr, nullptr, 0,
                            kSum, &ops, &rc) == GW_OSC_DIRECT_NO);
    CHECK(theirs[0] == 0);
    gw_osc_direct_close(d);
}

TEST_CASE("direct accumulates by cross-memory attach: read, combined here, written back",
          "[osc][direct][cma]")
{
    Opened o;
    // Rank 1's host window is reached by cross-memory attach (its process
    // is this one here; no shared mapping). Large enough for several steps.
    constexpr size_t kN = (600 << 10) / 8;
    std::vector<int64_t> mine(8), theirs(kN), origin(kN), before(kN, -1);
    for (size_t i = 0; i < kN; i++) {
        theirs[i] = static_cast<int64_t>(i);
        origin[i] = 3 * static_cast<int64_t>(i) + 1;
    }
    const gw_osc_win_self_t self = self_of(0, mine.data(), 64, -1, 8);
    std::vector<gw_osc_win_desc_t> all = {describe(self),
                                          describe(self_of(1, theirs.data(), kN * 8, -1, 8))};
    Peers peers{{true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = 0, rc = -1, word = 0;
    REQUIRE(gw_osc_direct_open(&self, 2, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    REQUIRE(mapped == 2);
    Combine c;
    c.word = &word;
    const gw_osc_mem_ops_t ops = c.ops();
    auto acc = [&](uint32_t kind, int64_t disp, const void *org, const void *compare,
                   void *result, int32_t op, uint64_t bytes) {
        rc = -1;
        return gw_osc_direct_acc(d, &word, kind, 1, disp, 0, bytes, org, compare, result, 0, op,
                                 &ops, &rc);
    };

    // The whole window, several steps: every element once, under the word.
    CHECK(acc(GW_OSC_GACC, 0, origin.data(), nullptr, before.data(), kSum, kN * 8) ==
          GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);
    CHECK(c.calls >= 3);
    CHECK(c.held == c.calls);
    CHECK(word == 0);
    bool exact = true;
    for (size_t i = 0; i < kN; i++) {
        exact = exact && before[i] == static_cast<int64_t>(i) &&
                theirs[i] == 4 * static_cast<int64_t>(i) + 1;
    }
    CHECK(exact);
    // Odd offsets and lengths: the bytes around stay.
    const int64_t two[2] = {10, 20};
    CHECK(acc(GW_OSC_ACC, 5, two, nullptr, nullptr, kSum, 16) == GW_OSC_DIRECT_MOVED);
    CHECK(theirs[4] == 17);
    CHECK(theirs[5] == 21 + 10);
    CHECK(theirs[6] == 25 + 20);
    CHECK(theirs[7] == 29);
    // NO_OP reads; the window is unchanged and combine not called.
    const int calls = c.calls;
    int64_t got[2] = {};
    CHECK(acc(GW_OSC_GACC, 5, nullptr, nullptr, got, kNoOp, 16) == GW_OSC_DIRECT_MOVED);
    CHECK(got[0] == 31);
    CHECK(got[1] == 45);
    CHECK(c.calls == calls);
    // REPLACE without a result: written, not read or combined.
    CHECK(acc(GW_OSC_ACC, 5, two, nullptr, nullptr, GW_OSC_OP_REPLACE, 16) ==
          GW_OSC_DIRECT_MOVED);
    CHECK(theirs[5] == 10);
    CHECK(theirs[6] == 20);
    CHECK(c.calls == calls);
    // Compare-and-swap: swaps on equal only.
    int64_t nv = 99, cmp = 10, old = -1;
    CHECK(acc(GW_OSC_CAS, 5, &nv, &cmp, &old, 0, 8) == GW_OSC_DIRECT_MOVED);
    CHECK(old == 10);
    CHECK(theirs[5] == 99);
    CHECK(acc(GW_OSC_CAS, 5, &nv, &cmp, &old, 0, 8) == GW_OSC_DIRECT_MOVED);
    CHECK(old == 99);
    CHECK(theirs[5] == 99);
    CHECK(word == 0);
    // The word held elsewhere: busy, unchanged.
    word = 1;
    CHECK(acc(GW_OSC_ACC, 5, two, nullptr, nullptr, kSum, 16) == GW_OSC_DIRECT_BUSY);
    CHECK(theirs[5] == 99);
    word = 0;
    // Past the end: refused, nothing changed.
    CHECK(acc(GW_OSC_ACC, kN - 1, two, nullptr, nullptr, kSum, 16) == GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_RANGE);
    CHECK(theirs[kN - 1] == 4 * static_cast<int64_t>(kN - 1) + 1);
    // A failing combine: said, and nothing written.
    int64_t odd[1] = {1};
    CHECK(acc(GW_OSC_ACC, 0, odd, nullptr, nullptr, kSum, 4) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == GW_OSC_ERR_FAILED);
    CHECK(theirs[0] == 1);
    CHECK(word == 0);
    // Device buffers: the message path.
    char dev[64] = {};
    o.g.device(dev, sizeof(dev), 0);
    CHECK(acc(GW_OSC_ACC, 0, dev, nullptr, nullptr, kSum, 8) == GW_OSC_DIRECT_NO);
    CHECK(acc(GW_OSC_GACC, 0, two, nullptr, dev, kSum, 8) == GW_OSC_DIRECT_NO);
    gw_osc_direct_close(d);

    // Memory the kernel will not copy (gone since the window was opened):
    // declined before anything changed, for the message path.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *gone = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(gone != MAP_FAILED);
    all[1] = describe(self_of(1, gone, page, -1, 8));
    REQUIRE(gw_osc_direct_open(&self, 2, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    REQUIRE(munmap(gone, page) == 0);
    CHECK(acc(GW_OSC_ACC, 0, two, nullptr, nullptr, kSum, 16) == GW_OSC_DIRECT_NO);
    CHECK(word == 0);
    gw_osc_direct_close(d);
}

TEST_CASE("direct accumulates on a mapped device window: the kernels, under its word",
          "[osc][direct]")
{
    Opened o;
    // Rank 1's window on GPU 0 (mapped here), rank 0's (this rank's) on the
    // host and private. Origin buffers: host, device on GPU 0 and GPU 1.
    int32_t win[8] = {}, mine[4] = {}, dev0[2] = {3, 4}, dev1[2] = {30, 40}, dres[2] = {};
    o.g.device(win, sizeof(win), 0);
    o.g.device(dev0, sizeof(dev0), 0);
    o.g.device(dev1, sizeof(dev1), 1);
    o.g.device(dres, sizeof(dres), 0);
    const gw_osc_win_self_t self = self_of(0, mine, sizeof(mine), -1, 4);
    std::vector<gw_osc_win_desc_t> all = {describe(self, false),
                                          describe(self_of(1, win, sizeof(win), 0, 4))};
    Peers peers{{true, true}};
    gw_osc_direct_t *d = nullptr;
    int mapped = 0, rc = -1, word = 0;
    REQUIRE(gw_osc_direct_open(&self, 2, all.data(), nullptr, Peers::on_node, &peers, &d,
                               &mapped) == 0);
    REQUIRE(mapped == 1);
    Combine c;  // never called for a device window
    const gw_osc_mem_ops_t ops = c.ops();
    auto acc = [&](uint32_t kind, int64_t disp, const void *origin, void *result, int32_t op,
                   uint64_t bytes = 8, int32_t type = GW_TYPE_INT32) {
        rc = -1;
        return gw_osc_direct_acc(d, &word, kind, 1, disp, 0, bytes, origin, nullptr, result,
                                 type, op, &ops, &rc);
    };
    // From host memory: staged to GPU scratch, reduced there, one wait.
    const int32_t host[2] = {1, 2};
    o.g.copies.clear();
    CHECK(acc(GW_OSC_ACC, 2, host, nullptr, GW_OP_SUM) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);
    CHECK(win[2] == 1);
    CHECK(win[3] == 2);
    REQUIRE(o.g.copies.size() == 1);
    CHECK_FALSE(o.g.copies[0].both_device);
    CHECK(o.g.reductions == 1);
    CHECK(o.g.waits.size() == 1);
    CHECK(o.g.scratch_lent == 0);
    CHECK(word == 0);
    // From this GPU's memory: reduced from it, no staging; the result (a
    // Get_accumulate, device memory here) gets the bytes before, by a kernel.
    o.g.copies.clear();
    CHECK(acc(GW_OSC_GACC, 2, dev0, dres, GW_OP_SUM) == GW_OSC_DIRECT_MOVED);
    CHECK(dres[0] == 1);
    CHECK(dres[1] == 2);
    CHECK(win[2] == 4);
    CHECK(win[3] == 6);
    REQUIRE(o.g.copies.size() == 1);
    CHECK(o.g.copies[0].dst == dres);
    CHECK(o.g.copies[0].both_device);
    CHECK(o.g.reductions == 2);
    // From another GPU: staged to this one first. REPLACE: a copy.
    CHECK(acc(GW_OSC_ACC, 2, dev1, nullptr, GW_OP_SUM) == GW_OSC_DIRECT_MOVED);
    CHECK(win[2] == 34);
    CHECK(o.g.scratch_lent == 0);
    int32_t before[2] = {};
    CHECK(acc(GW_OSC_GACC, 2, host, before, GW_OSC_OP_REPLACE) == GW_OSC_DIRECT_MOVED);
    CHECK(before[0] == 34);
    CHECK(before[1] == 46);
    CHECK(win[2] == 1);
    CHECK(win[3] == 2);
    // NO_OP (origin NULL): a read.
    CHECK(acc(GW_OSC_GACC, 3, nullptr, before, -1, 4) == GW_OSC_DIRECT_MOVED);
    CHECK(before[0] == 2);
    CHECK(word == 0);
    // A late origin buffer: the application's work on its GPU first.
    int32_t late[2] = {5, 5};
    o.g.device(late, sizeof(late), 0, true);
    o.g.user_waits.clear();
    CHECK(acc(GW_OSC_ACC, 0, late, nullptr, GW_OP_SUM) == GW_OSC_DIRECT_MOVED);
    CHECK(o.g.user_waits == std::vector<int>{0});
    CHECK(win[0] == 5);

    // The word held by another: the message path.
    word = 1;
    CHECK(acc(GW_OSC_ACC, 0, host, nullptr, GW_OP_SUM) == GW_OSC_DIRECT_BUSY);
    CHECK(win[0] == 5);
    word = 0;
    // Past the end, a failing kernel.
    CHECK(acc(GW_OSC_ACC, 7, host, nullptr, GW_OP_SUM) == GW_OSC_DIRECT_DONE);
    CHECK(rc == GW_OSC_ERR_RANGE);
    o.g.fail_reduce = true;
    CHECK(acc(GW_OSC_ACC, 0, host, nullptr, GW_OP_SUM) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == GW_OSC_ERR_FAILED);
    CHECK(word == 0);
    CHECK(o.g.scratch_lent == 0);
    o.g.fail_reduce = false;
    // Compare-and-swap, one kernel: from host values (staged), then with
    // this GPU's buffers (none staged); swapped only on equal.
    auto cas = [&](const void *nv, const void *cmp, void *old) {
        rc = -1;
        return gw_osc_direct_acc(d, &word, GW_OSC_CAS, 1, 1, 0, 4, nv, cmp, old, GW_TYPE_INT32,
                                 0, &ops, &rc);
    };
    const int32_t nv = 77, cmp_host = 2;
    int32_t old = -1;
    win[1] = 2;
    o.g.copies.clear();
    CHECK(cas(&nv, &cmp_host, &old) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == 0);
    CHECK(old == 2);
    CHECK(win[1] == 77);
    CHECK(o.g.cas == 1);
    CHECK(o.g.copies.size() == 3);  // origin and compare in, result out
    CHECK(o.g.scratch_lent == 0);
    CHECK(word == 0);
    int32_t dv[3] = {5, 77, -1};  // new, compare, result: on GPU 0
    o.g.device(dv, sizeof(dv), 0);
    o.g.copies.clear();
    CHECK(cas(&dv[0], &dv[1], &dv[2]) == GW_OSC_DIRECT_MOVED);
    CHECK(dv[2] == 77);
    CHECK(win[1] == 5);
    CHECK(o.g.copies.empty());
    CHECK(cas(&dv[0], &dv[1], &dv[2]) == GW_OSC_DIRECT_MOVED);  // 5 != 77: kept
    CHECK(dv[2] == 5);
    CHECK(win[1] == 5);
    o.g.fail_reduce = true;
    CHECK(cas(&nv, &cmp_host, &old) == GW_OSC_DIRECT_MOVED);
    CHECK(rc == GW_OSC_ERR_FAILED);
    CHECK(o.g.scratch_lent == 0);
    CHECK(word == 0);
    o.g.fail_reduce = false;
    // Declined: a CAS wider than 16 bytes, an op or type without a kernel.
    int32_t wide[5] = {};
    CHECK(gw_osc_direct_acc(d, &word, GW_OSC_CAS, 1, 0, 0, 20, wide, wide, wide, GW_TYPE_INT32, 0,
                            &ops, &rc) == GW_OSC_DIRECT_NO);
    CHECK(acc(GW_OSC_ACC, 0, host, nullptr, GW_OP_PROD) == GW_OSC_DIRECT_NO);
    CHECK(acc(GW_OSC_ACC, 0, host, nullptr, GW_OP_SUM, 8, -1) == GW_OSC_DIRECT_NO);
    CHECK(c.calls == 0);
    gw_osc_direct_close(d);
}
