// The engine's pacing toward other nodes, end to end without MPI: the rate
// comes from the RoCE port the fabric layer finds in a sysfs tree the test
// builds, large messages go in paced chunks and arrive intact, and new CNPs
// in the port's rp_cnp_handled counter lower the rate (DCQCN).
#include "gw_catch.hpp"

#include <cstring>
#include <vector>

#include "engine_pair.hpp"
#include "fake_sysfs.hpp"
#include "gpuwire/engine.h"

namespace {

using gpuwire::fabric::testing::FakeSysfs;


gw_engine_stats_t stats_of(gw_engine_t *e)
{
    gw_engine_stats_t s;
    gw_engine_stats(e, &s);
    return s;
}

} // namespace

TEST_CASE("pacing follows the RoCE port found in sysfs and its CNP counter", "[engine][pacing]")
{
    FakeSysfs fs;
    fs.add_port("mlx5_0", 1, "Ethernet", "4: ACTIVE", "100 Gb/sec (4X EDR)");
    fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "1000\n");
    const std::string root = fs.root().string();
    EnginePair p(0, false, [&](gw_engine_params_t &e) {
        e.sysfs_root = root.c_str();
        e.pace_auto = 1;
        e.pace_poll_us = 0; // every progress pass
        e.pace_min_bytes = 65536;
        e.chunk_bytes = 65536;
    });
    REQUIRE(stats_of(p.e[0]).pace_rate_mbps == 100000);

    // Peers of an EnginePair are on other "nodes" (no peer_is_local): a
    // large message goes in paced chunks.
    const size_t n = (size_t(1) << 20) + 77;
    std::vector<unsigned char> src(n), dst(n + 16, 0xEE);
    for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 29 + 3);
    Req s, r;
    REQUIRE(gw_irecv(p.e[1], &r.r, 3, 0, 9, dst.data(), n) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 3, 0, 9, src.data(), n, 0) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(s.r.status == GW_OK);
    CHECK(r.r.status == GW_OK);
    CHECK(r.r.length == n);
    CHECK(std::memcmp(dst.data(), src.data(), n) == 0);
    for (size_t i = n; i < n + 16; ++i) REQUIRE(dst[i] == 0xEE);
    CHECK(stats_of(p.e[0]).chunked_sends == 1);
    CHECK(stats_of(p.e[1]).chunked_recvs == 1);
    CHECK(stats_of(p.e[0]).pace_cnps == 0); // the counter did not move

    // The port handles 40 CNPs: the next poll cuts the rate.
    fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "1040\n");
    for (int i = 0; i < 100; ++i) p.progress();
    const gw_engine_stats_t after = stats_of(p.e[0]);
    CHECK(after.pace_cnps == 40);
    CHECK(after.pace_rate_mbps < 100000);
    CHECK(after.pace_rate_mbps > 0);
}

TEST_CASE("no RDMA port and no rate: no pacing, messages whole", "[engine][pacing]")
{
    FakeSysfs fs; // an empty tree
    const std::string root = fs.root().string();
    EnginePair p(0, false, [&](gw_engine_params_t &e) {
        e.sysfs_root = root.c_str();
        e.pace_auto = 1;
        e.pace_min_bytes = 65536;
    });
    CHECK(stats_of(p.e[0]).pace_rate_mbps == 0);
    const size_t n = size_t(1) << 20;
    std::vector<unsigned char> src(n, 0x5C), dst(n, 0);
    Req s, r;
    REQUIRE(gw_irecv(p.e[1], &r.r, 3, 0, 9, dst.data(), n) == GW_OK);
    REQUIRE(gw_isend(p.e[0], &s.r, 1, 3, 0, 9, src.data(), n, 0) == GW_OK);
    p.until([&] { return s.done && r.done; });
    CHECK(r.r.status == GW_OK);
    CHECK(dst == src);
    CHECK(stats_of(p.e[0]).chunked_sends == 0);
}
