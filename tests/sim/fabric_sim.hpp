// A simulator of N hosts on one switch, to judge gpuwire's pacer against
// plain DCQCN.
//
// Model (time-stepped; every step is `step_ns`):
//   - every host has one link to the switch and one back, both at link_gbps
//     with link_delay_ns of propagation; packets are MTU-sized and a link
//     serialises them at line rate;
//   - the switch keeps one FIFO per egress port; on enqueue it marks ECN with
//     a RED ramp on the instantaneous queue (0 below Kmin, Pmax at Kmax, 1
//     above) and, when the queue passes the PFC XOFF threshold, pauses every
//     host that has bytes in it, until the queue falls below XON;
//   - the receiving NIC (notification point) sends at most one CNP per flow
//     per cnp_interval_ns for marked packets; CNPs, PFC frames, RTS and grants
//     travel as control messages with propagation delay only (a priority
//     class, never queued);
//   - every sending NIC runs DCQCN per flow (gpuwire::pacing's controller,
//     fed each CNP) and round-robins its flows onto the link;
//   - in the gpuwire modes each host also runs gpuwire_pacing, unmodified:
//     a PortPacer fed by the delta of the NIC's (32-bit, wrapping)
//     rp_cnp_handled counter every counter_poll_ns, and a ReceiverCreditGate
//     that decides when each chunk of a rendezvous may move.
//
// What the model leaves out is listed in docs/pacing.md.
//
// Threading: run_simulation is re-entrant; nothing is shared between runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuwire/pacing/dcqcn_rate_controller.hpp"
#include "gpuwire/pacing/port_pacer.hpp"
#include "gpuwire/pacing/receiver_credit_gate.hpp"

