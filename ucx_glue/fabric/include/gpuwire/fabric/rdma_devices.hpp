// Enumeration of RDMA devices, their ports and GID tables from sysfs:
//
//   sys/class/infiniband/<dev>/ports/<port>/{state,link_layer,rate}
//   sys/class/infiniband/<dev>/ports/<port>/gids/<index>
//   sys/class/infiniband/<dev>/ports/<port>/gid_attrs/{types,ndevs}/<index>
//   sys/class/infiniband/<dev>/device/net/<netdev>        (fallback for the netdev)
//
// Discovery is a start-up step (it reads a few hundred small files per port);
// nothing here is meant for a fast path. A machine without RDMA devices gets
// an empty inventory and one Info line; that is not an error.
//
// Threading: re-entrant; the results are plain values owned by the caller.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpuwire/fabric/gid.hpp"
#include "gpuwire/fabric/log_sink.hpp"
#include "gpuwire/fabric/sysfs.hpp"

namespace gpuwire::fabric {

enum class LinkLayer { InfiniBand, Ethernet, Unknown };

// The IB port state as the kernel numbers it ("4: ACTIVE").
enum class PortState { Down = 1, Init = 2, Armed = 3, Active = 4, ActiveDefer = 5, Unknown = 0 };

const char* link_layer_name(LinkLayer layer);
const char* port_state_name(PortState state);

// One populated entry of a port's GID table (all-zero slots are left out).
struct GidEntry {
  unsigned index = 0;
  Gid gid{};
  GidType type = GidType::Unknown;
  std::string netdev;  // gid_attrs/ndevs/<index>; empty for IB or when unreadable
};

struct RdmaPort {
  std::string device;        // e.g. "mlx5_0"
  unsigned port_number = 0;  // 1-based, as verbs numbers ports
  LinkLayer link_layer = LinkLayer::Unknown;
  PortState state = PortState::Unknown;
  double rate_gbps = 0.0;      // 0 when unknown
  std::string netdev;          // the Ethernet interface behind a RoCE port; empty if none found
  std::vector<GidEntry> gids;  // sorted by index

  bool is_roce() const { return link_layer == LinkLayer::Ethernet; }
  bool is_active() const { return state == PortState::Active; }
  const GidEntry* find_gid(unsigned index) const;
};

struct RdmaDevice {
  std::string name;
  std::vector<RdmaPort> ports;  // sorted by port number
  // Whether libibverbs lists the device (a user-space provider is installed);
  // nullopt when not checked (built without libibverbs, or a fake sysfs root).
  std::optional<bool> verbs_usable;
};

struct FabricInventory {
  std::vector<RdmaDevice> devices;  // sorted by name in natural order

  bool empty() const { return devices.empty(); }
  const RdmaPort* find_port(std::string_view device, unsigned port_number) const;
  // The first active Ethernet port of a device that verbs did not reject, in
  // device then port order; nullptr when there is none.
  const RdmaPort* first_active_roce_port() const;
  // One line describing what was found ("2 RDMA devices: mlx5_0 port 1
  // Ethernet ACTIVE 100 Gb/s (eth0), ...") or that nothing was found.
  std::string summary() const;
};

// Reads every device and port under root.infiniband_dir(). Unreadable or
// garbage attributes become Unknown/0/empty and are reported once at Debug
// level; they never stop the enumeration. Logs summary() at Info level.
FabricInventory discover_rdma_devices(const SysfsRoot& root, const LogSink& sink);

// Reads one port (used by discover_rdma_devices; public for tests and tools).
RdmaPort read_rdma_port(const SysfsRoot& root, const std::string& device, unsigned port_number,
                        const LogSink& sink);

}  // namespace gpuwire::fabric
