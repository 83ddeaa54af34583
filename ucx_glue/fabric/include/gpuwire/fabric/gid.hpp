// RoCE/InfiniBand GIDs: 16-byte addresses as sysfs prints them
// ("fe80:0000:0000:0000:0202:c9ff:fe00:0001").
//
// For RoCE the GID table of a port mirrors the IP addresses of its netdev:
// an IPv4 address appears as an IPv4-mapped GID (::ffff:a.b.c.d), an IPv6
// address as itself; each address appears once per RoCE version.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuwire::fabric {

using Gid = std::array<std::uint8_t, 16>;

// What a GID address is, in the order of preference for RoCEv2 traffic: an
// IPv4-mapped GID routes like the IPv4 address the fabric is usually built
// on; a link-local one cannot leave the subnet.
enum class GidAddressKind { Ipv4Mapped, GlobalIpv6, LinkLocalIpv6, Zero };

// The RoCE version (or IB) of a GID table entry, from gid_attrs/types/<index>.
enum class GidType { InfiniBandOrRoceV1, RoceV2, Unknown };

// Parses sysfs' form (eight groups of four hex digits separated by ':').
std::optional<Gid> parse_sysfs_gid(std::string_view text);

// Parses an IP address as a GID: "192.0.2.7" becomes ::ffff:192.0.2.7,
// an IPv6 address stays itself.
std::optional<Gid> gid_from_ip_address(std::string_view address);

// inet_ntop's form of the address ("::ffff:192.0.2.7", "fe80::1").
std::string gid_to_string(const Gid& gid);

GidAddressKind classify_gid(const Gid& gid);
const char* gid_address_kind_name(GidAddressKind kind);

// Parses gid_attrs/types/<index>: "RoCE v2" or "IB/RoCE v1".
GidType parse_gid_type(std::string_view text);
const char* gid_type_name(GidType type);

}  // namespace gpuwire::fabric
