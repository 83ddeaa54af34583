// MemoryClassifier: what kind of memory a user buffer is, for every message.
//
// Two caches, because the two answers age differently (docs/cuda.md has the
// full argument):
//
// - Plain host memory (the driver does not know the address) goes into a
//   lock-free set-associative table of page ranges. A hit costs a hash and at
//   most four loads, no driver call, no lock. A plain host range can only turn
//   into CUDA memory after it is unmapped, so such an entry stays right until
//   its range is unmapped; the owner must forward every unmap of the process
//   to invalidate() (UCM's VM_UNMAPPED event, or Open MPI's memory release
//   hooks). Where no such events exist, set host_entries = 0.
// - Memory the driver knows (device, managed, pinned host) goes into a bounded
//   LRU map by allocation range. A hit is confirmed with one driver query of
//   the buffer ID (never reused by the driver), so a freed and re-allocated
//   buffer at the same address is detected, not served. This holds for
//   cuMemMap-ed (VMM) chunks too: a new chunk mapped at the same address has a
//   new buffer ID.
//
// Threading: classify(), invalidate() and counters() may be called from any
// thread concurrently. invalidate() is lock-free, allocates nothing and makes no
// driver call, so it may run inside a memory-release hook. The DriverApi must
// outlive the classifier.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

enum class MemoryKind : uint8_t {
  host,         // pageable host memory the driver does not know
  pinned_host,  // cudaMallocHost / cudaHostAlloc / cudaHostRegister
  device,       // cudaMalloc, cuMemAlloc, cudaMallocAsync (see kMemPool)
  managed,      // cudaMallocManaged
  vmm,          // cuMemCreate + cuMemMap
};

const char* memory_kind_name(MemoryKind kind);

enum MemoryFlag : uint32_t {
  kLegacyIpc = 1u << 0,  // cudaIpcGetMemHandle accepts the allocation
  kMemPool = 1u << 1,    // from a memory pool (cudaMallocAsync): no legacy IPC
  // With ClassifierConfig::sync_memops, on GPU memory a cudaMemcpy into which
  // may not have landed when it returned: first seen by this answer (marked
  // only now, after the application's copies so far), or not markable (pool,
  // managed, VMM memory). A message on it waits for the legacy stream first.
  kUnordered = 1u << 2,
};

struct MemoryInfo {
  MemoryKind kind = MemoryKind::host;
  uint32_t flags = 0;
  int device = -1;         // ordinal in this process; -1 for plain host memory
  uintptr_t base = 0;      // allocation base (mapped chunk for vmm); 0 for plain host
  size_t size = 0;         // allocation size; 0 for plain host
  uint64_t buffer_id = 0;  // driver's buffer ID; 0 for plain host

  bool on_gpu() const {
    return kind == MemoryKind::device || kind == MemoryKind::managed || kind == MemoryKind::vmm;
  }
  bool legacy_ipc_exportable() const {
    return kind == MemoryKind::device && (flags & kLegacyIpc) != 0;
  }
};

struct ClassifierConfig {
  // Plain-host table size, rounded up to a power of two (4 entries per set).
  // 0 turns the host cache off: every host buffer costs a driver query.
  uint32_t host_entries = 1024;
  // Driver-known allocations kept (LRU). 0: no device cache.
  uint32_t device_entries = 256;
  // Marks each device allocation the first time it is seen so that a
  // cudaMemcpy into it has landed when it returns (DriverApi::set_sync_memops):
  // what lets a message read it without waiting for the default stream.
  bool sync_memops = false;
};

struct ClassifierCounters {
  uint64_t host_hits = 0;      // served from the host table (approximate under concurrency)
  uint64_t device_hits = 0;    // device-table entries confirmed by buffer ID
  uint64_t misses = 0;         // full driver queries
  uint64_t stale = 0;          // device-table entries whose buffer ID had changed
  uint64_t invalidated = 0;    // host entries dropped by invalidate()
  uint64_t driver_errors = 0;  // failed driver queries
  uint64_t sync_memops_marked = 0;  // device allocations marked (ClassifierConfig::sync_memops)
  uint64_t sync_memops_errors = 0;  // marks the driver refused
};

class MemoryClassifier {
 public:
  explicit MemoryClassifier(DriverApi& driver, ClassifierConfig config = {});
  MemoryClassifier(const MemoryClassifier&) = delete;
  MemoryClassifier& operator=(const MemoryClassifier&) = delete;

  // Classifies [ptr, ptr + len). The buffer is taken to be one allocation, as
  // MPI requires; only `ptr` is asked about. `out` is set only on success; a
  // driver error is returned, never guessed into "host".
  Status classify(const void* ptr, size_t len, MemoryInfo& out) {
    if (no_gpu_ || ptr == nullptr) {
      out = MemoryInfo{};
      return Status{};
    }
    if (known_host(ptr, len)) {
      out = MemoryInfo{};
      return Status{};
    }
    return classify_slow(reinterpret_cast<uintptr_t>(ptr), len, out);
  }

