// The one-sided engine's GPU door (gpuwire/osc_direct.h, ucx_glue/osc/device)
// over a stand-in for the core's device API (fake_gpu.hpp): where buffers
// live, blocking copies, reductions by the kernels, accumulates from a
// mapped origin buffer, and their failures.
#include "gw_catch.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "direct_fixture.hpp"
#include "fake_gpu.hpp"
#include "gpuwire/cuda/reduce.h"
#include "gpuwire/osc_direct.h"

using namespace osctest;

TEST_CASE("device door: without a GPU every buffer is host memory", "[osc][direct]")
{
    FakeGpu g;
    g.fail_open = true;
    char buf[16], why[64] = "", desc[GW_OSC_DESC_BYTES];
    g.device(buf, sizeof(buf), 0);
    CHECK(gw_osc_dev_open(why, sizeof(why)) == -1);
    CHECK(std::string(why) == "fake open failed");
    CHECK(gw_osc_dev_where(buf, sizeof(buf)) == -1);
    CHECK(gw_osc_dev_describe(buf, sizeof(buf), desc, why, sizeof(why)) == -1);
    CHECK(std::string(why) == "no GPU");
    void *mapping = nullptr, *ptr = nullptr;
    int gpu = -1;
    CHECK(gw_osc_dev_map(desc, 1, &mapping, &ptr, &gpu, why, sizeof(why)) == -1);
    CHECK(g.maps == 0);
    gw_osc_dev_close();
    CHECK(g.user_waits.empty());
}

TEST_CASE("device door: where, blocking copies, failures logged", "[osc][direct]")
{
    Opened o;
    char dev[32], host[32] = "abcdefgh";
    o.g.device(dev, sizeof(dev), 1);
    CHECK(gw_osc_dev_where(dev + 8, 8) == 1);
    CHECK(gw_osc_dev_where(host, 8) == -1);
    CHECK(gw_osc_dev_where(dev + 24, 16) == -1);  // not wholly inside
    REQUIRE(gw_osc_dev_copy(dev, host, 8, 1) == 0);
    CHECK(std::memcmp(dev, "abcdefgh", 8) == 0);
    // Behind the application's work, and waited for.
    CHECK(o.g.user_waits == std::vector<int>{1});
    REQUIRE(o.g.waits.size() == 1);
    CHECK(o.g.waits[0] == std::make_pair(1, o.g.tickets[1]));
    CHECK(gw_osc_dev_copy(dev, host, 0, 1) == 0);  // nothing to move: no call
    CHECK(o.g.copies.size() == 1);
    o.g.fail_copy = true;
    CHECK(gw_osc_dev_copy(dev, host, 8, 1) == -1);
    CHECK(logged(0, "device copy of 8 bytes failed: fake copy failed"));
    o.g.fail_classify = true;
    CHECK(gw_osc_dev_where(dev, 8) == -1);
    CHECK(lines.back().second.find("taken as host memory") != std::string::npos);
}

TEST_CASE("device door: reductions by the kernels, scratch given back", "[osc][direct]")
{
    Opened o;
    int32_t win[4] = {1, 2, 3, 4};
    const int32_t add[4] = {10, 20, 30, 40};
    o.g.device(win, sizeof(win), 0);
    CHECK(gw_osc_dev_reduce_supported(GW_OP_SUM, GW_TYPE_INT32));
    CHECK(gw_osc_dev_reduce_supported(GW_OSC_OP_REPLACE, -1));
    CHECK_FALSE(gw_osc_dev_reduce_supported(GW_OP_MAX, GW_TYPE_INT32));
    CHECK_FALSE(gw_osc_dev_reduce_supported(-1, GW_TYPE_INT32));

    REQUIRE(gw_osc_dev_reduce(win, add, sizeof(win), GW_OP_SUM, GW_TYPE_INT32, 0) == 1);
    CHECK(win[0] == 11);
    CHECK(win[3] == 44);
    CHECK(o.g.scratch_lent == 0);
    CHECK(o.g.user_waits == std::vector<int>{0});
    // No kernel, or not whole elements: the caller stages; nothing moved.
    CHECK(gw_osc_dev_reduce(win, add, sizeof(win), GW_OP_MAX, GW_TYPE_INT32, 0) == 0);
    CHECK(gw_osc_dev_reduce(win, add, 6, GW_OP_SUM, GW_TYPE_INT32, 0) == 0);
    CHECK(o.g.reductions == 1);
    o.g.fail_reduce = true;
    CHECK(gw_osc_dev_reduce(win, add, sizeof(win), GW_OP_SUM, GW_TYPE_INT32, 0) == -1);
    CHECK(o.g.scratch_lent == 0);
    CHECK(logged(0, "reduction of 16 bytes on GPU 0 failed: fake reduce failed"));
    CHECK(win[0] == 11);
}

TEST_CASE("device door: an accumulate from a mapped origin buffer", "[osc][direct]")
{
    Opened o;
    int32_t win[2] = {5, 6}, origin[2] = {7, 8};
    o.g.device(win, sizeof(win), 0);
    o.g.device(origin, sizeof(origin), 0);
    char desc[GW_OSC_DESC_BYTES], why[64];
    REQUIRE(gw_osc_dev_describe(origin, sizeof(origin), desc, why, sizeof(why)) == 0);

    REQUIRE(gw_osc_dev_reduce_mapped(win, desc, 3, sizeof(win), GW_OP_SUM, GW_TYPE_INT32, 0) ==
            0);
    CHECK(win[0] == 12);
    CHECK(win[1] == 14);
    REQUIRE(gw_osc_dev_reduce_mapped(win, desc, 3, sizeof(win), GW_OSC_OP_REPLACE, -1, 0) == 0);
    CHECK(win[0] == 7);
    CHECK(o.g.copies.back().both_device);
    CHECK(o.g.maps == 2);
    CHECK(o.g.unmaps == 2);  // waited for, then given back
    CHECK(o.g.waits.size() == 2);

    // The origin buffer on another GPU than the window: refused, unmapped.
    CHECK(gw_osc_dev_reduce_mapped(win, desc, 3, sizeof(win), GW_OP_SUM, GW_TYPE_INT32, 1) ==
          -1);
    CHECK(o.g.unmaps == 3);
    CHECK(logged(0, "accumulate of 8 bytes from a mapped origin buffer on GPU 1 failed: the "
                    "origin buffer is on GPU 0, the window on GPU 1"));
    CHECK(gw_osc_dev_reduce_mapped(win, desc, 3, sizeof(win), GW_OP_MAX, GW_TYPE_INT32, 0) == -1);
    CHECK(o.g.unmaps == 4);
    CHECK(win[0] == 7);
}

