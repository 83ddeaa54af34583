// Pinned host memory: PinnedBuffer owns one allocation, PinnedPool hands out
// fixed-size staging chunks of a few large allocations.
//
// Pinning costs milliseconds (cudaHostAlloc/cudaHostRegister of 64 MiB: 3.5 ms
// on the target), so the pool pins a slab of chunks at a time, keeps every slab
// until it is destroyed, and never pins more than max_slabs: past that,
// acquire() answers busy and the staged pipeline waits for a chunk to come back.
// Chunks are portable and device-mapped: usable by copies on every device.
//
// Ownership: the pool owns its slabs; chunks (leases) must end before the pool
// is destroyed. Threading: not synchronised; the owner serialises acquire()
// and chunk destruction. The DriverApi must outlive buffers and pools.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static Result<PinnedBuffer> allocate(DriverApi& driver, size_t bytes, int device);
  ~PinnedBuffer() { reset(); }
  PinnedBuffer(PinnedBuffer&& o) noexcept { *this = std::move(o); }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset();

 private:
  DriverApi* driver_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

struct PinnedPoolConfig {
  size_t chunk_bytes = size_t{4} << 20;
  size_t chunks_per_slab = 8;
  size_t max_slabs = 8;  // 256 MiB with the defaults
  int device = 0;        // whose context pins slabs (when acquire() names none)
};

struct PinnedPoolCounters {
  uint64_t acquired = 0;
  uint64_t busy = 0;   // acquire() refused at the bound
  uint64_t slabs = 0;  // slabs pinned
};

class PinnedPool;

// A chunk on loan from a PinnedPool. Move-only; returns itself on destruction.
class PinnedChunk {
 public:
  PinnedChunk() = default;
  ~PinnedChunk() { reset(); }
  PinnedChunk(PinnedChunk&& o) noexcept { *this = std::move(o); }
  PinnedChunk& operator=(PinnedChunk&& o) noexcept;
  PinnedChunk(const PinnedChunk&) = delete;
  PinnedChunk& operator=(const PinnedChunk&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  explicit operator bool() const { return pool_ != nullptr; }
  void reset();

 private:
  friend class PinnedPool;
  PinnedPool* pool_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

class PinnedPool {
 public:
  PinnedPool(DriverApi& driver, PinnedPoolConfig config = {});
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A free chunk; pins a new slab if none is free and the bound allows; busy
  // when every chunk is on loan. A new slab is pinned in `device`'s context
  // (the config's when negative), so a process need not touch a GPU it does
  // not use; chunks are portable either way.
  Result<PinnedChunk> acquire(int device = -1);
  // Pins slabs up front (at start-up, not on a message's path).
  Status reserve(size_t slabs);

  size_t chunk_bytes() const { return config_.chunk_bytes; }
  size_t capacity() const { return slabs_.size() * config_.chunks_per_slab; }
  size_t available() const { return free_.size(); }
  PinnedPoolCounters counters() const { return counters_; }

 private:
  friend class PinnedChunk;
  Status grow(int device);
  void give_back(void* chunk) { free_.push_back(chunk); }

  DriverApi& driver_;
  const PinnedPoolConfig config_;
  std::vector<PinnedBuffer> slabs_;
  std::vector<void*> free_;
  PinnedPoolCounters counters_;
};

}  // namespace gpuwire::cuda
