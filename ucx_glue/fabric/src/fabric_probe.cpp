#include "gpuwire/fabric/fabric_probe.hpp"

#include "gpuwire/fabric/verbs_probe.hpp"

namespace gpuwire::fabric {

std::string check_fabric_config(const FabricConfig& config) {
  if (config.sysfs_root.empty()) return "fabric: sysfs_root is empty (use \"/\" for the system)";
  if (config.port_number > 255) {
    return "fabric: port_number " + std::to_string(config.port_number) +
           " is out of range [0, 255]";
  }
  if (config.port_number != 0 && config.device.empty()) {
    return "fabric: port_number " + std::to_string(config.port_number) +
           " is set but device is empty";
  }
  return check_roce_config(config.roce);
}

FabricProbeResult probe_fabric(const FabricConfig& config, const AddressLookup& addresses,
                               OnceFilter& once, const LogSink& sink) {
  FabricProbeResult result;
  if (auto bad = check_fabric_config(config); !bad.empty()) {
    emit(sink, LogLevel::Error, bad);
    result.note = std::move(bad);
    return result;
  }

  const SysfsRoot root(config.sysfs_root);
  result.inventory = discover_rdma_devices(root, sink);
  if (result.inventory.empty()) {
    result.note = result.inventory.summary();
    return result;
  }
  // Verbs sees the real system only; against a fake tree it would judge the
  // wrong devices.
  if (config.check_with_verbs && config.sysfs_root == "/") {
    mark_verbs_usable(result.inventory, verbs_device_names());
    for (const auto& device : result.inventory.devices) {
      if (device.verbs_usable == false) {
        emit(sink, LogLevel::Warning,
             "fabric: " + device.name +
                 " is in sysfs but libibverbs cannot open it (no rdma-core provider?); skipped");
      }
    }
  }

  const RdmaPort* port = nullptr;
  if (!config.device.empty()) {
    for (const auto& device : result.inventory.devices) {
      if (device.name != config.device) continue;
      for (const auto& p : device.ports) {
        if (config.port_number == 0 || p.port_number == config.port_number) {
          port = &p;
          break;
        }
      }
    }
    if (port == nullptr) {
      result.note = "fabric: configured device " + config.device +
                    (config.port_number ? ":" + std::to_string(config.port_number) : "") +
                    " not found";
      emit(sink, LogLevel::Warning, result.note);
      return result;
    }
  } else {
    port = result.inventory.first_active_roce_port();
    if (port == nullptr) {
      result.note =
          "fabric: no active RoCE port (InfiniBand only, or every Ethernet port down); "
          "RoCE settings left to UCX";
      emit(sink, LogLevel::Info, result.note);
      return result;
    }
  }

  const std::vector<Gid> interface_addresses =
      addresses ? addresses(port->netdev) : system_interface_addresses(port->netdev);
  std::string error;
  result.roce = select_roce_gid(*port, config.roce, interface_addresses, sink, error);
  if (!result.roce) {
    result.note = error;
    emit(sink, LogLevel::Warning, error);
    return result;
  }
  result.note = result.roce->describe();
  emit(sink, LogLevel::Info, result.note);

  // The ecn/ switches live on the physical netdev, not on a VLAN netdev the
  // chosen GID may belong to.
  const std::string& ecn_netdev = port->netdev.empty() ? result.roce->netdev : port->netdev;
  result.dcqcn = read_dcqcn_enable_state(root, ecn_netdev, result.roce->priority);
  report_dcqcn_enable_state(*result.dcqcn, once, sink);
  return result;
}

}  // namespace gpuwire::fabric
