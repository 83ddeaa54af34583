// The simulator's internals: the state of hosts, flows and control
// messages, and the Simulation that steps them. Private to tests/sim; the
// interface is fabric_sim.hpp.
//
// Threading: a Simulation is used by one thread and never shared.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "egress_port.hpp"
#include "fabric_sim.hpp"
#include "gpuwire/pacing/clock.hpp"

namespace gpuwire::sim::detail {

inline constexpr std::uint32_t kNoFlow = UINT32_MAX;
inline constexpr std::uint64_t kSnapshotNs = 10'000;
// The NIC's rp_cnp_handled starts just below 2^32 so that the engine-side
// delta has to handle a wrap in every run with CNPs.
inline constexpr std::uint32_t kCnpCounterStart = 0xffffffffu - 2;

// splitmix64: the same draws on every platform and standard library.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  double uniform01() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return double(z >> 11) * 0x1.0p-53;
  }

 private:
  std::uint64_t state_;
};

struct InFlight {
  std::uint64_t arrive_ns;
  SimPacket packet;
};

enum class ControlKind { Post, Cnp, Grant, Rts, PfcPause, PfcResume };

struct ControlMessage {
  std::uint64_t arrive_ns;
  std::uint64_t sequence;  // ties keep sending order
  ControlKind kind;
  std::uint32_t host;
  std::uint32_t flow;
  std::uint64_t bytes;

  bool operator>(const ControlMessage& o) const {
    return arrive_ns != o.arrive_ns ? arrive_ns > o.arrive_ns : sequence > o.sequence;
  }
};

struct Chunk {
  std::uint32_t flow;
  std::uint64_t bytes;
};

struct FlowState {
  FlowState(const FlowSpec& flow_spec, const pacing::DcqcnRateController& rate)
      : spec(flow_spec), nic_rate(rate) {}

  FlowSpec spec;
  pacing::DcqcnRateController nic_rate;
  double nic_tokens = 0;        // the NIC's per-flow rate limiter, bytes
  std::uint64_t posted = 0;     // bytes handed to the NIC
  std::uint64_t sent = 0;       // bytes the NIC put on the wire
  std::uint64_t delivered = 0;  // bytes the receiver got
  std::uint64_t granted = 0;    // bytes the receiver granted
  std::deque<std::pair<std::uint64_t, std::uint64_t>> landing;  // (delivered mark, chunk bytes)
  bool cnp_sent_before = false;
  std::uint64_t last_cnp_ns = 0;
  bool finished = false;
  std::uint64_t finish_ns = 0;
};

struct HostState {
  std::vector<std::uint32_t> out_flows;
  std::size_t next_flow = 0;  // round-robin position in out_flows
  double link_budget = 0;
  std::deque<InFlight> uplink;    // toward the switch
  std::deque<InFlight> downlink;  // from the switch
  int pause_count = 0;            // egress ports currently pausing this host
  std::uint64_t paused_ns = 0;
  std::uint32_t rp_cnp_handled = kCnpCounterStart;
  std::uint32_t rp_cnp_polled = kCnpCounterStart;
  std::optional<pacing::PortPacer> pacer;
  std::optional<pacing::ReceiverCreditGate> gate;
  std::deque<Chunk> pending;             // chunks waiting for the pacer
  std::vector<std::uint32_t> flow_from;  // at a receiver: sender host -> flow
  std::uint64_t received_bytes = 0;
  double queue_integral = 0;  // of this host's egress port, bytes * ns
};

class Simulation {
 public:
  // `config` must pass check_sim_config and `scenario` check_scenario.
  Simulation(const Scenario& scenario, const SimConfig& config);
  SimResult run();

 private:
  void build_flows(const Scenario& scenario);
  void build_gpuwire_parts();
  void start_messages();
  void send(ControlKind kind, std::uint64_t arrive_ns, std::uint32_t host, std::uint32_t flow,
            std::uint64_t bytes);
  void deliver_control(std::uint64_t now);
  void switch_ingress(std::uint64_t now, std::uint64_t step_index);
  void switch_egress(std::uint64_t now);
  void host_receive(std::uint64_t now);
  void grant_credits(std::uint64_t now);
  void admit_chunks(std::uint64_t now);
  void nic_transmit(std::uint64_t now);
  void record(std::uint64_t now);
  SimResult summarize(std::uint64_t end_ns);

  SimConfig config_;
  double bytes_per_step_;
  std::uint32_t hosts_count_;
  std::vector<HostState> hosts_;
  std::vector<EgressPort> ports_;
  std::vector<double> port_budget_;
  std::vector<FlowState> flows_;
  std::priority_queue<ControlMessage, std::vector<ControlMessage>, std::greater<>> control_;
  std::uint64_t control_sequence_ = 0;
  pacing::ManualClock clock_;
  Random random_;
  std::vector<std::uint32_t> scratch_hosts_;

  std::uint32_t busiest_port_ = 0;
  std::vector<std::uint32_t> receiving_ports_;
  std::uint64_t peak_queue_ = 0;
  std::vector<std::uint64_t> busiest_queue_by_step_;
  std::vector<std::vector<std::uint64_t>> delivered_snapshots_;  // every kSnapshotNs
  std::size_t finished_flows_ = 0;
  std::uint64_t first_finish_ns_ = 0;
  std::uint64_t cnps_sent_ = 0;
  std::uint64_t cnps_handled_ = 0;
  std::uint64_t next_trace_ns_ = 0;
  std::uint64_t next_poll_ns_ = 0;
  std::vector<TraceSample> trace_;
};

}  // namespace gpuwire::sim::detail