  // True when [ptr, ptr + len) is plain host memory by the host table alone:
  // no driver call, no lock, no MemoryInfo. False means "ask classify()", not
  // "device memory". What lets a host message with a GPU present skip the
  // general send and receive paths (the engine's host_path.hpp). As right as
  // the table: until the range is unmapped (invalidate()); a cudaHostRegister
  // of a range already cached stays "host" (the driver is not asked again),
  // which is safe for every path that reads host memory with the CPU.
  bool known_host(const void* ptr, size_t len) {
    if (!host_lookup(reinterpret_cast<uintptr_t>(ptr), len)) return false;
    // A plain store: the count is approximate under concurrency, never a
    // locked instruction on the message path.
    host_hits_.store(host_hits_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return true;
  }

  // Forgets cached host ranges overlapping [addr, addr + len): call it for
  // every munmap/mremap/brk-shrink/shmdt of the process. Lock-free, O(host_entries).
  void invalidate(const void* addr, size_t len) noexcept;
  void invalidate_all() noexcept;

  ClassifierCounters counters() const;
  size_t device_entries() const;

 private:
  // Host table word: [first page : 45][page count - 1 : 18][valid : 1]; 0 = empty.
  static constexpr unsigned kPageShift = 12;
  static constexpr unsigned kCountBits = 18;
  static constexpr unsigned kWays = 4;
  static constexpr uint64_t kMaxPages = uint64_t{1} << kCountBits;
  static constexpr uint64_t kMaxPage = uint64_t{1} << (64 - kCountBits - 1);

  static uint64_t page_span(uintptr_t ptr, size_t len, uint64_t* first) {
    uintptr_t last = ptr + (len ? len - 1 : 0);
    if (last < ptr) return 0;  // wraps: never cached
    *first = ptr >> kPageShift;
    return (last >> kPageShift) - *first + 1;
  }
  size_t set_of(uint64_t page) const {
    return static_cast<size_t>((page * 0x9E3779B97F4A7C15ull) >> set_shift_) * kWays;
  }
  // On every host message with a GPU (known_host), so with only the checks
  // the comparison does not make: a first page of 2^45 or more matches no
  // entry's 45 bits and a span beyond 2^18 pages no entry's count, but a
  // range that wraps can end on its own first page.
  bool host_lookup(uintptr_t ptr, size_t len) const {
    if (set_shift_ == 64) return false;
    const uintptr_t last = ptr + len - (len != 0);
    if (last < ptr) return false;
    const uint64_t first = ptr >> kPageShift;
    const uint64_t span = (last >> kPageShift) - first;  // pages - 1
    const std::atomic<uint64_t>* set = &host_table_[set_of(first)];
    for (unsigned w = 0; w < kWays; ++w) {
      uint64_t e = set[w].load(std::memory_order_relaxed);
      if ((e >> (kCountBits + 1)) == first && (e & 1) && span <= ((e >> 1) & (kMaxPages - 1)))
        return true;
    }
    return false;
  }

  struct DeviceEntry {
    MemoryInfo info;
  };
  using Lru = std::list<DeviceEntry>;

  Status classify_slow(uintptr_t ptr, size_t len, MemoryInfo& out);
  Status query(uintptr_t ptr, MemoryInfo& out);
  void host_insert(uintptr_t ptr, size_t len, uint64_t epoch_before);
  void device_insert(const MemoryInfo& info);  // requires mu_
  void device_erase_overlapping(uintptr_t base, size_t size);  // requires mu_

  DriverApi& driver_;
  const ClassifierConfig config_;
  const bool no_gpu_;

  std::unique_ptr<std::atomic<uint64_t>[]> host_table_;
  size_t host_slots_ = 0;
  unsigned set_shift_ = 64;  // 64: no host table (at least 2 sets otherwise)
  std::atomic<uint64_t> unmap_epoch_{0};
  std::atomic<uint32_t> victim_{0};
  std::atomic<uint64_t> host_hits_{0};
  std::atomic<uint64_t> invalidated_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> driver_errors_{0};
  std::atomic<uint64_t> sync_memops_marked_{0};
  std::atomic<uint64_t> sync_memops_errors_{0};

  mutable std::mutex mu_;  // guards everything below
  Lru lru_;                // front: most recently used
  std::map<uintptr_t, Lru::iterator> by_base_;
  uint64_t device_hits_ = 0;
  uint64_t stale_ = 0;
};

}  // namespace gpuwire::cuda
