// An operation applied to the target's window (gpuwire/osc.h,
// ucx_glue/osc/apply): blocks located in windows of every flavour, each kind
// applied, the fetching kinds' old bytes, failures that stop the operation.
#include "gw_catch.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpuwire/osc.h"

namespace {

// The caller's handles of op and type, as the header carries them.
constexpr int32_t kInt = 7;
enum : int32_t { kSum = 1, kMax = 2, kReplace = 3, kNoOp = 4 };

// Device memory stood for by host memory: every copy and combine recorded.
struct Mem {
    struct Call {
        int gpu;
        size_t len;
        int32_t op;
    };
    std::vector<Call> copies, combines;
    int fail_copy_at = -1;  // the copy that fails (index), -1: none

    gw_osc_mem_ops_t ops() { return gw_osc_mem_ops_t{&Mem::copy, &Mem::combine, this}; }

    static int copy(void *ctx, void *dst, const void *src, size_t len, int gpu)
    {
        auto *m = static_cast<Mem *>(ctx);
        m->copies.push_back({gpu, len, 0});
        if (static_cast<int>(m->copies.size()) - 1 == m->fail_copy_at) return -1;
        std::memcpy(dst, src, len);
        return 0;
    }
    // int32 SUM and MAX, REPLACE, NO_OP; anything else fails.
    static int combine(void *ctx, void *dst, const void *src, size_t len, int32_t type,
                       int32_t op, int gpu)
    {
        static_cast<Mem *>(ctx)->combines.push_back({gpu, len, op});
        if (op == kNoOp) return 0;
        if (op == kReplace) {
            std::memcpy(dst, src, len);
            return 0;
        }
        if (type != kInt || len % 4) return -1;
        for (size_t i = 0; i < len / 4; i++) {
            int32_t a, b;
            std::memcpy(&a, static_cast<const char *>(src) + 4 * i, 4);
            std::memcpy(&b, static_cast<char *>(dst) + 4 * i, 4);
            int32_t r = op == kSum ? a + b : op == kMax ? (a > b ? a : b) : 0;
            if (op != kSum && op != kMax) return -1;
            std::memcpy(static_cast<char *>(dst) + 4 * i, &r, 4);
        }
        return 0;
    }
};

// A message body: the blocks, then the payload.
std::vector<char> body(const std::vector<gw_osc_block_t> &blocks,
                       const std::vector<int32_t> &payload)
{
    std::vector<char> b(blocks.size() * sizeof(gw_osc_block_t) + payload.size() * 4);
    if (!blocks.empty()) std::memcpy(b.data(), blocks.data(), blocks.size() * sizeof(blocks[0]));
    if (!payload.empty()) {
        std::memcpy(b.data() + blocks.size() * sizeof(blocks[0]), payload.data(),
                    payload.size() * 4);
    }
    return b;
}

gw_osc_hdr_t hdr(uint32_t kind, int64_t disp, const std::vector<gw_osc_block_t> &blocks,
                 int32_t op = 0)
{
    gw_osc_hdr_t h{};
    h.kind = kind;
    h.disp = disp;
    h.nblocks = static_cast<uint32_t>(blocks.size());
    h.type = kInt;
    h.op = op;
    for (const auto &b : blocks) h.bytes += b.len;
    return h;
}

struct Window {
    std::vector<int32_t> mem;
    gw_osc_window_t w{};
    explicit Window(int n, int gpu = -1, int disp_unit = 4) : mem(n)
    {
        for (int i = 0; i < n; i++) mem[i] = 100 + i;
        w.base = reinterpret_cast<char *>(mem.data());
        w.size = static_cast<uint64_t>(n) * 4;
        w.disp_unit = disp_unit;
        w.gpu = gpu;
    }
};

std::vector<int32_t> ints(const std::vector<char> &bytes)
{
    std::vector<int32_t> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
}

}  // namespace

TEST_CASE("locate: a window's bounds in displacement units, and dynamic regions",
          "[osc][apply]")
{
    Window win(8, -1, 4);
    int gpu = 99;
    CHECK(gw_osc_locate(&win.w, 2, 0, 8, &gpu) == win.w.base + 8);
    CHECK(gpu == -1);
    CHECK(gw_osc_locate(&win.w, 7, 0, 4, &gpu) == win.w.base + 28);   // the last element
    CHECK(gw_osc_locate(&win.w, 7, 0, 5, &gpu) == nullptr);           // one byte over
    CHECK(gw_osc_locate(&win.w, 0, -1, 1, &gpu) == nullptr);          // before the window
    CHECK(gw_osc_locate(&win.w, 1, 8, 20, &gpu) == win.w.base + 12);  // disp, then off

    char a[64], b[64];
    const gw_osc_region_t regions[] = {{a, sizeof(a), -1}, {b, sizeof(b), 3}};
    gw_osc_window_t dyn{};
    dyn.dynamic = true;
    dyn.regions = regions;
    dyn.nregions = 2;
    const auto base_b = static_cast<int64_t>(reinterpret_cast<uintptr_t>(b));
    CHECK(gw_osc_locate(&dyn, base_b, 16, 48, &gpu) == b + 16);
    CHECK(gpu == 3);
    CHECK(gw_osc_locate(&dyn, base_b, 16, 49, &gpu) == nullptr);  // past the region's end
    const auto base_a = static_cast<int64_t>(reinterpret_cast<uintptr_t>(a));
    CHECK(gw_osc_locate(&dyn, base_a, 0, 1, &gpu) == a);
    CHECK(gpu == -1);
    dyn.nregions = 0;  // detached
    CHECK(gw_osc_locate(&dyn, base_a, 0, 1, &gpu) == nullptr);
}

