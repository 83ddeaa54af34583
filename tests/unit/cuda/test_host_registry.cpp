// HostRegistry: pageable host buffers pinned on their second use, bounded,
// and unregistered inside the unmap that ends them (the last case through a
// real munmap and UCM's event, against the fake driver).
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "fake_driver.hpp"
#include "gpuwire/cuda/host_registry.hpp"
#include "gw_catch.hpp"

using namespace gw_test;

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr uintptr_t kPage = 4096;

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

// Addresses the fake driver makes up: every buffer is taken to fill a
// mapping of its own (whole pages around it), unless listed as shared.
class FakeMapRegistry : public HostRegistry {
 public:
  using HostRegistry::HostRegistry;
  std::set<uintptr_t> shared;  // buffers inside a heap
 protected:
  bool own_mapping(uintptr_t p, size_t len, uintptr_t* lo, uintptr_t* hi) const override {
    if (shared.count(p)) return false;
    *lo = p & ~(kPage - 1);
    *hi = (p + len + kPage - 1) & ~(kPage - 1);
    return true;
  }
};

// The rules on real mappings of this process.
class RealMapRegistry : public HostRegistry {
 public:
  using HostRegistry::HostRegistry;
  using HostRegistry::own_mapping;
};

}  // namespace

TEST_CASE("host registry: off until configured, then pins a buffer on its second use",
          "[cuda][host_registry]") {
  FakeDriver drv;
  FakeMapRegistry r(drv);
  const uintptr_t base = 0x10000000;
  const void* p = at(base + 16);  // as malloc returns a large buffer: past a header
  CHECK_FALSE(r.pin(p, 2 * kMiB, 0));
  CHECK_FALSE(r.pin(p, 2 * kMiB, 0));
  CHECK(drv.host_registers == 0);

  r.configure(64 * kMiB, kMiB);
  CHECK_FALSE(r.pin(p, 2 * kMiB, 0));  // first use: only noted
  CHECK(drv.host_registers == 0);
  CHECK(r.pin(p, 2 * kMiB, 0));  // second: pinned, whole pages around it
  REQUIRE(drv.host_registers == 1);
  REQUIRE(drv.registered_.count(reinterpret_cast<void*>(base)) == 1);
  CHECK(drv.registered_[reinterpret_cast<void*>(base)] == 2 * kMiB + kPage);
  for (int i = 0; i < 10; ++i) REQUIRE(r.pin(p, 2 * kMiB, 0));
  CHECK(r.pin(at(base + 4096), kMiB, 0));  // inside it: pinned too
  CHECK(drv.host_registers == 1);
  HostRegistryCounters c = r.counters();
  CHECK(c.pinned == 1);
  CHECK(c.hits == 11);
  CHECK(c.bytes == 2 * kMiB + kPage);

  // Shorter than the minimum: never pinned, never noted.
  const void* small = at(0x30000000);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(r.pin(small, kMiB - 1, 0));
  CHECK(drv.host_registers == 1);

  r.configure(0, kMiB);  // off: what it pinned goes
  CHECK(drv.registered_live() == 0);
  CHECK(r.counters().bytes == 0);
  CHECK_FALSE(r.pin(p, 2 * kMiB, 0));
}

TEST_CASE("host registry: a longer use of the same buffer, the bound, a refusal",
          "[cuda][host_registry]") {
  FakeDriver drv;
  FakeMapRegistry r(drv);
  r.configure(5 * kMiB, kMiB);
  const uintptr_t a = 0x10000000, b = 0x20000000;
  CHECK_FALSE(r.pin(at(a), kMiB, 0));
  CHECK(r.pin(at(a), kMiB, 0));
  // The same buffer used longer: pinned again at its new length, at once.
  CHECK(r.pin(at(a), 2 * kMiB, 0));
  CHECK(drv.host_registers == 2);
  CHECK(drv.host_unregisters == 1);
  REQUIRE(drv.registered_live() == 1);
  CHECK(drv.registered_[reinterpret_cast<void*>(a)] == 2 * kMiB);

  // A second buffer that does not fit beside it: the least recently used goes.
  CHECK_FALSE(r.pin(at(b), 4 * kMiB, 0));
  CHECK(r.pin(at(b), 4 * kMiB, 0));
  CHECK(drv.registered_live() == 1);
  CHECK(drv.registered_.count(reinterpret_cast<void*>(b)) == 1);
  CHECK(r.counters().evicted == 2);
  CHECK(r.counters().bytes == 4 * kMiB);
  // Larger than the whole bound: never.
  const uintptr_t big = 0x40000000;
  CHECK_FALSE(r.pin(at(big), 6 * kMiB, 0));
  CHECK_FALSE(r.pin(at(big), 6 * kMiB, 0));
  CHECK(drv.registered_.count(reinterpret_cast<void*>(b)) == 1);

  // The driver refuses: counted, and that buffer is not asked about again.
  drv.fail_host_register = true;
  const uintptr_t c = 0x50000000;
  CHECK_FALSE(r.pin(at(c), kMiB, 0));
  CHECK_FALSE(r.pin(at(c), kMiB, 0));
  const int asked = drv.host_registers;
  CHECK_FALSE(r.pin(at(c), kMiB, 0));
  CHECK(drv.host_registers == asked);
  CHECK(r.counters().failed == 2);  // the one over the bound, this one

  // Inside a heap (not a mapping of its own): never pinned.
  const uintptr_t h = 0x60000000;
  r.shared.insert(h);
  drv.fail_host_register = false;
  for (int i = 0; i < 3; ++i) CHECK_FALSE(r.pin(at(h), 2 * kMiB, 0));
  CHECK(drv.host_registers == asked);
}

