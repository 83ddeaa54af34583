#include "gpuwire/cuda/pinned_cache.hpp"

#include <bit>

namespace gpuwire::cuda {

namespace {
constexpr size_t kTopClass = size_t{1} << (sizeof(size_t) * 8 - 1);
}  // namespace

PinnedCache::PinnedCache(DriverApi& driver, PinnedCacheConfig config)
    : driver_(driver), config_(config), limit_(config.max_bytes) {
  if (config_.min_bytes == 0) config_.min_bytes = 1;
  if (config_.min_bytes > kTopClass) {
    limit_ = 0;  // no class can exist
    config_.min_bytes = kTopClass;
  }
  config_.min_bytes = std::bit_ceil(config_.min_bytes);
}

PinnedCache::~PinnedCache() {
  if (lent_)
    detail::log(LogLevel::debug, "PinnedCache: %zu bytes still lent at destruction are unpinned",
                lent_);
  // Entries unpin themselves (PinnedBuffer).
}

size_t PinnedCache::class_bytes(size_t bytes) const {
  size_t c = bytes < config_.min_bytes ? config_.min_bytes : bytes;
  if (c > limit_ || c > kTopClass) return 0;
  c = std::bit_ceil(c);
  return c <= limit_ ? c : 0;
}

unsigned PinnedCache::class_index(size_t class_bytes) const {
  return static_cast<unsigned>(std::countr_zero(class_bytes) - std::countr_zero(config_.min_bytes));
}

size_t PinnedCache::idle_buffers() const {
  size_t n = 0;
  for (const auto& v : idle_) n += v.size();
  return n;
}

void* PinnedCache::lend(void* p) {
  Entry& e = buffers_.at(p);
  e.lent = true;
  lent_ += e.buffer.size();
  return p;
}

void PinnedCache::unpin(void* p) {
  auto it = buffers_.find(p);
  held_ -= it->second.buffer.size();
  buffers_.erase(it);  // PinnedBuffer unpins
}

Result<void*> PinnedCache::acquire(size_t bytes, int device) {
  const size_t cb = class_bytes(bytes);
  if (cb == 0) {
    ++counters_.busy;
    return Status::error(Errc::busy, "PinnedCache: message above the bound");
  }
  const unsigned idx = class_index(cb);
  if (idle_.size() <= idx) idle_.resize(idx + 1);

  // 1. An idle buffer of the class; the one returned last (warmest).
  if (!idle_[idx].empty()) {
    void* p = idle_[idx].back();
    idle_[idx].pop_back();
    ++counters_.hits;
    return lend(p);
  }
  auto pin = [&]() -> Result<void*> {
    Result<PinnedBuffer> b = PinnedBuffer::allocate(driver_, cb, device);
    if (!b) {
      // The driver refuses more: keep what is pinned, ask no more.
      ++counters_.pin_failures;
      limit_ = held_;
      return b.status();
    }
    void* p = b->data();
    buffers_.emplace(p, Entry{std::move(b).value(), false});
    held_ += cb;
    ++counters_.pins;
    return lend(p);
  };
  // 2. A new one within the bound.
  if (held_ + cb <= limit_) return pin();
  // 3. The smallest larger idle buffer (cheaper than unpinning and pinning).
  for (size_t i = idx + 1; i < idle_.size(); ++i) {
    if (idle_[i].empty()) continue;
    void* p = idle_[i].back();
    idle_[i].pop_back();
    ++counters_.hits;
    return lend(p);
  }
  // 4. Every idle buffer is of a smaller class now: unpin them, largest
  // first (fewest driver calls), oldest first within a class.
  if (lent_ + cb <= limit_) {
    for (size_t i = idx; i-- > 0 && held_ + cb > limit_;) {
      std::vector<void*>& v = idle_[i];
      size_t n = 0;
      while (n < v.size() && held_ + cb > limit_) {
        unpin(v[n++]);
        ++counters_.evictions;
      }
      v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
    }
    return pin();
  }
  ++counters_.busy;
  return Status::error(Errc::busy, "PinnedCache: bound reached");
}

void PinnedCache::release(void* buffer) {
  auto it = buffers_.find(buffer);
  if (it == buffers_.end() || !it->second.lent) {
    detail::log(LogLevel::warn, "PinnedCache: release of %p, which it did not lend, ignored",
                buffer);
    return;
  }
  Entry& e = it->second;
  e.lent = false;
  lent_ -= e.buffer.size();
  idle_[class_index(e.buffer.size())].push_back(buffer);
}

}  // namespace gpuwire::cuda
