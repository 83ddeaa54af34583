// PinnedCache (whole-message pinned bounce buffers) against the fake driver:
// size classes, reuse, the bound, eviction, refusal, pin failures, teardown.
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "fake_driver.hpp"
#include "gpuwire/cuda/pinned_cache.hpp"
#include "gw_catch.hpp"

using namespace gw_test;

namespace {
constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;

PinnedCacheConfig config(size_t max_bytes) { return PinnedCacheConfig{max_bytes, 64 * KiB}; }

void* lend(PinnedCache& c, size_t bytes, int device = 0) {
  Result<void*> r = c.acquire(bytes, device);
  REQUIRE(r.ok());
  return *r;
}
}  // namespace

TEST_CASE("pinned cache: size classes are powers of two from the smallest, within the bound",
          "[cuda][pinned_cache]") {
  FakeDriver drv;
  PinnedCache c(drv, config(1 * MiB));
  CHECK(c.enabled());
  CHECK(c.class_bytes(0) == 64 * KiB);
  CHECK(c.class_bytes(1) == 64 * KiB);
  CHECK(c.class_bytes(64 * KiB) == 64 * KiB);
  CHECK(c.class_bytes(64 * KiB + 1) == 128 * KiB);
  CHECK(c.class_bytes(700 * KiB) == 1 * MiB);
  CHECK(c.class_bytes(1 * MiB) == 1 * MiB);
  CHECK(c.class_bytes(1 * MiB + 1) == 0);
  CHECK(c.class_bytes(SIZE_MAX) == 0);

  // A bound that is no power of two: a class above it is refused.
  PinnedCache odd(drv, config(300 * KiB));
  CHECK(odd.class_bytes(256 * KiB) == 256 * KiB);
  CHECK(odd.class_bytes(257 * KiB) == 0);
  CHECK(odd.acquire(257 * KiB, 0).status().code() == Errc::busy);
  CHECK(drv.host_allocs == 0);

  // The smallest class is rounded up to a power of two.
  PinnedCache rounded(drv, PinnedCacheConfig{1 * MiB, 100 * KiB});
  CHECK(rounded.class_bytes(1) == 128 * KiB);
}

TEST_CASE("pinned cache: a buffer is pinned once and lent again", "[cuda][pinned_cache]") {
  FakeDriver drv;
  {
    PinnedCache c(drv, config(1 * MiB));
    CHECK(drv.host_allocs == 0);  // nothing pinned before it is needed
    void* a = lend(c, 100 * KiB, 1);
    CHECK(drv.host_allocs == 1);
    CHECK(drv.last_host_device == 1);  // pinned by the message's device
    std::memset(a, 0x5a, 128 * KiB);   // the whole class is real, writable memory
    CHECK(c.held_bytes() == 128 * KiB);
    CHECK(c.lent_bytes() == 128 * KiB);
    c.release(a);
    CHECK(c.lent_bytes() == 0);
    CHECK(c.held_bytes() == 128 * KiB);
    CHECK(c.idle_buffers() == 1);

    void* b = lend(c, 70 * KiB);  // same class
    CHECK(b == a);
    CHECK(drv.host_allocs == 1);
    void* d = lend(c, 70 * KiB);  // the first is lent: a second one
    CHECK(d != a);
    CHECK(drv.host_allocs == 2);
    c.release(b);
    c.release(d);
    CHECK(lend(c, 128 * KiB) == d);  // the one returned last comes first
    CHECK(c.counters().hits == 2);
    CHECK(c.counters().pins == 2);
    CHECK(c.buffers() == 2);
  }
  CHECK(drv.host_live() == 0);  // everything unpinned, the lent buffer too
  CHECK(drv.host_frees == 2);
}

