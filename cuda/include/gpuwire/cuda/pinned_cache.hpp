// PinnedCache: whole-message pinned host buffers, lent and kept for reuse.
//
// A message staged through host memory in one piece (a device receive landing
// in host memory, a device send copied out whole) wants one pinned buffer of
// its size: then the device copy is one DMA at full speed, with no CPU copy.
// Pinning costs milliseconds (64 MiB: 3.5 ms on the target), so buffers are
// kept and lent again.
//
// - Sizes come in classes: powers of two from min_bytes. acquire(n) lends an
//   idle buffer of n's class, else pins a new one while the bytes held (idle
//   and lent) stay within max_bytes, else lends the smallest larger idle
//   buffer, else unpins idle smaller buffers (largest first, oldest first
//   within a class) to make room, else answers busy: the caller then uses
//   plain host memory. A class above max_bytes is always busy. max_bytes 0:
//   always busy.
// - A failed pin (the driver refuses more pinned memory) lowers the bound to
//   the bytes held then, so a refusing driver is not asked again per message.
//
// Ownership: the cache owns every buffer it pinned, lent or not, and unpins
// all of them when destroyed; the owner makes sure nothing uses a lent buffer
// by then. Threading: not synchronised; the owner serialises every call.
// The DriverApi must outlive the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/pinned_pool.hpp"
#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

struct PinnedCacheConfig {
  size_t max_bytes = size_t{256} << 20;  // pinned bytes held, lent and idle; 0: off
  size_t min_bytes = size_t{64} << 10;   // smallest class (rounded up to a power of two)
};

struct PinnedCacheCounters {
  uint64_t hits = 0;          // lent a buffer pinned before
  uint64_t pins = 0;          // buffers pinned
  uint64_t evictions = 0;     // idle buffers unpinned to make room
  uint64_t busy = 0;          // acquire() refused: the bound could not be met
  uint64_t pin_failures = 0;  // the driver refused to pin
};

class PinnedCache {
 public:
  PinnedCache(DriverApi& driver, PinnedCacheConfig config = {});
  ~PinnedCache();
  PinnedCache(const PinnedCache&) = delete;
  PinnedCache& operator=(const PinnedCache&) = delete;

  // A pinned buffer of at least `bytes` (its class), portable and mapped;
  // `device`'s context pins it when a new one is needed. busy when the bound
  // cannot be met; the driver's error when pinning failed.
  Result<void*> acquire(size_t bytes, int device);
  // Gives back a buffer acquire() lent; it stays pinned for the next one.
  // Anything else is ignored (and logged).
  void release(void* buffer);

  bool enabled() const { return limit_ != 0; }
  // The class of a request: the buffer size acquire() would lend; 0 when it
  // is above the bound.
  size_t class_bytes(size_t bytes) const;
  // The bound now: max_bytes, or less after a failed pin.
  size_t limit() const { return limit_; }
  size_t max_bytes() const { return config_.max_bytes; }
  size_t held_bytes() const { return held_; }
  size_t lent_bytes() const { return lent_; }
  size_t buffers() const { return buffers_.size(); }
  size_t idle_buffers() const;
  PinnedCacheCounters counters() const { return counters_; }

 private:
  struct Entry {
    PinnedBuffer buffer;
    bool lent = false;
  };
  unsigned class_index(size_t class_bytes) const;
  void* lend(void* p);
  void unpin(void* p);

  DriverApi& driver_;
  PinnedCacheConfig config_;
  size_t limit_;
  size_t held_ = 0;
  size_t lent_ = 0;
  std::unordered_map<void*, Entry> buffers_;
  // Idle buffers per class, oldest first; index 0 is min_bytes.
  std::vector<std::vector<void*>> idle_;
  PinnedCacheCounters counters_;
};

}  // namespace gpuwire::cuda
