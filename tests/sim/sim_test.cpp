// The simulator's parts, and what it must show: gpuwire's pacer keeps an
// incast or an all-to-all free of PFC at full, fair utilisation, and without
// it DCQCN behaves as published.
#include "egress_port.hpp"
#include "fabric_sim.hpp"
#include "gw_catch.hpp"

using namespace gpuwire::sim;

namespace {

// Messages sized so the busiest link needs `ideal_us` at line rate.
std::uint64_t bytes_for(double gbps, double ideal_us) {
  return std::uint64_t(gbps / 8.0 * 1e3 * ideal_us);
}

SimConfig config_for(double gbps, PacingMode mode) {
  SimConfig c;
  c.link_gbps = gbps;
  c.mode = mode;
  REQUIRE(check_sim_config(c).empty());
  return c;
}

}  // namespace

TEST_CASE("RED: nothing below Kmin, a ramp to Pmax at Kmax, everything above", "[sim]") {
  const SwitchConfig s;
  CHECK(red_mark_probability(0, s) == 0.0);
  CHECK(red_mark_probability(s.ecn_kmin_bytes, s) == 0.0);
  CHECK(red_mark_probability((s.ecn_kmin_bytes + s.ecn_kmax_bytes) / 2, s) ==
        Approx(s.ecn_pmax / 2).epsilon(0.01));
  CHECK(red_mark_probability(s.ecn_kmax_bytes, s) == Approx(s.ecn_pmax));
  CHECK(red_mark_probability(s.ecn_kmax_bytes + 1, s) == 1.0);
}

TEST_CASE("an egress port pauses its senders above XOFF and resumes them below XON", "[sim]") {
  SwitchConfig s;
  s.pfc_xoff_bytes = 10'000;
  s.pfc_xon_bytes = 5'000;
  EgressPort port(s, 4);
  std::vector<std::uint32_t> pause, resume;
  port.enqueue({0, 1, 4000, false}, 1.0, pause);
  port.enqueue({0, 2, 4000, false}, 1.0, pause);
  CHECK(pause.empty());
  port.enqueue({0, 2, 4000, false}, 1.0, pause);  // 12000 > XOFF: both contributors
  CHECK(pause == std::vector<std::uint32_t>{1, 2});
  port.enqueue({0, 3, 100, false}, 1.0, pause);  // a newcomer while above XOFF
  CHECK(pause == std::vector<std::uint32_t>{1, 2, 3});
  CHECK(port.pause_frames() == 3);
  port.dequeue(resume);  // 8100: above XON
  CHECK(resume.empty());
  port.dequeue(resume);  // 4100: below XON
  CHECK(resume == std::vector<std::uint32_t>{1, 2, 3});
  CHECK(port.queue_bytes() == 4100);
}

TEST_CASE("ECN marks are drawn against the RED probability", "[sim]") {
  SwitchConfig s;
  EgressPort port(s, 2);
  std::vector<std::uint32_t> pause;
  for (int i = 0; i < 60; ++i) port.enqueue({0, 0, 4096, false}, 0.5, pause);  // 245 KB > Kmax
  CHECK(port.marked_packets() == 60 - 49);  // marked once the queue passed Kmax
}

TEST_CASE("Jain's fairness index", "[sim]") {
  CHECK(jain_fairness({}) == 1.0);
  CHECK(jain_fairness({5, 5, 5, 5}) == Approx(1.0));
  CHECK(jain_fairness({1, 0, 0, 0}) == Approx(0.25));
  CHECK(jain_fairness({3, 1}) == Approx(16.0 / 20.0));
}

TEST_CASE("scenarios and config checks", "[sim]") {
  const Scenario incast = make_incast(8, 1000);
  CHECK(incast.hosts == 9);
  CHECK(incast.flows.size() == 8);
  CHECK(incast.flows[7].src == 8);
  CHECK(incast.flows[7].dst == 0);
  const Scenario a2a = make_all_to_all(16, 1000);
  CHECK(a2a.flows.size() == 16 * 15);
  CHECK(a2a.flows[0].dst == 1);
  CHECK(a2a.flows[15].dst == 2);

  CHECK(check_scenario(incast).empty());
  CHECK(check_scenario(a2a).empty());
  Scenario bad = make_incast(2, 1000);
  bad.flows.push_back({1, 0, 5});
  CHECK(check_scenario(bad) == "sim: scenario 'incast 2:1' has two flows 1 -> 0");
  bad.flows.back() = {3, 0, 5};
  CHECK(check_scenario(bad).find("has a flow 3 -> 0") != std::string::npos);
  CHECK_THROWS_AS(run_simulation(bad, SimConfig{}), std::invalid_argument);

  SimConfig c;
  CHECK(check_sim_config(c).empty());
  c.switch_config.pfc_xoff_bytes = c.switch_config.ecn_kmax_bytes;
  CHECK(check_sim_config(c).find("sim: pfc_xoff_bytes = ") == 0);
  c = {};
  c.step_ns = 0;
  CHECK(check_sim_config(c).find("sim: step_ns = 0 is out of range") == 0);
  c = {};
  c.credits.chunk_bytes = 10;
  CHECK(check_sim_config(c).find("sim: credits: credits: chunk_bytes") == 0);
  c = {};
  c.nic_dcqcn.g = 0;
  CHECK(check_sim_config(c).find("sim: nic_dcqcn: dcqcn: g = 0") == 0);
}

