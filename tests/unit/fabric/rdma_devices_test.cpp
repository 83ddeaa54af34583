#include "gpuwire/fabric/rdma_devices.hpp"

#include "fake_sysfs.hpp"
#include "gw_catch.hpp"

using namespace gpuwire::fabric;
using gpuwire::fabric::testing::FakeSysfs;
using gpuwire::fabric::testing::LogCapture;
using gpuwire::fabric::testing::mapped_gid;
using gpuwire::fabric::testing::sysfs_gid;

TEST_CASE("no RDMA device: empty inventory and exactly one line", "[fabric][devices]") {
  FakeSysfs fs;
  LogCapture log;
  SECTION("no infiniband class at all") {}
  SECTION("an empty infiniband class") { fs.make_dir("sys/class/infiniband"); }
  const auto inventory = discover_rdma_devices(SysfsRoot(fs.root()), log.sink());
  CHECK(inventory.empty());
  CHECK(inventory.first_active_roce_port() == nullptr);
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0].first == LogLevel::Info);
  CHECK(log.lines[0].second.find("no RDMA device") != std::string::npos);
}

TEST_CASE("several devices and ports are enumerated in order", "[fabric][devices]") {
  FakeSysfs fs;
  fs.add_port("mlx5_10", 1, "Ethernet", "1: DOWN", "25 Gb/sec (1X EDR)");
  fs.add_port("mlx5_2", 1, "InfiniBand", "4: ACTIVE", "200 Gb/sec (4X HDR)");
  fs.add_port("mlx5_2", 2, "InfiniBand", "2: INIT", "2.5 Gb/sec (1X SDR)");
  fs.add_port("mlx5_0", 1, "Ethernet", "4: ACTIVE", "100 Gb/sec (4X EDR)");
  fs.add_gid("mlx5_0", 1, 0, sysfs_gid("fe80::1"), "IB/RoCE v1", "eth0");
  fs.add_gid("mlx5_10", 1, 0, sysfs_gid("fe80::2"), "IB/RoCE v1", "eth1");
  LogCapture log;
  const auto inventory = discover_rdma_devices(SysfsRoot(fs.root()), log.sink());

  REQUIRE(inventory.devices.size() == 3);
  CHECK(inventory.devices[0].name == "mlx5_0");
  CHECK(inventory.devices[1].name == "mlx5_2");
  CHECK(inventory.devices[2].name == "mlx5_10");
  REQUIRE(inventory.devices[1].ports.size() == 2);

  const RdmaPort* eth = inventory.find_port("mlx5_0", 1);
  REQUIRE(eth != nullptr);
  CHECK(eth->is_roce());
  CHECK(eth->is_active());
  CHECK(eth->rate_gbps == 100.0);
  CHECK(eth->netdev == "eth0");

  const RdmaPort* ib2 = inventory.find_port("mlx5_2", 2);
  REQUIRE(ib2 != nullptr);
  CHECK(ib2->link_layer == LinkLayer::InfiniBand);
  CHECK(ib2->state == PortState::Init);
  CHECK(ib2->rate_gbps == 2.5);
  CHECK(ib2->netdev.empty());

  CHECK(inventory.find_port("mlx5_2", 3) == nullptr);
  CHECK(inventory.first_active_roce_port() == eth);  // mlx5_10 is down, mlx5_2 is IB
  CHECK(log.any_contains("3 RDMA devices"));
  CHECK(log.any_contains("mlx5_0:1 Ethernet ACTIVE 100 Gb/s (eth0)"));
}

TEST_CASE("garbage attributes become unknown values, not failures", "[fabric][devices]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "Token Ring", "ACTIVE", "fast");
  fs.make_dir("sys/class/infiniband/mlx5_0/ports/not-a-number");
  fs.make_dir("sys/class/infiniband/mlx5_0/ports/0");  // ports are 1-based
  LogCapture log;
  const auto inventory = discover_rdma_devices(SysfsRoot(fs.root()), log.sink());
  REQUIRE(inventory.devices.size() == 1);
  REQUIRE(inventory.devices[0].ports.size() == 1);
  const auto& port = inventory.devices[0].ports[0];
  CHECK(port.link_layer == LinkLayer::Unknown);
  CHECK(port.state == PortState::Unknown);
  CHECK(port.rate_gbps == 0.0);
  CHECK(log.count(LogLevel::Debug) == 3);  // one line per garbage file
  CHECK(log.count(LogLevel::Warning) == 0);
}

