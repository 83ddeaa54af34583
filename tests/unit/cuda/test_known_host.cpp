// MemoryClassifier::known_host, the test behind the engine's host fast path
// with a GPU present (host_path.hpp): it answers from the host table alone,
// never for GPU, managed or pinned memory, and never stale once the range is
// unmapped. The last cases go through real munmap calls and UCM's unmap
// event (watch_unmaps, what the GpuContext installs), against the fake
// driver: the chain that must hold on a machine with a GPU.
#include <sys/mman.h>

#include "fake_driver.hpp"
#include "gpuwire/cuda/gpu_context.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gw_catch.hpp"

using namespace gw_test;

namespace {

MemoryKind kind_of(MemoryClassifier& c, const void* p, size_t len) {
  MemoryInfo info;
  info.kind = MemoryKind::vmm;  // poison: must be overwritten
  REQUIRE(c.classify(p, len, info).ok());
  return info.kind;
}

// A fresh anonymous mapping, as malloc makes for large buffers.
char* map_pages(size_t bytes, void* at = nullptr) {
  const int fixed = at ? MAP_FIXED_NOREPLACE : 0;
  void* p = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | fixed, -1, 0);
  REQUIRE(p != MAP_FAILED);
  if (at) REQUIRE(p == at);
  return static_cast<char*>(p);
}

// Unhooks before the classifier goes, whatever a failed REQUIRE skips.
struct Watch {
  MemoryClassifier* c;
  explicit Watch(MemoryClassifier* cl) : c(cl) { REQUIRE(watch_unmaps(c)); }
  ~Watch() { unwatch_unmaps(c); }
};

constexpr size_t kBytes = 64 << 10;

}  // namespace

TEST_CASE("known_host: the host table alone, no driver call per message", "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  const uintptr_t host = 0x10000000;  // the fake knows nothing here
  const void* h = reinterpret_cast<const void*>(host + 8);
  CHECK_FALSE(c.known_host(h, 8));  // never seen: to be classified
  CHECK(drv.attribute_queries == 0);
  CHECK(kind_of(c, h, 8) == MemoryKind::host);
  CHECK(drv.attribute_queries == 1);
  // What the engine asks per 8-byte send and per receive from now on.
  for (int i = 0; i < 1000; ++i) REQUIRE(c.known_host(h, 8));
  CHECK(drv.attribute_queries == 1);
  CHECK(drv.id_queries == 0);
  CHECK(c.counters().host_hits == 1000);
  CHECK(c.counters().misses == 1);
  // Longer than the cached span: not known, classified again.
  CHECK_FALSE(c.known_host(h, 1 << 20));

  // Memory the driver knows is never "known host", however often classified.
  const FakeKind kinds[] = {FakeKind::device, FakeKind::pool, FakeKind::managed,
                            FakeKind::pinned_host, FakeKind::vmm};
  for (FakeKind k : kinds) {
    const void* d = reinterpret_cast<const void*>(drv.alloc(kBytes, k) + 64);
    CHECK(kind_of(c, d, 8) != MemoryKind::host);
    CHECK(kind_of(c, d, 8) != MemoryKind::host);
    CHECK_FALSE(c.known_host(d, 8));
  }
}

TEST_CASE("known_host: a real munmap drops the range; device memory there is not served as host",
          "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  Watch w(&c);
  char* buf = map_pages(kBytes);
  buf[0] = 1;  // real host memory
  CHECK(kind_of(c, buf, 8) == MemoryKind::host);
  REQUIRE(c.known_host(buf, 8));

  // The application frees it; the driver hands the address out as a
  // cudaMalloc (or cudaMallocManaged) allocation.
  REQUIRE(munmap(buf, kBytes) == 0);
  CHECK(c.counters().invalidated >= 1);
  drv.alloc(kBytes, FakeKind::device, 0, reinterpret_cast<uintptr_t>(buf));
  CHECK_FALSE(c.known_host(buf, 8));
  CHECK(kind_of(c, buf, 8) == MemoryKind::device);
  CHECK_FALSE(c.known_host(buf, 8));
  drv.free(reinterpret_cast<uintptr_t>(buf));
}

TEST_CASE("known_host: host memory unmapped and mapped again pinned is classified pinned",
          "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  Watch w(&c);
  char* buf = map_pages(kBytes);
  CHECK(kind_of(c, buf + 4096, 8) == MemoryKind::host);
  REQUIRE(c.known_host(buf + 4096, 8));

  // Part of it unmapped (any overlap counts), the same pages mapped again
  // and registered (cudaHostAlloc, or cudaHostRegister of the new mapping).
  REQUIRE(munmap(buf + 4096, 4096) == 0);
  map_pages(4096, buf + 4096);
  drv.alloc(4096, FakeKind::pinned_host, 0, reinterpret_cast<uintptr_t>(buf + 4096));
  CHECK_FALSE(c.known_host(buf + 4096, 8));
  CHECK(kind_of(c, buf + 4096, 8) == MemoryKind::pinned_host);
  drv.free(reinterpret_cast<uintptr_t>(buf + 4096));
  REQUIRE(munmap(buf, kBytes) == 0);
}

TEST_CASE("known_host: spans are compared exactly; wrapping and out-of-range ranges never hit",
          "[cuda][classifier]") {
  FakeDriver drv;
  MemoryClassifier c(drv);
  const uintptr_t base = 0x10000000 + 100;  // 3 pages: 0x10000000 .. 0x10002fff
  const size_t len = 3 * 4096 - 100;
  CHECK(kind_of(c, reinterpret_cast<const void*>(base), len) == MemoryKind::host);
  const auto known = [&](uintptr_t p, size_t n) {
    return c.known_host(reinterpret_cast<const void*>(p), n);
  };
  CHECK(known(base, len));          // to the cached span's last byte
  CHECK_FALSE(known(base, len + 1));  // one byte into the next page
  CHECK(known(base, 0));
  CHECK(known(0x10000000, 1));      // same first page, inside the span
  CHECK_FALSE(known(0x10001000, 8));  // a later page of the span: not an entry's first page
  CHECK_FALSE(known(base, SIZE_MAX));  // wraps
  CHECK_FALSE(known(base, SIZE_MAX - base + 1));  // ends exactly at the top: beyond the span
  CHECK_FALSE(known(~uintptr_t{0} - 4095, 8));   // a first page no entry can hold
  CHECK(drv.attribute_queries == 1);
}
