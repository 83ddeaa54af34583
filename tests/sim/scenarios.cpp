#include <cstdio>
#include <set>
#include <utility>

#include "fabric_sim.hpp"

namespace gpuwire::sim {
namespace {

std::string out_of_range(const char* field, double value, const char* range) {
  char line[160];
  std::snprintf(line, sizeof line, "sim: %s = %g is out of range %s", field, value, range);
  return line;
}

}  // namespace

const char* pacing_mode_name(PacingMode mode) {
  switch (mode) {
    case PacingMode::NicDcqcnOnly: return "DCQCN only";
    case PacingMode::GpuwirePacer: return "gpuwire pacer";
    case PacingMode::SenderPacerOnly: return "sender pacer only";
  }
  return "?";
}

Scenario make_incast(std::uint32_t senders, std::uint64_t bytes_per_sender) {
  Scenario s;
  s.name = "incast " + std::to_string(senders) + ":1";
  s.hosts = senders + 1;
  for (std::uint32_t h = 1; h <= senders; ++h) s.flows.push_back({h, 0, bytes_per_sender});
  return s;
}

Scenario make_all_to_all(std::uint32_t hosts, std::uint64_t bytes_per_pair) {
  Scenario s;
  s.name = "all-to-all " + std::to_string(hosts);
  s.hosts = hosts;
  for (std::uint32_t src = 0; src < hosts; ++src) {
    for (std::uint32_t k = 1; k < hosts; ++k) {
      // Each host starts with a different destination, as all-to-all
      // implementations stagger their peers.
      s.flows.push_back({src, (src + k) % hosts, bytes_per_pair});
    }
  }
  return s;
}

std::string check_scenario(const Scenario& s) {
  if (s.hosts < 2 || s.hosts > 4096) return "sim: scenario '" + s.name + "' needs 2..4096 hosts";
  if (s.flows.empty()) return "sim: scenario '" + s.name + "' has no flows";
  std::set<std::pair<std::uint32_t, std::uint32_t>> pairs;
  for (const FlowSpec& f : s.flows) {
    if (f.src >= s.hosts || f.dst >= s.hosts || f.src == f.dst || f.bytes == 0) {
      return "sim: scenario '" + s.name + "' has a flow " + std::to_string(f.src) + " -> " +
             std::to_string(f.dst) + " of " + std::to_string(f.bytes) +
             " bytes (hosts must differ and exist, bytes > 0)";
    }
    if (!pairs.insert({f.src, f.dst}).second) {
      return "sim: scenario '" + s.name + "' has two flows " + std::to_string(f.src) + " -> " +
             std::to_string(f.dst);
    }
  }
  return {};
}

std::string check_sim_config(const SimConfig& c) {
  if (!(c.link_gbps > 0 && c.link_gbps <= 3200))
    return out_of_range("link_gbps", c.link_gbps, "(0, 3200]");
  if (c.link_delay_ns > 1'000'000)
    return out_of_range("link_delay_ns", double(c.link_delay_ns), "[0, 1e6]");
  if (c.mtu_bytes < 256 || c.mtu_bytes > 65536)
    return out_of_range("mtu_bytes", c.mtu_bytes, "[256, 65536]");
  if (c.step_ns < 1 || c.step_ns > 10'000)
    return out_of_range("step_ns", double(c.step_ns), "[1, 10000]");
  if (c.cnp_interval_ns > 1'000'000'000) {
    return out_of_range("cnp_interval_ns", double(c.cnp_interval_ns), "[0, 1e9]");
  }
  if (c.counter_poll_ns < c.step_ns || c.counter_poll_ns > 1'000'000) {
    return out_of_range("counter_poll_ns", double(c.counter_poll_ns), "[step_ns, 1e6]");
  }
  if (c.max_time_ns < c.step_ns || c.max_time_ns > 10'000'000'000ULL) {
    return out_of_range("max_time_ns", double(c.max_time_ns), "[step_ns, 1e10]");
  }
  if (c.post_spacing_ns > 1'000'000) {
    return out_of_range("post_spacing_ns", double(c.post_spacing_ns), "[0, 1e6]");
  }
  const SwitchConfig& s = c.switch_config;
  if (s.ecn_kmin_bytes >= s.ecn_kmax_bytes) {
    return out_of_range("ecn_kmin_bytes", double(s.ecn_kmin_bytes), "[0, ecn_kmax_bytes)");
  }
  if (!(s.ecn_pmax > 0 && s.ecn_pmax <= 1)) return out_of_range("ecn_pmax", s.ecn_pmax, "(0, 1]");
  if (s.pfc_xoff_bytes <= s.ecn_kmax_bytes) {
    return out_of_range("pfc_xoff_bytes", double(s.pfc_xoff_bytes), "(ecn_kmax_bytes, inf)");
  }
  if (s.pfc_xon_bytes >= s.pfc_xoff_bytes) {
    return out_of_range("pfc_xon_bytes", double(s.pfc_xon_bytes), "[0, pfc_xoff_bytes)");
  }
  // The library configs are checked as the simulation will use them.
  pacing::DcqcnConfig nic = c.nic_dcqcn;
  nic.line_rate_gbps = c.link_gbps;
  if (auto bad = pacing::check_dcqcn_config(nic); !bad.empty()) return "sim: nic_dcqcn: " + bad;
  pacing::PacerConfig pacer = c.pacer;
  pacer.rate.line_rate_gbps = c.link_gbps;
  if (auto bad = pacing::check_pacer_config(pacer); !bad.empty()) return "sim: pacer: " + bad;
  pacing::ReceiverCreditConfig credits = c.credits;
  credits.link_gbps = c.link_gbps;
  if (credits.window_bytes == 0) credits.window_bytes = credits.chunk_bytes;  // computed later
  if (auto bad = pacing::check_receiver_credit_config(credits); !bad.empty()) {
    return "sim: credits: " + bad;
  }
  return {};
}

}  // namespace gpuwire::sim
