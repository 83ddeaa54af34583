// Choosing the RoCEv2 GID index, traffic class and priority for a port.
//
// UCX picks a GID index by itself, and on hosts whose GID table holds RoCE v1
// entries, IPv6 link-local entries and entries for several addresses it can
// pick one that does not route. gpuwire decides before UCX starts and hands
// the result to UCX through its environment (UCX_IB_GID_INDEX,
// UCX_IB_TRAFFIC_CLASS, UCX_NET_DEVICES).
//
// Rule, in order:
//   1. a configured gid_index wins (it must be a populated entry; a non-v2
//      entry is used but warned about);
//   2. otherwise among the port's RoCE v2 entries, those whose address is one
//      of the interface's addresses (or the configured address);
//   3. among those, IPv4-mapped before global IPv6 before link-local, then the
//      lowest index;
//   4. if no entry matches an address, the best-ranked RoCE v2 entry, with a
//      warning naming the interface.
//
// Threading: re-entrant; results are plain values.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuwire/fabric/gid.hpp"
#include "gpuwire/fabric/log_sink.hpp"
#include "gpuwire/fabric/rdma_devices.hpp"

namespace gpuwire::fabric {

struct RoceConfig {
  // GID index to use whatever the table says (pml_gpuwire_roce_gid_index);
  // nullopt means choose automatically. Range [0, 65535].
  std::optional<unsigned> gid_index;
  // The address whose GID to use when the interface has several; empty means
  // any address of the port's netdev. An IPv4 or IPv6 literal.
  std::string address;
  // DSCP of RoCE traffic, [0, 63]. 26 is the usual lossless RoCE class.
  unsigned dscp = 26;
  // Switch/NIC priority of that traffic, [0, 7]; nullopt derives it from the
  // DSCP as the default trust-DSCP map does (dscp / 8).
  std::optional<unsigned> priority;
};

// Empty when every field is in range, else one line naming the first bad one.
std::string check_roce_config(const RoceConfig& config);

struct RoceSelection {
  std::string device;
  unsigned port_number = 0;
  std::string netdev;
  unsigned gid_index = 0;
  Gid gid{};
  GidType gid_type = GidType::Unknown;
  GidAddressKind address_kind = GidAddressKind::Zero;
  bool from_configured_index = false;
  bool matched_interface_address = false;
  unsigned dscp = 0;
  unsigned traffic_class = 0;  // the IP TOS byte: dscp << 2 (the NIC sets the ECN bits)
  unsigned priority = 0;

  // The UCX environment this selection stands for, in a fixed order:
  // UCX_NET_DEVICES=<dev>:<port>, UCX_IB_GID_INDEX, UCX_IB_TRAFFIC_CLASS.
  std::vector<std::pair<std::string, std::string>> ucx_environment() const;
  // One line for the log ("mlx5_0:1 (eth0) GID 3 ::ffff:192.0.2.7 RoCE v2, DSCP 26 ...").
  std::string describe() const;
};

// The addresses (as GIDs) currently assigned to `netdev`.
using AddressLookup = std::function<std::vector<Gid>(const std::string& netdev)>;

// getifaddrs()-based lookup for the real system.
std::vector<Gid> system_interface_addresses(const std::string& netdev);

// Applies the rule above to `port`. On failure returns nullopt and sets
// `error` to one line; `error` is untouched on success. `config` must pass
// check_roce_config.
std::optional<RoceSelection> select_roce_gid(const RdmaPort& port, const RoceConfig& config,
                                             const std::vector<Gid>& interface_addresses,
                                             const LogSink& sink, std::string& error);

}  // namespace gpuwire::fabric
