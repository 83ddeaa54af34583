#include "gpuwire/pacing/port_pacer.hpp"

#include "gw_catch.hpp"

using namespace gpuwire::pacing;

namespace {

constexpr std::uint64_t us = 1'000;
constexpr std::uint64_t kChunk = 64 * 1024;

PortPacer make(const Clock& clock, PacerConfig config = {}) {
  std::string error;
  auto pacer = PortPacer::create(config, clock, error);
  INFO(error);
  REQUIRE(pacer);
  return std::move(*pacer);
}

// Admits chunks back to back for `duration_ns`, each as soon as allowed;
// returns the achieved rate in Gb/s.
double admitted_rate_gbps(PortPacer& pacer, ManualClock& clock, std::uint64_t duration_ns) {
  const std::uint64_t start = clock.now_ns(), before = pacer.stats().admitted_bytes;
  while (clock.now_ns() < start + duration_ns) {
    const auto d = pacer.admit(kChunk);
    if (!d.admitted) clock.set_ns(d.retry_at_ns);
  }
  return double(pacer.stats().admitted_bytes - before) * 8.0 / double(clock.now_ns() - start);
}

}  // namespace

TEST_CASE("chunks below the rendezvous threshold are never paced", "[pacing][pacer]") {
  ManualClock clock;
  PacerConfig config;
  config.rendezvous_threshold_bytes = 8192;
  auto pacer = make(clock, config);
  // Drive the bucket deep into debt with large chunks...
  while (pacer.admit(kChunk).admitted) {
  }
  // ...small ones still pass and are not counted.
  const auto before = pacer.stats();
  for (int i = 0; i < 1000; ++i) CHECK(pacer.admit(8191).admitted);
  CHECK(pacer.stats().admitted_chunks == before.admitted_chunks);
  CHECK_FALSE(pacer.paced(8191));
  CHECK(pacer.paced(8192));
}

TEST_CASE("large chunks pass the burst, then wait for the rate", "[pacing][pacer]") {
  ManualClock clock(5 * us);
  PacerConfig config;
  config.burst_bytes = 4 * kChunk;
  auto pacer = make(clock, config);
  int admitted = 0;
  while (pacer.admit(kChunk).admitted) ++admitted;
  CHECK(admitted == 5);  // 4 chunks of burst; the 5th is admitted into debt
  const auto d = pacer.admit(kChunk);
  CHECK_FALSE(d.admitted);
  // One chunk of debt at 100 Gb/s = 12.5 bytes/ns.
  CHECK(d.retry_at_ns == 5 * us + (kChunk * 8 + 99) / 100);
  clock.set_ns(d.retry_at_ns - 1);
  CHECK_FALSE(pacer.admit(kChunk).admitted);
  clock.set_ns(d.retry_at_ns);
  CHECK(pacer.admit(kChunk).admitted);
  CHECK(pacer.stats().deferrals == 3);
}