TEST_CASE("a rate that is not a finite number of Gb/sec is unknown", "[fabric][devices]") {
  for (const char* rate : {"inf Gb/sec", "nan Gb/sec (4X EDR)", "infinity Gb/sec", "-1 Gb/sec"}) {
    FakeSysfs fs;
    fs.add_port("mlx5_0", 1, "Ethernet", "4: ACTIVE", rate);
    const auto port = read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, LogSink());
    INFO(rate);
    CHECK(port.rate_gbps == 0.0);
  }
}

TEST_CASE("missing port attributes leave defaults", "[fabric][devices]") {
  FakeSysfs fs;
  fs.make_dir("sys/class/infiniband/rxe0/ports/1");
  const auto inventory = discover_rdma_devices(SysfsRoot(fs.root()), {});
  REQUIRE(inventory.devices.size() == 1);
  const auto& port = inventory.devices[0].ports.at(0);
  CHECK(port.link_layer == LinkLayer::Unknown);
  CHECK(port.gids.empty());
}

TEST_CASE("the GID table skips empty and garbage slots", "[fabric][devices][gid]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "Ethernet");
  fs.add_gid("mlx5_0", 1, 0, sysfs_gid("fe80::1"), "IB/RoCE v1", "eth0");
  fs.add_gid("mlx5_0", 1, 1, sysfs_gid("fe80::1"), "RoCE v2", "eth0");
  fs.add_gid("mlx5_0", 1, 2, sysfs_gid("::"), "", "");  // unused slot
  fs.add_gid("mlx5_0", 1, 3, mapped_gid("192.0.2.7"), "RoCE v2", "eth0");
  fs.add_gid("mlx5_0", 1, 4, "not a gid", "RoCE v2", "eth0");
  fs.add_gid("mlx5_0", 1, 10, mapped_gid("198.51.100.1"), "RoCE v9", "eth0.100");
  LogCapture log;
  const auto port = read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, log.sink());
  REQUIRE(port.gids.size() == 4);
  CHECK(port.gids[0].index == 0);
  CHECK(port.gids[1].type == GidType::RoceV2);
  CHECK(port.gids[2].index == 3);
  CHECK(gid_to_string(port.gids[2].gid) == "::ffff:192.0.2.7");
  CHECK(port.gids[3].index == 10);
  CHECK(port.gids[3].type == GidType::Unknown);
  CHECK(port.gids[3].netdev == "eth0.100");
  CHECK(port.find_gid(2) == nullptr);
  CHECK(port.find_gid(3) == &port.gids[2]);
  CHECK(port.netdev == "eth0");
  CHECK(log.any_contains("gids/4"));
}

TEST_CASE("the netdev falls back to the PCI function's net folder", "[fabric][devices]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "Ethernet");  // no GIDs yet (interface has no address)
  SECTION("a single netdev") {
    fs.make_dir("sys/class/infiniband/mlx5_0/device/net/ens1f0");
    CHECK(read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, {}).netdev == "ens1f0");
  }
  SECTION("several netdevs: the one whose dev_port matches") {
    fs.write("sys/class/infiniband/mlx5_0/device/net/ens1f0/dev_port", "1\n");
    fs.write("sys/class/infiniband/mlx5_0/device/net/ens1f1/dev_port", "0\n");
    CHECK(read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, {}).netdev == "ens1f1");
  }
  SECTION("none") { CHECK(read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, {}).netdev.empty()); }
}

TEST_CASE("devices libibverbs cannot open are not chosen", "[fabric][devices]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "Ethernet");
  fs.add_port("mlx5_1", 1, "Ethernet");
  auto inventory = discover_rdma_devices(SysfsRoot(fs.root()), {});
  inventory.devices[0].verbs_usable = false;
  inventory.devices[1].verbs_usable = true;
  REQUIRE(inventory.first_active_roce_port() != nullptr);
  CHECK(inventory.first_active_roce_port()->device == "mlx5_1");
  CHECK(inventory.summary().find("[no verbs provider]") != std::string::npos);
}