TEST_CASE("host registry: an unmap unregisters what it overlaps, nothing else",
          "[cuda][host_registry]") {
  FakeDriver drv;
  FakeMapRegistry r(drv);
  r.configure(64 * kMiB, kMiB);
  const uintptr_t a = 0x10000000, b = 0x20000000;
  for (uintptr_t x : {a, b}) {
    CHECK_FALSE(r.pin(at(x), 2 * kMiB, 0));
    CHECK(r.pin(at(x), 2 * kMiB, 0));
  }
  REQUIRE(drv.registered_live() == 2);
  r.unmapped(at(a + 2 * kMiB), kMiB);  // just past a: untouched
  r.unmapped(at(a - kMiB), kMiB);      // just before it
  CHECK(drv.registered_live() == 2);
  r.unmapped(at(a + 2 * kMiB - 1), 1);  // its last byte
  CHECK(drv.registered_live() == 1);
  CHECK(drv.registered_.count(reinterpret_cast<void*>(b)) == 1);
  CHECK(r.counters().unmapped == 1);
  CHECK(r.counters().bytes == 2 * kMiB);
  // Mapped again at the same address and used: pinned afresh, not served
  // by the old registration.
  CHECK(r.pin(at(a), 2 * kMiB, 0));
  CHECK(drv.registered_live() == 2);
  CHECK(drv.host_registers == 3);
}

