// The pacer's notion of time: nanoseconds from an injectable clock.
//
// Everything in gpuwire_pacing takes "now" either from a Clock or as an
// argument, so tests (and the simulator) drive time by hand and get the same
// answer on every run.
//
// Threading: SteadyClock is thread-safe; ManualClock is not (one owner).
#pragma once

#include <cstdint>

namespace gpuwire::pacing {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds; only differences matter.
  virtual std::uint64_t now_ns() const = 0;
};

// CLOCK_MONOTONIC (a vDSO call, about 20 ns).
class SteadyClock final : public Clock {
 public:
  std::uint64_t now_ns() const override;
};

// Time that moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::uint64_t start_ns = 0) : now_(start_ns) {}
  std::uint64_t now_ns() const override { return now_; }
  void set_ns(std::uint64_t now) { now_ = now; }
  void advance_ns(std::uint64_t delta) { now_ += delta; }

 private:
  std::uint64_t now_;
};

}  // namespace gpuwire::pacing
