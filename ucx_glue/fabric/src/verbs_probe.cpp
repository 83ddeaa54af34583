#include "gpuwire/fabric/verbs_probe.hpp"

#include <algorithm>

#if defined(GPUWIRE_FABRIC_WITH_IBVERBS)
#include <infiniband/verbs.h>
#endif

namespace gpuwire::fabric {

#if defined(GPUWIRE_FABRIC_WITH_IBVERBS)
bool built_with_verbs() { return true; }

std::optional<std::vector<std::string>> verbs_device_names() {
  std::vector<std::string> names;
  int count = 0;
  ibv_device** list = ::ibv_get_device_list(&count);
  if (list == nullptr) return names;  // no devices or no kernel support: nothing usable
  for (int i = 0; i < count; ++i) names.emplace_back(::ibv_get_device_name(list[i]));
  ::ibv_free_device_list(list);
  return names;
}
#else
bool built_with_verbs() { return false; }

std::optional<std::vector<std::string>> verbs_device_names() { return std::nullopt; }
#endif

void mark_verbs_usable(FabricInventory& inventory,
                       const std::optional<std::vector<std::string>>& names) {
  if (!names) return;
  for (auto& device : inventory.devices) {
    device.verbs_usable = std::find(names->begin(), names->end(), device.name) != names->end();
  }
}

}  // namespace gpuwire::fabric
