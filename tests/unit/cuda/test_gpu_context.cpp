// The process's GPU context without a GPU, and the mapping cache it shares
// between the components' threads (the threaded case is a guard for the
// sanitizer builds: on a loaded machine the threads rarely overlap enough for
// a missing lock to show in the counts).
#include <thread>
#include <vector>

#include "fake_driver.hpp"
#include "gpuwire/core.h"
#include "gpuwire/cuda/gpu_context.hpp"
#include "gpuwire/cuda/ipc_exporter.hpp"
#include "gpuwire/cuda/ipc_mapping_cache.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gw_catch.hpp"

using namespace gw_test;

TEST_CASE("GPU context: without a GPU none is created, the attempt is counted",
          "[cuda][context]") {
  if (Driver::instance().available() && Driver::instance().device_count() > 0) {
    WARN("a GPU is present: the [gpu] tests cover this machine");
    return;
  }
  const gw_core_counters_t before = *gw_core_counters();
  std::string why;
  GpuContext* ctx = GpuContext::acquire(GpuContextConfig{}, why);
  CHECK(ctx == nullptr);
  CHECK_FALSE(why.empty());
  GpuContext::release(ctx);  // nothing held: nothing happens
  const gw_core_counters_t* after = gw_core_counters();
  CHECK(after->gpu_context_acquires == before.gpu_context_acquires + 1);
  CHECK(after->gpu_contexts_created == before.gpu_contexts_created);
  CHECK(after->gpu_context_refs == 0);
}

TEST_CASE("mapping cache: leases taken and ended from several threads at once",
          "[cuda][ipc][context]") {
  FakeDriver drv;
  IpcExporter ex(drv);
  IpcMappingCache cache(drv);
  uintptr_t d = drv.alloc(1 << 20);
  MemoryClassifier c(drv);
  MemoryInfo info;
  REQUIRE(c.classify(reinterpret_cast<void*>(d), 4096, info).ok());
  IpcBlob b;
  REQUIRE(ex.export_range(info, reinterpret_cast<void*>(d), 4096, &b).ok());
  REQUIRE(cache.acquire(7, b, 0).ok());  // opened once, before the threads
  constexpr int kThreads = 4;
  constexpr int kRounds = 100000;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        Result<IpcMapping> m = cache.acquire(7, b, 0);
        if (!m.ok() || m->ptr() == nullptr) ++failures[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) CHECK(f == 0);
  CHECK(cache.leased() == 0);
  CHECK(cache.counters().hits == uint64_t{kThreads} * kRounds);
  CHECK(cache.counters().misses == 1);
  CHECK(drv.ipc_opens == 1);
}