TEST_CASE("with gpuwire's pacer an incast never pauses the fabric", "[sim]") {
  for (double gbps : {100.0, 400.0}) {
    for (std::uint32_t n : {2u, 4u, 8u, 16u, 32u, 64u}) {
      const SimResult r = run_simulation(make_incast(n, bytes_for(gbps, 2000) / n),
                                         config_for(gbps, PacingMode::GpuwirePacer));
      INFO(n << " senders at " << gbps << " Gb/s");
      REQUIRE(r.finished);
      CHECK(r.pfc_pause_frames == 0);
      CHECK(r.utilization >= 0.95);
      CHECK(r.jain_fairness >= 0.99);
      CHECK(r.peak_queue_bytes < SwitchConfig{}.ecn_kmax_bytes);
    }
  }
}

TEST_CASE("with gpuwire's pacer a 16-host all-to-all never pauses the fabric", "[sim]") {
  for (double gbps : {100.0, 400.0}) {
    const SimResult r = run_simulation(make_all_to_all(16, bytes_for(gbps, 2000) / 15),
                                       config_for(gbps, PacingMode::GpuwirePacer));
    INFO(gbps << " Gb/s");
    REQUIRE(r.finished);
    CHECK(r.pfc_pause_frames == 0);
    CHECK(r.utilization >= 0.95);
    CHECK(r.jain_fairness >= 0.99);
  }
}

TEST_CASE("the same incasts without the pacer, or with the sender side alone, pause", "[sim]") {
  // Identical scenario and fabric; only the mode differs, so the credits are
  // what keeps PFC away.
  for (double gbps : {100.0, 400.0}) {
    const Scenario incast = make_incast(16, bytes_for(gbps, 2000) / 16);
    const SimResult dcqcn = run_simulation(incast, config_for(gbps, PacingMode::NicDcqcnOnly));
    const SimResult sender = run_simulation(incast, config_for(gbps, PacingMode::SenderPacerOnly));
    INFO(gbps << " Gb/s");
    CHECK(dcqcn.pfc_pause_frames > 0);
    CHECK(dcqcn.peak_queue_bytes > SwitchConfig{}.pfc_xoff_bytes);
    CHECK(sender.pfc_pause_frames > 0);
  }
}

TEST_CASE("DCQCN alone: fair shares, a queue that swings between Kmin and Kmax", "[sim]") {
  // Long-lived flows, so DCQCN leaves the incast transient and settles.
  const SwitchConfig s;
  struct Case {
    std::uint32_t senders;
    double gbps;
  };
  for (const Case c : {Case{8, 100.0}, Case{4, 400.0}}) {
    const SimResult r =
        run_simulation(make_incast(c.senders, bytes_for(c.gbps, 20'000) / c.senders),
                       config_for(c.gbps, PacingMode::NicDcqcnOnly));
    INFO(c.senders << " senders at " << c.gbps << " Gb/s");
    REQUIRE(r.finished);
    CHECK(r.late_jain_fairness >= 0.93);
    CHECK(r.steady_queue_mean > double(s.ecn_kmin_bytes));
    CHECK(r.steady_queue_mean < double(s.ecn_kmax_bytes));
    CHECK(r.steady_queue_min <= s.ecn_kmin_bytes);
    CHECK(r.steady_queue_max >= s.ecn_kmax_bytes / 2);
    CHECK(r.cnps_sent > 0);
  }
}

TEST_CASE("receivers send at most one CNP per flow per interval", "[sim]") {
  const SimConfig c = config_for(100, PacingMode::NicDcqcnOnly);
  const SimResult r = run_simulation(make_incast(8, bytes_for(100, 2000) / 8), c);
  REQUIRE(r.finished);
  CHECK(r.cnps_sent > 8);
  CHECK(r.cnps_sent <= 8 * (r.completion_ns / c.cnp_interval_ns + 1));
}

TEST_CASE("the pacer sees every CNP through the wrapping 32-bit counter", "[sim]") {
  // The simulated rp_cnp_handled starts 2 below 2^32, so a host that
  // handles 3 CNPs wraps it; a wrong delta would be about 2^32 (or 2^64).
  const SimResult r = run_simulation(make_incast(16, bytes_for(100, 2000) / 16),
                                     config_for(100, PacingMode::SenderPacerOnly));
  REQUIRE(r.cnp_counter_wraps == 16);
  CHECK(r.pacer_cnps <= r.cnps_handled);
  CHECK(r.pacer_cnps + 16 >= r.cnps_handled);  // at most one CNP per host after the last poll
  CHECK(r.pacer_rate_cuts > 0);
}

TEST_CASE("runs are deterministic", "[sim]") {
  const Scenario incast = make_incast(8, bytes_for(100, 500) / 8);
  const SimConfig c = config_for(100, PacingMode::NicDcqcnOnly);
  const SimResult a = run_simulation(incast, c);
  const SimResult b = run_simulation(incast, c);
  CHECK(a.completion_ns == b.completion_ns);
  CHECK(a.ecn_marked_packets == b.ecn_marked_packets);
  CHECK(a.peak_queue_bytes == b.peak_queue_bytes);
}