namespace gpuwire::sim {

enum class PacingMode {
  NicDcqcnOnly,     // messages go to the NIC whole; only the NIC's DCQCN reacts
  GpuwirePacer,     // receiver credits + the per-port pacer
  SenderPacerOnly,  // the per-port pacer alone, no credits (an ablation)
};

const char* pacing_mode_name(PacingMode mode);

// Defaults: the often-quoted DCQCN switch settings (REFERENCES.md) and a
// PFC threshold above Kmax, so ECN acts before PFC.
struct SwitchConfig {
  // RED ramp from Kmin (probability 0) to Kmax (Pmax); every packet above.
  std::uint64_t ecn_kmin_bytes = 5'000;    // [0, kmax)
  std::uint64_t ecn_kmax_bytes = 200'000;  // (kmin, xoff)
  double ecn_pmax = 0.01;                  // (0, 1]
  std::uint64_t pfc_xoff_bytes = 512 * 1024;            // pause upstream above this
  std::uint64_t pfc_xon_bytes = 512 * 1024 - 2 * 4096;  // resume below this; < xoff
};

// Credits as the simulator uses them by default: window_bytes 0 asks for
// recommended_window_bytes of the simulated round trip.
inline pacing::ReceiverCreditConfig default_credits() {
  pacing::ReceiverCreditConfig c;
  c.window_bytes = 0;
  return c;
}

struct SimConfig {
  PacingMode mode = PacingMode::GpuwirePacer;
  double link_gbps = 100.0;             // (0, 3200]
  std::uint64_t link_delay_ns = 1'000;  // one hop, host<->switch; [0, 1 ms]
  std::uint32_t mtu_bytes = 4096;       // [256, 65536]
  // [1, 10 us]; no longer than one MTU's serialisation keeps the model honest.
  std::uint64_t step_ns = 100;
  // Notification point: at most one CNP per flow per interval. [0, 1 s]
  std::uint64_t cnp_interval_ns = 50'000;
  // How often the engine reads rp_cnp_handled. [step_ns, 1 ms]
  std::uint64_t counter_poll_ns = 10'000;
  std::uint64_t max_time_ns = 100'000'000;  // give up after this much simulated time
  std::uint64_t trace_interval_ns = 0;      // 0: no time series
  std::uint64_t seed = 1;                   // ECN marking draws
  // A sender posts its messages one after the other; the k-th message of a
  // host starts k * post_spacing_ns after the first. [0, 1 ms]
  std::uint64_t post_spacing_ns = 200;
  SwitchConfig switch_config;
  // The NIC's DCQCN; line_rate_gbps is overwritten with link_gbps.
  pacing::DcqcnConfig nic_dcqcn;
  // gpuwire's pacer; rate.line_rate_gbps is overwritten with link_gbps.
  pacing::PacerConfig pacer;
  // gpuwire's receiver credits; link_gbps is overwritten with link_gbps, and
  // window_bytes == 0 (the default here) means recommended_window_bytes for
  // the simulated round trip.
  pacing::ReceiverCreditConfig credits = default_credits();
};

// Empty when every field is in range, else one line naming the first bad one.
std::string check_sim_config(const SimConfig& config);

struct FlowSpec {
  std::uint32_t src;
  std::uint32_t dst;
  std::uint64_t bytes;
};

struct Scenario {
  std::string name;
  std::uint32_t hosts = 0;
  std::vector<FlowSpec> flows;
};

// `senders` hosts each send `bytes_per_sender` to host 0.
Scenario make_incast(std::uint32_t senders, std::uint64_t bytes_per_sender);
// Every host sends `bytes_per_pair` to every other host.
Scenario make_all_to_all(std::uint32_t hosts, std::uint64_t bytes_per_pair);

struct TraceSample {
  std::uint64_t time_ns = 0;
  std::uint64_t queue_bytes = 0;               // the busiest egress port's queue
  std::vector<std::uint64_t> delivered_bytes;  // per flow, since the start
  std::vector<double> nic_rate_gbps;           // the NIC's DCQCN rate per flow
};

struct SimResult {
  bool finished = false;                  // every flow completed within max_time_ns
  std::uint64_t completion_ns = 0;        // last flow's last byte delivered
  std::uint64_t ideal_completion_ns = 0;  // bytes into the busiest receiver / line rate
  std::uint64_t peak_queue_bytes = 0;     // max over egress ports and time
  double mean_queue_bytes = 0;            // time average over egress ports that receive flows
  std::uint64_t pfc_pause_frames = 0;     // XOFF frames sent by the switch
  std::uint64_t pfc_paused_host_ns = 0;   // sum over hosts of time spent paused
  double utilization = 0;                 // receivers' delivered bytes / (line rate * completion)
  double jain_fairness = 0;               // flow throughputs until the first flow completes
  double late_jain_fairness = 0;          // same, second half of that interval only
  std::uint64_t ecn_marked_packets = 0;
  std::uint64_t cnps_sent = 0;     // by receivers (notification points)
  std::uint64_t cnps_handled = 0;  // by senders' NICs (rp_cnp_handled, summed)
  std::uint64_t pacer_cnps = 0;    // seen by gpuwire's pacers through counter deltas
  std::uint64_t pacer_rate_cuts = 0;
  std::uint32_t cnp_counter_wraps = 0;  // hosts whose 32-bit rp_cnp_handled wrapped
  // The busiest port's queue over the second half of the run (DCQCN's
  // steady state when there is one): min, mean, max.
  std::uint64_t steady_queue_min = 0;
  double steady_queue_mean = 0;
  std::uint64_t steady_queue_max = 0;
  std::vector<TraceSample> trace;
};

// Empty when the scenario is well formed (flows between distinct hosts below
// `hosts`, non-empty, at most one per sender and receiver pair), else one line.
std::string check_scenario(const Scenario& scenario);

// Runs `scenario` to completion (or max_time_ns). Throws
// std::invalid_argument with check_sim_config's or check_scenario's line.
SimResult run_simulation(const Scenario& scenario, const SimConfig& config);

// Jain's index (sum x)^2 / (n sum x^2); 1 for an empty or all-zero input.
double jain_fairness(const std::vector<double>& values);

}  // namespace gpuwire::sim
