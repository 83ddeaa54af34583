// The engine's pacing toward other nodes, end to end without MPI: the rate
// comes from the RoCE port the fabric layer finds in a sysfs tree the test
// builds, large messages go in paced chunks and arrive intact, and new CNPs
// in the port's rp_cnp_handled counter lower the rate (DCQCN).
#include "gw_catch.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "engine/fabric_setup.hpp"
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

namespace {

using gpuwire::fabric::testing::LogCapture;
using gpuwire::fabric::testing::mapped_gid;
using gpuwire::fabric::LogLevel;

// A RoCE port with IPv4-mapped RoCE v2 GID 3, DCQCN's reaction point off.
void make_roce_port(FakeSysfs &fs)
{
    fs.add_port("mlx5_1", 1, "Ethernet", "4: ACTIVE", "200 Gb/sec (4X HDR)");
    fs.add_gid("mlx5_1", 1, 2, mapped_gid("192.0.2.9"), "IB/RoCE v1", "gwtest0");
    fs.add_gid("mlx5_1", 1, 3, mapped_gid("192.0.2.9"), "RoCE v2", "gwtest0");
    fs.set_ecn("gwtest0", "roce_np", 3, "1");
    fs.set_ecn("gwtest0", "roce_rp", 3, "0");
}

bool said(const LogCapture &log, LogLevel level, const std::string &part)
{
    for (const auto &[l, line] : log.lines)
        if (l == level && line.find(part) != std::string::npos) return true;
    return false;
}

const char *user_set_gid(const char *name)
{
    return std::strcmp(name, "UCX_IB_GID_INDEX") == 0 ? "5" : nullptr;
}
const char *nothing_set(const char *) { return nullptr; }

} // namespace

TEST_CASE("start-up fabric set-up: the RoCE choice, DCQCN off warned, the paced port",
          "[engine][fabric]")
{
    FakeSysfs fs;
    make_roce_port(fs);
    LogCapture log;
    gpuwire::fabric::OnceFilter once;
    const std::string root = fs.root().string();
    auto setup = gpuwire::engine::setup_fabric(root.c_str(), true, once, log.sink());
    REQUIRE(setup.probe.roce);
    CHECK(setup.probe.roce->gid_index == 3);
    CHECK(setup.ucx_settings.empty()); // a test tree's devices are not UCX's
    CHECK(said(log, LogLevel::Warning, "DCQCN"));
    CHECK(said(log, LogLevel::Info, "not applied to UCX for a test sysfs tree"));
    REQUIRE(setup.pace_port);
    CHECK(setup.pace_port->device == "mlx5_1");
    CHECK(setup.pace_port->rate_gbps == 200.0);

    // The settings UCX would get: GID index and traffic class, never the
    // device list; a value the user exported stays.
    auto all = gpuwire::engine::roce_ucx_settings(*setup.probe.roce, &nothing_set, log.sink());
    REQUIRE(all.size() == 2);
    CHECK(all[0].first == "IB_GID_INDEX");
    CHECK(all[0].second == "3");
    CHECK(all[1].first == "IB_TRAFFIC_CLASS");
    auto kept = gpuwire::engine::roce_ucx_settings(*setup.probe.roce, &user_set_gid, log.sink());
    REQUIRE(kept.size() == 1);
    CHECK(kept[0].first == "IB_TRAFFIC_CLASS");
    CHECK(said(log, LogLevel::Info, "UCX_IB_GID_INDEX stays 5"));
}

TEST_CASE("the engine paces on the port its fabric set-up chose", "[engine][fabric][pacing]")
{
    FakeSysfs fs;
    fs.add_port("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "400 Gb/sec (4X NDR)");
    make_roce_port(fs);
    const std::string root = fs.root().string();
    std::vector<std::string> lines;
    EnginePair p(0, false, [&](gw_engine_params_t &e) {
        e.sysfs_root = root.c_str();
        e.pace_auto = 1;
        e.roce_apply = 1;
        e.verbose = GW_LOG_INFO;
        e.log_ctx = &lines;
        e.log = [](void *ctx, int, const char *msg) {
            static_cast<std::vector<std::string> *>(ctx)->emplace_back(msg);
        };
    });
    CHECK(stats_of(p.e[0]).pace_rate_mbps == 200000); // the RoCE port, not the IB one
    bool dcqcn_warned = false, doubled = false;
    for (const auto &l : lines) {
        dcqcn_warned |= l.find("DCQCN") != std::string::npos;
        doubled |= l.find("fabric: fabric:") != std::string::npos;
    }
    CHECK(dcqcn_warned);
    CHECK_FALSE(doubled);
}
