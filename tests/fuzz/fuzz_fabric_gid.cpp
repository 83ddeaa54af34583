// GIDs as sysfs prints them (ports/<n>/gids/<i>), the GID type files
// (gid_attrs/types/<i>), and IP addresses turned into GIDs
// (ucx_glue/fabric/gid.hpp).
#include <cctype>
#include <cstdio>
#include <string>

#include "fuzz_target.hpp"
#include "gpuwire/fabric/gid.hpp"

namespace {

using namespace gpuwire::fabric;

// sysfs' form, written independently: eight groups of four hex digits
// separated by single colons, nothing else.
bool reference_is_sysfs_gid(std::string_view t) {
  if (t.size() != 39) return false;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i % 5 == 4) {
      if (t[i] != ':') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(t[i]))) {
      return false;
    }
  }
  return true;
}

std::string sysfs_form(const Gid &gid) {
  std::string s;
  char group[8];
  for (size_t i = 0; i < gid.size(); i += 2) {
    std::snprintf(group, sizeof group, "%s%02x%02x", i ? ":" : "", gid[i], gid[i + 1]);
    s += group;
  }
  return s;
}

std::string lower(std::string_view t) {
  std::string s(t);
  for (auto &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What any GID must survive: a name for its kind, and the trip through the
// printed address form back to the same bytes.
void check_gid(const Gid &gid) {
  const GidAddressKind kind = classify_gid(gid);
  GW_FUZZ_REQUIRE(gid_address_kind_name(kind)[0] != '?');
  const std::string text = gid_to_string(gid);
  GW_FUZZ_REQUIRE(text != "?");
  const auto back = gid_from_ip_address(text);
  GW_FUZZ_REQUIRE(back.has_value());
  GW_FUZZ_REQUIRE(*back == gid);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view text = gpuwire::fuzz::as_text(data, size);

  const auto gid = parse_sysfs_gid(text);
  GW_FUZZ_REQUIRE(gid.has_value() == reference_is_sysfs_gid(text));
  if (gid) {
    GW_FUZZ_REQUIRE(sysfs_form(*gid) == lower(text));
    check_gid(*gid);
  }

  if (const auto from_ip = gid_from_ip_address(text)) check_gid(*from_ip);

  const GidType type = parse_gid_type(text);
  GW_FUZZ_REQUIRE(gid_type_name(type)[0] != '?');
  if (type != GidType::Unknown) GW_FUZZ_REQUIRE(size <= 10);
  return 0;
}
