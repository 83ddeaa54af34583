// PortPacer: admits rendezvous chunks onto one NIC port.
//
// Chunks below the rendezvous threshold (eager messages, control traffic)
// are never paced: admit() is one predictable branch for them. Larger chunks
// pass a token bucket whose rate is a DCQCN controller's current rate; the
// owner feeds the controller the port's new CNPs (the rp_cnp_handled counter
// delta from gpuwire_fabric) whenever it polls the counters.
//
//   engine progress:  pacer.on_congestion_notifications(delta, now, peers)  every poll
//   per chunk:        d = pacer.admit(bytes, now);
//                     if (!d.admitted) retry at d.retry_at_ns
//
// Cost: a paced decision is 8-16 ns; a clock read costs 25-45 ns on the
// machines measured (docs/pacing.md), so read the time once per progress
// pass and use admit(bytes, now).
//
// Ownership: holds a non-owning pointer to the Clock, which must outlive it.
// Threading: not thread-safe; one owner (the progress path).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gpuwire/pacing/clock.hpp"
#include "gpuwire/pacing/dcqcn_rate_controller.hpp"
#include "gpuwire/pacing/token_bucket.hpp"

namespace gpuwire::pacing {

struct PacerConfig {
  // Chunks smaller than this pass unpaced; keep equal to the engine's
  // rendezvous threshold. [1, 2^40]
  std::uint64_t rendezvous_threshold_bytes = 8192;
  // How far ahead of the rate the pacer may admit. [4 KiB, 1 GiB]
  std::uint64_t burst_bytes = 256 * 1024;
  DcqcnConfig rate;
};

// Empty when every field is in range, else one line naming the first bad one.
std::string check_pacer_config(const PacerConfig& config);

struct AdmissionDecision {
  bool admitted;
  // When deferred: the time admit() succeeds if the rate does not drop before.
  std::uint64_t retry_at_ns;
};

class PortPacer {
 public:
  struct Stats {
    std::uint64_t admitted_chunks = 0;
    std::uint64_t admitted_bytes = 0;
    std::uint64_t deferrals = 0;
  };

  // nullopt (and `error` set to one line) when the config is out of range.
  static std::optional<PortPacer> create(const PacerConfig& config, const Clock& clock,
                                         std::string& error);

  // True when a chunk of `bytes` goes through the bucket.
  bool paced(std::uint64_t bytes) const { return bytes >= threshold_; }

  // The decision for one chunk at `now_ns`; an admitted chunk is charged.
  AdmissionDecision admit(std::uint64_t chunk_bytes, std::uint64_t now_ns) {
    if (chunk_bytes < threshold_) [[likely]]
      return {true, 0};
    return admit_paced(chunk_bytes, now_ns);
  }
  // Same, reading the clock only for paced chunks.
  AdmissionDecision admit(std::uint64_t chunk_bytes) {
    if (chunk_bytes < threshold_) [[likely]]
      return {true, 0};
    return admit_paced(chunk_bytes, clock_->now_ns());
  }

  // `new_cnps` CNPs were handled by the port since the last call, while
  // chunks toward `active_flows` distinct peers were in flight on it (see
  // DcqcnRateController: the cut is scaled by the share notified).
  void on_congestion_notifications(std::uint64_t new_cnps, std::uint64_t now_ns,
                                   std::uint32_t active_flows = 1);

  // Runs the controller's timers (admit() does this too, when due).
  void advance(std::uint64_t now_ns);

  double rate_gbps() const { return rate_.current_rate_gbps(); }
  const DcqcnRateController& controller() const { return rate_; }
  const Stats& stats() const { return stats_; }
  const Clock& clock() const { return *clock_; }

 private:
  PortPacer(const PacerConfig& config, const Clock& clock, DcqcnRateController rate);
  AdmissionDecision admit_paced(std::uint64_t chunk_bytes, std::uint64_t now_ns);
  void sync_bucket_rate(std::uint64_t now_ns);

  std::uint64_t threshold_;
  const Clock* clock_;
  DcqcnRateController rate_;
  TokenBucket bucket_;
  std::uint64_t next_deadline_ns_;
  double bucket_rate_gbps_;
  Stats stats_;
};

}  // namespace gpuwire::pacing
