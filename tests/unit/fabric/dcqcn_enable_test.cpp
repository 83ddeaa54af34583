#include "gpuwire/fabric/dcqcn_enable.hpp"

#include "fake_sysfs.hpp"
#include "gw_catch.hpp"

using namespace gpuwire::fabric;
using gpuwire::fabric::testing::FakeSysfs;
using gpuwire::fabric::testing::LogCapture;

TEST_CASE("DCQCN enabled on both sides: silent", "[fabric][dcqcn]") {
  FakeSysfs fs;
  fs.set_ecn("eth0", "roce_np", 3, "1");
  fs.set_ecn("eth0", "roce_rp", 3, "1");
  const auto state = read_dcqcn_enable_state(SysfsRoot(fs.root()), "eth0", 3);
  CHECK(state.fully_enabled());
  LogCapture log;
  OnceFilter once;
  CHECK(report_dcqcn_enable_state(state, once, log.sink()));
  CHECK(log.lines.empty());
}

TEST_CASE("DCQCN off: one warning naming the file, not one per check", "[fabric][dcqcn]") {
  FakeSysfs fs;
  fs.set_ecn("eth0", "roce_np", 3, "1");
  fs.set_ecn("eth0", "roce_rp", 3, "0");
  fs.set_ecn("eth0", "roce_rp", 0, "1");  // another priority does not count
  const SysfsRoot root(fs.root());
  const auto state = read_dcqcn_enable_state(root, "eth0", 3);
  CHECK(state.notification_point == SwitchState::Enabled);
  CHECK(state.reaction_point == SwitchState::Disabled);
  LogCapture log;
  OnceFilter once;
  for (int poll = 0; poll < 5; ++poll) {
    CHECK_FALSE(
        report_dcqcn_enable_state(read_dcqcn_enable_state(root, "eth0", 3), once, log.sink()));
  }
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0].first == LogLevel::Warning);
  const std::string file = (fs.root() / "sys/class/net/eth0/ecn/roce_rp/enable/3").string();
  CHECK(log.lines[0].second.find(file) != std::string::npos);
  CHECK(log.lines[0].second.find("reaction point is off for priority 3") != std::string::npos);
}

TEST_CASE("both switches off: one warning per file", "[fabric][dcqcn]") {
  FakeSysfs fs;
  fs.set_ecn("eth0", "roce_np", 3, "0");
  fs.set_ecn("eth0", "roce_rp", 3, "0\n");
  LogCapture log;
  OnceFilter once;
  report_dcqcn_enable_state(read_dcqcn_enable_state(SysfsRoot(fs.root()), "eth0", 3), once,
                            log.sink());
  report_dcqcn_enable_state(read_dcqcn_enable_state(SysfsRoot(fs.root()), "eth0", 3), once,
                            log.sink());
  CHECK(log.count(LogLevel::Warning) == 2);
  CHECK(log.any_contains("roce_np/enable/3"));
  CHECK(log.any_contains("roce_rp/enable/3"));
}

TEST_CASE("missing or garbage switch files are unknown, said once at Info", "[fabric][dcqcn]") {
  FakeSysfs fs;
  fs.set_ecn("eth0", "roce_np", 3, "yes");
  const auto state = read_dcqcn_enable_state(SysfsRoot(fs.root()), "eth0", 3);
  CHECK(state.notification_point == SwitchState::Unknown);
  CHECK(state.reaction_point == SwitchState::Unknown);
  LogCapture log;
  OnceFilter once;
  CHECK_FALSE(report_dcqcn_enable_state(state, once, log.sink()));
  CHECK_FALSE(report_dcqcn_enable_state(state, once, log.sink()));
  CHECK(log.count(LogLevel::Info) == 2);
  CHECK(log.count(LogLevel::Warning) == 0);
}

TEST_CASE("no netdev or a bad priority reads as unknown", "[fabric][dcqcn]") {
  FakeSysfs fs;
  fs.set_ecn("eth0", "roce_np", 3, "1");
  CHECK(read_dcqcn_enable_state(SysfsRoot(fs.root()), "", 3).notification_point ==
        SwitchState::Unknown);
  CHECK(read_dcqcn_enable_state(SysfsRoot(fs.root()), "eth0", 8).notification_point ==
        SwitchState::Unknown);
}
