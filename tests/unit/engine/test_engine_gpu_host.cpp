// Host messages with "a GPU present": two engines whose GPU context asks the
// cuda unit tests' fake driver (GpuContext::set_test_driver) instead of CUDA.
// A host buffer is classified once (one driver query) and then sent and
// received by the host fast path (host_path.hpp) on the classifier's host
// table alone; a host range unmapped and mapped again as GPU memory is
// classified again, through a real munmap and UCM's unmap event, never served
// as host from the table.
#include "gw_catch.hpp"

#include <sys/mman.h>

#include <cstring>

#include "engine_pair.hpp"
#include "fake_driver.hpp"
#include "gpuwire/cuda/gpu_context.hpp"
#include "gpuwire/engine.h"

namespace {

using gpuwire::cuda::GpuContext;

// The fake GPU for the engines made while it lives (declare it first: the
// engines release the context before it goes).
struct FakeGpu {
    gw_test::FakeDriver drv;
    FakeGpu() { GpuContext::set_test_driver(&drv); }
    ~FakeGpu() { GpuContext::set_test_driver(nullptr); }
};

void with_device(gw_engine_params_t &p)
{
    p.device_support = 1;
    p.device_sync = 0; // no CUDA stream to wait for
}

gw_engine_stats_t stats_of(gw_engine_t *e)
{
    gw_engine_stats_t s;
    gw_engine_stats(e, &s);
    return s;
}

// One 8-byte message from engine 0 to engine 1, data and status checked.
void round_trip(EnginePair &p, const unsigned char *src, unsigned char *dst, int tag)
{
    Req s, r;
    std::memset(dst, 0xEE, 8);
    REQUIRE(gw_irecv(p.e[1], &r.r, 3, 0, tag, dst, 8) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 3, 0, tag, src, 8, 0) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(s.r.status == GW_OK);
    CHECK(r.r.status == GW_OK);
    CHECK(r.r.length == 8);
    CHECK(r.r.source == 0);
    CHECK(r.r.tag == tag);
    CHECK(std::memcmp(dst, src, 8) == 0);
}

} // namespace

TEST_CASE("GPU present: host messages go on one driver query per buffer", "[engine][device]")
{
    FakeGpu gpu;
    EnginePair p(0, false, with_device);
    REQUIRE(gw_engine_has_device(p.e[0], nullptr) == 1);
    // On pages of their own: two buffers, two entries of the host table.
    alignas(4096) static unsigned char src[4096];
    alignas(4096) static unsigned char dst[4096];
    constexpr int kRounds = 200;
    for (int i = 0; i < kRounds; ++i) {
        for (int b = 0; b < 8; ++b) src[b] = static_cast<unsigned char>(i * 8 + b);
        round_trip(p, src, dst, i % 50);
    }
    // The two buffers' first messages asked the driver; every later send and
    // receive was answered by the host table (the context is the process's:
    // both engines report the same classifier).
    CHECK(gpu.drv.attribute_queries == 2);
    const gw_engine_stats_t s0 = stats_of(p.e[0]);
    CHECK(s0.classifier_misses == 2);
    INFO("host hits " << s0.classifier_host_hits);
    CHECK(s0.classifier_host_hits == 2 * kRounds - 2);
    CHECK(s0.sends == kRounds);
    CHECK(s0.ipc_sends + s0.staged_sends + s0.ucx_device_sends + s0.shared_host_sends == 0);
    CHECK(stats_of(p.e[1]).recvs == kRounds);
    CHECK(stats_of(p.e[1]).device_recvs == 0);
}

TEST_CASE("GPU present: a host range unmapped and mapped again as GPU memory is not sent as host",
          "[engine][device]")
{
    FakeGpu gpu;
    EnginePair p(0, false, with_device);
    REQUIRE(gw_engine_has_device(p.e[0], nullptr) == 1);
    constexpr size_t kPage = 4096;
    void *m = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    auto *src = static_cast<unsigned char *>(m);
    unsigned char dst[8];
    for (int i = 0; i < 3; ++i) {
        std::memset(src, 'a' + i, 8);
        round_trip(p, src, dst, 1); // classified once, then from the table
    }
    const uint64_t misses = stats_of(p.e[0]).classifier_misses;

    // Freed; the same pages come back as memory the driver calls GPU memory
    // (readable here, as the fake's device memory is, so that a stale "host"
    // answer shows as a message sent as host, not as a crash).
    REQUIRE(munmap(m, kPage) == 0);
    REQUIRE(mmap(m, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
                 MAP_FIXED_NOREPLACE, -1, 0) == m);
    gpu.drv.alloc(kPage, gw_test::FakeKind::device, 0, reinterpret_cast<uintptr_t>(m));
    std::memset(src, 'z', 8);

    // The send is classified again and taken for device memory: staged.
    // Without a CUDA driver the staging copy fails the send at once; with
    // one (the fake's "device" memory is host memory a stream can copy) it
    // arrives. Either way it is not a host message.
    const gw_engine_stats_t before = stats_of(p.e[0]);
    Req s;
    const gw_status_t st = gw_isend(p.e[0], &s.r, 1, 3, 0, 2, src, 8, 0);
    if (st == GW_OK) {
        Req r;
        std::memset(dst, 0, 8);
        REQUIRE(gw_irecv(p.e[1], &r.r, 3, 0, 2, dst, 8) == GW_OK);
        p.until([&] { return s.done && r.done; });
        CHECK(s.r.status == GW_OK);
        CHECK(r.r.status == GW_OK);
        CHECK(std::memcmp(dst, src, 8) == 0);
    } else {
        CHECK_FALSE(s.done);
        // Nothing arrived.
        gw_probe_info_t info;
        for (int i = 0; i < 1000; ++i) p.progress();
        CHECK(gw_iprobe(p.e[1], 3, GW_ANY_SOURCE, GW_ANY_TAG, &info) == 0);
    }
    const gw_engine_stats_t after = stats_of(p.e[0]);
    CHECK(after.classifier_misses == misses + 1);
    CHECK(after.eager_sends + after.rndv_sends == before.eager_sends + before.rndv_sends);
    CHECK(gw_engine_is_device_memory(p.e[0], src, 8) == 1);

    gpu.drv.free(reinterpret_cast<uintptr_t>(m));
    REQUIRE(munmap(m, kPage) == 0);
}
