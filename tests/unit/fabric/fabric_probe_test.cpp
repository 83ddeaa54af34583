#include "gpuwire/fabric/fabric_probe.hpp"

#include "fake_sysfs.hpp"
#include "gpuwire/fabric/verbs_probe.hpp"
#include "gw_catch.hpp"

using namespace gpuwire::fabric;
using gpuwire::fabric::testing::FakeSysfs;
using gpuwire::fabric::testing::LogCapture;
using gpuwire::fabric::testing::mapped_gid;
using gpuwire::fabric::testing::sysfs_gid;

namespace {

AddressLookup addresses_of_eth0(std::vector<const char*> literals) {
  return [literals](const std::string& netdev) {
    std::vector<Gid> out;
    if (netdev != "eth0") return out;
    for (const char* l : literals) out.push_back(*gid_from_ip_address(l));
    return out;
  };
}

void make_roce_host(FakeSysfs& fs) {
  fs.add_port("mlx5_0", 1, "InfiniBand");
  fs.add_port("mlx5_1", 1, "Ethernet", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  fs.add_gid("mlx5_1", 1, 0, sysfs_gid("fe80::9"), "IB/RoCE v1", "eth0");
  fs.add_gid("mlx5_1", 1, 1, sysfs_gid("fe80::9"), "RoCE v2", "eth0");
  fs.add_gid("mlx5_1", 1, 2, mapped_gid("192.0.2.9"), "IB/RoCE v1", "eth0");
  fs.add_gid("mlx5_1", 1, 3, mapped_gid("192.0.2.9"), "RoCE v2", "eth0");
}

}  // namespace

TEST_CASE("probe: first active RoCE port, its GID, and DCQCN off reported once",
          "[fabric][probe]") {
  FakeSysfs fs;
  make_roce_host(fs);
  fs.set_ecn("eth0", "roce_np", 3, "1");
  fs.set_ecn("eth0", "roce_rp", 3, "0");
  FabricConfig config;
  config.sysfs_root = fs.root();
  LogCapture log;
  OnceFilter once;
  const auto r = probe_fabric(config, addresses_of_eth0({"192.0.2.9"}), once, log.sink());
  REQUIRE(r.roce);
  CHECK(r.roce->device == "mlx5_1");
  CHECK(r.roce->gid_index == 3);
  REQUIRE(r.dcqcn);
  CHECK(r.dcqcn->reaction_point == SwitchState::Disabled);
  CHECK(r.note.find("mlx5_1:1 (eth0) GID 3") != std::string::npos);
  CHECK(log.count(LogLevel::Warning) == 1);

  probe_fabric(config, addresses_of_eth0({"192.0.2.9"}), once, log.sink());
  CHECK(log.count(LogLevel::Warning) == 1);  // the same file is not reported twice
}

TEST_CASE("probe: a configured device and port", "[fabric][probe]") {
  FakeSysfs fs;
  make_roce_host(fs);
  FabricConfig config;
  config.sysfs_root = fs.root();
  OnceFilter once;
  LogCapture log;

  config.device = "mlx5_0";  // InfiniBand: no RoCE selection, a warning saying why
  auto r = probe_fabric(config, addresses_of_eth0({}), once, log.sink());
  CHECK_FALSE(r.roce);
  CHECK(r.note.find("not Ethernet") != std::string::npos);

  config.device = "mlx5_7";
  r = probe_fabric(config, addresses_of_eth0({}), once, log.sink());
  CHECK_FALSE(r.roce);
  CHECK(r.note == "fabric: configured device mlx5_7 not found");

  config.device = "mlx5_1";
  config.port_number = 1;
  config.roce.gid_index = 1;
  r = probe_fabric(config, addresses_of_eth0({}), once, log.sink());
  REQUIRE(r.roce);
  CHECK(r.roce->gid_index == 1);
}

TEST_CASE("probe: an RDMA-less machine gets one line and no settings", "[fabric][probe]") {
  FakeSysfs fs;
  FabricConfig config;
  config.sysfs_root = fs.root();
  OnceFilter once;
  LogCapture log;
  const auto r = probe_fabric(config, {}, once, log.sink());
  CHECK(r.inventory.empty());
  CHECK_FALSE(r.roce);
  CHECK_FALSE(r.dcqcn);
  REQUIRE(log.lines.size() == 1);
  CHECK(r.note == log.lines[0].second);
}

TEST_CASE("probe: InfiniBand-only host leaves RoCE to UCX", "[fabric][probe]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "InfiniBand");
  FabricConfig config;
  config.sysfs_root = fs.root();
  OnceFilter once;
  const auto r = probe_fabric(config, {}, once, {});
  CHECK_FALSE(r.roce);
  CHECK(r.note.find("no active RoCE port") != std::string::npos);
}

TEST_CASE("probe: config errors are one line", "[fabric][probe]") {
  FabricConfig config;
  config.port_number = 2;
  CHECK(check_fabric_config(config) == "fabric: port_number 2 is set but device is empty");
  config.device = "mlx5_0";
  config.port_number = 256;
  CHECK(check_fabric_config(config) == "fabric: port_number 256 is out of range [0, 255]");
  config.port_number = 1;
  config.roce.dscp = 99;
  CHECK(check_fabric_config(config) == "roce: dscp 99 is out of range [0, 63]");
  OnceFilter once;
  LogCapture log;
  const auto r = probe_fabric(config, {}, once, log.sink());
  CHECK_FALSE(r.roce);
  CHECK(log.count(LogLevel::Error) == 1);
}

TEST_CASE("probe of the real system never fails", "[fabric][probe]") {
  OnceFilter once;
  LogCapture log;
  const auto r = probe_fabric(FabricConfig{}, {}, once, log.sink());
  CHECK_FALSE(r.note.empty());
  CHECK(log.count(LogLevel::Error) == 0);
}

TEST_CASE("the verbs cross-check follows the build", "[fabric][verbs]") {
  const auto names = verbs_device_names();
  CHECK(names.has_value() == built_with_verbs());
  FabricInventory inventory;
  inventory.devices.push_back({"mlx5_0", {}, std::nullopt});
  inventory.devices.push_back({"mlx5_1", {}, std::nullopt});
  mark_verbs_usable(inventory, std::nullopt);
  CHECK_FALSE(inventory.devices[0].verbs_usable.has_value());
  mark_verbs_usable(inventory, std::vector<std::string>{"mlx5_1"});
  CHECK(inventory.devices[0].verbs_usable == false);
  CHECK(inventory.devices[1].verbs_usable == true);
}
