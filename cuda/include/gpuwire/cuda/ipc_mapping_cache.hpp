// IpcMappingCache: the receiver's side of CUDA IPC.
//
// Maps a peer's exported allocation once per (peer, base, buffer ID, local
// device) and hands out IpcMapping leases, one per copy in flight.
// - A mapping with a lease is never closed. Idle mappings are closed in LRU
//   order when the cache holds more than max_entries mappings or max_bytes of
//   exported allocations. While every mapping is leased the cache may exceed
//   its bounds; it shrinks back as leases end.
// - Stale mappings are never served: a blob for a known (peer, base) with a new
//   buffer ID, or for a range overlapping another mapping of the same peer,
//   means the peer freed that allocation. The old mapping leaves the index at
//   once and is closed when its last lease ends.
// - Closing unmaps (cudaIpcCloseMemHandle), which lets the peer's driver free
//   the memory behind it: bound max_bytes with that in mind.
//
// Ownership: the cache owns every mapping; leases must end before the cache is
// destroyed. Threading: every call (acquire, a lease's end, purge_peer, the
// gauges) takes the cache's own lock: the process's one cache (GpuContext)
// serves the engine and coll gpuwire from their threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/ipc_blob.hpp"
#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

struct IpcCacheConfig {
  size_t max_entries = 512;
  size_t max_bytes = size_t{64} << 30;
};

struct IpcCacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;          // mappings opened
  uint64_t evictions = 0;       // idle mappings closed to respect the bounds
  uint64_t stale = 0;           // mappings withdrawn because the peer freed the allocation
  uint64_t open_failures = 0;
  uint64_t close_failures = 0;
};

class IpcMappingCache;

// A lease on a mapping: ptr() stays valid while the lease lives. Move-only.
class IpcMapping {
 public:
  IpcMapping() = default;
  ~IpcMapping() { reset(); }
  IpcMapping(IpcMapping&& other) noexcept { *this = std::move(other); }
  IpcMapping& operator=(IpcMapping&& other) noexcept;
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;

  // The payload (blob offset applied) in this process' address space.
  void* ptr() const { return ptr_; }
  size_t length() const { return length_; }
  int device() const { return device_; }
  explicit operator bool() const { return cache_ != nullptr; }
  void reset();

 private:
  friend class IpcMappingCache;
  IpcMappingCache* cache_ = nullptr;
  void* node_ = nullptr;  // the cache's entry
  void* ptr_ = nullptr;
  size_t length_ = 0;
  int device_ = -1;
};

class IpcMappingCache {
 public:
  IpcMappingCache(DriverApi& driver, IpcCacheConfig config = {});
  ~IpcMappingCache();  // closes every mapping
  IpcMappingCache(const IpcMappingCache&) = delete;
  IpcMappingCache& operator=(const IpcMappingCache&) = delete;

  // Maps (or finds) the allocation of `blob` from `peer` into `device`'s
  // context. The blob is validated again here.
  Result<IpcMapping> acquire(uint32_t peer, const IpcBlob& blob, int device);

  // The peer is gone: withdraw all its mappings (idle ones close now).
  void purge_peer(uint32_t peer);

  IpcCacheCounters counters() const { std::lock_guard<std::mutex> l(mu_); return counters_; }
  size_t entries() const { std::lock_guard<std::mutex> l(mu_); return lru_.size(); }  // indexed mappings
  size_t bytes() const { std::lock_guard<std::mutex> l(mu_); return bytes_; }  // of indexed mappings
  size_t leased() const { std::lock_guard<std::mutex> l(mu_); return leased_; }  // mappings with leases
  size_t withdrawn() const { std::lock_guard<std::mutex> l(mu_); return withdrawn_.size(); }  // stale, still leased

 private:
  friend class IpcMapping;
  using Key = std::tuple<uint32_t, uint64_t, int>;  // peer, base, local device
  struct Node;
  using List = std::list<Node>;
  struct Node {
    uint32_t peer;
    int device;
    uint64_t base;
    uint64_t size;
    uint64_t buffer_id;
    uintptr_t mapped;
    uint32_t refs;
    bool withdrawn;
  };

  IpcMapping lease(Node& node, const IpcBlob& blob);
  void release(Node* node);
  void withdraw(List::iterator it);  // out of the index; closed now or at last release
  void close(const Node& node);
  void trim();

  // One cache serves every component of the process (GpuContext): acquire,
  // a lease's release and purge_peer may come from different threads.
  mutable std::mutex mu_;
  DriverApi& driver_;
  const IpcCacheConfig config_;
  List lru_;        // indexed mappings, front: most recently used
  List withdrawn_;  // stale mappings that still have leases
  std::map<Key, List::iterator> index_;
  size_t bytes_ = 0;
  size_t leased_ = 0;
  IpcCacheCounters counters_;
};

}  // namespace gpuwire::cuda