TEST_CASE("pinned cache: the bound holds; a larger idle buffer serves before refusing",
          "[cuda][pinned_cache]") {
  FakeDriver drv;
  PinnedCache c(drv, config(1 * MiB));
  std::vector<void*> lent;
  for (int i = 0; i < 4; ++i) lent.push_back(lend(c, 256 * KiB));
  CHECK(c.held_bytes() == 1 * MiB);

  Result<void*> none = c.acquire(64 * KiB, 0);
  CHECK(none.status().code() == Errc::busy);
  CHECK(c.counters().busy == 1);
  CHECK(drv.host_allocs == 4);

  c.release(lent.back());
  void* big = lent.back();
  lent.pop_back();
  void* small = lend(c, 64 * KiB);  // no room to pin: the idle 256 KiB one
  CHECK(small == big);
  CHECK(drv.host_allocs == 4);
  CHECK(c.held_bytes() == 1 * MiB);
  CHECK(c.lent_bytes() == 1 * MiB);
  c.release(small);
  CHECK(c.lent_bytes() == 3 * 256 * KiB);
  CHECK(c.idle_buffers() == 1);
}

TEST_CASE("pinned cache: idle smaller buffers are unpinned for a larger one, largest first",
          "[cuda][pinned_cache]") {
  FakeDriver drv;
  PinnedCache c(drv, config(1 * MiB));
  void* a = lend(c, 256 * KiB);
  void* b = lend(c, 256 * KiB);
  void* s1 = lend(c, 128 * KiB);
  void* s2 = lend(c, 128 * KiB);
  c.release(a);  // a is the oldest idle 256 KiB buffer
  c.release(s1);
  c.release(b);
  c.release(s2);
  CHECK(c.held_bytes() == 768 * KiB);

  // 768 KiB held + 512 KiB > 1 MiB: unpin 256 KiB (the oldest of the largest).
  void* big = lend(c, 512 * KiB);
  CHECK(big != nullptr);
  CHECK(c.counters().evictions == 1);
  CHECK(drv.host_frees == 1);
  CHECK(c.held_bytes() == 1 * MiB);
  CHECK(lend(c, 256 * KiB) == b);  // b stayed
  void* x = lend(c, 128 * KiB);
  CHECK((x == s1 || x == s2));
  CHECK(drv.host_allocs == 5);

  // Everything lent but one 128 KiB buffer: a 512 KiB request cannot be met
  // even by unpinning, and nothing is unpinned for nothing.
  c.release(big);
  void* big2 = lend(c, 512 * KiB);
  CHECK(big2 == big);
  Result<void*> none = c.acquire(200 * KiB, 0);
  // (idle: one 128 KiB; lent 896 KiB + 256 KiB > 1 MiB)
  CHECK(none.status().code() == Errc::busy);
  CHECK(c.counters().evictions == 1);
  CHECK(drv.host_frees == 1);

  // With the 512 KiB one back, 256 KiB fits by lending it (larger idle).
  c.release(big2);
  CHECK(lend(c, 200 * KiB) == big2);
  CHECK(c.held_bytes() <= c.max_bytes());
}

TEST_CASE("pinned cache: several small buffers go for one large one", "[cuda][pinned_cache]") {
  FakeDriver drv;
  PinnedCache c(drv, config(1 * MiB));
  std::vector<void*> v;
  for (int i = 0; i < 16; ++i) v.push_back(lend(c, 64 * KiB));
  for (void* p : v) c.release(p);
  CHECK(c.held_bytes() == 1 * MiB);
  void* all = lend(c, 1 * MiB);
  CHECK(all != nullptr);
  CHECK(c.counters().evictions == 16);
  CHECK(c.buffers() == 1);
  CHECK(drv.host_live() == 1);
}

