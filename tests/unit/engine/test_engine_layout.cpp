// Messages of a gw_layout_t (non-contiguous host memory packed piece by
// piece by its owner): layout to layout, layout to one range and back, a
// truncated message, and a chunked transfer's header (a D-bit message)
// arriving into a layout receive, which then lands whole and is unpacked at
// completion.
#include "gw_catch.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine_pair.hpp"
#include "fake_sysfs.hpp"
#include "gpuwire/engine.h"

namespace {

// `blocks` blocks of `block` bytes every `stride` bytes of `mem`.
struct Strided {
    gw_layout_t gw{};
    std::vector<unsigned char> mem;
    size_t block, stride;
    Strided(size_t blocks, size_t block_, size_t stride_, unsigned char fill)
        : mem((blocks - 1) * stride_ + block_, fill), block(block_), stride(stride_)
    {
        gw.pack = pack;
        gw.unpack = unpack;
        gw.user = this;
        gw.length = blocks * block;
    }
    unsigned char &at(size_t packed) { return mem[packed / block * stride + packed % block]; }
    static size_t pack(void *user, size_t offset, void *dst, size_t max)
    {
        auto *s = static_cast<Strided *>(user);
        const size_t n = std::min(max, s->gw.length - offset);
        for (size_t i = 0; i < n; ++i) static_cast<unsigned char *>(dst)[i] = s->at(offset + i);
        return n;
    }
    static int unpack(void *user, size_t offset, const void *src, size_t len)
    {
        auto *s = static_cast<Strided *>(user);
        if (offset + len > s->gw.length) return -1;
        for (size_t i = 0; i < len; ++i) s->at(offset + i) = static_cast<const unsigned char *>(src)[i];
        return 0;
    }
};

unsigned char pattern(size_t i) { return static_cast<unsigned char>(i * 31 + 7); }

} // namespace

TEST_CASE("a layout travels to a layout, to one range and back", "[engine]")
{
    EnginePair p;
    const size_t blocks = 40, block = 8192, stride = 10000;
    Strided src(blocks, block, stride, 0x11), dst(blocks, block, stride, 0xEE);
    for (size_t i = 0; i < src.gw.length; ++i) src.at(i) = pattern(i);

    Req s, r;
    REQUIRE(gw_irecv_layout(p.e[1], &r.r, 4, 0, 2, &dst.gw) == GW_OK);
    REQUIRE(gw_isend_layout(p.e[0], &s.r, 1, 4, 0, 2, &src.gw, 0) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(s.r.status == GW_OK);
    REQUIRE(r.r.status == GW_OK);
    CHECK(r.r.length == src.gw.length);
    for (size_t i = 0; i < dst.gw.length; ++i) REQUIRE(dst.at(i) == pattern(i));
    for (size_t b = 0; b + 1 < blocks; ++b) // the gaps stay untouched
        for (size_t g = block; g < stride; ++g) REQUIRE(dst.mem[b * stride + g] == 0xEE);

    // To one range, and from one range into a layout.
    std::vector<unsigned char> flat(src.gw.length);
    Req s2, r2;
    REQUIRE(gw_irecv(p.e[1], &r2.r, 4, 0, 3, flat.data(), flat.size()) == GW_OK);
    REQUIRE(gw_isend_layout(p.e[0], &s2.r, 1, 4, 0, 3, &src.gw, GW_SEND_SYNC) == GW_OK);
    p.until([&] { return s2.done && r2.done; });
    REQUIRE(r2.r.status == GW_OK);
    for (size_t i = 0; i < flat.size(); ++i) REQUIRE(flat[i] == pattern(i));
    Strided back(blocks, block, stride, 0);
    Req s3, r3;
    REQUIRE(gw_isend(p.e[0], &s3.r, 1, 4, 0, 5, flat.data(), flat.size(), 0) == GW_OK);
    REQUIRE(gw_irecv_layout(p.e[1], &r3.r, 4, 0, 5, &back.gw) == GW_OK);
    p.until([&] { return s3.done && r3.done; });
    REQUIRE(r3.r.status == GW_OK);
    for (size_t i = 0; i < back.gw.length; ++i) REQUIRE(back.at(i) == pattern(i));
}

TEST_CASE("a message longer than a layout receive is truncated", "[engine]")
{
    EnginePair p;
    Strided src(16, 4096, 5000, 1), dst(8, 4096, 5000, 0);
    Req s, r;
    REQUIRE(gw_irecv_layout(p.e[1], &r.r, 4, 0, 1, &dst.gw) == GW_OK);
    REQUIRE(gw_isend_layout(p.e[0], &s.r, 1, 4, 0, 1, &src.gw, 0) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(r.r.status == GW_ERR_TRUNCATE);
}

TEST_CASE("a chunked transfer into a layout receive lands whole, then is unpacked", "[engine]")
{
    using gpuwire::fabric::testing::FakeSysfs;
    FakeSysfs fs;
    fs.add_port("mlx5_0", 1, "Ethernet", "4: ACTIVE", "100 Gb/sec (4X EDR)");
    fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "0\n");
    const std::string root = fs.root().string();
    EnginePair p(0, false, [&](gw_engine_params_t &e) {
        e.sysfs_root = root.c_str();
        e.pace_auto = 1;
        e.pace_min_bytes = 65536;
        e.chunk_bytes = 65536;
    });
    // A paced sender refuses a layout (it needs one range) ...
    Strided src(32, 8192, 9000, 0), dst(32, 8192, 9000, 0xEE);
    Req refused;
    CHECK(gw_isend_layout(p.e[0], &refused.r, 1, 6, 0, 1, &src.gw, 0) == GW_ERR_UNSUPPORTED);
    // ... and sends the bytes as a chunked transfer, whose header (a D-bit
    // message) arrives into the layout receive.
    std::vector<unsigned char> flat(src.gw.length);
    for (size_t i = 0; i < flat.size(); ++i) flat[i] = pattern(i);
    Req s, r;
    REQUIRE(gw_irecv_layout(p.e[1], &r.r, 6, 0, 1, &dst.gw) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 6, 0, 1, flat.data(), flat.size(), 0) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(s.r.status == GW_OK);
    REQUIRE(r.r.status == GW_OK);
    CHECK(r.r.length == flat.size());
    gw_engine_stats_t st;
    gw_engine_stats(p.e[1], &st);
    CHECK(st.chunked_recvs == 1);
    for (size_t i = 0; i < dst.gw.length; ++i) REQUIRE(dst.at(i) == pattern(i));
    CHECK((r.r.flags & 0x80000000u) == 0); // the engine's staging mark is gone
}