TEST_CASE("a dynamic window's access across regions attached end to end", "[osc][apply]")
{
    int gpu = 7;
    char c[128];
    const auto at = [&](int i) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(c + i)); };
    // Attached in the other order: found by address, not by attach order.
    gw_osc_region_t regions[] = {{c + 64, 64, -1}, {c, 64, -1}};
    gw_osc_window_t dyn{};
    dyn.dynamic = true;
    dyn.regions = regions;
    dyn.nregions = 2;
    CHECK(gw_osc_locate(&dyn, at(32), 0, 64, &gpu) == c + 32);
    CHECK(gpu == -1);
    CHECK(gw_osc_locate(&dyn, at(0), 0, 128, &gpu) == c);
    CHECK(gw_osc_locate(&dyn, at(1), 0, 128, &gpu) == nullptr);  // one byte past both
    // A gap between them: not all of it attached.
    regions[0] = {c + 72, 56, -1};
    CHECK(gw_osc_locate(&dyn, at(32), 0, 64, &gpu) == nullptr);
    CHECK(gw_osc_locate(&dyn, at(72), 0, 56, &gpu) == c + 72);
    // Device regions are separate allocations: never one range.
    regions[0] = {c + 64, 64, 2};
    regions[1] = {c, 64, 2};
    CHECK(gw_osc_locate(&dyn, at(32), 0, 64, &gpu) == nullptr);
    CHECK(gw_osc_locate(&dyn, at(64), 0, 64, &gpu) == c + 64);
    CHECK(gpu == 2);
}

TEST_CASE("put and get, contiguous and in blocks, on a host window", "[osc][apply]")
{
    Window win(8);
    Mem mem;
    const gw_osc_mem_ops_t ops = mem.ops();
    gw_osc_miss_t miss{};
    // Elements 1 and 5..6 (disp 1: offsets from element 1).
    const std::vector<gw_osc_block_t> blocks = {{0, 4}, {16, 8}};
    auto b = body(blocks, {-1, -5, -6});
    auto h = hdr(GW_OSC_PUT, 1, blocks);
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), nullptr, &ops, &miss));
    CHECK(win.mem == std::vector<int32_t>{100, -1, 102, 103, 104, -5, -6, 107});

    std::vector<char> reply(12);
    b = body(blocks, {});
    h = hdr(GW_OSC_GET, 1, blocks);
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), reply.data(), &ops, &miss));
    CHECK(ints(reply) == std::vector<int32_t>{-1, -5, -6});
    CHECK(win.mem[1] == -1);  // a get changes nothing
    CHECK(mem.copies.empty());  // host memory: no callback
    CHECK(mem.combines.empty());
}

TEST_CASE("accumulate combines each block with the header's op and type", "[osc][apply]")
{
    Window win(4);
    Mem mem;
    const gw_osc_mem_ops_t ops = mem.ops();
    gw_osc_miss_t miss{};
    const std::vector<gw_osc_block_t> blocks = {{0, 4}, {8, 8}};
    auto b = body(blocks, {1, 2, 3});
    auto h = hdr(GW_OSC_ACC, 0, blocks, kSum);
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), nullptr, &ops, &miss));
    CHECK(win.mem == std::vector<int32_t>{101, 101, 104, 106});
    REQUIRE(mem.combines.size() == 2);
    CHECK(mem.combines[0].len == 4);
    CHECK(mem.combines[1].len == 8);
    CHECK(mem.combines[1].op == kSum);
    CHECK(mem.combines[1].gpu == -1);

    b = body(blocks, {500, 0, 200});
    h = hdr(GW_OSC_ACC, 0, blocks, kMax);
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), nullptr, &ops, &miss));
    CHECK(win.mem == std::vector<int32_t>{500, 101, 104, 200});

    // An op the callback refuses fails the operation.
    h = hdr(GW_OSC_ACC, 0, blocks, 42);
    CHECK(GW_OSC_ERR_FAILED == gw_osc_apply_blocks(&win.w, &h, b.data(), nullptr, &ops, &miss));
}

