#include "gpuwire/cuda/memory_classifier.hpp"

#include <algorithm>
#include <bit>

namespace gpuwire::cuda {

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::host: return "host";
    case MemoryKind::pinned_host: return "pinned_host";
    case MemoryKind::device: return "device";
    case MemoryKind::managed: return "managed";
    case MemoryKind::vmm: return "vmm";
  }
  return "?";
}

MemoryClassifier::MemoryClassifier(DriverApi& driver, ClassifierConfig config)
    : driver_(driver), config_(config), no_gpu_(!driver.available()) {
  if (no_gpu_ || config_.host_entries == 0) return;
  size_t slots = std::bit_ceil(std::max<size_t>(config_.host_entries, 2 * kWays));
  size_t sets = slots / kWays;
  host_slots_ = slots;
  set_shift_ = 64 - static_cast<unsigned>(std::countr_zero(sets));
  host_table_ = std::make_unique<std::atomic<uint64_t>[]>(slots);
  for (size_t i = 0; i < slots; ++i) host_table_[i].store(0, std::memory_order_relaxed);
}

Status MemoryClassifier::classify_slow(uintptr_t ptr, size_t len, MemoryInfo& out) {
  // Read before the driver is asked: an unmap after this point drops what we insert.
  const uint64_t epoch = unmap_epoch_.load(std::memory_order_seq_cst);

  if (config_.device_entries > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_base_.upper_bound(ptr);
    if (it != by_base_.begin()) {
      --it;
      const MemoryInfo& cached = it->second->info;
      const uintptr_t off = ptr - cached.base;
      if (off < cached.size && len <= cached.size - off) {
        uint64_t id = 0;
        Status s = driver_.buffer_id(ptr, &id);
        if (!s) {
          driver_errors_.fetch_add(1, std::memory_order_relaxed);
          return detail::log_status(LogLevel::error, "memory classifier", s);
        }
        if (id == cached.buffer_id) {
          ++device_hits_;
          lru_.splice(lru_.begin(), lru_, it->second);
          out = cached;
          return Status{};
        }
        // Freed (and perhaps re-allocated at the same address): never serve it.
        ++stale_;
        lru_.erase(it->second);
        by_base_.erase(it);
      }
    }
  }

  MemoryInfo info;
  Status s = query(ptr, info);
  misses_.fetch_add(1, std::memory_order_relaxed);
  if (!s) {
    driver_errors_.fetch_add(1, std::memory_order_relaxed);
    return detail::log_status(LogLevel::error, "memory classifier", s);
  }
  bool first_use = false;  // kUnordered on this answer only, not on the cached entry
  if (config_.sync_memops && info.on_gpu()) {
    // Only plain device allocations take the mark; the rest stay unordered.
    const bool markable = info.kind == MemoryKind::device && !(info.flags & kMemPool);
    if (markable && driver_.set_sync_memops(info.base)) {
      sync_memops_marked_.fetch_add(1, std::memory_order_relaxed);
      first_use = true;
    } else {
      if (markable) sync_memops_errors_.fetch_add(1, std::memory_order_relaxed);
      info.flags |= kUnordered;  // every answer says so
    }
  }
  if (info.kind == MemoryKind::host) {
    host_insert(ptr, len, epoch);
  } else if (config_.device_entries > 0 && info.size > 0 && ptr >= info.base &&
             ptr - info.base < info.size) {
    std::lock_guard<std::mutex> lock(mu_);
    device_erase_overlapping(info.base, info.size);
    device_insert(info);
  }
  out = info;
  if (first_use) out.flags |= kUnordered;
  return Status{};
}

Status MemoryClassifier::query(uintptr_t ptr, MemoryInfo& out) {
  PointerAttributes a;
  Status s = driver_.pointer_attributes(ptr, &a);
  if (!s) return s;
  MemoryInfo info;
  if (a.memory_type == RawMemoryType::none && a.buffer_id == 0 && !a.is_managed) {
    out = info;  // plain host memory
    return Status{};
  }
  info.buffer_id = a.buffer_id;
  info.device = a.device;
  info.base = a.range_base;
  info.size = a.range_size;
  if (a.is_managed) {
    info.kind = MemoryKind::managed;
  } else if (a.memory_type == RawMemoryType::host) {
    info.kind = MemoryKind::pinned_host;
  } else if (a.memory_type == RawMemoryType::device || a.memory_type == RawMemoryType::unified) {
    info.kind = MemoryKind::device;
    if (a.from_mempool) {
      info.flags |= kMemPool;
    } else if (a.legacy_ipc) {
      info.flags |= kLegacyIpc;
    } else {
      bool is_vmm = false;
      uintptr_t base = 0;
      size_t size = 0;
      s = driver_.vmm_range(ptr, &is_vmm, &base, &size);
      if (!s) return s;
      if (is_vmm) {
        info.kind = MemoryKind::vmm;
        info.base = base;
        info.size = size;
      }
    }
  } else {
    return Status::error(Errc::not_supported, "cuPointerGetAttributes: unexpected memory type",
                         static_cast<int>(a.memory_type));
  }
  out = info;
  return Status{};
}

