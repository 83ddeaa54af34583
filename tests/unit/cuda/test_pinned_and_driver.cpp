// PinnedPool against the fake driver; Status, logging and the real Driver as
// seen on a machine without a GPU (or in a host-only build).
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "fake_driver.hpp"
#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/ipc_mapping_cache.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gpuwire/cuda/pinned_pool.hpp"
#include "gpuwire/cuda/stream.hpp"
#include "gw_catch.hpp"

using namespace gw_test;

TEST_CASE("pinned pool: slabs pinned once, chunks on loan, bounded", "[cuda][pinned]") {
  FakeDriver drv;
  PinnedPoolConfig cfg;
  cfg.chunk_bytes = 64 << 10;
  cfg.chunks_per_slab = 4;
  cfg.max_slabs = 2;
  {
    PinnedPool pool(drv, cfg);
    CHECK(pool.capacity() == 0);
    CHECK(drv.host_allocs == 0);  // nothing pinned before it is needed

    std::vector<PinnedChunk> out;
    std::set<uintptr_t> starts;
    for (int i = 0; i < 8; ++i) {
      Result<PinnedChunk> c = pool.acquire();
      REQUIRE(c.ok());
      CHECK(c->size() == cfg.chunk_bytes);
      std::memset(c->data(), i, c->size());  // real, writable memory
      starts.insert(reinterpret_cast<uintptr_t>(c->data()));
      out.push_back(std::move(c).value());
    }
    CHECK(starts.size() == 8);
    for (auto it = starts.begin(); std::next(it) != starts.end(); ++it)
      if (*std::next(it) - *it < cfg.chunk_bytes) FAIL("chunks overlap");
    CHECK(drv.host_allocs == 2);
    CHECK(pool.capacity() == 8);

    Result<PinnedChunk> none = pool.acquire();
    CHECK(none.status().code() == Errc::busy);
    CHECK(pool.counters().busy == 1);

    void* returned = out.back().data();
    out.pop_back();  // back to the pool
    CHECK(pool.available() == 1);
    Result<PinnedChunk> again = pool.acquire();
    REQUIRE(again.ok());
    CHECK(again->data() == returned);
    CHECK(drv.host_allocs == 2);

    PinnedChunk moved = std::move(again).value();
    PinnedChunk other = std::move(moved);
    CHECK_FALSE(moved);
    CHECK(other);
    out.clear();
    other.reset();
    CHECK(pool.available() == 8);
  }
  CHECK(drv.host_live() == 0);  // the pool unpinned its slabs
  CHECK(drv.host_frees == 2);
}

TEST_CASE("pinned pool: reserve up front, and allocation failures", "[cuda][pinned]") {
  FakeDriver drv;
  PinnedPoolConfig cfg;
  cfg.chunk_bytes = 4096;
  cfg.chunks_per_slab = 2;
  cfg.max_slabs = 3;
  PinnedPool pool(drv, cfg);
  REQUIRE(pool.reserve(2).ok());
  CHECK(pool.capacity() == 4);
  CHECK(pool.reserve(4).code() == Errc::busy);
  CHECK(pool.capacity() == 6);

  PinnedPool failing(drv, cfg);
  drv.fail_host_alloc = true;
  Result<PinnedChunk> c = failing.acquire();
  CHECK(c.status().code() == Errc::driver);
  CHECK(std::string(c.status().call()) == "cudaHostAlloc");
}

TEST_CASE("pinned pool: a slab is pinned in the context of the GPU that asked for it",
          "[cuda][pinned]") {
  FakeDriver drv(4);
  PinnedPoolConfig cfg;
  cfg.chunk_bytes = 4096;
  cfg.chunks_per_slab = 1;
  cfg.max_slabs = 4;
  cfg.device = 0;
  PinnedPool pool(drv, cfg);
  Result<PinnedChunk> a = pool.acquire(3);
  REQUIRE(a.ok());
  CHECK(drv.last_host_device == 3);  // not GPU 0: the process may never use it
  Result<PinnedChunk> b = pool.acquire();
  REQUIRE(b.ok());
  CHECK(drv.last_host_device == 0);  // no GPU named: the configured one
  a->reset();
  Result<PinnedChunk> c = pool.acquire(2);  // a free chunk: nothing new pinned
  REQUIRE(c.ok());
  CHECK(drv.host_allocs == 2);
}

