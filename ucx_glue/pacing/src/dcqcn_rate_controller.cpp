#include "gpuwire/pacing/dcqcn_rate_controller.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpuwire::pacing {
namespace {

constexpr std::uint64_t kMicrosecond = 1'000;
constexpr std::uint64_t kSecond = 1'000'000'000;
constexpr unsigned kStageLimit = 1'000'000;  // stage counters saturate here
// Timer steps run one at a time while the rate is recovering; a caller that
// slept for seconds gets at most this many, then the rest are skipped.
constexpr unsigned kMaxStepsPerAdvance = 10'000;

std::string out_of_range(const char* field, double value, const char* range) {
  char line[160];
  std::snprintf(line, sizeof line, "dcqcn: %s = %g is out of range %s", field, value, range);
  return line;
}

}  // namespace

std::string check_dcqcn_config(const DcqcnConfig& c) {
  // Written so that NaN fails every check.
  if (!(c.line_rate_gbps > 0.0 && c.line_rate_gbps <= 3200.0)) {
    return out_of_range("line_rate_gbps", c.line_rate_gbps, "(0, 3200]");
  }
  if (!(c.min_rate_gbps > 0.0 && c.min_rate_gbps <= c.line_rate_gbps)) {
    return out_of_range("min_rate_gbps", c.min_rate_gbps, "(0, line_rate_gbps]");
  }
  if (!(c.g > 0.0 && c.g < 1.0)) return out_of_range("g", c.g, "(0, 1)");
  if (!(c.initial_alpha >= 0.0 && c.initial_alpha <= 1.0)) {
    return out_of_range("initial_alpha", c.initial_alpha, "[0, 1]");
  }
  if (c.alpha_update_period_ns < kMicrosecond || c.alpha_update_period_ns > kSecond) {
    return out_of_range("alpha_update_period_ns", double(c.alpha_update_period_ns), "[1000, 1e9]");
  }
  if (c.rate_increase_period_ns < kMicrosecond || c.rate_increase_period_ns > kSecond) {
    return out_of_range("rate_increase_period_ns", double(c.rate_increase_period_ns),
                        "[1000, 1e9]");
  }
  if (c.rate_decrease_interval_ns > kSecond) {
    return out_of_range("rate_decrease_interval_ns", double(c.rate_decrease_interval_ns),
                        "[0, 1e9]");
  }
  if (c.byte_counter_bytes < 1024 || c.byte_counter_bytes > (1ULL << 40)) {
    return out_of_range("byte_counter_bytes", double(c.byte_counter_bytes), "[1024, 2^40]");
  }
  if (c.fast_recovery_steps < 1 || c.fast_recovery_steps > 1000) {
    return out_of_range("fast_recovery_steps", c.fast_recovery_steps, "[1, 1000]");
  }
  if (!(c.additive_increase_gbps >= 0.0 && c.additive_increase_gbps <= c.line_rate_gbps)) {
    return out_of_range("additive_increase_gbps", c.additive_increase_gbps, "[0, line_rate_gbps]");
  }
  if (!(c.hyper_increase_gbps >= 0.0 && c.hyper_increase_gbps <= c.line_rate_gbps)) {
    return out_of_range("hyper_increase_gbps", c.hyper_increase_gbps, "[0, line_rate_gbps]");
  }
  return {};
}

DcqcnConfig dcqcn_config_for_rate(double line_rate_gbps, const DcqcnConfig& base) {
  DcqcnConfig c = base;
  c.line_rate_gbps = line_rate_gbps;
  if (line_rate_gbps > 0.0 && line_rate_gbps < kDcqcnReferenceGbps) {
    const double scale = line_rate_gbps / kDcqcnReferenceGbps;
    c.min_rate_gbps *= scale;
    c.additive_increase_gbps *= scale;
    c.hyper_increase_gbps *= scale;
  }
  return c;
}

std::optional<DcqcnRateController> DcqcnRateController::create(const DcqcnConfig& config,
                                                               std::uint64_t now_ns,
                                                               std::string& error) {
  if (auto bad = check_dcqcn_config(config); !bad.empty()) {
    error = std::move(bad);
    return std::nullopt;
  }
  return DcqcnRateController(config, now_ns);
}

DcqcnRateController::DcqcnRateController(const DcqcnConfig& config, std::uint64_t now_ns)
    : config_(config),
      current_gbps_(config.line_rate_gbps),
      target_gbps_(config.line_rate_gbps),
      alpha_(config.initial_alpha),
      alpha_deadline_ns_(now_ns + config.alpha_update_period_ns),
      increase_deadline_ns_(now_ns + config.rate_increase_period_ns) {}