TEST_CASE("host registry: a real munmap reaches it through UCM's event",
          "[cuda][host_registry]") {
  FakeDriver drv;
  {
    RealMapRegistry r(drv);
    REQUIRE(watch_unmaps(&r));
    r.configure(256 * kMiB, kMiB);
    // 5 MiB read-write, then 1 MiB read-only: the read-write part is a
    // mapping of its own (no neighbour above it to merge with).
    const size_t len = 6 * kMiB, rw = 5 * kMiB;
    auto* m = static_cast<char*>(
        mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(m != MAP_FAILED);
    REQUIRE(mprotect(m + rw, len - rw, PROT_READ) == 0);
    CHECK_FALSE(r.pin(m + 64, 2 * kMiB, 0));
    CHECK(r.pin(m + 64, 2 * kMiB, 0));
    REQUIRE(drv.registered_live() == 1);
    const auto reg = *drv.registered_.begin();
    CHECK(reinterpret_cast<char*>(reg.first) <= m);  // the whole mapping
    CHECK(reinterpret_cast<char*>(reg.first) + reg.second == m + rw);
    CHECK(r.pin(m + 3 * kMiB, kMiB, 0));  // elsewhere in it: pinned already
    CHECK(drv.host_registers == 1);
    REQUIRE(munmap(m + 4 * kMiB, 4096) == 0);  // a page of it goes
    CHECK(drv.registered_live() == 0);
    CHECK(r.counters().unmapped == 1);
    REQUIRE(munmap(m, len) == 0);
    // Still pinned when the registry goes: unregistered then.
    auto* n = static_cast<char*>(
        mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(n != MAP_FAILED);
    REQUIRE(mprotect(n + rw, len - rw, PROT_READ) == 0);
    r.pin(n, rw, 0);
    CHECK(r.pin(n, rw, 0));
    CHECK(drv.registered_live() == 1);
    unwatch_unmaps(&r);
    REQUIRE(munmap(n, len) == 0);
    CHECK(drv.registered_live() == 1);  // no longer watched
  }
  CHECK(drv.registered_live() == 0);
}

TEST_CASE("host registry: which mappings may be pinned whole", "[cuda][host_registry]") {
  FakeDriver drv;
  RealMapRegistry r(drv);
  uintptr_t lo = 0, hi = 0;
  // A small buffer of the brk heap.
  auto* small = static_cast<char*>(std::malloc(4096));
  REQUIRE(small);
  small[0] = 1;
  CHECK_FALSE(r.own_mapping(reinterpret_cast<uintptr_t>(small), 64, &lo, &hi));
  std::free(small);
  // A file's mapping, and read-only memory.
  FILE* f = std::tmpfile();
  REQUIRE(f);
  REQUIRE(ftruncate(fileno(f), 1 << 20) == 0);
  void* fm = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(f), 0);
  REQUIRE(fm != MAP_FAILED);
  CHECK_FALSE(r.own_mapping(reinterpret_cast<uintptr_t>(fm), 1 << 20, &lo, &hi));
  munmap(fm, 1 << 20);
  std::fclose(f);
  void* ro = mmap(nullptr, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(ro != MAP_FAILED);
  CHECK_FALSE(r.own_mapping(reinterpret_cast<uintptr_t>(ro), 1 << 20, &lo, &hi));
  munmap(ro, 1 << 20);
  // A thread arena's heap: 64 MiB reserved at a 64 MiB boundary, the
  // first part read-write, the rest inaccessible.
  const size_t arena = 64 * kMiB;
  auto* res = static_cast<char*>(
      mmap(nullptr, 2 * arena, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  REQUIRE(res != MAP_FAILED);
  char* heap = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(res) + arena - 1) &
                                       ~(uintptr_t{arena} - 1));
  // As malloc does: only the aligned reservation is kept.
  if (heap > res) REQUIRE(munmap(res, heap - res) == 0);
  REQUIRE(munmap(heap + arena, res + 2 * arena - (heap + arena)) == 0);
  REQUIRE(mprotect(heap, 4 * kMiB, PROT_READ | PROT_WRITE) == 0);
  CHECK_FALSE(r.own_mapping(reinterpret_cast<uintptr_t>(heap) + kMiB, 2 * kMiB, &lo, &hi));
  munmap(heap, arena);
  // A mapping with a guard page after it (a thread's stack above it).
  const size_t len = 2 * kMiB;
  auto* m = static_cast<char*>(
      mmap(nullptr, len + kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(m != MAP_FAILED);
  REQUIRE(mprotect(m + len, 4096, PROT_NONE) == 0);
  if ((reinterpret_cast<uintptr_t>(m) + len + 4096) % arena != 0)
    CHECK(r.own_mapping(reinterpret_cast<uintptr_t>(m), len, &lo, &hi));
  REQUIRE(mprotect(m + len, kMiB, PROT_READ) == 0);
  CHECK(r.own_mapping(reinterpret_cast<uintptr_t>(m), len, &lo, &hi));
  CHECK(lo <= reinterpret_cast<uintptr_t>(m));
  CHECK(hi == reinterpret_cast<uintptr_t>(m) + len);
  CHECK_FALSE(r.own_mapping(reinterpret_cast<uintptr_t>(m), len + 1, &lo, &hi));
  munmap(m, len + kMiB);
}

TEST_CASE("host registry: malloc's own large chunk, not its merged neighbours",
          "[cuda][host_registry]") {
  FakeDriver drv;
  RealMapRegistry r(drv);
  REQUIRE(mallopt(M_MMAP_THRESHOLD, 256 << 10) == 1);
  // A neighbour right below, as the kernel merges anonymous mappings with the
  // same rights (the driver's own pinned memory may be one).
  const size_t len = 3 * kMiB + 5;
  void* below = nullptr;
  bool merged = false;
  auto* buf = static_cast<unsigned char*>(std::malloc(len));
  REQUIRE(buf);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf);
  uintptr_t lo = 0, hi = 0;
  REQUIRE(r.own_mapping(p, len, &lo, &hi));
  CHECK(lo <= p);
  CHECK(p - lo < kPage);
  CHECK(hi >= p + len);
  CHECK(hi - (p + len) < kPage);
  CHECK(lo % kPage == 0);
  CHECK(hi % kPage == 0);
  const uintptr_t chunk_lo = lo, chunk_hi = hi;
  below = mmap(reinterpret_cast<void*>(chunk_lo - 2 * kMiB), 2 * kMiB, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (below != MAP_FAILED && reinterpret_cast<uintptr_t>(below) == chunk_lo - 2 * kMiB) {
    static_cast<char*>(below)[0] = 1;
    REQUIRE(r.own_mapping(p, len, &lo, &hi));
    merged = true;
    CHECK(lo == chunk_lo);  // not the merged mapping's start
    CHECK(hi == chunk_hi);
    munmap(below, 2 * kMiB);
  }
  if (!merged) WARN("no room right below the chunk: the merged case was not tried");
  // An interior pointer is not a chunk: the whole mapping, as for mmap.
  REQUIRE(r.own_mapping(p + 4096, kMiB, &lo, &hi));
  CHECK(lo <= p);
  CHECK(hi >= p + len);
  // Aligned large allocations are chunks too.
  void* aligned = nullptr;
  REQUIRE(posix_memalign(&aligned, 64 << 10, 2 * kMiB) == 0);
  REQUIRE(r.own_mapping(reinterpret_cast<uintptr_t>(aligned), 2 * kMiB, &lo, &hi));
  CHECK(lo <= reinterpret_cast<uintptr_t>(aligned));
  CHECK(reinterpret_cast<uintptr_t>(aligned) - lo < (64 << 10) + kPage);
  CHECK(hi >= reinterpret_cast<uintptr_t>(aligned) + 2 * kMiB);
  CHECK(hi - lo < 2 * kMiB + 2 * (64 << 10) + kPage);
  std::free(aligned);
  std::free(buf);
}

TEST_CASE("host registry: a chunk's mapping below inaccessible memory that ends on 64 MiB",
          "[cuda][host_registry]") {
  // What an arena's heap looks like from its mapping alone; malloc's own
  // chunk there (its header says so) is still pinned as the chunk.
  FakeDriver drv;
  RealMapRegistry r(drv);
  const size_t arena = 64 * kMiB, len = 2 * kMiB;
  auto* res = static_cast<char*>(
      mmap(nullptr, 2 * arena, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  REQUIRE(res != MAP_FAILED);
  char* end = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(res) + 2 * arena) &
                                      ~(uintptr_t{arena} - 1));
  if (end < res + 2 * arena) REQUIRE(munmap(end, res + 2 * arena - end) == 0);
  char* chunk = end - arena;
  REQUIRE(mprotect(chunk, len, PROT_READ | PROT_WRITE) == 0);
  const size_t header[2] = {0, len | 2};  // offset 0; size with IS_MMAPPED alone
  std::memcpy(chunk, header, sizeof header);
  const uintptr_t p = reinterpret_cast<uintptr_t>(chunk) + 16;
  uintptr_t lo = 0, hi = 0;
  REQUIRE(r.own_mapping(p, len - 16, &lo, &hi));
  CHECK(lo == reinterpret_cast<uintptr_t>(chunk));
  CHECK(hi == reinterpret_cast<uintptr_t>(chunk) + len);
  // Without the header it is taken for an arena's heap.
  const size_t none[2] = {0, 0};
  std::memcpy(chunk, none, sizeof none);
  CHECK_FALSE(r.own_mapping(p, len - 16, &lo, &hi));
  munmap(res, end - res);
}

TEST_CASE("host registry: a malloc buffer beside memory the driver pinned, freed",
          "[cuda][host_registry]") {
  FakeDriver drv;
  {
    RealMapRegistry r(drv);
    REQUIRE(watch_unmaps(&r));
    r.configure(256 * kMiB, kMiB);
    REQUIRE(mallopt(M_MMAP_THRESHOLD, 256 << 10) == 1);
    const size_t len = 4 * kMiB;
    auto* buf = static_cast<unsigned char*>(std::malloc(len));
    REQUIRE(buf);
    uintptr_t lo = 0, hi = 0;
    REQUIRE(r.own_mapping(reinterpret_cast<uintptr_t>(buf), len, &lo, &hi));
    // Memory right below the chunk, registered by someone else (the
    // driver's own pinned memory): one mapping with the chunk, for the kernel.
    void* below = mmap(reinterpret_cast<void*>(lo - kMiB), kMiB, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    const bool beside = below != MAP_FAILED && reinterpret_cast<uintptr_t>(below) == lo - kMiB;
    if (beside) REQUIRE(drv.host_register(below, kMiB, 0));
    CHECK_FALSE(r.pin(buf, len, 0));
    CHECK(r.pin(buf, len, 0));  // the chunk alone
    CHECK(r.counters().pinned == 1);
    CHECK(drv.registered_live() == (beside ? 2u : 1u));
    CHECK(r.pin(buf + kMiB, kMiB, 0));  // inside it: pinned already
    CHECK(r.counters().hits == 1);
    std::free(buf);  // glibc unmaps the chunk: unregistered inside the unmap
    CHECK(r.counters().unmapped == 1);
    CHECK(drv.registered_live() == (beside ? 1u : 0u));
    if (beside) {
      REQUIRE(drv.host_unregister(below));
      munmap(below, kMiB);
    }
    unwatch_unmaps(&r);
  }
  CHECK(drv.registered_live() == 0);
}
