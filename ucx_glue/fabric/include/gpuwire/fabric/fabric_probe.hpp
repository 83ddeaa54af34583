// One call that does the fabric layer's start-up work for the engine.
//
// Before UCX starts, the engine calls probe_fabric() (through
// engine/fabric_setup.hpp): it enumerates devices, picks the port (configured
// or first active RoCE port), chooses the GID index and traffic class, and
// checks DCQCN for the chosen priority. The engine logs the choice, hands the
// GID index and traffic class to UCX where asked to, and opens a
// CongestionCounterReader on the same port for the pacer.
//
// Threading: call from one thread; the OnceFilter belongs to the caller.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "gpuwire/fabric/dcqcn_enable.hpp"
#include "gpuwire/fabric/log_sink.hpp"
#include "gpuwire/fabric/rdma_devices.hpp"
#include "gpuwire/fabric/roce_selection.hpp"

namespace gpuwire::fabric {

struct FabricConfig {
  std::filesystem::path sysfs_root = "/";
  // Device and port to use; empty device / port 0 means the first active RoCE
  // port found. port_number range [0, 255].
  std::string device;
  unsigned port_number = 0;
  // Cross-check devices with libibverbs (only meaningful for the real root).
  bool check_with_verbs = true;
  RoceConfig roce;
};

// Empty when every field is in range, else one line naming the first bad one.
std::string check_fabric_config(const FabricConfig& config);

struct FabricProbeResult {
  FabricInventory inventory;
  // The chosen RoCE settings; nullopt when there is no usable RoCE port (an
  // IB-only or RDMA-less machine is not an error; `note` says which).
  std::optional<RoceSelection> roce;
  std::optional<DcqcnEnableState> dcqcn;
  std::string note;  // one line: what was chosen, or why nothing was
};

// `addresses` defaults to system_interface_addresses when empty.
FabricProbeResult probe_fabric(const FabricConfig& config, const AddressLookup& addresses,
                               OnceFilter& once, const LogSink& sink);

}  // namespace gpuwire::fabric
