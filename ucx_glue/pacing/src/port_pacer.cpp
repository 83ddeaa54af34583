#include "gpuwire/pacing/port_pacer.hpp"

namespace gpuwire::pacing {
namespace {

constexpr double kBytesPerNsPerGbps = 1.0 / 8.0;

}  // namespace

std::string check_pacer_config(const PacerConfig& c) {
  if (c.rendezvous_threshold_bytes < 1 || c.rendezvous_threshold_bytes > (1ULL << 40)) {
    return "pacer: rendezvous_threshold_bytes = " + std::to_string(c.rendezvous_threshold_bytes) +
           " is out of range [1, 2^40]";
  }
  if (c.burst_bytes < 4096 || c.burst_bytes > (1ULL << 30)) {
    return "pacer: burst_bytes = " + std::to_string(c.burst_bytes) +
           " is out of range [4096, 2^30]";
  }
  return check_dcqcn_config(c.rate);
}

std::optional<PortPacer> PortPacer::create(const PacerConfig& config, const Clock& clock,
                                           std::string& error) {
  if (auto bad = check_pacer_config(config); !bad.empty()) {
    error = std::move(bad);
    return std::nullopt;
  }
  auto rate = DcqcnRateController::create(config.rate, clock.now_ns(), error);
  if (!rate) return std::nullopt;
  return PortPacer(config, clock, *rate);
}

PortPacer::PortPacer(const PacerConfig& config, const Clock& clock, DcqcnRateController rate)
    : threshold_(config.rendezvous_threshold_bytes),
      clock_(&clock),
      rate_(rate),
      bucket_(rate.current_rate_gbps() * kBytesPerNsPerGbps, double(config.burst_bytes),
              clock.now_ns()),
      next_deadline_ns_(rate.next_deadline_ns()),
      bucket_rate_gbps_(rate.current_rate_gbps()) {}

void PortPacer::sync_bucket_rate(std::uint64_t now_ns) {
  const double gbps = rate_.current_rate_gbps();
  if (gbps != bucket_rate_gbps_) {
    bucket_.set_rate(gbps * kBytesPerNsPerGbps, now_ns);
    bucket_rate_gbps_ = gbps;
  }
}

void PortPacer::advance(std::uint64_t now_ns) {
  rate_.advance(now_ns);
  next_deadline_ns_ = rate_.next_deadline_ns();
  sync_bucket_rate(now_ns);
}

void PortPacer::on_congestion_notifications(std::uint64_t new_cnps, std::uint64_t now_ns,
                                            std::uint32_t active_flows) {
  if (new_cnps == 0) return;
  rate_.on_congestion_notifications(new_cnps, now_ns, active_flows);
  next_deadline_ns_ = rate_.next_deadline_ns();
  sync_bucket_rate(now_ns);
}

AdmissionDecision PortPacer::admit_paced(std::uint64_t chunk_bytes, std::uint64_t now_ns) {
  if (now_ns >= next_deadline_ns_) advance(now_ns);
  if (!bucket_.try_take(chunk_bytes, now_ns)) {
    ++stats_.deferrals;
    return {false, bucket_.ready_at_ns(now_ns)};
  }
  ++stats_.admitted_chunks;
  stats_.admitted_bytes += chunk_bytes;
  rate_.on_bytes_sent(chunk_bytes, now_ns);
  sync_bucket_rate(now_ns);
  return {true, 0};
}

}  // namespace gpuwire::pacing
