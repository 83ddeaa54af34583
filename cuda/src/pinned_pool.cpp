#include "gpuwire/cuda/pinned_pool.hpp"

namespace gpuwire::cuda {

Result<PinnedBuffer> PinnedBuffer::allocate(DriverApi& driver, size_t bytes, int device) {
  if (bytes == 0) return Status::error(Errc::invalid_argument, "PinnedBuffer: zero bytes");
  void* p = nullptr;
  Status s = driver.host_alloc(bytes, device, &p);
  if (!s) return detail::log_status(LogLevel::error, "PinnedBuffer", s);
  PinnedBuffer b;
  b.driver_ = &driver;
  b.data_ = p;
  b.size_ = bytes;
  return b;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    driver_ = std::exchange(o.driver_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void PinnedBuffer::reset() {
  if (data_) detail::log_failure(LogLevel::warn, "PinnedBuffer", driver_->host_free(data_));
  driver_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

PinnedChunk& PinnedChunk::operator=(PinnedChunk&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = std::exchange(o.pool_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void PinnedChunk::reset() {
  if (pool_) pool_->give_back(data_);
  pool_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

PinnedPool::PinnedPool(DriverApi& driver, PinnedPoolConfig config) : driver_(driver), config_(config) {}

Status PinnedPool::grow(int device) {
  if (slabs_.size() >= config_.max_slabs)
    return Status::error(Errc::busy, "PinnedPool: all chunks on loan");
  if (config_.chunk_bytes == 0 || config_.chunks_per_slab == 0 ||
      config_.chunk_bytes > SIZE_MAX / config_.chunks_per_slab)
    return Status::error(Errc::invalid_argument, "PinnedPool: bad chunk geometry");
  Result<PinnedBuffer> slab =
      PinnedBuffer::allocate(driver_, config_.chunk_bytes * config_.chunks_per_slab,
                             device >= 0 ? device : config_.device);
  if (!slab) return slab.status();
  auto* base = static_cast<char*>(slab->data());
  slabs_.push_back(std::move(slab).value());
  free_.reserve(capacity());
  for (size_t i = config_.chunks_per_slab; i-- > 0;) free_.push_back(base + i * config_.chunk_bytes);
  ++counters_.slabs;
  return Status{};
}

Status PinnedPool::reserve(size_t slabs) {
  while (slabs_.size() < slabs) {
    Status s = grow(-1);
    if (!s) return s;
  }
  return Status{};
}

Result<PinnedChunk> PinnedPool::acquire(int device) {
  if (free_.empty()) {
    Status s = grow(device);
    if (!s) {
      if (s.code() == Errc::busy) ++counters_.busy;
      return s;
    }
  }
  PinnedChunk c;
  c.pool_ = this;
  c.data_ = free_.back();
  c.size_ = config_.chunk_bytes;
  free_.pop_back();
  ++counters_.acquired;
  return c;
}

}  // namespace gpuwire::cuda
