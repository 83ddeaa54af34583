// GpuContext: the process's one owner of GPU state, shared by every gpuwire
// component of the process (the engine's DevicePath for pml gpuwire, the C
// device API of gpuwire/gpu_device.h for coll gpuwire).
//
// Why one: CUDA opens a peer allocation's IPC handle only once per process
// (a second cudaIpcOpenMemHandle fails with cudaErrorAlreadyMapped), pinned
// memory is a bounded resource of the node, and every unmap of the process
// must reach the one memory-kind cache that could hold a stale host answer.
//
// Lifetime: acquire() creates the context on the first call (it fails, with
// why, when there is no CUDA driver or no GPU) and counts references; the
// last release() destroys it, removing the UCM unmap handler before the
// classifier goes. Components open and close in either order.
// Sizes come from the config of the acquire() that creates the context.
//
// Threading: classify() is lock-free; the mapping cache has its own lock;
// the exporter, the stream pool, the pinned pool, the pinned cache and the
// scratch cache each have a lock of their own, taken by the accessors below
// (with_*) for the duration of the call. The pinned chunk pool serves the
// engine only: its chunks go back (PinnedChunk's end) under the engine's lock,
// never concurrently with another user. Streams: indexes 0 .. p2p_streams-1
// belong to the engine (one caller at a time: the engine's lock), index
// p2p_streams to the collectives (their own lock): a TrackedStream's mark()
// is never called from two threads at once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/host_registry.hpp"
#include "gpuwire/cuda/ipc_exporter.hpp"
#include "gpuwire/cuda/ipc_mapping_cache.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gpuwire/cuda/pinned_cache.hpp"
#include "gpuwire/cuda/pinned_pool.hpp"
#include "gpuwire/cuda/scratch_cache.hpp"
#include "gpuwire/cuda/stream.hpp"

namespace gpuwire::cuda {

// Forwards every unmap of the process (UCM's VM_UNMAPPED event: munmap,
// mremap, shmdt, brk) to c->invalidate(), which is what keeps the
// classifier's cached "plain host" answers right when the driver later maps
// GPU, managed or pinned memory at an address that was host memory. False
// when UCM refused (then the host table must stay off). The GpuContext does
// this for its classifier; separate so that the chain from a real munmap to
// the table can be tested without a GPU. unwatch_unmaps() before c goes.
bool watch_unmaps(MemoryClassifier* c);
void unwatch_unmaps(MemoryClassifier* c);

struct GpuContextConfig {
  size_t ipc_cache_entries = 512;
  size_t ipc_cache_bytes = size_t{64} << 30;
  int p2p_streams = 4;                          // per device, for the engine
  size_t staging_chunk_bytes = size_t{4} << 20;  // pinned chunks of chunked transfers
  size_t staging_max_bytes = size_t{64} << 20;
  size_t pinned_cache_bytes = size_t{256} << 20;  // whole-message pinned buffers; 0: none
};

class GpuContext {
 public:
  // The process's context, created on the first call; nullptr with why when
  // there is no usable GPU. Every successful acquire() needs one release().
  static GpuContext* acquire(const GpuContextConfig& config, std::string& why);
  static void release(GpuContext* ctx);
  // Tests only: the context created next asks this driver (the unit tests'
  // fake) instead of CUDA's for everything but streams and NVLink teams, so
  // that the engine runs with "a GPU present" on a machine without one
  // (tests/unit/engine/test_engine_gpu_host.cpp). Set while no context
  // exists; nullptr goes back to the CUDA driver.
  static void set_test_driver(DriverApi* driver);

  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  Driver& driver() { return driver_; }
  int device_count() const { return static_cast<int>(uuids_.size()); }
  // The local ordinal of the GPU with this UUID, or -1.
  int device_of_uuid(const uint8_t uuid[16]) const;
  bool unmap_hooked() const { return unmap_hooked_; }

  MemoryClassifier& classifier() { return classifier_; }  // lock-free
  IpcMappingCache& mappings() { return mappings_; }       // locks itself

  Status export_range(const MemoryInfo& mi, const void* buf, size_t len, IpcBlob* blob) {
    std::lock_guard<std::mutex> lock(export_mu_);
    return exporter_.export_range(mi, buf, len, blob);
  }
  IpcExporterCounters exporter_counters() {
    std::lock_guard<std::mutex> lock(export_mu_);
    return exporter_.counters();
  }

  // The engine's streams of a device in turn, or its stream `index`.
  Result<TrackedStream*> next_p2p_stream(int device);
  Result<TrackedStream*> p2p_stream(int device, int index);
  // The collectives' stream of a device.
  Result<TrackedStream*> coll_stream(int device);
  // The device's legacy default stream, tracked; the engine's only.
  Result<TrackedStream*> legacy_stream(int device);

  template <class F>
  auto with_pinned_pool(F&& f) {
    std::lock_guard<std::mutex> lock(pinned_mu_);
    return f(pinned_);
  }
  template <class F>
  auto with_pinned_cache(F&& f) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    return f(cache_);
  }
  template <class F>
  auto with_scratch(F&& f) {
    std::lock_guard<std::mutex> lock(scratch_mu_);
    return f(scratch_);
  }
  // Read without the lock: the class sizes never change, the bound only
  // shrinks (after a failed pin), and the gauges are statistics.
  const PinnedCache& pinned_cache() const { return cache_; }
  // The application's host buffers pinned for reuse (host_registry.hpp):
  // off until configured, and always off without unmap events.
  HostRegistry& host_registry() { return registry_; }
  void configure_host_registry(size_t max_bytes, size_t min_bytes) {
    registry_.configure(registry_hooked_ ? max_bytes : 0, min_bytes);
  }
  // Whether unmaps reach the host registry (UCM's hooks): without them it
  // stays off.
  bool host_registry_hooked() const { return registry_hooked_; }
  size_t pinned_chunk_bytes() const { return pinned_.chunk_bytes(); }
  size_t pinned_staging_bytes() const { return pinned_.capacity() * pinned_.chunk_bytes(); }

 private:
  GpuContext(const GpuContextConfig& config, DriverApi& api);
  ~GpuContext();
  ClassifierConfig classifier_config();

  bool unmap_hooked_ = false;  // set before classifier_ is built (declared first)
  Driver& driver_;  // CUDA's: NVLink teams
  DriverApi& api_;  // driver_, or the test driver: classifier, IPC, pinned memory
  const int p2p_streams_;
  MemoryClassifier classifier_;
  std::mutex export_mu_;
  IpcExporter exporter_;
  IpcMappingCache mappings_;
  std::mutex streams_mu_;
  StreamPool streams_;
  std::vector<int> next_stream_;  // per device, under streams_mu_
  std::mutex pinned_mu_;
  PinnedPool pinned_;
  std::mutex cache_mu_;
  PinnedCache cache_;
  std::mutex scratch_mu_;
  ScratchCache scratch_;
  HostRegistry registry_;  // locks itself; unregisters what it pinned when it goes
  bool registry_hooked_ = false;
  std::vector<std::array<uint8_t, 16>> uuids_;
};

}  // namespace gpuwire::cuda
