#include "gpuwire/pacing/receiver_credit_gate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpuwire::pacing {
namespace {

constexpr double kBytesPerNsPerGbps = 1.0 / 8.0;

}  // namespace

std::string check_receiver_credit_config(const ReceiverCreditConfig& c) {
  if (c.chunk_bytes < 4096 || c.chunk_bytes > (1ULL << 30)) {
    return "credits: chunk_bytes = " + std::to_string(c.chunk_bytes) +
           " is out of range [4096, 2^30]";
  }
  if (c.window_bytes < c.chunk_bytes || c.window_bytes > (1ULL << 40)) {
    return "credits: window_bytes = " + std::to_string(c.window_bytes) +
           " is out of range [chunk_bytes, 2^40]";
  }
  if (!(c.link_gbps > 0.0 && c.link_gbps <= 3200.0)) {
    return "credits: link_gbps = " + std::to_string(c.link_gbps) + " is out of range (0, 3200]";
  }
  if (!(c.grant_headroom >= 0.0 && c.grant_headroom < 0.5)) {
    return "credits: grant_headroom = " + std::to_string(c.grant_headroom) +
           " is out of range [0, 0.5)";
  }
  if (c.grant_burst_bytes > c.window_bytes) {
    return "credits: grant_burst_bytes = " + std::to_string(c.grant_burst_bytes) +
           " is out of range [0, window_bytes]";
  }
  if (c.max_senders < 1 || c.max_senders > (1u << 24)) {
    return "credits: max_senders = " + std::to_string(c.max_senders) + " is out of range [1, 2^24]";
  }
  return {};
}

std::uint64_t recommended_window_bytes(double link_gbps, std::uint64_t round_trip_ns,
                                       std::uint64_t chunk_bytes) {
  const double bdp = link_gbps * kBytesPerNsPerGbps * double(round_trip_ns);
  return static_cast<std::uint64_t>(std::ceil(bdp)) + 2 * chunk_bytes;
}

std::optional<ReceiverCreditGate> ReceiverCreditGate::create(const ReceiverCreditConfig& config,
                                                             std::uint64_t now_ns,
                                                             std::string& error) {
  if (auto bad = check_receiver_credit_config(config); !bad.empty()) {
    error = std::move(bad);
    return std::nullopt;
  }
  return ReceiverCreditGate(config, now_ns);
}

ReceiverCreditGate::ReceiverCreditGate(const ReceiverCreditConfig& config, std::uint64_t now_ns)
    : config_(config),
      grant_pacing_(config.link_gbps * (1.0 - config.grant_headroom) * kBytesPerNsPerGbps,
                    double(config.grant_burst_bytes), now_ns) {}

bool ReceiverCreditGate::add_demand(std::uint32_t sender, std::uint64_t bytes) {
  if (sender >= config_.max_senders || bytes == 0) return false;
  if (sender >= demand_.size()) demand_.resize(std::size_t(sender) + 1, 0);
  if (demand_[sender] == 0) ready_.push_back(sender);  // not queued while it had no demand
  demand_[sender] += bytes;
  return true;
}

std::uint64_t ReceiverCreditGate::cancel_demand(std::uint32_t sender) {
  if (sender >= demand_.size() || demand_[sender] == 0) return 0;
  const std::uint64_t dropped = demand_[sender];
  demand_[sender] = 0;
  ready_.erase(std::find(ready_.begin(), ready_.end(), sender));
  return dropped;
}

std::uint64_t ReceiverCreditGate::demand_bytes(std::uint32_t sender) const {
  return sender < demand_.size() ? demand_[sender] : 0;
}

std::uint64_t ReceiverCreditGate::head_grant_bytes() const {
  return std::min(config_.chunk_bytes, demand_[ready_.front()]);
}

std::optional<CreditGrant> ReceiverCreditGate::next_grant(std::uint64_t now_ns) {
  if (ready_.empty()) return std::nullopt;
  const std::uint32_t sender = ready_.front();
  const std::uint64_t bytes = head_grant_bytes();
  if (in_flight_ + bytes > config_.window_bytes) {
    ++stats_.window_stalls;
    return std::nullopt;
  }
  if (!grant_pacing_.try_take(bytes, now_ns)) {
    ++stats_.pacing_stalls;
    return std::nullopt;
  }
  ready_.pop_front();
  demand_[sender] -= bytes;
  if (demand_[sender] > 0) ready_.push_back(sender);
  in_flight_ += bytes;
  ++stats_.grants;
  stats_.granted_bytes += bytes;
  return CreditGrant{sender, bytes};
}

std::uint64_t ReceiverCreditGate::next_grant_time_ns(std::uint64_t now_ns) const {
  if (ready_.empty()) return std::numeric_limits<std::uint64_t>::max();
  if (in_flight_ + head_grant_bytes() > config_.window_bytes) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return grant_pacing_.ready_at_ns(now_ns);
}

bool ReceiverCreditGate::release(std::uint64_t bytes) {
  stats_.released_bytes += bytes;
  if (bytes > in_flight_) {
    in_flight_ = 0;
    return false;
  }
  in_flight_ -= bytes;
  return true;
}

}  // namespace gpuwire::pacing
