#include "gpuwire/pacing/receiver_credit_gate.hpp"

#include <map>

#include "gw_catch.hpp"

using namespace gpuwire::pacing;

namespace {

constexpr std::uint64_t kChunk = 64 * 1024;

ReceiverCreditGate make(ReceiverCreditConfig config) {
  std::string error;
  auto gate = ReceiverCreditGate::create(config, 0, error);
  INFO(error);
  REQUIRE(gate);
  return std::move(*gate);
}

// A gate whose grant rate never holds anything back.
ReceiverCreditConfig unpaced(std::uint64_t window) {
  ReceiverCreditConfig c;
  c.window_bytes = window;
  c.chunk_bytes = kChunk;
  c.link_gbps = 3200;
  c.grant_headroom = 0;
  c.grant_burst_bytes = window;
  return c;
}

}  // namespace

TEST_CASE("grants never exceed the window", "[pacing][credits]") {
  auto gate = make(unpaced(4 * kChunk));
  REQUIRE(gate.add_demand(0, 100 * kChunk));
  REQUIRE(gate.add_demand(1, 100 * kChunk));
  int grants = 0;
  while (gate.next_grant(0)) ++grants;
  CHECK(grants == 4);
  CHECK(gate.in_flight_bytes() == 4 * kChunk);
  CHECK(gate.next_grant_time_ns(0) == UINT64_MAX);
  CHECK(gate.stats().window_stalls == 1);
  CHECK(gate.release(kChunk));
  CHECK(gate.next_grant_time_ns(0) == 0);
  CHECK(gate.next_grant(0));
  CHECK_FALSE(gate.next_grant(0));
}

TEST_CASE("senders are served round-robin, one chunk each", "[pacing][credits]") {
  auto gate = make(unpaced(1ULL << 30));
  gate.add_demand(7, 3 * kChunk);
  gate.add_demand(2, kChunk + 100);  // a short last chunk
  gate.add_demand(5, 3 * kChunk);
  std::vector<std::pair<std::uint32_t, std::uint64_t>> order;
  while (auto g = gate.next_grant(0)) order.emplace_back(g->sender, g->bytes);
  const std::vector<std::pair<std::uint32_t, std::uint64_t>> expected = {
      {7, kChunk}, {2, kChunk}, {5, kChunk}, {7, kChunk},
      {2, 100},    {5, kChunk}, {7, kChunk}, {5, kChunk}};
  CHECK(order == expected);
  CHECK(gate.waiting_senders() == 0);
  CHECK(gate.demand_bytes(7) == 0);
}

TEST_CASE("more demand from a waiting sender does not queue it twice", "[pacing][credits]") {
  auto gate = make(unpaced(1ULL << 30));
  gate.add_demand(1, kChunk);
  gate.add_demand(1, kChunk);
  gate.add_demand(2, kChunk);
  CHECK(gate.waiting_senders() == 2);
  CHECK(gate.next_grant(0)->sender == 1);
  CHECK(gate.next_grant(0)->sender == 2);
  CHECK(gate.next_grant(0)->sender == 1);
  CHECK_FALSE(gate.next_grant(0));
}

TEST_CASE("grants are paced to the receiver's link rate", "[pacing][credits]") {
  ReceiverCreditConfig c;
  c.window_bytes = 1ULL << 30;
  c.chunk_bytes = kChunk;
  c.link_gbps = 100;  // 12.5 bytes/ns: one chunk per 5243 ns
  c.grant_headroom = 0;
  c.grant_burst_bytes = 0;
  auto gate = make(c);
  gate.add_demand(0, 1000 * kChunk);
  REQUIRE(gate.next_grant(0));
  CHECK_FALSE(gate.next_grant(0));
  CHECK(gate.stats().pacing_stalls == 1);
  const std::uint64_t next = gate.next_grant_time_ns(0);
  CHECK(next == 5243);
  CHECK_FALSE(gate.next_grant(next - 1));
  CHECK(gate.next_grant(next));
  // Over 1 ms the grants add up to the link rate.
  std::uint64_t now = next, granted = 0;
  while (now < next + 1'000'000) {
    if (auto g = gate.next_grant(now)) {
      granted += g->bytes;
    } else {
      now = gate.next_grant_time_ns(now);
    }
  }
  CHECK(double(granted) * 8 / 1e6 == Approx(100.0).epsilon(0.01));
}

