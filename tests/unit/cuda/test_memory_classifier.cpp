// MemoryClassifier against the fake driver: kinds, the host fast path, buffer-ID
// validation across free/re-use, invalidation by unmaps, bounds.
#include <atomic>
#include <thread>
#include <vector>

#include "fake_driver.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gw_catch.hpp"

using namespace gw_test;

namespace {
MemoryInfo classify(MemoryClassifier& c, uintptr_t p, size_t len) {
  MemoryInfo info;
  info.kind = MemoryKind::vmm;  // poison: must be overwritten
  Status s = c.classify(reinterpret_cast<const void*>(p), len, info);
  REQUIRE(s.ok());
  return info;
}
constexpr uintptr_t kHost = 0x10000000;  // the fake knows nothing here: host memory
}  // namespace

TEST_CASE("no driver: everything is host and nothing is asked", "[cuda][classifier]") {
  FakeDriver drv(0, false);
  MemoryClassifier c(drv);
  CHECK(classify(c, kHost, 64).kind == MemoryKind::host);
  CHECK(classify(c, 0x7f0000000000, 64).kind == MemoryKind::host);
  CHECK(drv.attribute_queries == 0);
}

TEST_CASE("host buffers: one query, then served without the driver", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  CHECK(classify(c, kHost + 100, 1000).kind == MemoryKind::host);
  CHECK(drv.attribute_queries == 1);
  for (int i = 0; i < 100; ++i) CHECK(classify(c, kHost + 100, 1000).kind == MemoryKind::host);
  // another buffer starting in the same page and ending in the cached span
  CHECK(classify(c, kHost + 8, 2000).kind == MemoryKind::host);
  CHECK(drv.attribute_queries == 1);
  CHECK(drv.id_queries == 0);
  CHECK(c.counters().host_hits == 101);
  CHECK(c.counters().misses == 1);

  // a longer buffer from the same page is asked once, then served
  CHECK(classify(c, kHost + 100, 3 * 4096).kind == MemoryKind::host);
  CHECK(classify(c, kHost + 100, 3 * 4096).kind == MemoryKind::host);
  CHECK(drv.attribute_queries == 2);
}

TEST_CASE("null and zero-length buffers", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  CHECK(classify(c, 0, 0).kind == MemoryKind::host);
  CHECK(drv.attribute_queries == 0);
  uintptr_t d = drv.alloc(1 << 20);
  CHECK(classify(c, d, 0).kind == MemoryKind::device);
}

TEST_CASE("device memory: kind, ordinal, allocation, buffer ID", "[cuda][classifier]") {
  FakeDriver drv;
  uintptr_t before = drv.alloc(8 << 20, FakeKind::device, 0);  // allocated before the classifier
  MemoryClassifier c(drv);
  uintptr_t d1 = drv.alloc(4 << 20, FakeKind::device, 1);

  MemoryInfo a = classify(c, before + 4096, 1024);
  CHECK(a.kind == MemoryKind::device);
  CHECK(a.on_gpu());
  CHECK(a.legacy_ipc_exportable());
  CHECK(a.device == 0);
  CHECK(a.base == before);
  CHECK(a.size == (8u << 20));
  CHECK(a.buffer_id == drv.find(before)->id);

  MemoryInfo b = classify(c, d1, 4 << 20);
  CHECK(b.device == 1);
  CHECK(b.base == d1);

  // repeated use: confirmed by one buffer-ID query, no full query
  int full = drv.attribute_queries;
  for (int i = 0; i < 10; ++i) CHECK(classify(c, before + 64, 128).buffer_id == a.buffer_id);
  CHECK(drv.attribute_queries == full);
  CHECK(drv.id_queries == 10);
  CHECK(c.counters().device_hits == 10);
}

TEST_CASE("sync_memops: each device allocation is marked once, nothing else", "[cuda][classifier]") {
  FakeDriver drv;
  uintptr_t d = drv.alloc(1 << 20, FakeKind::device, 0);
  uintptr_t m = drv.alloc(1 << 20, FakeKind::managed, 0);
  uintptr_t p = drv.alloc(1 << 20, FakeKind::pinned_host, 0);
  uintptr_t v = drv.alloc(1 << 20, FakeKind::vmm, 0);
  {
    MemoryClassifier off(drv);  // the default: no marks
    classify(off, d + 64, 64);
    CHECK(drv.sync_marked.empty());
  }
  ClassifierConfig cfg;
  cfg.sync_memops = true;
  MemoryClassifier c(drv, cfg);
  // The first answer says a copy into it may not have landed (marked only
  // now); the cached ones do not.
  CHECK((classify(c, d, 64).flags & kUnordered) != 0);
  for (int i = 1; i < 3; ++i) CHECK((classify(c, d + 4096 * i, 64).flags & kUnordered) == 0);
  // Not markable: every answer says so.
  for (int i = 0; i < 2; ++i) {
    CHECK((classify(c, m, 64).flags & kUnordered) != 0);
    CHECK((classify(c, v, 64).flags & kUnordered) != 0);
  }
  CHECK((classify(c, p, 64).flags & kUnordered) == 0);
  CHECK((classify(c, kHost, 64).flags & kUnordered) == 0);
  REQUIRE(drv.sync_marked.size() == 1);
  CHECK(drv.sync_marked[0] == d);  // the allocation's base, not the pointer
  CHECK(c.counters().sync_memops_marked == 1);
  CHECK(c.counters().sync_memops_errors == 0);
  // freed and allocated again at the same address: a new allocation, marked again
  drv.free(d);
  drv.alloc(1 << 20, FakeKind::device, 0, d);
  classify(c, d + 8, 8);
  CHECK(drv.sync_marked.size() == 2);
  CHECK(c.counters().sync_memops_marked == 2);
}

