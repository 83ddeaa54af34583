// HostRegistry: the application's host buffers that messages use again and
// again, pinned (cudaHostRegister) so that a copy between one of them and GPU
// memory is one DMA at the copy engine's rate instead of a CPU copy through
// pinned chunks. Bounded in bytes, least recently used out first; a buffer is
// pinned the second time a message of at least min_bytes uses it, so a buffer
// used once costs nothing more.
//
// What is pinned is malloc's own mapping of a large buffer (its mmapped
// chunk, told by the chunk's header), else the whole mapping that holds the
// buffer, and only private anonymous memory (mmap): never the brk heap, a
// thread arena's heap (64 MiB aligned, its inaccessible rest after it), the
// main stack or a file. The chunk comes first because the kernel merges
// neighbouring anonymous mappings, the driver's own pinned memory among them,
// and a range overlapping one already registered is refused. The
// driver refuses a copy whose host range is only partly registered: a range
// inside a heap would make the application's own copies of a later
// allocation that overlaps it fail, whereas a mapping's bytes can only be
// reused through an unmap, which unregisters it.
//
// Unmaps: every unmap of the process (UCM's VM_UNMAPPED event: munmap,
// mremap, shmdt, brk, madvise; watch_unmaps()) reaches unmapped(), which
// unregisters an overlapping range at once, inside the unmap. Deferring it
// would leave the driver translating that address to the old pages for every
// later copy of the process, the application's own included. unmapped() takes
// no lock and calls the driver only for a range this registry pinned: never
// for the driver's own mappings, so never back into a driver that unmaps.
//
// Threading: pin() and configure() take the registry's lock (the driver's
// calls made under it may unmap: unmapped() never takes it); each slot is
// claimed with a compare-and-swap by whichever of them unregisters it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "gpuwire/cuda/driver.hpp"

namespace gpuwire::cuda {

struct HostRegistryCounters {
  uint64_t pinned = 0;     // ranges registered
  uint64_t hits = 0;       // pin() answered by a registered range
  uint64_t evicted = 0;    // unregistered for room or for a longer range
  uint64_t unmapped = 0;   // unregistered because the process unmapped them
  uint64_t failed = 0;     // buffers not pinned: not a mapping of their own, or the driver refused
  uint64_t bytes = 0;      // registered now
};

class HostRegistry {
 public:
  static constexpr unsigned kSlots = 32;
  static constexpr unsigned kCandidates = 8;

  explicit HostRegistry(DriverApi& api) : api_(api) {}
  virtual ~HostRegistry();
  HostRegistry(const HostRegistry&) = delete;
  HostRegistry& operator=(const HostRegistry&) = delete;

  // max_bytes 0 turns it off (and unregisters everything); ranges shorter
  // than min_bytes are never pinned.
  void configure(size_t max_bytes, size_t min_bytes);

  // True when [ptr, ptr + len) of pageable host memory is now pinned by this
  // registry (registered on this call or before); false: use it as pageable.
  // device: the GPU whose context registers it (the registration is portable).
  bool pin(const void* ptr, size_t len, int device);

  // Every unmap of the process: unregisters what overlaps [addr, addr + len).
  void unmapped(const void* addr, size_t len) noexcept;

  HostRegistryCounters counters() const;

 protected:
  // The mapping [lo, hi) that holds [p, p + len), if it may be pinned whole
  // (the rules above; from /proc/self/maps). Tests replace it.
  virtual bool own_mapping(uintptr_t p, size_t len, uintptr_t* lo, uintptr_t* hi) const;

 private:
  enum : int { kFree = 0, kBusy = 1, kLive = 2 };
  struct Slot {
    std::atomic<int> state{kFree};
    std::atomic<uintptr_t> lo{0};  // page-aligned range [lo, hi)
    std::atomic<uintptr_t> hi{0};
    uint64_t last_use = 0;  // under mu_
  };
  struct Candidate {
    uintptr_t ptr = 0;
    size_t len = 0;
    bool refused = false;  // the driver refused it: never asked again
  };

  // Unregisters a live slot if this caller claims it; false if another did.
  bool drop(Slot& s, std::atomic<uint64_t>& why) noexcept;
  bool make_room(size_t bytes);  // under mu_
  Slot* least_recent();          // under mu_: the live slot used longest ago
  Candidate* seen(uintptr_t ptr, size_t len);  // under mu_: nullptr on the first sighting

  DriverApi& api_;
  mutable std::mutex mu_;
  size_t max_bytes_ = 0;
  size_t min_bytes_ = size_t{1} << 20;
  uint64_t clock_ = 0;
  Slot slots_[kSlots];
  Candidate candidates_[kCandidates];
  unsigned next_candidate_ = 0;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> pinned_{0}, hits_{0}, evicted_{0}, unmapped_{0}, failed_{0};
};

// Forwards every unmap of the process to r->unmapped() (as watch_unmaps does
// for the classifier); unwatch before r goes.
bool watch_unmaps(HostRegistry* r);
void unwatch_unmaps(HostRegistry* r);

}  // namespace gpuwire::cuda