bool DcqcnRateController::at_line_rate() const { return current_gbps_ >= config_.line_rate_gbps; }

void DcqcnRateController::cut_rate(std::uint64_t now_ns, double share) {
  target_gbps_ = current_gbps_;
  current_gbps_ = std::max(config_.min_rate_gbps, current_gbps_ * (1.0 - share * alpha_ / 2.0));
  alpha_ = (1.0 - config_.g) * alpha_ + config_.g;
  timer_stages_ = 0;
  byte_stages_ = 0;
  bytes_in_stage_ = 0;
  increase_deadline_ns_ = now_ns + config_.rate_increase_period_ns;
  alpha_deadline_ns_ = now_ns + config_.alpha_update_period_ns;
  last_cut_ns_ = now_ns;
  cut_before_ = true;
  ++stats_.rate_cuts;
}

void DcqcnRateController::increase_step() {
  const unsigned f = config_.fast_recovery_steps;
  const unsigned high = std::max(timer_stages_, byte_stages_);
  const unsigned low = std::min(timer_stages_, byte_stages_);
  if (high < f) {
    ++stats_.fast_recovery_steps;  // target stays: climb back toward the pre-cut rate
  } else if (low > f) {
    target_gbps_ += double(low - f) * config_.hyper_increase_gbps;
    ++stats_.hyper_steps;
  } else {
    target_gbps_ += config_.additive_increase_gbps;
    ++stats_.additive_steps;
  }
  target_gbps_ = std::min(target_gbps_, config_.line_rate_gbps);
  current_gbps_ = std::min((target_gbps_ + current_gbps_) / 2.0, config_.line_rate_gbps);
  // Halving the gap never closes it; snap once it is negligible so the
  // controller can tell it has recovered and stop stepping.
  if (target_gbps_ - current_gbps_ <= 1e-6 * config_.line_rate_gbps) current_gbps_ = target_gbps_;
}

void DcqcnRateController::advance(std::uint64_t now_ns) {
  if (now_ns >= alpha_deadline_ns_) {
    const std::uint64_t periods =
        (now_ns - alpha_deadline_ns_) / config_.alpha_update_period_ns + 1;
    alpha_ *= std::pow(1.0 - config_.g, double(periods));
    alpha_deadline_ns_ += periods * config_.alpha_update_period_ns;
  }
  unsigned steps = 0;
  while (now_ns >= increase_deadline_ns_) {
    if (at_line_rate() || steps == kMaxStepsPerAdvance) {
      // Nothing left to recover (or the caller slept): skip the periods in bulk.
      const std::uint64_t periods =
          (now_ns - increase_deadline_ns_) / config_.rate_increase_period_ns + 1;
      increase_deadline_ns_ += periods * config_.rate_increase_period_ns;
      timer_stages_ = unsigned(std::min<std::uint64_t>(timer_stages_ + periods, kStageLimit));
      break;
    }
    timer_stages_ = std::min(timer_stages_ + 1, kStageLimit);
    increase_step();
    increase_deadline_ns_ += config_.rate_increase_period_ns;
    ++steps;
  }
}

std::uint64_t DcqcnRateController::next_deadline_ns() const {
  return std::min(alpha_deadline_ns_, increase_deadline_ns_);
}

void DcqcnRateController::on_congestion_notifications(std::uint64_t count, std::uint64_t now_ns,
                                                      std::uint32_t active_flows) {
  if (count == 0) return;
  advance(now_ns);
  stats_.cnps += count;
  const bool interval_over =
      now_ns >= last_cut_ns_ && now_ns - last_cut_ns_ >= config_.rate_decrease_interval_ns;
  if (!cut_before_ || interval_over) {
    const double flows = active_flows == 0 ? 1.0 : double(active_flows);
    cut_rate(now_ns, std::min(1.0, double(count) / flows));
  } else {
    // Congestion persists inside the decrease interval: no second cut, but
    // alpha must not decay as if the period had been quiet.
    alpha_deadline_ns_ = now_ns + config_.alpha_update_period_ns;
  }
}

void DcqcnRateController::on_bytes_sent(std::uint64_t bytes, std::uint64_t now_ns) {
  // Stages only matter while recovering; a cut restarts them anyway.
  if (at_line_rate()) return;
  bytes_in_stage_ += bytes;
  while (bytes_in_stage_ >= config_.byte_counter_bytes) {
    bytes_in_stage_ -= config_.byte_counter_bytes;
    byte_stages_ = std::min(byte_stages_ + 1, kStageLimit);
    increase_step();
    if (at_line_rate()) {
      bytes_in_stage_ = 0;
      break;
    }
  }
}

}  // namespace gpuwire::pacing
