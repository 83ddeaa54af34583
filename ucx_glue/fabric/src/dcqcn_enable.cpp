#include "gpuwire/fabric/dcqcn_enable.hpp"

namespace gpuwire::fabric {
namespace {

SwitchState read_switch(const std::filesystem::path& file) {
  const auto text = read_attribute(file);
  if (!text) return SwitchState::Unknown;
  if (*text == "1") return SwitchState::Enabled;
  if (*text == "0") return SwitchState::Disabled;
  return SwitchState::Unknown;
}

// What an off switch costs, in the words a cluster admin would act on.
const char* consequence(bool notification_point) {
  return notification_point
             ? "this host will not send CNPs for ECN-marked packets, so senders toward it never "
               "slow down"
             : "this host will not slow down on CNPs, so congestion ends in PFC pauses";
}

void report_one(const char* role, bool notification_point, SwitchState state,
                const std::filesystem::path& file, unsigned priority, OnceFilter& once,
                const LogSink& sink) {
  const std::string path = file.string();
  if (state == SwitchState::Disabled) {
    emit_once(once, path, sink, LogLevel::Warning,
              std::string("fabric: DCQCN ") + role + " is off for priority " +
                  std::to_string(priority) + " (" + path + " reads 0); " +
                  consequence(notification_point));
  } else if (state == SwitchState::Unknown) {
    emit_once(once, path, sink, LogLevel::Info,
              std::string("fabric: cannot read ") + path + "; DCQCN " + role +
                  " state unknown (the inbox driver may not expose it)");
  }
}

}  // namespace

const char* switch_state_name(SwitchState state) {
  switch (state) {
    case SwitchState::Enabled: return "enabled";
    case SwitchState::Disabled: return "disabled";
    case SwitchState::Unknown: return "unknown";
  }
  return "?";
}

DcqcnEnableState read_dcqcn_enable_state(const SysfsRoot& root, const std::string& netdev,
                                         unsigned priority) {
  DcqcnEnableState state;
  state.netdev = netdev;
  state.priority = priority;
  const auto ecn = root.net_dir() / netdev / "ecn";
  const auto prio = std::to_string(priority);
  state.notification_point_file = ecn / "roce_np/enable" / prio;
  state.reaction_point_file = ecn / "roce_rp/enable" / prio;
  if (netdev.empty() || priority > 7) return state;  // both Unknown
  state.notification_point = read_switch(state.notification_point_file);
  state.reaction_point = read_switch(state.reaction_point_file);
  return state;
}

bool report_dcqcn_enable_state(const DcqcnEnableState& state, OnceFilter& once,
                               const LogSink& sink) {
  report_one("notification point", true, state.notification_point, state.notification_point_file,
             state.priority, once, sink);
  report_one("reaction point", false, state.reaction_point, state.reaction_point_file,
             state.priority, once, sink);
  return state.fully_enabled();
}

}  // namespace gpuwire::fabric
