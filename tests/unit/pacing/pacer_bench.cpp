// Cost of one admission decision of PortPacer.
//
// Not a test: timings depend on the machine. Prints ns per decision for
//   - a chunk below the rendezvous threshold (the branch every eager message pays),
//   - a paced chunk, admitted or deferred, with the caller's timestamp,
//   - the same reading SteadyClock inside admit(), and the clock read alone,
//   - a ReceiverCreditGate grant/release pair.
// Usage: gpuwire_pacer_bench [iterations]   (default 20 million)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpuwire/pacing/port_pacer.hpp"
#include "gpuwire/pacing/receiver_credit_gate.hpp"

using namespace gpuwire::pacing;

namespace {

// Keeps the compiler from discarding a result.
template <typename T>
void keep(const T& value) {
  asm volatile("" : : "g"(&value) : "memory");
}

template <typename Body>
double ns_per_iteration(std::uint64_t iterations, Body&& body) {
  body(iterations / 10);  // warm caches and branch predictors
  const auto start = std::chrono::steady_clock::now();
  body(iterations);
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() / double(iterations);
}

PortPacer make_pacer(const Clock& clock) {
  PacerConfig config;
  config.rate.line_rate_gbps = 400;
  std::string error;
  auto pacer = PortPacer::create(config, clock, error);
  if (!pacer) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::exit(1);
  }
  return std::move(*pacer);
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t iterations = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20'000'000;
  if (iterations < 10) {
    std::fprintf(stderr, "iterations must be at least 10\n");
    return 2;
  }
  SteadyClock steady;
  ManualClock manual;
  std::uint64_t admitted = 0;

  PortPacer small = make_pacer(manual);
  const double below = ns_per_iteration(iterations, [&](std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) admitted += small.admit(4096, i).admitted;  // time unused
  });

  // Time advances 1 ns per decision: at 400 Gb/s (50 bytes/ns) 64 KiB chunks
  // are admitted about once per 1300 decisions, so both outcomes are timed,
  // mostly deferrals (the common case when chunks queue behind the rate).
  PortPacer paced = make_pacer(manual);
  std::uint64_t tick = 0;
  const double above = ns_per_iteration(iterations, [&](std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) admitted += paced.admit(65536, ++tick).admitted;
  });

  // Time advances 1300 ns per decision: nearly every chunk is admitted, which
  // also runs the byte counter and the DCQCN timers.
  PortPacer flowing = make_pacer(manual);
  flowing.on_congestion_notifications(1, 0);  // recovering: the timers do work
  std::uint64_t now = 0;  // shared by the warm-up and the timed run: time never goes back
  const double admitting = ns_per_iteration(iterations, [&](std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i, now += 1300) {
      admitted += flowing.admit(65536, now).admitted;
    }
  });

  std::uint64_t clock_sum = 0;
  const double clock_read = ns_per_iteration(iterations, [&](std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) clock_sum += steady.now_ns();
  });
  keep(clock_sum);

  PortPacer clocked = make_pacer(steady);
  const double with_clock = ns_per_iteration(iterations, [&](std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) admitted += clocked.admit(65536).admitted;
  });

  ReceiverCreditConfig credit_config;
  credit_config.link_gbps = 3200;
  credit_config.grant_burst_bytes = credit_config.window_bytes;
  std::string error;
  auto gate = ReceiverCreditGate::create(credit_config, 0, error);
  if (!gate) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  for (std::uint32_t s = 0; s < 64; ++s) gate->add_demand(s, ~0ULL >> 8);
  now = 0;
  const double grant = ns_per_iteration(iterations, [&](std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i, now += 100) {
      if (auto g = gate->next_grant(now)) gate->release(g->bytes);
    }
  });
  keep(admitted);

  std::printf("PortPacer admission decision, ns per call (%llu calls each)\n",
              static_cast<unsigned long long>(iterations));
  std::printf("  below rendezvous threshold (one branch)      %6.2f\n", below);
  std::printf("  paced, caller's timestamp, mostly deferred   %6.2f\n", above);
  std::printf("  paced, caller's timestamp, mostly admitted   %6.2f\n", admitting);
  std::printf("  paced, SteadyClock read inside admit()       %6.2f\n", with_clock);
  std::printf("  (SteadyClock::now_ns alone                   %6.2f)\n", clock_read);
  std::printf("ReceiverCreditGate grant + release, 64 senders %6.2f\n", grant);
  return 0;
}
