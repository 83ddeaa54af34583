#include "gpuwire/pacing/clock.hpp"

#include <time.h>

namespace gpuwire::pacing {

std::uint64_t SteadyClock::now_ns() const {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace gpuwire::pacing