void MemoryClassifier::host_insert(uintptr_t ptr, size_t len, uint64_t epoch_before) {
  if (set_shift_ == 64) return;
  uint64_t first = 0;
  uint64_t pages = page_span(ptr, len, &first);
  if (pages == 0 || first >= kMaxPage) return;
  pages = std::min(pages, kMaxPages);
  std::atomic<uint64_t>* set = &host_table_[set_of(first)];

  unsigned way = kWays;
  for (unsigned w = 0; w < kWays && way == kWays; ++w) {
    uint64_t e = set[w].load(std::memory_order_relaxed);
    if ((e & 1) && (e >> (kCountBits + 1)) == first) {
      way = w;
      pages = std::max(pages, ((e >> 1) & (kMaxPages - 1)) + 1);
    }
  }
  for (unsigned w = 0; w < kWays && way == kWays; ++w)
    if (set[w].load(std::memory_order_relaxed) == 0) way = w;
  if (way == kWays) way = victim_.fetch_add(1, std::memory_order_relaxed) % kWays;

  const uint64_t word = (first << (kCountBits + 1)) | ((pages - 1) << 1) | 1;
  // Dekker pairing with invalidate(): either its scan sees this store, or this
  // load sees its epoch bump and the entry is withdrawn.
  set[way].store(word, std::memory_order_seq_cst);
  if (unmap_epoch_.load(std::memory_order_seq_cst) != epoch_before) {
    uint64_t expected = word;
    set[way].compare_exchange_strong(expected, 0, std::memory_order_seq_cst);
  }
}

void MemoryClassifier::invalidate(const void* addr, size_t len) noexcept {
  if (set_shift_ == 64 || len == 0) return;
  unmap_epoch_.fetch_add(1, std::memory_order_seq_cst);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t hi = lo + len - 1 < lo ? UINTPTR_MAX : lo + len - 1;
  const uint64_t lo_page = lo >> kPageShift;
  const uint64_t hi_page = hi >> kPageShift;
  uint64_t dropped = 0;
  for (size_t i = 0; i < host_slots_; ++i) {
    uint64_t e = host_table_[i].load(std::memory_order_seq_cst);
    if (!(e & 1)) continue;
    const uint64_t first = e >> (kCountBits + 1);
    const uint64_t last = first + ((e >> 1) & (kMaxPages - 1));
    if (first <= hi_page && last >= lo_page &&
        host_table_[i].compare_exchange_strong(e, 0, std::memory_order_seq_cst))
      ++dropped;
  }
  if (dropped) invalidated_.fetch_add(dropped, std::memory_order_relaxed);
}

void MemoryClassifier::invalidate_all() noexcept {
  if (set_shift_ == 64) return;
  unmap_epoch_.fetch_add(1, std::memory_order_seq_cst);
  uint64_t dropped = 0;
  for (size_t i = 0; i < host_slots_; ++i)
    if (host_table_[i].exchange(0, std::memory_order_seq_cst) != 0) ++dropped;
  if (dropped) invalidated_.fetch_add(dropped, std::memory_order_relaxed);
}

void MemoryClassifier::device_insert(const MemoryInfo& info) {
  lru_.push_front(DeviceEntry{info});
  by_base_[info.base] = lru_.begin();
  while (lru_.size() > config_.device_entries) {
    by_base_.erase(lru_.back().info.base);
    lru_.pop_back();
  }
}

void MemoryClassifier::device_erase_overlapping(uintptr_t base, size_t size) {
  // Entries never overlap each other, and live allocations never overlap: any
  // entry overlapping a fresh answer belongs to a freed allocation.
  auto it = by_base_.lower_bound(base);
  if (it != by_base_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second->info.size > base) {
      lru_.erase(prev->second);
      by_base_.erase(prev);
    }
  }
  while (it != by_base_.end() && it->first - base < size) {
    lru_.erase(it->second);
    it = by_base_.erase(it);
  }
}

ClassifierCounters MemoryClassifier::counters() const {
  ClassifierCounters c;
  c.host_hits = host_hits_.load(std::memory_order_relaxed);
  c.invalidated = invalidated_.load(std::memory_order_relaxed);
  c.misses = misses_.load(std::memory_order_relaxed);
  c.driver_errors = driver_errors_.load(std::memory_order_relaxed);
  c.sync_memops_marked = sync_memops_marked_.load(std::memory_order_relaxed);
  c.sync_memops_errors = sync_memops_errors_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  c.device_hits = device_hits_;
  c.stale = stale_;
  return c;
}

size_t MemoryClassifier::device_entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace gpuwire::cuda