TEST_CASE("pinned buffer: move-only owner", "[cuda][pinned]") {
  FakeDriver drv;
  {
    Result<PinnedBuffer> r = PinnedBuffer::allocate(drv, 1000, 0);
    REQUIRE(r.ok());
    PinnedBuffer a = std::move(r).value();
    PinnedBuffer b;
    b = std::move(a);
    CHECK_FALSE(a);
    CHECK(b.size() == 1000);
    CHECK(drv.host_live() == 1);
  }
  CHECK(drv.host_live() == 0);
  CHECK(PinnedBuffer::allocate(drv, 0, 0).status().code() == Errc::invalid_argument);
}

TEST_CASE("status: messages name the failing call", "[cuda][status]") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.message() == "ok");
  Status s = Status::error(Errc::busy, "PinnedPool: all chunks on loan");
  CHECK(s.message() == "PinnedPool: all chunks on loan: busy");
  Status r = Status::runtime_error("cudaIpcOpenMemHandle", 1);
  CHECK(r.code() == Errc::driver);
  CHECK(r.message().rfind("cudaIpcOpenMemHandle: ", 0) == 0);
#if GPUWIRE_TEST_HAVE_CUDA
  // The runtime's own name for the code (driver.cpp names it for status.cpp).
  CHECK(r.message() == "cudaIpcOpenMemHandle: cudaErrorInvalidValue (1)");
#else
  CHECK(r.message() == "cudaIpcOpenMemHandle: CUDA_ERROR (1)");
#endif

  Result<int> v = 3;
  CHECK(v.ok());
  CHECK(*v == 3);
  Result<int> e = s;
  CHECK_FALSE(e.ok());
  CHECK(e.status().code() == Errc::busy);
  Result<int> bogus = Status{};  // an ok status without a value is an error
  CHECK_FALSE(bogus.ok());
}

namespace {
std::vector<std::string>* g_logged = nullptr;
void sink(LogLevel, const char* msg, void*) { g_logged->push_back(msg); }
}  // namespace

TEST_CASE("logging goes to the sink, and nowhere without one", "[cuda][status]") {
  std::vector<std::string> logged;
  g_logged = &logged;
  set_log_sink(sink, nullptr);
  FakeDriver drv;
  IpcMappingCache cache(drv);
  IpcBlob b{};
  b.magic = kIpcBlobMagic;
  b.version = kIpcBlobVersion;
  b.base = 0x1000;
  b.size = 4096;
  b.buffer_id = 1;
  b.handle[0] = 1;
  drv.fail_opens = 1;
  CHECK_FALSE(cache.acquire(0, b, 0).ok());
  set_log_sink(nullptr, nullptr);
  REQUIRE(logged.size() == 1);
  CHECK(logged[0].find("cudaIpcOpenMemHandle") != std::string::npos);
}

TEST_CASE("the real driver on a machine without a GPU reports it and refuses work", "[cuda][driver]") {
  Driver& d = Driver::instance();
  if (d.available()) {
    WARN("a GPU is present: the [gpu] tests cover this machine");
    return;
  }
  CHECK_FALSE(d.available());
  CHECK(d.device_count() == 0);
  CHECK(std::string(d.unavailable_reason()).size() > 0);
  INFO(d.unavailable_reason());

  MemoryClassifier c(d);
  MemoryInfo info;
  int x = 0;
  REQUIRE(c.classify(&x, sizeof x, info).ok());
  CHECK(info.kind == MemoryKind::host);

  StreamPool pool;
  CHECK(pool.next(0).status().code() == Errc::no_device);
  CHECK(Stream::create(0).status().code() == Errc::no_device);
  Stream none;
  CHECK(copy_async(&x, &x, sizeof x, none).code() == Errc::no_device);
  {
    DeviceGuard g(0);
    CHECK(g.status().code() == Errc::no_device);
  }
  PinnedPool pinned(d);
  CHECK_FALSE(pinned.acquire().ok());
}