TEST_CASE("freed and re-allocated at the same address: the new buffer is seen", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  uintptr_t d = drv.alloc(1 << 20);
  MemoryInfo first = classify(c, d, 1 << 20);
  drv.free(d);
  drv.alloc(2 << 20, FakeKind::pool, 1, d);  // same address, other kind, size, device
  MemoryInfo second = classify(c, d, 1 << 20);
  CHECK(second.buffer_id != first.buffer_id);
  CHECK(second.kind == MemoryKind::device);
  CHECK((second.flags & kMemPool) != 0);
  CHECK_FALSE(second.legacy_ipc_exportable());
  CHECK(second.device == 1);
  CHECK(second.size == (2u << 20));
  CHECK(c.counters().stale == 1);

  // freed for good: the address is nobody's now
  drv.free(d);
  CHECK(classify(c, d, 64).kind == MemoryKind::host);
  CHECK(c.counters().stale == 2);
}

TEST_CASE("a fresh answer replaces overlapping entries of freed allocations", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  uintptr_t a = drv.alloc(1 << 20);
  uintptr_t b = drv.alloc(1 << 20);
  REQUIRE(b == a + (1 << 20));
  classify(c, a, 64);
  classify(c, b, 64);
  CHECK(c.device_entries() == 2);
  drv.free(a);
  drv.free(b);
  uintptr_t big = drv.alloc(2 << 20, FakeKind::device, 0, a);  // covers both
  CHECK(classify(c, big + (1 << 20) + 5, 10).buffer_id == drv.find(big)->id);
  CHECK(c.device_entries() == 1);
  CHECK(classify(c, a, 64).base == big);
}

TEST_CASE("managed, pinned host, pool and VMM memory", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  uintptr_t m = drv.alloc(1 << 20, FakeKind::managed);
  uintptr_t h = drv.alloc(1 << 20, FakeKind::pinned_host);
  uintptr_t p = drv.alloc(1 << 20, FakeKind::pool, 1);
  uintptr_t v = drv.alloc(2 << 20, FakeKind::vmm);

  CHECK(classify(c, m, 16).kind == MemoryKind::managed);
  CHECK(classify(c, h, 16).kind == MemoryKind::pinned_host);
  CHECK_FALSE(classify(c, h, 16).on_gpu());
  MemoryInfo pool = classify(c, p, 16);
  CHECK(pool.kind == MemoryKind::device);
  CHECK(pool.flags == kMemPool);
  CHECK(pool.device == 1);

  MemoryInfo vm = classify(c, v + 100, 16);
  CHECK(vm.kind == MemoryKind::vmm);
  CHECK(vm.base == v);  // the mapped chunk, not the reserved range
  CHECK(vm.size == (2u << 20));
  // cached like device memory, and a new chunk mapped at the same address is seen
  int full = drv.attribute_queries;
  CHECK(classify(c, v + 100, 16).buffer_id == vm.buffer_id);
  CHECK(drv.attribute_queries == full);
  drv.free(v);
  drv.alloc(2 << 20, FakeKind::vmm, 0, v);
  CHECK(classify(c, v + 100, 16).buffer_id == drv.find(v)->id);
  CHECK(c.counters().stale == 1);
}

TEST_CASE("unmaps invalidate host entries; without them a stale answer is possible", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  const uintptr_t buf = 0x7e0000000000;
  const uintptr_t other = kHost;
  CHECK(classify(c, buf, 1 << 20).kind == MemoryKind::host);
  CHECK(classify(c, other, 64).kind == MemoryKind::host);

  // The host range is unmapped and the driver maps device memory there.
  drv.alloc(1 << 20, FakeKind::device, 0, buf);
  // This is the one hazard the unmap events exist for:
  CHECK(classify(c, buf, 1 << 20).kind == MemoryKind::host);

  c.invalidate(reinterpret_cast<void*>(buf + 4096), 4096);  // any overlap drops the entry
  CHECK(classify(c, buf, 1 << 20).kind == MemoryKind::device);
  CHECK(c.counters().invalidated == 1);
  // entries that do not overlap the unmapped range survive
  int q = drv.attribute_queries;
  CHECK(classify(c, other, 64).kind == MemoryKind::host);
  CHECK(drv.attribute_queries == q);

  c.invalidate_all();
  classify(c, other, 64);
  CHECK(drv.attribute_queries == q + 1);
}

