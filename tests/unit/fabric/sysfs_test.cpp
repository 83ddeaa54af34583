#include "gpuwire/fabric/sysfs.hpp"

#include "fake_sysfs.hpp"
#include "gw_catch.hpp"

using namespace gpuwire::fabric;
using gpuwire::fabric::testing::FakeSysfs;

TEST_CASE("parse_unsigned accepts plain decimal only", "[fabric][sysfs]") {
  CHECK(parse_unsigned("42") == 42u);
  CHECK(parse_unsigned(" 42\n") == 42u);
  CHECK(parse_unsigned("0") == 0u);
  CHECK(parse_unsigned("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parse_unsigned("18446744073709551616"));  // overflow
  CHECK_FALSE(parse_unsigned(""));
  CHECK_FALSE(parse_unsigned("\n"));
  CHECK_FALSE(parse_unsigned("-1"));
  CHECK_FALSE(parse_unsigned("+1"));
  CHECK_FALSE(parse_unsigned("12abc"));
  CHECK_FALSE(parse_unsigned("0x10"));
  CHECK_FALSE(parse_unsigned("1 2"));
}

TEST_CASE("read_attribute trims, and is nullopt for a missing file", "[fabric][sysfs]") {
  FakeSysfs fs;
  fs.write("a/b", "  Ethernet \n");
  CHECK(read_attribute(fs.root() / "a/b") == std::string("Ethernet"));
  CHECK_FALSE(read_attribute(fs.root() / "a/missing"));
  CHECK_FALSE(read_attribute(fs.root() / "a"));  // a directory does not read
  fs.write("a/n", "17\n");
  CHECK(read_unsigned(fs.root() / "a/n") == 17u);
  fs.write("a/g", "seventeen\n");
  CHECK_FALSE(read_unsigned(fs.root() / "a/g"));
}

TEST_CASE("list_directory sorts device names naturally", "[fabric][sysfs]") {
  FakeSysfs fs;
  for (const char* name : {"mlx5_10", "mlx5_2", "mlx5_0", "mlx5_1"})
    fs.make_dir(std::string("d/") + name);
  const auto names = list_directory(fs.root() / "d");
  REQUIRE(names == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10"});
  CHECK(list_directory(fs.root() / "nope").empty());
  CHECK(natural_less("9", "10"));
  CHECK_FALSE(natural_less("10", "9"));
  CHECK(natural_less("a", "ab"));
  CHECK_FALSE(natural_less("x1", "x1"));
}

TEST_CASE("SysfsRoot builds paths under its root", "[fabric][sysfs]") {
  const SysfsRoot root("/fake");
  CHECK(root.port_dir("mlx5_0", 1) ==
        std::filesystem::path("/fake/sys/class/infiniband/mlx5_0/ports/1"));
  CHECK(root.net_dir() == std::filesystem::path("/fake/sys/class/net"));
  CHECK(SysfsRoot().infiniband_dir() == std::filesystem::path("/sys/class/infiniband"));
}
