#include "gpuwire/fabric/roce_selection.hpp"

#include "fake_sysfs.hpp"
#include "gw_catch.hpp"

using namespace gpuwire::fabric;
using gpuwire::fabric::testing::FakeSysfs;
using gpuwire::fabric::testing::LogCapture;
using gpuwire::fabric::testing::mapped_gid;
using gpuwire::fabric::testing::sysfs_gid;

namespace {

// The table a ConnectX port shows for an interface with one IPv4, one global
// IPv6 and its link-local address: every address once per RoCE version.
RdmaPort typical_port(FakeSysfs& fs) {
  fs.add_port("mlx5_0", 1, "Ethernet");
  fs.add_gid("mlx5_0", 1, 0, sysfs_gid("fe80::5"), "IB/RoCE v1", "eth0");
  fs.add_gid("mlx5_0", 1, 1, sysfs_gid("fe80::5"), "RoCE v2", "eth0");
  fs.add_gid("mlx5_0", 1, 2, mapped_gid("192.0.2.7"), "IB/RoCE v1", "eth0");
  fs.add_gid("mlx5_0", 1, 3, mapped_gid("192.0.2.7"), "RoCE v2", "eth0");
  fs.add_gid("mlx5_0", 1, 4, sysfs_gid("2001:db8::7"), "IB/RoCE v1", "eth0");
  fs.add_gid("mlx5_0", 1, 5, sysfs_gid("2001:db8::7"), "RoCE v2", "eth0");
  return read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, {});
}

Gid ip(const char* text) { return *gid_from_ip_address(text); }

}  // namespace

TEST_CASE("the IPv4-mapped RoCE v2 GID of the interface's address wins", "[fabric][roce]") {
  FakeSysfs fs;
  const RdmaPort port = typical_port(fs);
  LogCapture log;
  std::string error;
  const auto s = select_roce_gid(port, {}, {ip("fe80::5"), ip("2001:db8::7"), ip("192.0.2.7")},
                                 log.sink(), error);
  REQUIRE(s);
  CHECK(s->gid_index == 3);
  CHECK(s->gid_type == GidType::RoceV2);
  CHECK(s->address_kind == GidAddressKind::Ipv4Mapped);
  CHECK(s->matched_interface_address);
  CHECK_FALSE(s->from_configured_index);
  CHECK(s->netdev == "eth0");
  CHECK(s->dscp == 26);
  CHECK(s->traffic_class == 104);
  CHECK(s->priority == 3);
  CHECK(log.lines.empty());
  CHECK(error.empty());

  const auto env = s->ucx_environment();
  REQUIRE(env.size() == 3);
  CHECK(env[0] == std::pair<std::string, std::string>{"UCX_NET_DEVICES", "mlx5_0:1"});
  CHECK(env[1] == std::pair<std::string, std::string>{"UCX_IB_GID_INDEX", "3"});
  CHECK(env[2] == std::pair<std::string, std::string>{"UCX_IB_TRAFFIC_CLASS", "104"});
  CHECK(s->describe().find("GID 3 ::ffff:192.0.2.7 RoCE v2") != std::string::npos);
}

TEST_CASE("an IPv6-only interface gets its global RoCE v2 GID", "[fabric][roce]") {
  FakeSysfs fs;
  const RdmaPort port = typical_port(fs);
  std::string error;
  const auto s = select_roce_gid(port, {}, {ip("fe80::5"), ip("2001:db8::7")}, {}, error);
  REQUIRE(s);
  CHECK(s->gid_index == 5);
  CHECK(s->address_kind == GidAddressKind::GlobalIpv6);
}

TEST_CASE("a configured address chooses among several", "[fabric][roce]") {
  FakeSysfs fs;
  const RdmaPort port = typical_port(fs);
  RoceConfig config;
  config.address = "2001:db8::7";
  std::string error;
  const auto s = select_roce_gid(port, config, {ip("192.0.2.7"), ip("2001:db8::7")}, {}, error);
  REQUIRE(s);
  CHECK(s->gid_index == 5);
}

TEST_CASE("no matching address: best RoCE v2 entry and a warning naming the netdev",
          "[fabric][roce]") {
  FakeSysfs fs;
  const RdmaPort port = typical_port(fs);
  LogCapture log;
  std::string error;
  const auto s = select_roce_gid(port, {}, {ip("203.0.113.9")}, log.sink(), error);
  REQUIRE(s);
  CHECK(s->gid_index == 3);
  CHECK_FALSE(s->matched_interface_address);
  REQUIRE(log.count(LogLevel::Warning) == 1);
  CHECK(log.any_contains("matches an address of eth0"));
}

