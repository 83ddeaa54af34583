// The RDMA devices and the RoCE choice, from gpuwire's fabric layer: the same
// probe_fabric() the engine runs, with its messages kept instead of logged.
#include "gpuwire/fabric/fabric_probe.hpp"
#include "probes.hpp"

namespace gpuwire::info {

FabricReport probe_fabric_view() {
  FabricReport r;
  fabric::FabricConfig config;  // the real sysfs, the first active RoCE port
  fabric::OnceFilter once;
  fabric::FabricProbeResult probe = fabric::probe_fabric(config, {}, once, {});
  for (const fabric::RdmaDevice& dev : probe.inventory.devices) {
    r.devices.push_back(dev.name);
    for (const fabric::RdmaPort& port : dev.ports) {
      RdmaPortView v;
      v.device = port.device;
      v.port = port.port_number;
      v.link_layer = fabric::link_layer_name(port.link_layer);
      v.state = fabric::port_state_name(port.state);
      v.netdev = port.netdev;
      v.rate_gbps = port.rate_gbps;
      r.ports.push_back(std::move(v));
    }
  }
  r.summary = probe.inventory.summary();
  r.note = probe.note;
  if (probe.roce) r.roce = probe.roce->describe();
  if (probe.dcqcn) r.dcqcn_enabled = probe.dcqcn->fully_enabled();
  return r;
}

}  // namespace gpuwire::info