TEST_CASE("the grant headroom keeps grants just below the link", "[pacing][credits]") {
  ReceiverCreditConfig c;
  c.window_bytes = 1ULL << 30;
  c.link_gbps = 400;
  c.grant_headroom = 0.01;
  auto gate = make(c);
  gate.add_demand(0, 1ULL << 40);
  std::uint64_t now = 0, granted = 0;
  while (now < 1'000'000) {
    if (auto g = gate.next_grant(now)) {
      granted += g->bytes;
    } else {
      now = gate.next_grant_time_ns(now);
    }
  }
  CHECK(double(granted) * 8 / 1e6 == Approx(396.0).epsilon(0.005));
}

TEST_CASE("many senders get equal shares", "[pacing][credits]") {
  auto gate = make(unpaced(8 * kChunk));
  for (std::uint32_t s = 0; s < 64; ++s) gate.add_demand(s, 1000 * kChunk);
  std::map<std::uint32_t, std::uint64_t> granted;
  for (int round = 0; round < 640; ++round) {
    auto g = gate.next_grant(std::uint64_t(round) * 1000);
    REQUIRE(g);
    granted[g->sender] += g->bytes;
    gate.release(g->bytes);  // lands at once
  }
  for (const auto& [sender, bytes] : granted) CHECK(bytes == 10 * kChunk);
}

TEST_CASE("cancelled demand is dropped, granted bytes stay in flight", "[pacing][credits]") {
  auto gate = make(unpaced(1ULL << 30));
  gate.add_demand(3, 4 * kChunk);
  gate.add_demand(4, kChunk);
  REQUIRE(gate.next_grant(0)->sender == 3);
  CHECK(gate.cancel_demand(3) == 3 * kChunk);
  CHECK(gate.cancel_demand(3) == 0);
  CHECK(gate.cancel_demand(99) == 0);
  CHECK(gate.next_grant(0)->sender == 4);
  CHECK_FALSE(gate.next_grant(0));
  CHECK(gate.in_flight_bytes() == 2 * kChunk);
}

TEST_CASE("bad demand and over-release are refused", "[pacing][credits]") {
  ReceiverCreditConfig c = unpaced(4 * kChunk);
  c.max_senders = 16;
  auto gate = make(c);
  CHECK_FALSE(gate.add_demand(16, kChunk));
  CHECK_FALSE(gate.add_demand(0, 0));
  CHECK(gate.waiting_senders() == 0);
  gate.add_demand(0, kChunk);
  gate.next_grant(0);
  CHECK_FALSE(gate.release(2 * kChunk));
  CHECK(gate.in_flight_bytes() == 0);
}

TEST_CASE("the recommended window is a BDP plus two chunks", "[pacing][credits]") {
  CHECK(recommended_window_bytes(100, 10'000, kChunk) == 125'000 + 2 * kChunk);
  CHECK(recommended_window_bytes(400, 8'000, kChunk) == 400'000 + 2 * kChunk);
}

TEST_CASE("ReceiverCreditConfig is range-checked with one line", "[pacing][credits]") {
  std::string error;
  ReceiverCreditConfig c;
  c.chunk_bytes = 1024;
  CHECK_FALSE(ReceiverCreditGate::create(c, 0, error));
  CHECK(error == "credits: chunk_bytes = 1024 is out of range [4096, 2^30]");
  c = {};
  c.window_bytes = c.chunk_bytes - 1;
  CHECK(check_receiver_credit_config(c).find("credits: window_bytes = ") == 0);
  c = {};
  c.link_gbps = 0;
  CHECK(check_receiver_credit_config(c).find("credits: link_gbps = ") == 0);
  c = {};
  c.grant_headroom = 0.5;
  CHECK(check_receiver_credit_config(c).find("credits: grant_headroom = ") == 0);
  c = {};
  c.grant_burst_bytes = c.window_bytes + 1;
  CHECK(check_receiver_credit_config(c).find("credits: grant_burst_bytes = ") == 0);
  c = {};
  c.max_senders = 0;
  CHECK(check_receiver_credit_config(c) == "credits: max_senders = 0 is out of range [1, 2^24]");
}
