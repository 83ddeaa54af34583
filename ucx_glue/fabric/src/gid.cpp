#include "gpuwire/fabric/gid.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace gpuwire::fabric {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<Gid> parse_sysfs_gid(std::string_view text) {
  // Exactly "xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx": the kernel always
  // prints the full form, so anything else is garbage, not an abbreviation.
  constexpr std::size_t kLength = 8 * 4 + 7;
  if (text.size() != kLength) return std::nullopt;
  Gid gid{};
  for (std::size_t group = 0; group < 8; ++group) {
    const std::size_t at = group * 5;
    if (group > 0 && text[at - 1] != ':') return std::nullopt;
    unsigned value = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const int h = hex_value(text[at + k]);
      if (h < 0) return std::nullopt;
      value = value * 16 + static_cast<unsigned>(h);
    }
    gid[group * 2] = static_cast<std::uint8_t>(value >> 8);
    gid[group * 2 + 1] = static_cast<std::uint8_t>(value & 0xff);
  }
  return gid;
}

std::optional<Gid> gid_from_ip_address(std::string_view address) {
  const std::string text(address);
  Gid gid{};
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    gid[10] = 0xff;
    gid[11] = 0xff;
    std::memcpy(&gid[12], &v4, 4);
    return gid;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::memcpy(gid.data(), &v6, 16);
    return gid;
  }
  return std::nullopt;
}

std::string gid_to_string(const Gid& gid) {
  in6_addr v6{};
  std::memcpy(&v6, gid.data(), 16);
  char buffer[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(AF_INET6, &v6, buffer, sizeof buffer) == nullptr) return "?";
  return buffer;
}

GidAddressKind classify_gid(const Gid& gid) {
  bool zero = true;
  for (const auto b : gid) zero = zero && b == 0;
  if (zero) return GidAddressKind::Zero;
  bool mapped = gid[10] == 0xff && gid[11] == 0xff;
  for (int i = 0; i < 10; ++i) mapped = mapped && gid[i] == 0;
  if (mapped) return GidAddressKind::Ipv4Mapped;
  if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80) return GidAddressKind::LinkLocalIpv6;
  return GidAddressKind::GlobalIpv6;
}

const char* gid_address_kind_name(GidAddressKind kind) {
  switch (kind) {
    case GidAddressKind::Ipv4Mapped: return "IPv4-mapped";
    case GidAddressKind::GlobalIpv6: return "IPv6";
    case GidAddressKind::LinkLocalIpv6: return "IPv6 link-local";
    case GidAddressKind::Zero: return "empty";
  }
  return "?";
}

GidType parse_gid_type(std::string_view text) {
  if (text == "RoCE v2") return GidType::RoceV2;
  if (text == "IB/RoCE v1" || text == "RoCE v1" || text == "IB") return GidType::InfiniBandOrRoceV1;
  return GidType::Unknown;
}

const char* gid_type_name(GidType type) {
  switch (type) {
    case GidType::InfiniBandOrRoceV1: return "IB/RoCE v1";
    case GidType::RoceV2: return "RoCE v2";
    case GidType::Unknown: return "unknown type";
  }
  return "?";
}

}  // namespace gpuwire::fabric