TEST_CASE("without CNPs the pacer admits at line rate", "[pacing][pacer]") {
  ManualClock clock;
  auto pacer = make(clock);
  admitted_rate_gbps(pacer, clock, 100 * us);  // spend the burst
  CHECK(admitted_rate_gbps(pacer, clock, 2'000 * us) == Approx(100.0).epsilon(0.01));
}

TEST_CASE("CNPs lower the admission rate; it recovers when they stop", "[pacing][pacer]") {
  ManualClock clock;
  auto pacer = make(clock);
  admitted_rate_gbps(pacer, clock, 100 * us);
  const std::uint64_t cut_at = clock.now_ns();
  pacer.advance(cut_at);
  const double alpha = pacer.controller().alpha();  // decayed a little while quiet
  pacer.on_congestion_notifications(4, cut_at);
  const double cut_rate = 100.0 * (1.0 - alpha / 2.0);
  CHECK(pacer.rate_gbps() == Approx(cut_rate));
  CHECK(cut_rate == Approx(50.0).epsilon(0.01));
  // Once the bucket is out of debt, chunks are spaced at the cut rate.
  AdmissionDecision d = pacer.admit(kChunk);
  while (d.admitted) d = pacer.admit(kChunk);
  clock.set_ns(d.retry_at_ns);
  REQUIRE(pacer.admit(kChunk).admitted);
  d = pacer.admit(kChunk);
  REQUIRE_FALSE(d.admitted);
  const double spacing_ns = double(kChunk) / (cut_rate / 8.0);
  CHECK(double(d.retry_at_ns - clock.now_ns()) == Approx(spacing_ns).margin(1.0));

  clock.set_ns(cut_at + 55 * us);  // past the decrease interval, before the first increase
  pacer.advance(clock.now_ns());
  const double rate_before = pacer.rate_gbps();
  const double alpha_before = pacer.controller().alpha();
  pacer.on_congestion_notifications(1, clock.now_ns());
  CHECK(rate_before == Approx(cut_rate));
  CHECK(pacer.rate_gbps() == Approx(rate_before * (1.0 - alpha_before / 2.0)));
  CHECK(pacer.controller().stats().rate_cuts == 2);
  // Quiet for 50 ms: timers and the byte counter (driven by admit) bring it back.
  admitted_rate_gbps(pacer, clock, 50'000 * us);
  CHECK(pacer.rate_gbps() > 99.0);
  CHECK(pacer.controller().stats().hyper_steps > 0);
}

TEST_CASE("a port with many peers cuts by the share notified", "[pacing][pacer]") {
  ManualClock clock;
  auto pacer = make(clock);
  pacer.on_congestion_notifications(1, 0, 15);  // one peer of fifteen marked
  CHECK(pacer.rate_gbps() == Approx(100.0 * (1.0 - 0.5 / 15.0)));
}

TEST_CASE("advance() runs the timers without admissions", "[pacing][pacer]") {
  ManualClock clock;
  auto pacer = make(clock);
  pacer.on_congestion_notifications(1, 0);
  CHECK(pacer.rate_gbps() == Approx(50.0));
  pacer.advance(60 * us);
  CHECK(pacer.rate_gbps() == Approx(75.0));
}

TEST_CASE("PacerConfig is range-checked with one line", "[pacing][pacer]") {
  ManualClock clock;
  std::string error;
  PacerConfig config;
  config.rendezvous_threshold_bytes = 0;
  CHECK_FALSE(PortPacer::create(config, clock, error));
  CHECK(error == "pacer: rendezvous_threshold_bytes = 0 is out of range [1, 2^40]");
  config = {};
  config.burst_bytes = 100;
  CHECK(check_pacer_config(config) == "pacer: burst_bytes = 100 is out of range [4096, 2^30]");
  config = {};
  config.rate.g = 2;
  CHECK(check_pacer_config(config).find("dcqcn: g = 2") == 0);
}

// What netns_pace_rate checks only loosely on the wall clock (a shared
// machine's scheduler slows the processes), exactly here: its configuration
// (400 Mb/s, 1 MiB chunks, the default 256 KiB burst, 4 messages of 16 MiB)
// with every request for admission late by up to 4 ms (the burst covers
// 5.2 ms at this rate): the pacer's own admission times give the rate within
// 1 %, and at no time have more bytes been admitted than the rate allows.
TEST_CASE("the pacer holds 400 Mb/s with 1 MiB chunks, however late it is asked",
          "[pacing][pacer]") {
  constexpr std::uint64_t kMiB = 1 << 20, kTotal = 64 * kMiB;
  ManualClock clock(1'000 * us);
  PacerConfig config;
  config.rendezvous_threshold_bytes = 1;
  config.rate = dcqcn_config_for_rate(0.4);
  auto pacer = make(clock, config);
  const double bytes_per_ns = 0.4 / 8.0;
  const std::uint64_t start = clock.now_ns();
  std::uint64_t admitted = 0, last_admit = start, lcg = 12345;
  while (admitted < kTotal) {
    const auto d = pacer.admit(kMiB);
    if (!d.admitted) {
      // Asked again 0 to 4 ms after the pacer said it would admit.
      lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
      clock.set_ns(d.retry_at_ns + (lcg >> 33) % (4'000 * us));
      continue;
    }
    admitted += kMiB;
    last_admit = clock.now_ns();
    // Never ahead of the rate: the burst plus the chunk just admitted.
    REQUIRE(double(admitted) <=
            double(last_admit - start) * bytes_per_ns + double(config.burst_bytes + kMiB));
  }
  // From the first to the last admission, all but the last chunk and the
  // burst were paid for at the rate.
  const double paid = double(kTotal - kMiB - config.burst_bytes);
  const double mbps = paid * 8.0 / double(last_admit - start) * 1000.0;
  CHECK(mbps == Approx(400.0).epsilon(0.01));
  CHECK(pacer.stats().deferrals > 0);
}
