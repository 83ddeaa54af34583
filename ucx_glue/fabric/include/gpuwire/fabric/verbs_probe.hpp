// Optional cross-check with libibverbs.
//
// A device can be in sysfs yet unusable from user space (no rdma-core
// provider for it); UCX would then fail later with a less clear message. When
// gpuwire is built with libibverbs, the devices ibv_get_device_list() returns
// are the usable ones. Built without it, the check reports "not checked".
//
// Threading: ibv_get_device_list is thread-safe; so is this.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpuwire/fabric/rdma_devices.hpp"

namespace gpuwire::fabric {

// True when this build has libibverbs.
bool built_with_verbs();

// Names of the devices libibverbs can open; nullopt without libibverbs.
std::optional<std::vector<std::string>> verbs_device_names();

// Sets RdmaDevice::verbs_usable from `names` (nullopt leaves it unset).
void mark_verbs_usable(FabricInventory& inventory,
                       const std::optional<std::vector<std::string>>& names);

}  // namespace gpuwire::fabric
