#include "simulation.hpp"

#include <algorithm>
#include <stdexcept>

#include "gpuwire/fabric/congestion_counters.hpp"

namespace gpuwire::sim {
namespace detail {

Simulation::Simulation(const Scenario& scenario, const SimConfig& config)
    : config_(config),
      bytes_per_step_(config.link_gbps / 8.0 * double(config.step_ns)),
      hosts_count_(scenario.hosts),
      hosts_(scenario.hosts),
      port_budget_(scenario.hosts, 0.0),
      random_(config.seed) {
  config_.nic_dcqcn.line_rate_gbps = config.link_gbps;
  config_.pacer.rate.line_rate_gbps = config.link_gbps;
  config_.credits.link_gbps = config.link_gbps;
  if (config_.credits.window_bytes == 0) {
    // A grant turns into landed bytes after two hops to the sender, two hops
    // back, and a few steps of serialisation.
    const std::uint64_t round_trip = 4 * config.link_delay_ns + 4 * config.step_ns;
    config_.credits.window_bytes =
        pacing::recommended_window_bytes(config.link_gbps, round_trip, config_.credits.chunk_bytes);
  }
  for (std::uint32_t h = 0; h < hosts_count_; ++h) {
    ports_.emplace_back(config_.switch_config, hosts_count_);
  }
  build_flows(scenario);
  if (config_.mode != PacingMode::NicDcqcnOnly) build_gpuwire_parts();
  start_messages();
}

void Simulation::build_flows(const Scenario& scenario) {
  std::string error;
  std::vector<std::uint64_t> incoming(hosts_count_, 0);
  for (const FlowSpec& spec : scenario.flows) {
    auto rate = pacing::DcqcnRateController::create(config_.nic_dcqcn, 0, error);
    if (!rate) throw std::invalid_argument(error);
    flows_.emplace_back(spec, *rate);
    hosts_[spec.src].out_flows.push_back(std::uint32_t(flows_.size() - 1));
    incoming[spec.dst] += spec.bytes;
  }
  for (std::uint32_t h = 0; h < hosts_count_; ++h) {
    if (incoming[h] > 0) receiving_ports_.push_back(h);
    if (incoming[h] > incoming[busiest_port_]) busiest_port_ = h;
  }
}

void Simulation::build_gpuwire_parts() {
  std::string error;
  for (HostState& host : hosts_) {
    host.pacer = pacing::PortPacer::create(config_.pacer, clock_, error);
    if (!host.pacer) throw std::invalid_argument(error);
    if (config_.mode != PacingMode::GpuwirePacer) continue;
    host.gate = pacing::ReceiverCreditGate::create(config_.credits, 0, error);
    if (!host.gate) throw std::invalid_argument(error);
    host.flow_from.assign(hosts_count_, kNoFlow);
  }
  for (std::uint32_t f = 0; f < flows_.size(); ++f) {
    if (config_.mode == PacingMode::GpuwirePacer) {
      hosts_[flows_[f].spec.dst].flow_from[flows_[f].spec.src] = f;
    }
  }
}

void Simulation::start_messages() {
  if (config_.mode == PacingMode::SenderPacerOnly) {
    // Without credits each sender cuts its messages into chunks itself and
    // offers them to its pacer round-robin across destinations.
    for (HostState& host : hosts_) {
      std::vector<std::uint64_t> left;
      for (std::uint32_t f : host.out_flows) left.push_back(flows_[f].spec.bytes);
      for (bool any = true; any;) {
        any = false;
        for (std::size_t i = 0; i < left.size(); ++i) {
          if (left[i] == 0) continue;
          const std::uint64_t bytes = std::min(left[i], config_.credits.chunk_bytes);
          host.pending.push_back({host.out_flows[i], bytes});
          left[i] -= bytes;
          any = true;
        }
      }
    }
    return;
  }
  for (HostState& host : hosts_) {
    for (std::size_t k = 0; k < host.out_flows.size(); ++k) {
      const std::uint32_t f = host.out_flows[k];
      const FlowSpec& spec = flows_[f].spec;
      const std::uint64_t posted_at = k * config_.post_spacing_ns;
      if (config_.mode == PacingMode::NicDcqcnOnly) {
        send(ControlKind::Post, posted_at, spec.src, f, spec.bytes);
      } else {
        // The rendezvous request reaches the receiver two hops later.
        send(ControlKind::Rts, posted_at + 2 * config_.link_delay_ns, spec.dst, f, spec.bytes);
      }
    }
  }
}

void Simulation::send(ControlKind kind, std::uint64_t arrive_ns, std::uint32_t host,
                      std::uint32_t flow, std::uint64_t bytes) {
  control_.push(ControlMessage{arrive_ns, control_sequence_++, kind, host, flow, bytes});
}

void Simulation::deliver_control(std::uint64_t now) {
  while (!control_.empty() && control_.top().arrive_ns <= now) {
    const ControlMessage m = control_.top();
    control_.pop();
    switch (m.kind) {
      case ControlKind::Post: flows_[m.flow].posted = m.bytes; break;
      case ControlKind::Cnp:
        flows_[m.flow].nic_rate.on_congestion_notifications(1, now);
        ++hosts_[m.host].rp_cnp_handled;  // wraps at 2^32 like the NIC's counter
        ++cnps_handled_;
        break;
      case ControlKind::Grant: hosts_[m.host].pending.push_back({m.flow, m.bytes}); break;
      case ControlKind::Rts:
        hosts_[m.host].gate->add_demand(flows_[m.flow].spec.src, m.bytes);
        break;
      case ControlKind::PfcPause: ++hosts_[m.host].pause_count; break;
      case ControlKind::PfcResume: --hosts_[m.host].pause_count; break;
    }
  }
}

void Simulation::switch_ingress(std::uint64_t now, std::uint64_t step_index) {
  // Rotate which host's arrivals enqueue first so no host is always behind
  // the others in the same step (that would bias its ECN marks).
  const std::uint32_t first = std::uint32_t(step_index % hosts_count_);
  for (std::uint32_t k = 0; k < hosts_count_; ++k) {
    HostState& host = hosts_[(first + k) % hosts_count_];
    while (!host.uplink.empty() && host.uplink.front().arrive_ns <= now) {
      const SimPacket packet = host.uplink.front().packet;
      host.uplink.pop_front();
      scratch_hosts_.clear();
      ports_[flows_[packet.flow].spec.dst].enqueue(packet, random_.uniform01(), scratch_hosts_);
      for (std::uint32_t h : scratch_hosts_) {
        send(ControlKind::PfcPause, now + config_.link_delay_ns, h, 0, 0);
      }
    }
  }
  for (const EgressPort& port : ports_) peak_queue_ = std::max(peak_queue_, port.queue_bytes());
}

void Simulation::switch_egress(std::uint64_t now) {
  for (std::uint32_t d = 0; d < hosts_count_; ++d) {
    EgressPort& port = ports_[d];
    port_budget_[d] += bytes_per_step_;
    while (!port.empty() && port_budget_[d] >= port.head().bytes) {
      scratch_hosts_.clear();
      const SimPacket packet = port.dequeue(scratch_hosts_);
      port_budget_[d] -= packet.bytes;
      hosts_[d].downlink.push_back({now + config_.link_delay_ns, packet});
      for (std::uint32_t h : scratch_hosts_) {
        send(ControlKind::PfcResume, now + config_.link_delay_ns, h, 0, 0);
      }
    }
    // An idle link cannot bank time for later.
    if (port.empty()) port_budget_[d] = std::min(port_budget_[d], bytes_per_step_);
  }
}

void Simulation::host_receive(std::uint64_t now) {
  for (std::uint32_t d = 0; d < hosts_count_; ++d) {
    HostState& host = hosts_[d];
    while (!host.downlink.empty() && host.downlink.front().arrive_ns <= now) {
      const SimPacket packet = host.downlink.front().packet;
      host.downlink.pop_front();
      FlowState& flow = flows_[packet.flow];
      flow.delivered += packet.bytes;
      host.received_bytes += packet.bytes;
      if (packet.ecn_marked &&
          (!flow.cnp_sent_before || now - flow.last_cnp_ns >= config_.cnp_interval_ns)) {
        flow.cnp_sent_before = true;
        flow.last_cnp_ns = now;
        ++cnps_sent_;
        send(ControlKind::Cnp, now + 2 * config_.link_delay_ns, flow.spec.src, packet.flow, 0);
      }
      while (!flow.landing.empty() && flow.delivered >= flow.landing.front().first) {
        host.gate->release(flow.landing.front().second);
        flow.landing.pop_front();
      }
      if (!flow.finished && flow.delivered == flow.spec.bytes) {
        flow.finished = true;
        flow.finish_ns = now;
        if (finished_flows_++ == 0) first_finish_ns_ = now;
      }
    }
  }
}

void Simulation::grant_credits(std::uint64_t now) {
  for (std::uint32_t d = 0; d < hosts_count_; ++d) {
    HostState& host = hosts_[d];
    if (!host.gate) continue;
    while (auto grant = host.gate->next_grant(now)) {
      const std::uint32_t f = host.flow_from[grant->sender];
      FlowState& flow = flows_[f];
      flow.granted += grant->bytes;
      flow.landing.emplace_back(flow.granted, grant->bytes);
      send(ControlKind::Grant, now + 2 * config_.link_delay_ns, flow.spec.src, f, grant->bytes);
    }
  }
}

void Simulation::admit_chunks(std::uint64_t now) {
  const bool poll = now >= next_poll_ns_;
  if (poll) next_poll_ns_ += config_.counter_poll_ns;
  for (HostState& host : hosts_) {
    if (!host.pacer) continue;
    if (poll) {
      // What the engine does with gpuwire_fabric's reader: a wrap-aware delta.
      const std::uint64_t delta = fabric::counter_delta(host.rp_cnp_polled, host.rp_cnp_handled,
                                                        fabric::CounterWidth::Bits32);
      host.rp_cnp_polled = host.rp_cnp_handled;
      // The engine knows toward how many peers it has chunks outstanding.
      std::uint32_t active = 0;
      for (std::uint32_t f : host.out_flows) active += flows_[f].sent < flows_[f].spec.bytes;
      host.pacer->on_congestion_notifications(delta, now, active);
    }
    while (!host.pending.empty()) {
      const Chunk chunk = host.pending.front();
      if (!host.pacer->admit(chunk.bytes, now).admitted) break;
      flows_[chunk.flow].posted += chunk.bytes;
      host.pending.pop_front();
    }
  }
}

void Simulation::nic_transmit(std::uint64_t now) {
  const double step = double(config_.step_ns);
  for (HostState& host : hosts_) {
    host.link_budget += bytes_per_step_;
    for (std::uint32_t f : host.out_flows) {
      FlowState& flow = flows_[f];
      if (now >= flow.nic_rate.next_deadline_ns()) flow.nic_rate.advance(now);
      flow.nic_tokens = std::min(flow.nic_tokens + flow.nic_rate.current_rate_gbps() / 8.0 * step,
                                 double(config_.mtu_bytes));
    }
    if (host.pause_count > 0) {
      host.paused_ns += config_.step_ns;
      host.link_budget = std::min(host.link_budget, bytes_per_step_);
      continue;
    }
    const std::size_t n = host.out_flows.size();
    bool idle = true;
    while (n > 0) {
      std::size_t pick = n;
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (host.next_flow + k) % n;
        const FlowState& flow = flows_[host.out_flows[i]];
        if (flow.posted > flow.sent && flow.nic_tokens >= 0.0) {
          pick = i;
          break;
        }
      }
      if (pick == n) break;
      idle = false;
      const std::uint32_t f = host.out_flows[pick];
      FlowState& flow = flows_[f];
      const auto bytes =
          std::uint32_t(std::min<std::uint64_t>(config_.mtu_bytes, flow.posted - flow.sent));
      if (host.link_budget < bytes) break;  // still serialising
      host.link_budget -= bytes;
      flow.nic_tokens -= bytes;
      flow.sent += bytes;
      flow.nic_rate.on_bytes_sent(bytes, now);
      host.uplink.push_back(
          {now + config_.link_delay_ns, SimPacket{f, flow.spec.src, bytes, false}});
      host.next_flow = (pick + 1) % n;
    }
    if (idle) host.link_budget = std::min(host.link_budget, bytes_per_step_);
  }
}

SimResult Simulation::run() {
  std::uint64_t now = 0, step_index = 0;
  while (finished_flows_ < flows_.size() && now <= config_.max_time_ns) {
    clock_.set_ns(now);
    deliver_control(now);
    switch_ingress(now, step_index);
    switch_egress(now);
    host_receive(now);
    grant_credits(now);
    admit_chunks(now);
    nic_transmit(now);
    record(now);
    now += config_.step_ns;
    ++step_index;
  }
  return summarize(now);
}

}  // namespace detail

SimResult run_simulation(const Scenario& scenario, const SimConfig& config) {
  if (auto bad = check_sim_config(config); !bad.empty()) throw std::invalid_argument(bad);
  if (auto bad = check_scenario(scenario); !bad.empty()) throw std::invalid_argument(bad);
  detail::Simulation simulation(scenario, config);
  return simulation.run();
}

}  // namespace gpuwire::sim
