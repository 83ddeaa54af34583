#include "gpuwire/fabric/roce_selection.hpp"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace gpuwire::fabric {
namespace {

int preference_rank(GidAddressKind kind) {
  switch (kind) {
    case GidAddressKind::Ipv4Mapped: return 0;
    case GidAddressKind::GlobalIpv6: return 1;
    case GidAddressKind::LinkLocalIpv6: return 2;
    case GidAddressKind::Zero: return 3;
  }
  return 3;
}

// Best entry by address kind, then lowest index; nullptr if `candidates` is empty.
const GidEntry* best_ranked(const std::vector<const GidEntry*>& candidates) {
  const GidEntry* best = nullptr;
  for (const auto* entry : candidates) {
    if (best == nullptr) {
      best = entry;
      continue;
    }
    const int a = preference_rank(classify_gid(entry->gid));
    const int b = preference_rank(classify_gid(best->gid));
    if (a < b || (a == b && entry->index < best->index)) best = entry;
  }
  return best;
}

std::string port_name(const RdmaPort& port) {
  return port.device + ":" + std::to_string(port.port_number);
}

RoceSelection make_selection(const RdmaPort& port, const GidEntry& entry,
                             const RoceConfig& config) {
  RoceSelection s;
  s.device = port.device;
  s.port_number = port.port_number;
  s.netdev = entry.netdev.empty() ? port.netdev : entry.netdev;
  s.gid_index = entry.index;
  s.gid = entry.gid;
  s.gid_type = entry.type;
  s.address_kind = classify_gid(entry.gid);
  s.dscp = config.dscp;
  s.traffic_class = config.dscp << 2;
  s.priority = config.priority ? *config.priority : config.dscp / 8;
  return s;
}

}  // namespace

std::string check_roce_config(const RoceConfig& config) {
  if (config.gid_index && *config.gid_index > 65535) {
    return "roce: gid_index " + std::to_string(*config.gid_index) + " is out of range [0, 65535]";
  }
  if (!config.address.empty() && !gid_from_ip_address(config.address)) {
    return "roce: address '" + config.address + "' is not an IPv4 or IPv6 address";
  }
  if (config.dscp > 63) {
    return "roce: dscp " + std::to_string(config.dscp) + " is out of range [0, 63]";
  }
  if (config.priority && *config.priority > 7) {
    return "roce: priority " + std::to_string(*config.priority) + " is out of range [0, 7]";
  }
  return {};
}

std::vector<std::pair<std::string, std::string>> RoceSelection::ucx_environment() const {
  return {
      {"UCX_NET_DEVICES", device + ":" + std::to_string(port_number)},
      {"UCX_IB_GID_INDEX", std::to_string(gid_index)},
      {"UCX_IB_TRAFFIC_CLASS", std::to_string(traffic_class)},
  };
}

std::string RoceSelection::describe() const {
  std::string line = "roce: " + device + ":" + std::to_string(port_number);
  if (!netdev.empty()) line += " (" + netdev + ")";
  line += " GID " + std::to_string(gid_index) + " " + gid_to_string(gid) + " " +
          gid_type_name(gid_type) + " " + gid_address_kind_name(address_kind);
  if (from_configured_index) line += " [configured]";
  line += ", DSCP " + std::to_string(dscp) + " (traffic class " + std::to_string(traffic_class) +
          "), priority " + std::to_string(priority);
  return line;
}

std::vector<Gid> system_interface_addresses(const std::string& netdev) {
  std::vector<Gid> addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return addresses;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_name == nullptr || netdev != it->ifa_name) continue;
    Gid gid{};
    if (it->ifa_addr->sa_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      gid[10] = 0xff;
      gid[11] = 0xff;
      std::memcpy(&gid[12], &v4->sin_addr, 4);
    } else if (it->ifa_addr->sa_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      std::memcpy(gid.data(), &v6->sin6_addr, 16);
    } else {
      continue;
    }
    addresses.push_back(gid);
  }
  ::freeifaddrs(list);
  return addresses;
}

std::optional<RoceSelection> select_roce_gid(const RdmaPort& port, const RoceConfig& config,
                                             const std::vector<Gid>& interface_addresses,
                                             const LogSink& sink, std::string& error) {
  if (!port.is_roce()) {
    error = "roce: " + port_name(port) + " is " + link_layer_name(port.link_layer) +
            ", not Ethernet; there is no RoCE GID to choose";
    return std::nullopt;
  }

  if (config.gid_index) {
    const GidEntry* entry = port.find_gid(*config.gid_index);
    if (entry == nullptr) {
      error = "roce: configured GID index " + std::to_string(*config.gid_index) + " is empty on " +
              port_name(port);
      return std::nullopt;
    }
    if (entry->type != GidType::RoceV2) {
      emit(sink, LogLevel::Warning,
           "roce: configured GID index " + std::to_string(entry->index) + " on " + port_name(port) +
               " is " + gid_type_name(entry->type) +
               ", not RoCE v2; it will not route across IP subnets");
    }
    RoceSelection s = make_selection(port, *entry, config);
    s.from_configured_index = true;
    return s;
  }

  std::vector<const GidEntry*> roce_v2;
  for (const auto& entry : port.gids) {
    if (entry.type == GidType::RoceV2) roce_v2.push_back(&entry);
  }
  if (roce_v2.empty()) {
    error = "roce: " + port_name(port) +
            " has no RoCE v2 GID (only RoCE v1/IB entries or none); set the GID index explicitly";
    return std::nullopt;
  }

  std::vector<Gid> wanted = interface_addresses;
  if (!config.address.empty()) {
    const auto address = gid_from_ip_address(config.address);
    if (!address) {
      error = "roce: address '" + config.address + "' is not an IPv4 or IPv6 address";
      return std::nullopt;
    }
    wanted = {*address};
  }

  std::vector<const GidEntry*> matching;
  for (const auto* entry : roce_v2) {
    if (std::find(wanted.begin(), wanted.end(), entry->gid) != wanted.end()) {
      matching.push_back(entry);
    }
  }

  const GidEntry* chosen = best_ranked(matching);
  const bool matched = chosen != nullptr;
  if (!matched) {
    chosen = best_ranked(roce_v2);
    const std::string whose =
        config.address.empty()
            ? "an address of " + (port.netdev.empty() ? std::string("its netdev") : port.netdev)
            : "configured address " + config.address;
    emit(sink, LogLevel::Warning,
         "roce: no RoCE v2 GID on " + port_name(port) + " matches " + whose + "; using index " +
             std::to_string(chosen->index) + " (" + gid_to_string(chosen->gid) + ")");
  }
  RoceSelection s = make_selection(port, *chosen, config);
  s.matched_interface_address = matched;
  return s;
}

}  // namespace gpuwire::fabric
