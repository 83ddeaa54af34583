// The IPC blob decoder, IpcExporter and IpcMappingCache against the fake driver.
#include <cstring>
#include <random>
#include <vector>

#include "fake_driver.hpp"
#include "gpuwire/cuda/ipc_exporter.hpp"
#include "gpuwire/cuda/ipc_mapping_cache.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gw_catch.hpp"

using namespace gw_test;

namespace {

IpcBlob good_blob() {
  IpcBlob b{};
  b.magic = kIpcBlobMagic;
  b.version = kIpcBlobVersion;
  b.device = 1;
  b.base = 0x7f0000000000;
  b.size = 1 << 20;
  b.buffer_id = 42;
  b.offset = 4096;
  b.length = 8192;
  b.handle[0] = 42;
  return b;
}

Status decode(const IpcBlob& b, IpcBlob* out) { return decode_ipc_blob(&b, sizeof b, out); }

// What the sender does: classify, then export.
IpcBlob export_of(FakeDriver& drv, IpcExporter& ex, uintptr_t ptr, size_t len) {
  MemoryClassifier c(drv);
  MemoryInfo info;
  REQUIRE(c.classify(reinterpret_cast<void*>(ptr), len, info).ok());
  IpcBlob b;
  Status s = ex.export_range(info, reinterpret_cast<void*>(ptr), len, &b);
  REQUIRE(s.ok());
  return b;
}

}  // namespace

TEST_CASE("blob: a valid blob decodes to itself", "[cuda][ipc]") {
  IpcBlob in = good_blob(), out{};
  REQUIRE(decode(in, &out).ok());
  CHECK(std::memcmp(&in, &out, sizeof in) == 0);
  in.offset = in.size;  // an empty payload at the very end is fine
  in.length = 0;
  CHECK(decode(in, &out).ok());
}

TEST_CASE("blob: malformed input is refused and leaves the output untouched", "[cuda][ipc]") {
  IpcBlob out{};
  out.buffer_id = 7;
  const IpcBlob g = good_blob();
  std::vector<std::pair<const char*, IpcBlob>> bad;
  auto add = [&](const char* what, auto mutate) {
    IpcBlob b = g;
    mutate(b);
    bad.emplace_back(what, b);
  };
  add("magic", [](IpcBlob& b) { b.magic ^= 1; });
  add("version", [](IpcBlob& b) { b.version = 2; });
  add("flags", [](IpcBlob& b) { b.flags = 1; });
  add("reserved", [](IpcBlob& b) { b.reserved = 1; });
  add("device", [](IpcBlob& b) { b.device = -1; });
  add("base", [](IpcBlob& b) { b.base = 0; });
  add("size", [](IpcBlob& b) { b.size = 0; });
  add("wrap", [](IpcBlob& b) { b.base = UINT64_MAX - 100; });
  add("buffer id", [](IpcBlob& b) { b.buffer_id = 0; });
  add("offset", [](IpcBlob& b) { b.offset = b.size + 1; });
  add("length", [](IpcBlob& b) { b.length = b.size - b.offset + 1; });
  add("offset+length overflow", [](IpcBlob& b) {
    b.offset = 16;
    b.length = UINT64_MAX - 8;
  });
  add("huge offset", [](IpcBlob& b) { b.offset = UINT64_MAX; });
  for (auto& [what, b] : bad) {
    INFO(what);
    Status s = decode(b, &out);
    CHECK(s.code() == Errc::invalid_argument);
    CHECK(out.buffer_id == 7);
  }
  // wrong sizes
  std::vector<uint8_t> bytes(sizeof(IpcBlob) + 1);
  std::memcpy(bytes.data(), &g, sizeof g);
  CHECK_FALSE(decode_ipc_blob(bytes.data(), bytes.size(), &out).ok());
  CHECK_FALSE(decode_ipc_blob(bytes.data(), sizeof(IpcBlob) - 1, &out).ok());
  CHECK_FALSE(decode_ipc_blob(nullptr, sizeof(IpcBlob), &out).ok());
  // an unaligned wire buffer is fine
  CHECK(decode_ipc_blob(bytes.data(), sizeof(IpcBlob), &out).ok());
  std::vector<uint8_t> shifted(sizeof(IpcBlob) + 1);
  std::memcpy(shifted.data() + 1, &g, sizeof g);
  CHECK(decode_ipc_blob(shifted.data() + 1, sizeof(IpcBlob), &out).ok());
}

