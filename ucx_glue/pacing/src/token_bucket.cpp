#include "gpuwire/pacing/token_bucket.hpp"

#include <cmath>

namespace gpuwire::pacing {

double TokenBucket::tokens_at(std::uint64_t now_ns) const {
  if (now_ns <= last_ns_) return tokens_;
  const double filled = tokens_ + double(now_ns - last_ns_) * rate_;
  return filled < burst_ ? filled : burst_;
}

std::uint64_t TokenBucket::ready_at_ns(std::uint64_t now_ns) const {
  const double tokens = tokens_at(now_ns);
  if (tokens >= 0.0) return now_ns;
  // Debt is paid back from the last refill on; a stale `now_ns` before it
  // must not be the base.
  const std::uint64_t base = now_ns > last_ns_ ? now_ns : last_ns_;
  std::uint64_t ready = base + static_cast<std::uint64_t>(std::ceil(-tokens / rate_));
  // Rounding can leave the bucket a hair in debt at the computed time; the
  // promise is that try_take succeeds then.
  while (tokens_at(ready) < 0.0) ++ready;
  return ready;
}

}  // namespace gpuwire::pacing
