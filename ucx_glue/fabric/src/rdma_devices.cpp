#include "gpuwire/fabric/rdma_devices.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace gpuwire::fabric {
namespace {

// "4: ACTIVE" -> Active. The number is authoritative; the word is for humans.
PortState parse_port_state(std::string_view text) {
  const auto colon = text.find(':');
  const auto number = parse_unsigned(text.substr(0, colon));
  if (!number || colon == std::string_view::npos) return PortState::Unknown;
  if (*number >= 1 && *number <= 5) return static_cast<PortState>(*number);
  return PortState::Unknown;
}

LinkLayer parse_link_layer(std::string_view text) {
  if (text == "Ethernet") return LinkLayer::Ethernet;
  if (text == "InfiniBand") return LinkLayer::InfiniBand;
  return LinkLayer::Unknown;
}

// "100 Gb/sec (4X EDR)" -> 100; "2.5 Gb/sec (1X SDR)" -> 2.5.
double parse_rate_gbps(std::string_view text) {
  const auto space = text.find(' ');
  if (space == std::string_view::npos || text.substr(space + 1, 6) != "Gb/sec") return 0.0;
  double value = 0.0;
  const auto number = text.substr(0, space);
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  // from_chars also reads "inf" and "nan": a rate is a finite number.
  if (ec != std::errc() || end != number.data() + number.size()) return 0.0;
  if (!std::isfinite(value) || value < 0) return 0.0;
  return value;
}

void note_garbage(const LogSink& sink, const std::filesystem::path& file, std::string_view what) {
  emit(sink, LogLevel::Debug, "fabric: " + file.string() + " " + std::string(what));
}

std::vector<GidEntry> read_gid_table(const std::filesystem::path& port_dir, const LogSink& sink) {
  std::vector<GidEntry> entries;
  for (const auto& name : list_directory(port_dir / "gids")) {
    const auto index = parse_unsigned(name);
    if (!index || *index > 65535) continue;
    const auto file = port_dir / "gids" / name;
    const auto text = read_attribute(file);
    if (!text) continue;  // unused slots may fail to read
    const auto gid = parse_sysfs_gid(*text);
    if (!gid) {
      note_garbage(sink, file, "does not hold a GID; entry skipped");
      continue;
    }
    if (classify_gid(*gid) == GidAddressKind::Zero) continue;
    GidEntry entry;
    entry.index = static_cast<unsigned>(*index);
    entry.gid = *gid;
    if (const auto type = read_attribute(port_dir / "gid_attrs/types" / name)) {
      entry.type = parse_gid_type(*type);
    }
    if (const auto ndev = read_attribute(port_dir / "gid_attrs/ndevs" / name)) entry.netdev = *ndev;
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  return entries;
}

// The netdev behind a RoCE port: the one the lowest populated GID belongs to
// (index 0 is the netdev's own link-local address; VLAN netdevs come later),
// else the device's PCI function's netdev whose dev_port matches the port.
std::string find_port_netdev(const SysfsRoot& root, const std::string& device, unsigned port,
                             const std::vector<GidEntry>& gids) {
  for (const auto& entry : gids) {
    if (!entry.netdev.empty()) return entry.netdev;
  }
  const auto net_dir = root.device_dir(device) / "device/net";
  const auto names = list_directory(net_dir);
  if (names.size() == 1) return names.front();
  for (const auto& name : names) {
    const auto dev_port = read_unsigned(net_dir / name / "dev_port");
    if (dev_port && *dev_port + 1 == port) return name;
  }
  return {};
}

}  // namespace

const char* link_layer_name(LinkLayer layer) {
  switch (layer) {
    case LinkLayer::InfiniBand: return "InfiniBand";
    case LinkLayer::Ethernet: return "Ethernet";
    case LinkLayer::Unknown: return "unknown link layer";
  }
  return "?";
}

const char* port_state_name(PortState state) {
  switch (state) {
    case PortState::Down: return "DOWN";
    case PortState::Init: return "INIT";
    case PortState::Armed: return "ARMED";
    case PortState::Active: return "ACTIVE";
    case PortState::ActiveDefer: return "ACTIVE_DEFER";
    case PortState::Unknown: return "UNKNOWN";
  }
  return "?";
}

const GidEntry* RdmaPort::find_gid(unsigned index) const {
  for (const auto& entry : gids) {
    if (entry.index == index) return &entry;
  }
  return nullptr;
}

const RdmaPort* FabricInventory::find_port(std::string_view device, unsigned port_number) const {
  for (const auto& dev : devices) {
    if (dev.name != device) continue;
    for (const auto& port : dev.ports) {
      if (port.port_number == port_number) return &port;
    }
  }
  return nullptr;
}

const RdmaPort* FabricInventory::first_active_roce_port() const {
  for (const auto& dev : devices) {
    if (dev.verbs_usable == false) continue;
    for (const auto& port : dev.ports) {
      if (port.is_roce() && port.is_active()) return &port;
    }
  }
  return nullptr;
}

std::string FabricInventory::summary() const {
  if (devices.empty()) {
    return "fabric: no RDMA device found; RoCE GID selection, DCQCN checks and congestion "
           "counters are off";
  }
  std::string line = "fabric: " + std::to_string(devices.size()) +
                     (devices.size() == 1 ? " RDMA device:" : " RDMA devices:");
  bool first = true;
  for (const auto& dev : devices) {
    if (dev.ports.empty()) {
      line += std::string(first ? " " : ", ") + dev.name + " (no ports)";
      first = false;
    }
    for (const auto& port : dev.ports) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%g Gb/s", port.rate_gbps);
      line += std::string(first ? " " : ", ") + dev.name + ":" + std::to_string(port.port_number) +
              " " + link_layer_name(port.link_layer) + " " + port_state_name(port.state) + " " +
              rate;
      if (!port.netdev.empty()) line += " (" + port.netdev + ")";
      first = false;
    }
    if (dev.verbs_usable == false) line += " [no verbs provider]";
  }
  return line;
}