TEST_CASE("blob: random bytes never decode into an out-of-range payload", "[cuda][ipc]") {
  std::mt19937_64 rng(12345);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    IpcBlob b = good_blob();
    auto* raw = reinterpret_cast<uint8_t*>(&b);
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) raw[rng() % 72] = static_cast<uint8_t>(rng());
    IpcBlob out{};
    if (decode(b, &out).ok()) {
      ++accepted;
      CHECK(out.offset <= out.size);
      CHECK(out.length <= out.size - out.offset);
      CHECK(out.base + out.size > out.base);
    }
  }
  CHECK(accepted > 0);  // harmless mutations (handle, uuid, in-range values) pass
}

TEST_CASE("exporter: one handle per allocation, found again by buffer ID", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  uintptr_t d = drv.alloc(1 << 20, FakeKind::device, 1);
  IpcBlob b1 = export_of(drv, ex, d + 100, 200);
  CHECK(b1.base == d);
  CHECK(b1.size == (1u << 20));
  CHECK(b1.offset == 100);
  CHECK(b1.length == 200);
  CHECK(b1.device == 1);
  CHECK(b1.device_uuid[0] == 0xA1);
  CHECK(b1.buffer_id == drv.find(d)->id);
  CHECK(validate_ipc_blob(b1).ok());
  IpcBlob b2 = export_of(drv, ex, d + 5000, 10);
  CHECK(std::memcmp(b1.handle, b2.handle, sizeof b1.handle) == 0);
  CHECK(drv.ipc_gets == 1);
  CHECK(ex.counters().hits == 1);

  // free and re-allocate at the same address: a new handle
  drv.free(d);
  drv.alloc(1 << 20, FakeKind::device, 1, d);
  IpcBlob b3 = export_of(drv, ex, d, 10);
  CHECK(b3.buffer_id != b1.buffer_id);
  CHECK(drv.ipc_gets == 2);
}

TEST_CASE("exporter: refuses what legacy IPC cannot export, and bad ranges", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  MemoryClassifier c(drv);
  IpcBlob out{};
  for (FakeKind k : {FakeKind::pool, FakeKind::managed, FakeKind::pinned_host, FakeKind::vmm}) {
    uintptr_t p = drv.alloc(1 << 20, k);
    MemoryInfo info;
    REQUIRE(c.classify(reinterpret_cast<void*>(p), 64, info).ok());
    CHECK(ex.export_range(info, reinterpret_cast<void*>(p), 64, &out).code() == Errc::not_supported);
  }
  MemoryInfo host;
  CHECK(ex.export_range(host, &out, 8, &out).code() == Errc::not_supported);
  CHECK(ex.counters().refused == 5);
  CHECK(drv.ipc_gets == 0);

  uintptr_t d = drv.alloc(1 << 20);
  MemoryInfo info;
  REQUIRE(c.classify(reinterpret_cast<void*>(d), 64, info).ok());
  CHECK(ex.export_range(info, reinterpret_cast<void*>(d + (1 << 20) - 8), 16, &out).code() ==
        Errc::invalid_argument);
  CHECK(ex.export_range(info, reinterpret_cast<void*>(d - 1), 1, &out).code() == Errc::invalid_argument);
}

TEST_CASE("exporter: bounded LRU", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv, 2);
  uintptr_t a = drv.alloc(1 << 20), b = drv.alloc(1 << 20), c = drv.alloc(1 << 20);
  export_of(drv, ex, a, 1);
  export_of(drv, ex, b, 1);
  export_of(drv, ex, a, 1);
  export_of(drv, ex, c, 1);  // evicts b
  CHECK(ex.size() == 2);
  CHECK(ex.counters().evictions == 1);
  export_of(drv, ex, a, 1);
  CHECK(drv.ipc_gets == 3);
  export_of(drv, ex, b, 1);
  CHECK(drv.ipc_gets == 4);
  ex.forget(drv.find(b)->id);
  CHECK(ex.size() == 1);
}

