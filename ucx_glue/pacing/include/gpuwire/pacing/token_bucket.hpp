// A token bucket that admits whole requests and may go into debt.
//
// A request is admitted whenever the bucket is not in debt, and then takes
// all its bytes, possibly into debt. So a chunk larger than the burst still
// passes, and over any long interval the admitted bytes are at most
// rate * interval + burst + one request.
//
// Threading: not thread-safe; one owner.
#pragma once

#include <cstdint>

namespace gpuwire::pacing {

class TokenBucket {
 public:
  // Starts full. `bytes_per_ns` > 0, `burst_bytes` >= 0 (callers range-check).
  TokenBucket(double bytes_per_ns, double burst_bytes, std::uint64_t now_ns)
      : rate_(bytes_per_ns), burst_(burst_bytes), tokens_(burst_bytes), last_ns_(now_ns) {}

  // Admits and charges `bytes` if the bucket is not in debt at `now_ns`.
  bool try_take(std::uint64_t bytes, std::uint64_t now_ns) {
    refill(now_ns);
    if (tokens_ < 0.0) return false;
    tokens_ -= double(bytes);
    return true;
  }

  // Changes the rate from `now_ns` on (time before it is credited at the old rate).
  void set_rate(double bytes_per_ns, std::uint64_t now_ns) {
    refill(now_ns);
    rate_ = bytes_per_ns;
  }

  // The first time at or after `now_ns` when try_take would admit.
  std::uint64_t ready_at_ns(std::uint64_t now_ns) const;

  // Tokens at `now_ns` (negative while in debt), without changing state.
  double tokens_at(std::uint64_t now_ns) const;

  double bytes_per_ns() const { return rate_; }
  double burst_bytes() const { return burst_; }

 private:
  void refill(std::uint64_t now_ns) {
    if (now_ns <= last_ns_) return;  // a stale timestamp must not mint tokens
    const double filled = tokens_ + double(now_ns - last_ns_) * rate_;
    tokens_ = filled < burst_ ? filled : burst_;
    last_ns_ = now_ns;
  }

  double rate_;
  double burst_;
  double tokens_;
  std::uint64_t last_ns_;
};

}  // namespace gpuwire::pacing