TEST_CASE("a GID on a VLAN netdev is chosen when its address is the one asked for",
          "[fabric][roce]") {
  FakeSysfs fs;
  RdmaPort port = typical_port(fs);
  fs.add_gid("mlx5_0", 1, 7, mapped_gid("10.0.0.5"), "RoCE v2", "eth0.100");
  port = read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, {});
  RoceConfig config;
  config.address = "10.0.0.5";
  std::string error;
  const auto s = select_roce_gid(port, config, {}, {}, error);
  REQUIRE(s);
  CHECK(s->gid_index == 7);
  CHECK(s->netdev == "eth0.100");
}

TEST_CASE("a configured GID index overrides the rule", "[fabric][roce]") {
  FakeSysfs fs;
  const RdmaPort port = typical_port(fs);
  LogCapture log;
  std::string error;
  RoceConfig config;

  config.gid_index = 5;
  auto s = select_roce_gid(port, config, {ip("192.0.2.7")}, log.sink(), error);
  REQUIRE(s);
  CHECK(s->gid_index == 5);
  CHECK(s->from_configured_index);
  CHECK(log.lines.empty());

  config.gid_index = 2;  // RoCE v1: used as asked, with a warning
  s = select_roce_gid(port, config, {}, log.sink(), error);
  REQUIRE(s);
  CHECK(s->gid_index == 2);
  CHECK(log.count(LogLevel::Warning) == 1);
  CHECK(log.any_contains("not RoCE v2"));

  config.gid_index = 9;  // an empty slot
  s = select_roce_gid(port, config, {}, log.sink(), error);
  CHECK_FALSE(s);
  CHECK(error == "roce: configured GID index 9 is empty on mlx5_0:1");
}

TEST_CASE("a table with only RoCE v1 entries is an error with a way out", "[fabric][roce]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "Ethernet");
  fs.add_gid("mlx5_0", 1, 0, sysfs_gid("fe80::5"), "IB/RoCE v1", "eth0");
  fs.add_gid("mlx5_0", 1, 1, mapped_gid("192.0.2.7"), "IB/RoCE v1", "eth0");
  const auto port = read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, {});
  std::string error;
  CHECK_FALSE(select_roce_gid(port, {}, {ip("192.0.2.7")}, {}, error));
  CHECK(error.find("has no RoCE v2 GID") != std::string::npos);
  CHECK(error.find("set the GID index") != std::string::npos);
}

TEST_CASE("an InfiniBand port has no RoCE GID to choose", "[fabric][roce]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "InfiniBand");
  const auto port = read_rdma_port(SysfsRoot(fs.root()), "mlx5_0", 1, {});
  std::string error;
  CHECK_FALSE(select_roce_gid(port, {}, {}, {}, error));
  CHECK(error.find("not Ethernet") != std::string::npos);
}

TEST_CASE("DSCP and priority", "[fabric][roce]") {
  FakeSysfs fs;
  const RdmaPort port = typical_port(fs);
  RoceConfig config;
  config.dscp = 46;
  std::string error;
  auto s = select_roce_gid(port, config, {}, {}, error);
  REQUIRE(s);
  CHECK(s->traffic_class == 184);
  CHECK(s->priority == 5);
  config.priority = 4;
  s = select_roce_gid(port, config, {}, {}, error);
  REQUIRE(s);
  CHECK(s->priority == 4);
}

TEST_CASE("RoceConfig is range-checked with one line per field", "[fabric][roce]") {
  CHECK(check_roce_config({}).empty());
  RoceConfig c;
  c.dscp = 64;
  CHECK(check_roce_config(c) == "roce: dscp 64 is out of range [0, 63]");
  c = {};
  c.priority = 8;
  CHECK(check_roce_config(c) == "roce: priority 8 is out of range [0, 7]");
  c = {};
  c.gid_index = 70000;
  CHECK(check_roce_config(c) == "roce: gid_index 70000 is out of range [0, 65535]");
  c = {};
  c.address = "eth0";
  CHECK(check_roce_config(c) == "roce: address 'eth0' is not an IPv4 or IPv6 address");
}

TEST_CASE("system_interface_addresses knows the loopback", "[fabric][roce]") {
  const auto lo = system_interface_addresses("lo");
  // Containers may lack lo's IPv6 address, never its IPv4 one.
  CHECK(std::find(lo.begin(), lo.end(), ip("127.0.0.1")) != lo.end());
  CHECK(system_interface_addresses("no-such-interface").empty());
}
