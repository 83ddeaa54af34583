// What a run measured: the per-step recording and the summary of a run.
#include <algorithm>

#include "simulation.hpp"

namespace gpuwire::sim {
namespace detail {

void Simulation::record(std::uint64_t now) {
  busiest_queue_by_step_.push_back(ports_[busiest_port_].queue_bytes());
  for (std::uint32_t d : receiving_ports_) {
    hosts_[d].queue_integral += double(ports_[d].queue_bytes()) * double(config_.step_ns);
  }
  if (now % kSnapshotNs < config_.step_ns) {
    std::vector<std::uint64_t> delivered(flows_.size());
    for (std::size_t f = 0; f < flows_.size(); ++f) delivered[f] = flows_[f].delivered;
    delivered_snapshots_.push_back(std::move(delivered));
  }
  if (config_.trace_interval_ns > 0 && now >= next_trace_ns_) {
    TraceSample sample;
    sample.time_ns = now;
    sample.queue_bytes = ports_[busiest_port_].queue_bytes();
    for (const FlowState& flow : flows_) {
      sample.delivered_bytes.push_back(flow.delivered);
      sample.nic_rate_gbps.push_back(flow.nic_rate.current_rate_gbps());
    }
    trace_.push_back(std::move(sample));
    next_trace_ns_ += config_.trace_interval_ns;
  }
}

SimResult Simulation::summarize(std::uint64_t end_ns) {
  SimResult r;
  r.finished = finished_flows_ == flows_.size();
  for (const FlowState& flow : flows_) r.completion_ns = std::max(r.completion_ns, flow.finish_ns);
  if (!r.finished) r.completion_ns = end_ns;
  const double bytes_per_ns = config_.link_gbps / 8.0;
  std::uint64_t busiest_bytes = 0;
  for (std::uint32_t d : receiving_ports_)
    busiest_bytes = std::max(busiest_bytes, hosts_[d].received_bytes);
  std::vector<std::uint64_t> sent_by(hosts_count_, 0);
  for (const FlowState& flow : flows_) sent_by[flow.spec.src] += flow.spec.bytes;
  for (std::uint64_t b : sent_by) busiest_bytes = std::max(busiest_bytes, b);
  r.ideal_completion_ns = std::uint64_t(double(busiest_bytes) / bytes_per_ns);

  r.peak_queue_bytes = peak_queue_;
  double utilization = 0, mean_queue = 0;
  for (std::uint32_t d : receiving_ports_) {
    utilization += double(hosts_[d].received_bytes) / (bytes_per_ns * double(r.completion_ns));
    mean_queue += hosts_[d].queue_integral / double(end_ns);
  }
  r.utilization = utilization / double(receiving_ports_.size());
  r.mean_queue_bytes = mean_queue / double(receiving_ports_.size());
  for (const EgressPort& port : ports_) {
    r.pfc_pause_frames += port.pause_frames();
    r.ecn_marked_packets += port.marked_packets();
  }
  for (const HostState& host : hosts_) r.pfc_paused_host_ns += host.paused_ns;
  r.cnps_sent = cnps_sent_;
  r.cnps_handled = cnps_handled_;
  for (const HostState& host : hosts_) {
    r.cnp_counter_wraps += host.rp_cnp_handled < kCnpCounterStart;
    if (!host.pacer) continue;
    r.pacer_cnps += host.pacer->controller().stats().cnps;
    r.pacer_rate_cuts += host.pacer->controller().stats().rate_cuts;
  }

  // Fairness over [0, first finish] and over its second half, from the snapshots.
  const std::uint64_t window_end = r.finished || finished_flows_ > 0 ? first_finish_ns_ : end_ns;
  const std::size_t end_index =
      std::min<std::size_t>(window_end / kSnapshotNs, delivered_snapshots_.size() - 1);
  const std::size_t mid_index = end_index / 2;
  std::vector<double> whole, late;
  for (std::size_t f = 0; f < flows_.size(); ++f) {
    whole.push_back(double(delivered_snapshots_[end_index][f]));
    late.push_back(double(delivered_snapshots_[end_index][f] - delivered_snapshots_[mid_index][f]));
  }
  r.jain_fairness = jain_fairness(whole);
  r.late_jain_fairness = jain_fairness(late);

  // The busiest queue over the same second half: while every flow is still
  // sending, which is where DCQCN's steady state is.
  const std::size_t last_step =
      std::min<std::size_t>(window_end / config_.step_ns, busiest_queue_by_step_.size());
  const std::size_t first_step = last_step / 2;
  if (last_step > first_step) {
    std::uint64_t lo = UINT64_MAX, hi = 0;
    double sum = 0;
    for (std::size_t i = first_step; i < last_step; ++i) {
      lo = std::min(lo, busiest_queue_by_step_[i]);
      hi = std::max(hi, busiest_queue_by_step_[i]);
      sum += double(busiest_queue_by_step_[i]);
    }
    r.steady_queue_min = lo;
    r.steady_queue_max = hi;
    r.steady_queue_mean = sum / double(last_step - first_step);
  }
  r.trace = std::move(trace_);
  return r;
}

}  // namespace detail

double jain_fairness(const std::vector<double>& values) {
  double sum = 0, sum_squares = 0;
  for (double v : values) {
    sum += v;
    sum_squares += v * v;
  }
  if (values.empty() || sum_squares == 0) return 1.0;
  return sum * sum / (double(values.size()) * sum_squares);
}

}  // namespace gpuwire::sim
