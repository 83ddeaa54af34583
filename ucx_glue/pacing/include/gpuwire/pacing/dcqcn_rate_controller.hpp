// A DCQCN reaction point (Zhu et al., SIGCOMM 2015) as a plain state machine.
//
// The NIC runs DCQCN per QP in hardware; gpuwire runs the same algorithm once
// per port in software, fed by the port's rp_cnp_handled counter, so the
// rate at which it admits rendezvous chunks follows the fabric's congestion
// signal instead of dumping chunks the NIC will only queue.
//
//   on CNP      target = current; current *= (1 - share * alpha/2);
//               alpha = (1 - g) alpha + g; stage counters and timers restart
//   alpha timer every alpha_update_period without a CNP: alpha *= (1 - g)
//   increase    every rate_increase_period (timer stage) and every
//               byte_counter_bytes sent (byte stage):
//                 max(stages) <  F : fast recovery  current = (target + current) / 2
//                 min(stages) >  F : hyper increase target += (min - F) * hyper_increase
//                 otherwise        : additive       target += additive_increase
//               and after either increase current = (target + current) / 2
//
// The controller stands for a whole port, whose counter sums the CNPs of
// every QP on it. Several CNPs seen at once (a counter delta) cause one cut,
// cuts are at least rate_decrease_interval apart, and a cut is scaled by the
// share of the port's active flows that were notified, min(1, cnps / flows):
// the NIC slows only the notified QPs, so the port's total rate drops by
// about that share. With one active flow this is DCQCN exactly.
//
// Threading: not thread-safe; one owner (the engine's progress path).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuwire::pacing {

// Defaults are the constants of the DCQCN authors' simulator (ns3-rdma
// mix/config.txt) and paper.
struct DcqcnConfig {
  double line_rate_gbps = 100.0;                     // (0, 3200]
  double min_rate_gbps = 0.1;                        // (0, line_rate_gbps]
  double g = 1.0 / 256.0;                            // (0, 1): alpha's EWMA gain
  double initial_alpha = 1.0;                        // [0, 1]
  std::uint64_t alpha_update_period_ns = 55'000;     // [1 us, 1 s]
  std::uint64_t rate_increase_period_ns = 60'000;    // [1 us, 1 s]
  std::uint64_t rate_decrease_interval_ns = 50'000;  // [0, 1 s]; the CNP interval
  std::uint64_t byte_counter_bytes = 300'000;        // [1 KiB, 1 TiB]
  unsigned fast_recovery_steps = 5;                  // F, [1, 1000]
  double additive_increase_gbps = 0.04;              // [0, line_rate_gbps]
  double hyper_increase_gbps = 0.2;                  // [0, line_rate_gbps]
};

// Empty when every field is in range, else one line naming the first bad one.
std::string check_dcqcn_config(const DcqcnConfig& config);

// The line rate the constants above were chosen for. DCQCN's steps are
// absolute (40 Mb/s additive, 200 Mb/s hyper, 100 Mb/s floor): right from
// this rate up, but above the line rate itself below 200 Mb/s, and a floor
// at or above the line rate means no cut at all.
inline constexpr double kDcqcnReferenceGbps = 100.0;

// `base` for a port of `line_rate_gbps`. The rule: below the reference rate,
// min_rate_gbps, additive_increase_gbps and hyper_increase_gbps are scaled by
// line_rate_gbps / kDcqcnReferenceGbps, so a cut and its recovery take the
// same number of steps, and the same share of the line rate, at any rate; at
// or above it they stay as given. Every line rate in (0, 3200] then passes
// check_dcqcn_config() (when `base` does at the reference rate).
DcqcnConfig dcqcn_config_for_rate(double line_rate_gbps, const DcqcnConfig& base = {});

class DcqcnRateController {
 public:
  struct Stats {
    std::uint64_t cnps = 0;       // notifications reported
    std::uint64_t rate_cuts = 0;  // cuts made (<= cnps)
    std::uint64_t fast_recovery_steps = 0;
    std::uint64_t additive_steps = 0;
    std::uint64_t hyper_steps = 0;
  };

  // Starts at line rate with alpha = initial_alpha. nullopt (and `error` set
  // to one line) when the config is out of range.
  static std::optional<DcqcnRateController> create(const DcqcnConfig& config, std::uint64_t now_ns,
                                                   std::string& error);

  // `count` new CNPs arrived since the last call (0 is a no-op) while
  // `active_flows` flows (QPs toward distinct peers; 0 counts as 1) were
  // sending on the port. Runs the timers up to `now_ns` first.
  void on_congestion_notifications(std::uint64_t count, std::uint64_t now_ns,
                                   std::uint32_t active_flows = 1);

  // `bytes` were sent (admitted); drives the byte counter.
  void on_bytes_sent(std::uint64_t bytes, std::uint64_t now_ns);

  // Runs the alpha and rate-increase timers up to `now_ns`. Cheap when
  // nothing is due; callers may skip it until next_deadline_ns().
  void advance(std::uint64_t now_ns);

  // The earliest time a timer changes something (advance() before it is a no-op).
  std::uint64_t next_deadline_ns() const;

  double current_rate_gbps() const { return current_gbps_; }
  double target_rate_gbps() const { return target_gbps_; }
  double alpha() const { return alpha_; }
  const Stats& stats() const { return stats_; }
  const DcqcnConfig& config() const { return config_; }

 private:
  DcqcnRateController(const DcqcnConfig& config, std::uint64_t now_ns);
  void cut_rate(std::uint64_t now_ns, double share);
  void increase_step();
  bool at_line_rate() const;

  DcqcnConfig config_;
  double current_gbps_;
  double target_gbps_;
  double alpha_;
  unsigned timer_stages_ = 0;
  unsigned byte_stages_ = 0;
  std::uint64_t bytes_in_stage_ = 0;
  std::uint64_t alpha_deadline_ns_;
  std::uint64_t increase_deadline_ns_;
  std::uint64_t last_cut_ns_ = 0;
  bool cut_before_ = false;
  Stats stats_;
};

}  // namespace gpuwire::pacing