RdmaPort read_rdma_port(const SysfsRoot& root, const std::string& device, unsigned port_number,
                        const LogSink& sink) {
  RdmaPort port;
  port.device = device;
  port.port_number = port_number;
  const auto dir = root.port_dir(device, port_number);

  if (const auto text = read_attribute(dir / "state")) {
    port.state = parse_port_state(*text);
    if (port.state == PortState::Unknown) note_garbage(sink, dir / "state", "is not a port state");
  }
  if (const auto text = read_attribute(dir / "link_layer")) {
    port.link_layer = parse_link_layer(*text);
    if (port.link_layer == LinkLayer::Unknown) {
      note_garbage(sink, dir / "link_layer", "is not a known link layer");
    }
  }
  if (const auto text = read_attribute(dir / "rate")) {
    port.rate_gbps = parse_rate_gbps(*text);
    if (port.rate_gbps == 0.0) note_garbage(sink, dir / "rate", "is not a rate in Gb/sec");
  }
  port.gids = read_gid_table(dir, sink);
  if (port.is_roce()) port.netdev = find_port_netdev(root, device, port_number, port.gids);
  return port;
}

FabricInventory discover_rdma_devices(const SysfsRoot& root, const LogSink& sink) {
  FabricInventory inventory;
  for (const auto& name : list_directory(root.infiniband_dir())) {
    RdmaDevice device;
    device.name = name;
    for (const auto& port_name : list_directory(root.device_dir(name) / "ports")) {
      const auto number = parse_unsigned(port_name);
      if (!number || *number == 0 || *number > 255) continue;
      device.ports.push_back(read_rdma_port(root, name, static_cast<unsigned>(*number), sink));
    }
    inventory.devices.push_back(std::move(device));
  }
  emit(sink, LogLevel::Info, inventory.summary());
  return inventory;
}

}  // namespace gpuwire::fabric