TEST_CASE("an unmap during the driver query withdraws the answer being cached", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  const uintptr_t buf = 0x7e0000000000;
  int fired = 0;
  drv.on_query = [&](uintptr_t) {
    if (fired++ == 0) c.invalidate(reinterpret_cast<void*>(buf), 4096);
  };
  CHECK(classify(c, buf, 64).kind == MemoryKind::host);
  CHECK(drv.attribute_queries == 1);
  CHECK(classify(c, buf, 64).kind == MemoryKind::host);  // not served from the table
  CHECK(drv.attribute_queries == 2);
  CHECK(classify(c, buf, 64).kind == MemoryKind::host);  // this one was cached
  CHECK(drv.attribute_queries == 2);
}

TEST_CASE("host cache off: every host buffer asks the driver", "[cuda][classifier]") {
  FakeDriver drv;
  ClassifierConfig cfg;
  cfg.host_entries = 0;
  MemoryClassifier c(drv, cfg);
  for (int i = 0; i < 5; ++i) CHECK(classify(c, kHost, 64).kind == MemoryKind::host);
  CHECK(drv.attribute_queries == 5);
  c.invalidate(reinterpret_cast<void*>(kHost), 64);  // harmless
}

TEST_CASE("the host table is bounded and stays correct when it thrashes", "[cuda][classifier]") {
  FakeDriver drv;
  ClassifierConfig cfg;
  cfg.host_entries = 16;
  MemoryClassifier c(drv, cfg);
  for (int round = 0; round < 3; ++round)
    for (uintptr_t i = 0; i < 1000; ++i) CHECK(classify(c, kHost + i * 4096, 100).kind == MemoryKind::host);
  uintptr_t d = drv.alloc(1 << 20);
  CHECK(classify(c, d, 64).kind == MemoryKind::device);
  CHECK(drv.attribute_queries <= 3001);
  CHECK(drv.attribute_queries > 2900);  // 16 entries cannot hold 1000 pages
}

TEST_CASE("the device table is an LRU of bounded size", "[cuda][classifier]") {
  FakeDriver drv;
  ClassifierConfig cfg;
  cfg.device_entries = 2;
  MemoryClassifier c(drv, cfg);
  uintptr_t a = drv.alloc(1 << 20), b = drv.alloc(1 << 20), d = drv.alloc(1 << 20);
  classify(c, a, 1);
  classify(c, b, 1);
  classify(c, a, 1);  // a is most recent
  classify(c, d, 1);  // evicts b
  CHECK(c.device_entries() == 2);
  int full = drv.attribute_queries;
  classify(c, a, 1);
  CHECK(drv.attribute_queries == full);
  classify(c, b, 1);
  CHECK(drv.attribute_queries == full + 1);
}

TEST_CASE("a driver error is returned, not guessed", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  uintptr_t d = drv.alloc(1 << 20);
  classify(c, d, 1);
  drv.fail_queries = true;
  MemoryInfo out;
  out.buffer_id = 77;
  Status s = c.classify(reinterpret_cast<void*>(d), 1, out);
  CHECK(s.code() == Errc::driver);
  CHECK(std::string(s.call()) == "cuPointerGetAttributes(BUFFER_ID)");
  s = c.classify(reinterpret_cast<void*>(kHost), 1, out);
  CHECK_FALSE(s.ok());
  CHECK(out.buffer_id == 77);  // untouched
  CHECK(c.counters().driver_errors == 2);
}

TEST_CASE("concurrent classify and invalidate", "[cuda][classifier]") {
  FakeDriver drv;
  uintptr_t d = drv.alloc(1 << 20);
  MemoryClassifier c(drv);
  classify(c, d, 1);  // the fake is not thread-safe: keep device lookups single-threaded
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    MemoryInfo info;
    while (!stop.load()) {
      // host hits only: the fake driver must not be entered concurrently
      if (!c.classify(reinterpret_cast<void*>(kHost), 64, info).ok() || info.kind != MemoryKind::host)
        wrong.fetch_add(1);
    }
  });
  for (int i = 0; i < 20000; ++i) {
    c.invalidate(reinterpret_cast<void*>(kHost + 0x100000), 4096);  // elsewhere
    if (i % 64 == 0) c.invalidate(reinterpret_cast<void*>(kHost), 4096);  // the reader's page
  }
  stop.store(true);
  reader.join();
  CHECK(wrong.load() == 0);
}
