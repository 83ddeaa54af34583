#include "gpuwire/fabric/gid.hpp"

#include "fake_sysfs.hpp"
#include "gw_catch.hpp"

using namespace gpuwire::fabric;
using gpuwire::fabric::testing::mapped_gid;

TEST_CASE("sysfs GIDs parse in full form only", "[fabric][gid]") {
  const auto gid = parse_sysfs_gid("fe80:0000:0000:0000:0202:c9ff:fe00:0001");
  REQUIRE(gid);
  CHECK((*gid)[0] == 0xfe);
  CHECK((*gid)[15] == 0x01);
  CHECK(gid_to_string(*gid) == "fe80::202:c9ff:fe00:1");
  CHECK(classify_gid(*gid) == GidAddressKind::LinkLocalIpv6);

  CHECK_FALSE(parse_sysfs_gid("fe80::1"));
  CHECK_FALSE(parse_sysfs_gid("fe80:0000:0000:0000:0202:c9ff:fe00:000g"));
  CHECK_FALSE(parse_sysfs_gid("fe80-0000:0000:0000:0202:c9ff:fe00:0001"));
  CHECK_FALSE(parse_sysfs_gid(""));
}

TEST_CASE("GID kinds: IPv4-mapped, global IPv6, link-local, zero", "[fabric][gid]") {
  CHECK(classify_gid(*parse_sysfs_gid(mapped_gid("192.0.2.7"))) == GidAddressKind::Ipv4Mapped);
  CHECK(classify_gid(*gid_from_ip_address("2001:db8::7")) == GidAddressKind::GlobalIpv6);
  CHECK(classify_gid(*gid_from_ip_address("fe80::1")) == GidAddressKind::LinkLocalIpv6);
  CHECK(classify_gid(Gid{}) == GidAddressKind::Zero);
}

TEST_CASE("IP addresses map to the GIDs the kernel lists", "[fabric][gid]") {
  CHECK(gid_from_ip_address("192.0.2.7") == parse_sysfs_gid(mapped_gid("192.0.2.7")));
  CHECK(gid_to_string(*gid_from_ip_address("192.0.2.7")) == "::ffff:192.0.2.7");
  CHECK_FALSE(gid_from_ip_address("192.0.2"));
  CHECK_FALSE(gid_from_ip_address("eth0"));
}

TEST_CASE("GID types", "[fabric][gid]") {
  CHECK(parse_gid_type("RoCE v2") == GidType::RoceV2);
  CHECK(parse_gid_type("IB/RoCE v1") == GidType::InfiniBandOrRoceV1);
  CHECK(parse_gid_type("RoCE v3") == GidType::Unknown);
  CHECK(parse_gid_type("") == GidType::Unknown);
}
