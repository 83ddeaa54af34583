#include "gpuwire/cuda/gpu_context.hpp"

#include <ucm/api/ucm.h>

#include <algorithm>
#include <cstring>

#include "gpuwire/core.h"

namespace gpuwire::cuda {

namespace {

// The process's context and its references. std::mutex is constant-
// initialised: no static initialisation order to worry about, and usable
// from any component's open, whenever the core was loaded.
constinit std::mutex g_mu;
constinit GpuContext* g_ctx = nullptr;
constinit unsigned long long g_refs = 0;
constinit DriverApi* g_test_driver = nullptr;

// The classifier caches "plain host" answers by page range; such an answer
// stays right until the range is unmapped, so every unmap of the process is
// forwarded to it (UCM hooks munmap, mremap, shmdt and brk).
void on_vm_unmapped(ucm_event_type_t, ucm_event_t* event, void* arg) {
  static_cast<MemoryClassifier*>(arg)->invalidate(event->vm_unmapped.address,
                                                  event->vm_unmapped.size);
}

void count(unsigned long long gw_core_counters_t::*field, long long by) {
  __atomic_fetch_add(&(gw_core_counters()->*field), by, __ATOMIC_RELAXED);
}

}  // namespace

bool watch_unmaps(MemoryClassifier* c) {
  return ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 1000, on_vm_unmapped, c) == UCS_OK;
}

void unwatch_unmaps(MemoryClassifier* c) {
  ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_vm_unmapped, c);
}

// Without unmap events a cached host answer could outlive its mapping: then
// the classifier asks the driver every time instead. The handler's argument is
// the classifier, built right after this (its address is already fixed); an
// unmap between the two reaches an empty cache, which has nothing to drop.
ClassifierConfig GpuContext::classifier_config() {
  ClassifierConfig c;
  c.sync_memops = true;  // messages read device buffers without waiting for the default stream
  unmap_hooked_ = watch_unmaps(&classifier_);
  if (!unmap_hooked_) c.host_entries = 0;
  return c;
}

GpuContext::GpuContext(const GpuContextConfig& config, DriverApi& api)
    : driver_(Driver::instance()),
      api_(api),
      p2p_streams_(std::clamp(config.p2p_streams, 1, 63)),
      classifier_(api_, classifier_config()),
      exporter_(api_),
      mappings_(api_, IpcCacheConfig{config.ipc_cache_entries, config.ipc_cache_bytes}),
      // The engine's streams are non-blocking (stream.hpp says why); the
      // collectives' stream stays ordered after the legacy stream.
      streams_(StreamPoolConfig{p2p_streams_ + 1, 0, false, (uint64_t{1} << p2p_streams_) - 1}),
      pinned_(api_, PinnedPoolConfig{config.staging_chunk_bytes, 2,
                                        std::max<size_t>(1, config.staging_max_bytes /
                                                                (2 * config.staging_chunk_bytes)),
                                        0}),
      cache_(api_, PinnedCacheConfig{config.pinned_cache_bytes, size_t{64} << 10}),
      registry_(api_) {
  registry_hooked_ = watch_unmaps(&registry_);
}

GpuContext::~GpuContext() {
  // After the unset no handler runs any more; then the classifier may go
  // (members are destroyed after this body).
  if (unmap_hooked_) unwatch_unmaps(&classifier_);
  if (registry_hooked_) unwatch_unmaps(&registry_);
}

GpuContext* GpuContext::acquire(const GpuContextConfig& config, std::string& why) {
  std::lock_guard<std::mutex> lock(g_mu);
  count(&gw_core_counters_t::gpu_context_acquires, 1);
  if (!g_ctx) {
    DriverApi& drv = g_test_driver ? *g_test_driver : Driver::instance();
    if (!drv.available()) {
      why = g_test_driver ? "test driver: no CUDA driver" : Driver::instance().unavailable_reason();
      return nullptr;
    }
    if (drv.device_count() <= 0) {
      why = "no GPU";
      return nullptr;
    }
    GpuContext* c = new GpuContext(config, drv);
    for (int i = 0; i < drv.device_count(); ++i) {
      std::array<uint8_t, 16> u{};
      if (!drv.device_uuid(i, u.data())) u.fill(0);
      c->uuids_.push_back(u);
    }
    c->next_stream_.assign(c->uuids_.size(), 0);
    g_ctx = c;
    count(&gw_core_counters_t::gpu_contexts_created, 1);
  }
  ++g_refs;
  count(&gw_core_counters_t::gpu_context_refs, 1);
  return g_ctx;
}

void GpuContext::set_test_driver(DriverApi* driver) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_ctx) {
    detail::log(LogLevel::error, "GpuContext::set_test_driver while a context exists: ignored");
    return;
  }
  g_test_driver = driver;
}

void GpuContext::release(GpuContext* ctx) {
  if (!ctx) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (ctx != g_ctx || g_refs == 0) {
    detail::log(LogLevel::error, "GpuContext::release of a context not held");
    return;
  }
  count(&gw_core_counters_t::gpu_context_refs, -1);
  if (--g_refs == 0) {
    delete g_ctx;
    g_ctx = nullptr;
  }
}

int GpuContext::device_of_uuid(const uint8_t uuid[16]) const {
  for (size_t i = 0; i < uuids_.size(); ++i) {
    if (std::memcmp(uuids_[i].data(), uuid, 16) == 0) return static_cast<int>(i);
  }
  return -1;
}

Result<TrackedStream*> GpuContext::next_p2p_stream(int device) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  if (device < 0 || device >= device_count())
    return Status::error(Errc::invalid_argument, "GpuContext: no such device", device);
  int& next = next_stream_[device];
  Result<TrackedStream*> s = streams_.get(device, next);
  if (s) next = (next + 1) % p2p_streams_;
  return s;
}

Result<TrackedStream*> GpuContext::p2p_stream(int device, int index) {
  if (index < 0 || index >= p2p_streams_)
    return Status::error(Errc::invalid_argument, "GpuContext: no such stream", index);
  std::lock_guard<std::mutex> lock(streams_mu_);
  return streams_.get(device, index);
}

Result<TrackedStream*> GpuContext::legacy_stream(int device) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  return streams_.legacy(device);
}

Result<TrackedStream*> GpuContext::coll_stream(int device) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  return streams_.get(device, p2p_streams_);
}

}  // namespace gpuwire::cuda
