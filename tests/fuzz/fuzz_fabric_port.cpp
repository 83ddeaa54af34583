// One RDMA port as sysfs describes it (ucx_glue/fabric: read_rdma_port):
// state, link layer, rate, a GID table with types and netdevs, and the
// netdev fallback through device/net/<name>/dev_port. Whatever the files hold,
// the port comes back with known enum values, a usable rate and GID entries
// that parsed.
//
// Input: NUL-separated fields: state, link_layer, rate, then for GID indexes
// 0..3 the triple (gids/<i>, gid_attrs/types/<i>, gid_attrs/ndevs/<i>), then
// dev_port of the fallback netdev. A missing field is a missing file; a field
// of exactly "-" is an unreadable entry (a folder where a file should be).
#include <cctype>
#include <cmath>
#include <string>

#include "fuzz_target.hpp"
#include "gpuwire/fabric/rdma_devices.hpp"
#include "scratch_sysfs.hpp"

namespace {

using namespace gpuwire::fabric;
constexpr size_t kGids = 4;
constexpr size_t kFields = 3 + 3 * kGids + 1;
const std::filesystem::path kPortDir = "sys/class/infiniband/dev0/ports/1";
const std::filesystem::path kNetDir = "sys/class/infiniband/dev0/device/net/eth0";

void put(const gpuwire::fuzz::ScratchSysfs &scratch, const std::filesystem::path &file,
         const std::vector<std::string_view> &fields, size_t index) {
  if (index >= fields.size()) {
    scratch.remove(file);
  } else if (fields[index] == "-") {
    scratch.remove(file);
    scratch.write(file / "x", "");
  } else {
    scratch.write(file, fields[index]);
  }
}

// What read_attribute makes of a file: its first 4 KiB, whitespace trimmed.
std::string_view as_read(std::string_view content) {
  content = content.substr(0, 4096);
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!content.empty() && space(content.front())) content.remove_prefix(1);
  while (!content.empty() && space(content.back())) content.remove_suffix(1);
  return content;
}

bool known_state(PortState s) {
  switch (s) {
    case PortState::Down:
    case PortState::Init:
    case PortState::Armed:
    case PortState::Active:
    case PortState::ActiveDefer:
    case PortState::Unknown:
      return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const gpuwire::fuzz::ScratchSysfs scratch;
  const auto fields = gpuwire::fuzz::split_fields(data, size, kFields);
  put(scratch, kPortDir / "state", fields, 0);
  put(scratch, kPortDir / "link_layer", fields, 1);
  put(scratch, kPortDir / "rate", fields, 2);
  for (size_t i = 0; i < kGids; ++i) {
    const std::string index = std::to_string(i);
    put(scratch, kPortDir / "gids" / index, fields, 3 + 3 * i);
    put(scratch, kPortDir / "gid_attrs/types" / index, fields, 4 + 3 * i);
    put(scratch, kPortDir / "gid_attrs/ndevs" / index, fields, 5 + 3 * i);
  }
  // Without the last field there is no fallback netdev at all.
  if (fields.size() < kFields) {
    scratch.remove(kNetDir);
  } else {
    put(scratch, kNetDir / "dev_port", fields, kFields - 1);
  }

  const LogSink sink = [](LogLevel, std::string_view line) { GW_FUZZ_REQUIRE(!line.empty()); };
  const RdmaPort port = read_rdma_port(SysfsRoot(scratch.root()), "dev0", 1, sink);

  GW_FUZZ_REQUIRE(port.device == "dev0" && port.port_number == 1);
  GW_FUZZ_REQUIRE(known_state(port.state));
  GW_FUZZ_REQUIRE(port_state_name(port.state)[0] != '?');
  GW_FUZZ_REQUIRE(link_layer_name(port.link_layer)[0] != '?');
  // "0 when unknown": a rate is a finite, non-negative number of Gb/s.
  GW_FUZZ_REQUIRE(std::isfinite(port.rate_gbps) && port.rate_gbps >= 0.0);

  GW_FUZZ_REQUIRE(port.gids.size() <= kGids);
  for (size_t i = 0; i < port.gids.size(); ++i) {
    const GidEntry &e = port.gids[i];
    GW_FUZZ_REQUIRE(e.index < kGids);
    if (i > 0) GW_FUZZ_REQUIRE(port.gids[i - 1].index < e.index);
    GW_FUZZ_REQUIRE(classify_gid(e.gid) != GidAddressKind::Zero);
    GW_FUZZ_REQUIRE(parse_sysfs_gid(as_read(fields[3 + 3 * e.index])) == e.gid);
    GW_FUZZ_REQUIRE(port.find_gid(e.index) == &e);
  }
  if (!port.is_roce()) GW_FUZZ_REQUIRE(port.netdev.empty());

  FabricInventory inventory;
  inventory.devices.push_back(RdmaDevice{"dev0", {port}, std::nullopt});
  GW_FUZZ_REQUIRE(inventory.find_port("dev0", 1) != nullptr);
  const RdmaPort *active = inventory.first_active_roce_port();
  GW_FUZZ_REQUIRE(active == nullptr || (active->is_roce() && active->is_active()));
  const std::string summary = inventory.summary();
  GW_FUZZ_REQUIRE(summary.rfind("fabric: 1 RDMA device:", 0) == 0);
  return 0;
}
