#include "gpuwire/pacing/token_bucket.hpp"

#include "gw_catch.hpp"

using namespace gpuwire::pacing;

TEST_CASE("a bucket admits whole requests and may go into debt", "[pacing][bucket]") {
  TokenBucket bucket(1.0, 1000.0, 0);  // 1 byte/ns, 1000 bytes of burst
  CHECK(bucket.try_take(600, 0));
  CHECK(bucket.try_take(600, 0));  // 400 left: admitted, 200 in debt
  CHECK(bucket.tokens_at(0) == -200.0);
  CHECK_FALSE(bucket.try_take(1, 0));
  CHECK(bucket.ready_at_ns(0) == 200);
  CHECK_FALSE(bucket.try_take(1, 199));
  CHECK(bucket.try_take(5000, 200));  // larger than the burst: still passes when out of debt
  CHECK(bucket.ready_at_ns(200) == 5200);
}

TEST_CASE("the bucket never holds more than its burst", "[pacing][bucket]") {
  TokenBucket bucket(2.0, 100.0, 0);
  CHECK(bucket.tokens_at(1'000'000) == 100.0);
  CHECK(bucket.try_take(100, 1'000'000));
  CHECK(bucket.tokens_at(1'000'000) == 0.0);
}

TEST_CASE("a rate change credits the time before it at the old rate", "[pacing][bucket]") {
  TokenBucket bucket(1.0, 1e9, 0);
  CHECK(bucket.try_take(1000, 0));  // burst 1e9: admitted, 999'999'000 left
  TokenBucket empty(1.0, 0.0, 0);
  CHECK(empty.try_take(1000, 0));  // -1000
  empty.set_rate(0.5, 500);        // 500 ns at 1 B/ns: -500
  CHECK(empty.tokens_at(500) == -500.0);
  CHECK(empty.ready_at_ns(500) == 1500);  // then at 0.5 B/ns
}

TEST_CASE("a stale timestamp does not mint tokens", "[pacing][bucket]") {
  TokenBucket bucket(1.0, 0.0, 1000);
  CHECK(bucket.try_take(100, 1000));
  CHECK_FALSE(bucket.try_take(100, 900));
  CHECK(bucket.tokens_at(900) == -100.0);
  // The debt is paid from the last refill on, not from the stale time.
  CHECK(bucket.ready_at_ns(900) == 1100);
}

TEST_CASE("over a long run admitted bytes follow the rate", "[pacing][bucket]") {
  const double rate = 12.5;  // 100 Gb/s
  TokenBucket bucket(rate, 262144.0, 0);
  std::uint64_t now = 0, admitted = 0;
  const std::uint64_t chunk = 65536, horizon = 10'000'000;
  while (now < horizon) {
    if (bucket.try_take(chunk, now)) {
      admitted += chunk;
    } else {
      now = bucket.ready_at_ns(now);
    }
  }
  CHECK(double(admitted) <= rate * double(horizon) + 262144.0 + 2 * chunk);
  CHECK(double(admitted) >= rate * double(horizon));
}