TEST_CASE("get-accumulate answers the bytes before the op", "[osc][apply]")
{
    Window win(3);
    Mem mem;
    const gw_osc_mem_ops_t ops = mem.ops();
    gw_osc_miss_t miss{};
    const std::vector<gw_osc_block_t> blocks = {{0, 12}};
    auto b = body(blocks, {10, 20, 30});
    std::vector<char> reply(12);
    auto h = hdr(GW_OSC_GACC, 0, blocks, kSum);
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), reply.data(), &ops, &miss));
    CHECK(ints(reply) == std::vector<int32_t>{100, 101, 102});
    CHECK(win.mem == std::vector<int32_t>{110, 121, 132});
    // Fetch-and-op with NO_OP: the old value, nothing changed.
    h = hdr(GW_OSC_GACC, 0, blocks, kNoOp);
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), reply.data(), &ops, &miss));
    CHECK(ints(reply) == std::vector<int32_t>{110, 121, 132});
    CHECK(win.mem == std::vector<int32_t>{110, 121, 132});
}

TEST_CASE("compare-and-swap swaps only on equal, answers the old value", "[osc][apply]")
{
    Window win(2);
    Mem mem;
    const gw_osc_mem_ops_t ops = mem.ops();
    gw_osc_miss_t miss{};
    const std::vector<gw_osc_block_t> blocks = {{0, 4}};
    std::vector<char> reply(4);
    auto h = hdr(GW_OSC_CAS, 1, blocks);
    auto b = body(blocks, {7, 100});  // new 7 if it holds 100: it holds 101
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), reply.data(), &ops, &miss));
    CHECK(ints(reply) == std::vector<int32_t>{101});
    CHECK(win.mem[1] == 101);
    b = body(blocks, {7, 101});
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), reply.data(), &ops, &miss));
    CHECK(ints(reply) == std::vector<int32_t>{101});
    CHECK(win.mem[1] == 7);
    CHECK(win.mem[0] == 100);
}

TEST_CASE("a block outside the window stops the operation and says where", "[osc][apply]")
{
    Window win(4);
    Mem mem;
    const gw_osc_mem_ops_t ops = mem.ops();
    gw_osc_miss_t miss{};
    const std::vector<gw_osc_block_t> blocks = {{0, 4}, {12, 8}, {0, 4}};
    auto b = body(blocks, {-1, -2, -3, -4});
    auto h = hdr(GW_OSC_PUT, 1, blocks);
    CHECK(GW_OSC_ERR_RANGE == gw_osc_apply_blocks(&win.w, &h, b.data(), nullptr, &ops, &miss));
    CHECK(miss.at == 1 + 12);  // disp + off, as the message names it
    CHECK(miss.len == 8);
    CHECK(win.mem == std::vector<int32_t>{100, -1, 102, 103});  // the first block only
}

TEST_CASE("a device window goes through the copy callback; a failure stops there",
          "[osc][apply]")
{
    Window win(4, 2);
    Mem mem;
    const gw_osc_mem_ops_t ops = mem.ops();
    gw_osc_miss_t miss{};
    const std::vector<gw_osc_block_t> blocks = {{0, 4}, {8, 4}};
    auto b = body(blocks, {-1, -3});
    auto h = hdr(GW_OSC_PUT, 0, blocks);
    REQUIRE(0 == gw_osc_apply_blocks(&win.w, &h, b.data(), nullptr, &ops, &miss));
    CHECK(win.mem == std::vector<int32_t>{-1, 101, -3, 103});
    REQUIRE(mem.copies.size() == 2);
    CHECK(mem.copies[0].gpu == 2);
    CHECK(mem.copies[1].len == 4);

    // Get-accumulate: the read of block 0 fails; its op is still applied
    // (the bytes were sent), block 1 is not.
    mem.copies.clear();
    mem.fail_copy_at = 0;
    std::vector<char> reply(8);
    b = body(blocks, {10, 30});
    h = hdr(GW_OSC_GACC, 0, blocks, kSum);
    CHECK(GW_OSC_ERR_FAILED ==
          gw_osc_apply_blocks(&win.w, &h, b.data(), reply.data(), &ops, &miss));
    CHECK(win.mem == std::vector<int32_t>{9, 101, -3, 103});
    CHECK(mem.copies.size() == 1);
    CHECK(mem.combines.size() == 1);
    CHECK(mem.combines[0].gpu == 2);
}

TEST_CASE("the fetching kinds", "[osc][apply]")
{
    CHECK(gw_osc_fetches(GW_OSC_GET));
    CHECK(gw_osc_fetches(GW_OSC_GACC));
    CHECK(gw_osc_fetches(GW_OSC_CAS));
    CHECK_FALSE(gw_osc_fetches(GW_OSC_PUT));
    CHECK_FALSE(gw_osc_fetches(GW_OSC_ACC));
    CHECK_FALSE(gw_osc_fetches(GW_OSC_FLUSH));
}
