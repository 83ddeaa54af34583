#include "gpuwire/pacing/dcqcn_rate_controller.hpp"

#include <algorithm>
#include <functional>
#include <vector>

#include "gw_catch.hpp"

using namespace gpuwire::pacing;

namespace {

constexpr std::uint64_t us = 1'000;

DcqcnRateController make(const DcqcnConfig& config = {}, std::uint64_t now = 0) {
  std::string error;
  auto c = DcqcnRateController::create(config, now, error);
  REQUIRE(c);
  return *c;
}

}  // namespace

TEST_CASE("defaults are the DCQCN constants", "[pacing][dcqcn]") {
  const DcqcnConfig d;
  CHECK(check_dcqcn_config(d).empty());
  CHECK(d.g == 1.0 / 256.0);
  CHECK(d.alpha_update_period_ns == 55 * us);
  CHECK(d.rate_increase_period_ns == 60 * us);
  CHECK(d.rate_decrease_interval_ns == 50 * us);
  CHECK(d.byte_counter_bytes == 300'000);
  CHECK(d.fast_recovery_steps == 5);
  CHECK(d.additive_increase_gbps == 0.04);
  CHECK(d.hyper_increase_gbps == 0.2);
}

TEST_CASE("every DcqcnConfig field is range-checked with one line", "[pacing][dcqcn]") {
  using Mutator = std::function<void(DcqcnConfig&)>;
  const std::vector<std::pair<const char*, Mutator>> cases = {
      {"line_rate_gbps", [](DcqcnConfig& c) { c.line_rate_gbps = 0; }},
      {"line_rate_gbps", [](DcqcnConfig& c) { c.line_rate_gbps = 5000; }},
      {"min_rate_gbps", [](DcqcnConfig& c) { c.min_rate_gbps = 0; }},
      {"min_rate_gbps", [](DcqcnConfig& c) { c.min_rate_gbps = 200; }},
      {"g", [](DcqcnConfig& c) { c.g = 0; }},
      {"g", [](DcqcnConfig& c) { c.g = 1; }},
      {"initial_alpha", [](DcqcnConfig& c) { c.initial_alpha = 1.5; }},
      {"alpha_update_period_ns", [](DcqcnConfig& c) { c.alpha_update_period_ns = 10; }},
      {"rate_increase_period_ns", [](DcqcnConfig& c) { c.rate_increase_period_ns = 0; }},
      {"rate_decrease_interval_ns",
       [](DcqcnConfig& c) { c.rate_decrease_interval_ns = 2'000'000'000; }},
      {"byte_counter_bytes", [](DcqcnConfig& c) { c.byte_counter_bytes = 10; }},
      {"fast_recovery_steps", [](DcqcnConfig& c) { c.fast_recovery_steps = 0; }},
      {"additive_increase_gbps", [](DcqcnConfig& c) { c.additive_increase_gbps = -1; }},
      {"hyper_increase_gbps", [](DcqcnConfig& c) { c.hyper_increase_gbps = 101; }},
  };
  for (const auto& [field, mutate] : cases) {
    DcqcnConfig c;
    mutate(c);
    const std::string error = check_dcqcn_config(c);
    INFO(field);
    CHECK(error.find(std::string("dcqcn: ") + field + " = ") == 0);
    CHECK(error.find('\n') == std::string::npos);
    std::string out;
    CHECK_FALSE(DcqcnRateController::create(c, 0, out));
    CHECK(out == error);
  }
}

TEST_CASE("a CNP cuts the rate by alpha/2 and raises alpha", "[pacing][dcqcn]") {
  auto c = make();
  CHECK(c.current_rate_gbps() == 100.0);
  CHECK(c.alpha() == 1.0);
  c.on_congestion_notifications(0, 1 * us);  // nothing new: nothing happens
  CHECK(c.current_rate_gbps() == 100.0);

  c.on_congestion_notifications(3, 1 * us);  // several at once: one cut
  CHECK(c.current_rate_gbps() == Approx(50.0));
  CHECK(c.target_rate_gbps() == Approx(100.0));
  CHECK(c.alpha() == Approx(1.0));
  CHECK(c.stats().cnps == 3);
  CHECK(c.stats().rate_cuts == 1);

  c.on_congestion_notifications(1, 30 * us);  // inside the decrease interval
  CHECK(c.current_rate_gbps() == Approx(50.0));
  CHECK(c.stats().rate_cuts == 1);

  c.on_congestion_notifications(1, 51 * us);
  CHECK(c.current_rate_gbps() == Approx(25.0));
  CHECK(c.target_rate_gbps() == Approx(50.0));
  CHECK(c.stats().rate_cuts == 2);
}

TEST_CASE("a port cut is scaled by the share of its flows notified", "[pacing][dcqcn]") {
  auto c = make();
  c.on_congestion_notifications(2, 0, 8);  // 2 of 8 flows: a quarter of a full cut
  CHECK(c.current_rate_gbps() == Approx(100.0 * (1.0 - 0.25 * 0.5)));
  CHECK(c.target_rate_gbps() == Approx(100.0));
  CHECK(c.alpha() == Approx(1.0));  // alpha tracks congestion, not its extent
  auto d = make();
  d.on_congestion_notifications(20, 0, 8);  // more CNPs than flows: a full cut
  CHECK(d.current_rate_gbps() == Approx(50.0));
  auto e = make();
  e.on_congestion_notifications(1, 0, 0);  // zero flows counts as one
  CHECK(e.current_rate_gbps() == Approx(50.0));
}

TEST_CASE("alpha decays by (1-g) per quiet period and sets the next cut", "[pacing][dcqcn]") {
  auto c = make();
  c.on_congestion_notifications(1, 0);
  c.advance(10 * 55 * us);
  const double g = 1.0 / 256.0;
  CHECK(c.alpha() == Approx(std::pow(1.0 - g, 10)));
  const double alpha = c.alpha();
  const double before = c.current_rate_gbps();
  c.on_congestion_notifications(1, 10 * 55 * us);
  CHECK(c.current_rate_gbps() == Approx(before * (1.0 - alpha / 2.0)));
  CHECK(c.alpha() == Approx((1.0 - g) * alpha + g));
}

TEST_CASE("a CNP inside the decrease interval stops alpha decaying", "[pacing][dcqcn]") {
  auto c = make();
  c.on_congestion_notifications(1, 0);
  c.on_congestion_notifications(1, 40 * us);  // no cut, but the alpha period restarts
  c.advance(90 * us);                         // 50 us after it: not yet a quiet period
  CHECK(c.alpha() == Approx(1.0));
  c.advance(95 * us);
  CHECK(c.alpha() == Approx(1.0 - 1.0 / 256.0));
}

TEST_CASE("timer stages: F fast-recovery steps, then additive increase", "[pacing][dcqcn]") {
  auto c = make();
  c.on_congestion_notifications(1, 0);        // 100 -> 50, target 100
  c.on_congestion_notifications(1, 50 * us);  // 50 -> 25, target 50
  REQUIRE(c.current_rate_gbps() == Approx(25.0));
  const std::uint64_t t0 = 50 * us;
  const double expected_fast[] = {37.5, 43.75, 46.875, 48.4375};
  for (int i = 0; i < 4; ++i) {
    c.advance(t0 + (i + 1) * 60 * us);
    CHECK(c.current_rate_gbps() == Approx(expected_fast[i]));
    CHECK(c.target_rate_gbps() == Approx(50.0));
  }
  c.advance(t0 + 5 * 60 * us);  // stage F: additive
  CHECK(c.target_rate_gbps() == Approx(50.04));
  CHECK(c.current_rate_gbps() == Approx((50.04 + 48.4375) / 2));
  CHECK(c.stats().fast_recovery_steps == 4);
  CHECK(c.stats().additive_steps == 1);
  CHECK(c.stats().hyper_steps == 0);
}

TEST_CASE("hyper increase needs both timer and byte stages past F", "[pacing][dcqcn]") {
  DcqcnConfig config;
  config.line_rate_gbps = 400;
  auto c = make(config);
  c.on_congestion_notifications(1, 0);
  c.on_congestion_notifications(1, 50 * us);  // 400 -> 200 -> 100, target 200
  const std::uint64_t t0 = 50 * us;
  c.on_bytes_sent(6 * 300'000, t0 + 1);  // byte stages 1..6: 4 fast, 2 additive
  CHECK(c.stats().fast_recovery_steps == 4);
  CHECK(c.stats().additive_steps == 2);
  for (int t = 1; t <= 5; ++t) c.advance(t0 + t * 60 * us);  // timer stages 1..5: additive
  CHECK(c.stats().additive_steps == 7);
  CHECK(c.stats().hyper_steps == 0);
  const double target = c.target_rate_gbps();
  c.advance(t0 + 6 * 60 * us);  // timer 6, bytes 6: min = 6 > F
  CHECK(c.stats().hyper_steps == 1);
  CHECK(c.target_rate_gbps() == Approx(target + 0.2));
  c.on_bytes_sent(300'000, t0 + 6 * 60 * us + 1);  // bytes 7, timer 6: min still 6
  CHECK(c.target_rate_gbps() == Approx(target + 0.4));
}

TEST_CASE("rates stay within [min_rate, line_rate]", "[pacing][dcqcn]") {
  DcqcnConfig config;
  config.min_rate_gbps = 1.0;
  auto c = make(config);
  for (int i = 0; i < 100; ++i) c.on_congestion_notifications(1, std::uint64_t(i) * 50 * us);
  CHECK(c.current_rate_gbps() == 1.0);
  // Recovery from the floor after a long quiet spell is bounded work and ends at line rate.
  c.advance(10'000'000'000ULL);
  CHECK(c.current_rate_gbps() == Approx(100.0));
  CHECK(c.current_rate_gbps() <= 100.0);
  CHECK(c.target_rate_gbps() <= 100.0);
}

TEST_CASE("at line rate the timers do nothing but age alpha", "[pacing][dcqcn]") {
  auto c = make();
  CHECK(c.next_deadline_ns() == 55 * us);
  c.advance(1'000 * us);
  CHECK(c.current_rate_gbps() == 100.0);
  CHECK(c.stats().fast_recovery_steps == 0);
  CHECK(c.alpha() < 1.0);
  CHECK(c.next_deadline_ns() > 1'000 * us);
  c.on_bytes_sent(10'000'000, 1'000 * us);
  CHECK(c.stats().additive_steps == 0);
}

TEST_CASE("a stale timestamp does not cut twice", "[pacing][dcqcn]") {
  auto c = make({}, 1'000 * us);
  c.on_congestion_notifications(1, 1'000 * us);
  c.on_congestion_notifications(1, 999 * us);  // earlier than the cut
  CHECK(c.stats().rate_cuts == 1);
}

TEST_CASE("DCQCN's constants are scaled to line rates below the reference",
          "[pacing][dcqcn]") {
  // pml_gpuwire_pace_mbps allows 1 Mb/s to 3.2 Tb/s: every such rate must
  // give a configuration the controller accepts.
  for (double mbps : {1.0, 39.0, 40.0, 99.0, 100.0, 199.0, 200.0, 1000.0, 99999.0, 100000.0,
                      400000.0, 3200000.0}) {
    const DcqcnConfig c = dcqcn_config_for_rate(mbps / 1000.0);
    INFO(mbps << " Mb/s");
    CHECK(check_dcqcn_config(c).empty());
    CHECK(c.line_rate_gbps == mbps / 1000.0);
    const double scale = std::min(1.0, c.line_rate_gbps / kDcqcnReferenceGbps);
    CHECK(c.additive_increase_gbps == Approx(0.04 * scale));
    CHECK(c.hyper_increase_gbps == Approx(0.2 * scale));
    CHECK(c.min_rate_gbps == Approx(0.1 * scale));
    CHECK(c.min_rate_gbps < c.line_rate_gbps);  // a cut can lower the rate
  }
  // The unscaled constants are what refused 1-199 Mb/s.
  DcqcnConfig raw;
  raw.line_rate_gbps = 0.199;
  raw.min_rate_gbps = 0.001;
  CHECK(check_dcqcn_config(raw).find("hyper_increase_gbps") != std::string::npos);
}

TEST_CASE("a scaled controller recovers in the same steps as at the reference rate",
          "[pacing][dcqcn]") {
  // The same CNP then quiet time at 1 Mb/s and at 100 Gb/s: the rates stay in
  // proportion at every step, so the recovery has the same shape.
  DcqcnRateController slow = make(dcqcn_config_for_rate(0.001));
  DcqcnRateController ref = make(dcqcn_config_for_rate(kDcqcnReferenceGbps));
  slow.on_congestion_notifications(1, 10 * us);
  ref.on_congestion_notifications(1, 10 * us);
  REQUIRE(slow.current_rate_gbps() < 0.001);
  for (std::uint64_t t = 10 * us; t < 20'000 * us; t += 60 * us) {
    slow.advance(t);
    ref.advance(t);
    REQUIRE(slow.current_rate_gbps() / 0.001 ==
            Approx(ref.current_rate_gbps() / kDcqcnReferenceGbps).epsilon(1e-6));
  }
  CHECK(slow.stats().additive_steps == ref.stats().additive_steps);
  CHECK(slow.stats().additive_steps > 0);
  CHECK(slow.current_rate_gbps() == Approx(0.001));
}