TEST_CASE("pinned cache: off, and a driver that refuses to pin", "[cuda][pinned_cache]") {
  FakeDriver drv;
  PinnedCache off(drv, config(0));
  CHECK_FALSE(off.enabled());
  CHECK(off.acquire(64 * KiB, 0).status().code() == Errc::busy);
  CHECK(drv.host_allocs == 0);

  PinnedCache c(drv, config(1 * MiB));
  void* a = lend(c, 64 * KiB);
  c.release(a);
  drv.fail_host_alloc = true;
  Result<void*> failed = c.acquire(256 * KiB, 0);
  CHECK(failed.status().code() == Errc::driver);
  CHECK(c.counters().pin_failures == 1);
  CHECK(c.limit() == 64 * KiB);  // no more than it could pin
  const int allocs = drv.host_allocs;
  CHECK(c.acquire(256 * KiB, 0).status().code() == Errc::busy);  // not asked again
  CHECK(drv.host_allocs == allocs);
  CHECK(lend(c, 1000) == a);  // what is pinned still serves
  CHECK(c.acquire(1000, 0).status().code() == Errc::busy);
  c.release(a);
  CHECK(c.lent_bytes() == 0);
}

TEST_CASE("pinned cache: a release it did not lend is ignored", "[cuda][pinned_cache]") {
  FakeDriver drv;
  PinnedCache c(drv, config(1 * MiB));
  int stranger = 0;
  c.release(&stranger);
  void* a = lend(c, 64 * KiB);
  c.release(a);
  c.release(a);  // twice
  CHECK(c.lent_bytes() == 0);
  CHECK(c.idle_buffers() == 1);
  CHECK(lend(c, 64 * KiB) == a);
  CHECK(c.acquire(64 * KiB, 0).ok());  // a second buffer, not a twice-lent one
  CHECK(c.buffers() == 2);
}

TEST_CASE("pinned cache: random traffic keeps the bound, and lent buffers never overlap",
          "[cuda][pinned_cache]") {
  FakeDriver drv;
  const size_t bound = 4 * MiB;
  {
    PinnedCache c(drv, config(bound));
    std::mt19937_64 rng(12345);
    std::map<uintptr_t, size_t> lent;  // start -> requested bytes
    size_t busy = 0;
    for (int step = 0; step < 20000; ++step) {
      const bool give_back = !lent.empty() && (rng() % 100 < 45 || lent.size() > 40);
      if (give_back) {
        auto it = lent.begin();
        std::advance(it, static_cast<long>(rng() % lent.size()));
        c.release(reinterpret_cast<void*>(it->first));
        lent.erase(it);
      } else {
        // Mostly small, sometimes up to the bound, now and then above it.
        const size_t n = rng() % 10 < 7 ? 1 + rng() % (256 * KiB)
                                        : 1 + rng() % (bound + bound / 4);
        Result<void*> r = c.acquire(n, static_cast<int>(rng() % 2));
        if (!r.ok()) {
          REQUIRE(r.status().code() == Errc::busy);
          ++busy;
        } else {
          const auto p = reinterpret_cast<uintptr_t>(*r);
          // Not overlapping any other lent buffer's requested bytes.
          auto next = lent.lower_bound(p);
          if (next != lent.end()) REQUIRE(p + n <= next->first);
          if (next != lent.begin()) {
            auto prev = std::prev(next);
            REQUIRE(prev->first + prev->second <= p);
          }
          static_cast<char*>(*r)[0] = static_cast<char>(step);  // real memory, n bytes
          static_cast<char*>(*r)[n - 1] = static_cast<char>(step);
          lent.emplace(p, n);
        }
      }
      REQUIRE(c.held_bytes() <= bound);
      REQUIRE(c.lent_bytes() <= c.held_bytes());
      REQUIRE(static_cast<size_t>(drv.host_live()) == c.buffers());
    }
    CHECK(busy > 0);
    CHECK(c.counters().hits > c.counters().pins);  // buffers are reused
    for (const auto& [p, n] : lent) c.release(reinterpret_cast<void*>(p));
    CHECK(c.lent_bytes() == 0);
  }
  CHECK(drv.host_live() == 0);
}
