// Whether the NIC runs DCQCN for a priority.
//
// mlx5 NICs (with the vendor driver) expose per-priority switches:
//   sys/class/net/<netdev>/ecn/roce_np/enable/<prio>   notification point:
//       the receiver turns ECN-marked packets into CNPs
//   sys/class/net/<netdev>/ecn/roce_rp/enable/<prio>   reaction point:
//       the sender cuts its rate on CNPs
// With either off, congestion is only stopped by PFC pauses, and gpuwire's
// pacer sees no CNPs to react to. The inbox kernel driver may not expose the
// files at all; then the state is Unknown and that is said once at Info level.
//
// Threading: re-entrant except for the OnceFilter passed in (one owner).
#pragma once

#include <filesystem>
#include <string>

#include "gpuwire/fabric/log_sink.hpp"
#include "gpuwire/fabric/sysfs.hpp"

namespace gpuwire::fabric {

enum class SwitchState { Enabled, Disabled, Unknown };

const char* switch_state_name(SwitchState state);

struct DcqcnEnableState {
  std::string netdev;
  unsigned priority = 0;
  SwitchState notification_point = SwitchState::Unknown;
  SwitchState reaction_point = SwitchState::Unknown;
  std::filesystem::path notification_point_file;
  std::filesystem::path reaction_point_file;

  bool fully_enabled() const {
    return notification_point == SwitchState::Enabled && reaction_point == SwitchState::Enabled;
  }
};

// Reads both switches. "1" is Enabled, "0" Disabled, anything else (or a
// missing file) Unknown. `priority` must be in [0, 7].
DcqcnEnableState read_dcqcn_enable_state(const SysfsRoot& root, const std::string& netdev,
                                         unsigned priority);

// Warns once per file (naming it) when a switch is off, and says once at Info
// level when it cannot be read. Returns true when both are enabled.
bool report_dcqcn_enable_state(const DcqcnEnableState& state, OnceFilter& once,
                               const LogSink& sink);

}  // namespace gpuwire::fabric