TEST_CASE("mapping cache: one mapping per allocation, leases add the offset", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  IpcMappingCache cache(drv);
  uintptr_t d = drv.alloc(1 << 20);
  IpcBlob b = export_of(drv, ex, d + 64, 128);
  {
    Result<IpcMapping> m1 = cache.acquire(3, b, 0);
    REQUIRE(m1.ok());
    Result<IpcMapping> m2 = cache.acquire(3, export_of(drv, ex, d + 4096, 1), 0);
    REQUIRE(m2.ok());
    CHECK(drv.ipc_opens == 1);
    const uintptr_t mapped = reinterpret_cast<uintptr_t>(m1->ptr()) - 64;
    CHECK(drv.is_open(mapped));
    CHECK(reinterpret_cast<uintptr_t>(m2->ptr()) == mapped + 4096);
    CHECK(m1->length() == 128);
    CHECK(cache.leased() == 1);
    CHECK(cache.counters().hits == 1);
    CHECK(cache.counters().misses == 1);
    // another peer, or another local device, is another mapping
    REQUIRE(cache.acquire(4, b, 0).ok());
    REQUIRE(cache.acquire(3, b, 1).ok());
    CHECK(drv.ipc_opens == 3);
    CHECK(cache.entries() == 3);
    CHECK(cache.bytes() == 3u << 20);
  }
  CHECK(cache.leased() == 0);
  CHECK(drv.open_count() == 3);  // idle mappings stay mapped
}

TEST_CASE("mapping cache: leases move, and end once", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  IpcMappingCache cache(drv);
  uintptr_t d = drv.alloc(1 << 20);
  Result<IpcMapping> r = cache.acquire(0, export_of(drv, ex, d, 8), 0);
  REQUIRE(r.ok());
  IpcMapping a = std::move(r).value();
  IpcMapping b = std::move(a);
  CHECK_FALSE(a);
  CHECK(b);
  CHECK(cache.leased() == 1);
  IpcMapping c;
  c = std::move(b);
  CHECK(cache.leased() == 1);
  c.reset();
  c.reset();
  CHECK(cache.leased() == 0);
}

TEST_CASE("mapping cache: LRU eviction by count and bytes closes idle mappings", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  IpcCacheConfig cfg;
  cfg.max_entries = 2;
  cfg.max_bytes = 3u << 20;
  IpcMappingCache cache(drv, cfg);
  uintptr_t a = drv.alloc(1 << 20), b = drv.alloc(1 << 20), c = drv.alloc(1 << 20), big = drv.alloc(2 << 20);
  IpcBlob ba = export_of(drv, ex, a, 1), bb = export_of(drv, ex, b, 1), bc = export_of(drv, ex, c, 1);
  REQUIRE(cache.acquire(0, ba, 0).ok());
  REQUIRE(cache.acquire(0, bb, 0).ok());
  REQUIRE(cache.acquire(0, ba, 0).ok());  // a most recent
  REQUIRE(cache.acquire(0, bc, 0).ok());  // count bound: b goes
  CHECK(cache.entries() == 2);
  CHECK(cache.counters().evictions == 1);
  CHECK(drv.ipc_closes == 1);
  REQUIRE(cache.acquire(0, ba, 0).ok());
  CHECK(drv.ipc_opens == 3);
  REQUIRE(cache.acquire(0, export_of(drv, ex, big, 1), 0).ok());  // c goes
  CHECK(cache.entries() == 2);
  CHECK(cache.bytes() == 3u << 20);
  CHECK(drv.ipc_closes == 2);
  // the byte bound alone: a second 2 MiB buffer pushes out a and big
  uintptr_t big2 = drv.alloc(2 << 20);
  REQUIRE(cache.acquire(0, export_of(drv, ex, big2, 1), 0).ok());
  CHECK(cache.entries() == 1);
  CHECK(cache.bytes() == 2u << 20);
  CHECK(drv.ipc_closes == 4);
  CHECK(cache.counters().evictions == 4);
  CHECK(drv.bad_closes == 0);
}

TEST_CASE("mapping cache: a leased mapping is never evicted", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  IpcCacheConfig cfg;
  cfg.max_entries = 1;
  IpcMappingCache cache(drv, cfg);
  uintptr_t a = drv.alloc(1 << 20), b = drv.alloc(1 << 20);
  Result<IpcMapping> la = cache.acquire(0, export_of(drv, ex, a, 1), 0);
  Result<IpcMapping> lb = cache.acquire(0, export_of(drv, ex, b, 1), 0);
  REQUIRE(la.ok());
  REQUIRE(lb.ok());
  CHECK(cache.entries() == 2);  // over the bound: both are in use
  CHECK(drv.ipc_closes == 0);
  la->reset();  // a idle now, and least recently used: trimmed
  CHECK(cache.entries() == 1);
  CHECK(drv.ipc_closes == 1);
  CHECK(drv.is_open(reinterpret_cast<uintptr_t>(lb->ptr())));
}

TEST_CASE("mapping cache: a re-allocated buffer at the same base is never served stale", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  IpcMappingCache cache(drv);
  uintptr_t d = drv.alloc(1 << 20);
  IpcBlob old_blob = export_of(drv, ex, d, 8);
  Result<IpcMapping> old_lease = cache.acquire(0, old_blob, 0);
  REQUIRE(old_lease.ok());
  const uintptr_t old_map = reinterpret_cast<uintptr_t>(old_lease->ptr());

  drv.free(d);
  drv.alloc(1 << 20, FakeKind::device, 0, d);
  IpcBlob new_blob = export_of(drv, ex, d, 8);
  REQUIRE(new_blob.base == old_blob.base);
  REQUIRE(new_blob.buffer_id != old_blob.buffer_id);

  Result<IpcMapping> fresh = cache.acquire(0, new_blob, 0);
  REQUIRE(fresh.ok());
  CHECK(reinterpret_cast<uintptr_t>(fresh->ptr()) != old_map);
  CHECK(cache.counters().stale == 1);
  CHECK(cache.entries() == 1);
  CHECK(cache.withdrawn() == 1);     // the old one is still leased...
  CHECK(drv.is_open(old_map));       // ...so still mapped
  old_lease->reset();
  CHECK(cache.withdrawn() == 0);
  CHECK_FALSE(drv.is_open(old_map));  // closed at its last release

  // and the new mapping is what later acquires get
  Result<IpcMapping> again = cache.acquire(0, new_blob, 0);
  CHECK(again->ptr() == fresh->ptr());
}

TEST_CASE("mapping cache: an overlapping new allocation withdraws the old mapping", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  IpcMappingCache cache(drv);
  uintptr_t a = drv.alloc(1 << 20), b = drv.alloc(1 << 20);
  REQUIRE(cache.acquire(0, export_of(drv, ex, a, 1), 0).ok());
  REQUIRE(cache.acquire(0, export_of(drv, ex, b, 1), 0).ok());
  REQUIRE(cache.acquire(1, export_of(drv, ex, b, 1), 0).ok());  // other peer: unaffected
  drv.free(a);
  drv.free(b);
  uintptr_t inner = drv.alloc(64 << 10, FakeKind::device, 0, b + 4096);  // inside the old b
  REQUIRE(cache.acquire(0, export_of(drv, ex, inner, 1), 0).ok());
  CHECK(cache.counters().stale == 1);
  CHECK(cache.entries() == 3);  // peer 0: a, inner; peer 1: b
  CHECK(drv.ipc_closes == 1);
}

TEST_CASE("mapping cache: failures, malformed blobs, purge and destruction", "[cuda][ipc]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  uintptr_t a = drv.alloc(1 << 20), b = drv.alloc(1 << 20);
  IpcBlob ba = export_of(drv, ex, a, 1), bb = export_of(drv, ex, b, 1);
  {
    IpcMappingCache cache(drv);
    drv.fail_opens = 1;
    Result<IpcMapping> r = cache.acquire(0, ba, 0);
    CHECK(r.status().code() == Errc::driver);
    CHECK(std::string(r.status().call()) == "cudaIpcOpenMemHandle");
    CHECK(cache.entries() == 0);
    CHECK(cache.counters().open_failures == 1);

    IpcBlob bad = ba;
    bad.length = bad.size + 1;
    CHECK(cache.acquire(0, bad, 0).status().code() == Errc::invalid_argument);
    CHECK(drv.ipc_opens == 1);

    REQUIRE(cache.acquire(0, ba, 0).ok());
    Result<IpcMapping> held = cache.acquire(0, bb, 0);
    REQUIRE(held.ok());
    REQUIRE(cache.acquire(5, ba, 0).ok());
    cache.purge_peer(0);
    CHECK(cache.entries() == 1);
    CHECK(cache.withdrawn() == 1);
    CHECK(drv.open_count() == 2);
    held->reset();
    CHECK(drv.open_count() == 1);
  }
  CHECK(drv.open_count() == 0);  // the destructor closed the rest
  CHECK(drv.bad_closes == 0);
}
