#include "gpuwire/cuda/ipc_mapping_cache.hpp"

#include <climits>
#include <cstring>

namespace gpuwire::cuda {

IpcMapping& IpcMapping::operator=(IpcMapping&& other) noexcept {
  if (this != &other) {
    reset();
    cache_ = std::exchange(other.cache_, nullptr);
    node_ = std::exchange(other.node_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    length_ = std::exchange(other.length_, 0);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void IpcMapping::reset() {
  if (cache_) cache_->release(static_cast<IpcMappingCache::Node*>(node_));
  cache_ = nullptr;
  node_ = nullptr;
  ptr_ = nullptr;
  length_ = 0;
  device_ = -1;
}

IpcMappingCache::IpcMappingCache(DriverApi& driver, IpcCacheConfig config)
    : driver_(driver), config_(config) {}

IpcMappingCache::~IpcMappingCache() {
  if (leased_ != 0)
    detail::log(LogLevel::error, "IpcMappingCache destroyed with %zu leased mappings", leased_);
  for (const Node& n : lru_) close(n);
  for (const Node& n : withdrawn_) close(n);
}

Result<IpcMapping> IpcMappingCache::acquire(uint32_t peer, const IpcBlob& blob, int device) {
  std::lock_guard<std::mutex> lock(mu_);
  Status s = validate_ipc_blob(blob);
  if (!s) return s;

  auto it = index_.find(Key{peer, blob.base, device});
  if (it != index_.end()) {
    Node& n = *it->second;
    if (n.buffer_id == blob.buffer_id && n.size == blob.size) {
      ++counters_.hits;
      lru_.splice(lru_.begin(), lru_, it->second);
      return lease(n, blob);
    }
    ++counters_.stale;
    withdraw(it->second);
  }
  // Live allocations of one process never overlap: any other mapping of this
  // peer that overlaps the blob's range is of a freed allocation.
  const uint64_t end = blob.base + blob.size;
  for (auto o = index_.lower_bound(Key{peer, 0, INT_MIN});
       o != index_.end() && std::get<0>(o->first) == peer && std::get<1>(o->first) < end;) {
    const Node& n = *o->second;
    const bool same = n.base == blob.base && n.buffer_id == blob.buffer_id && n.size == blob.size;
    auto next = std::next(o);
    if (!same && n.base + n.size > blob.base) {
      ++counters_.stale;
      withdraw(o->second);
    }
    o = next;
  }

  IpcHandle handle;
  std::memcpy(handle.bytes, blob.handle, sizeof handle.bytes);
  uintptr_t mapped = 0;
  s = driver_.ipc_open(handle, device, &mapped);
  if (!s) {
    ++counters_.open_failures;
    return detail::log_status(LogLevel::error, "IpcMappingCache", s);
  }
  ++counters_.misses;
  lru_.push_front(Node{peer, device, blob.base, blob.size, blob.buffer_id, mapped, 0, false});
  index_[Key{peer, blob.base, device}] = lru_.begin();
  bytes_ += blob.size;
  IpcMapping m = lease(lru_.front(), blob);
  trim();
  return m;
}

IpcMapping IpcMappingCache::lease(Node& n, const IpcBlob& blob) {
  if (n.refs++ == 0) ++leased_;
  IpcMapping m;
  m.cache_ = this;
  m.node_ = &n;
  m.ptr_ = reinterpret_cast<void*>(n.mapped + blob.offset);
  m.length_ = blob.length;
  m.device_ = n.device;
  return m;
}

void IpcMappingCache::release(Node* n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (--n->refs != 0) return;
  --leased_;
  if (!n->withdrawn) {
    trim();
    return;
  }
  for (auto it = withdrawn_.begin(); it != withdrawn_.end(); ++it) {
    if (&*it == n) {
      close(*it);
      withdrawn_.erase(it);
      return;
    }
  }
}

void IpcMappingCache::withdraw(List::iterator it) {
  Node& n = *it;
  index_.erase(Key{n.peer, n.base, n.device});
  bytes_ -= n.size;
  if (n.refs == 0) {
    close(n);
    lru_.erase(it);
  } else {
    n.withdrawn = true;
    withdrawn_.splice(withdrawn_.end(), lru_, it);
  }
}

void IpcMappingCache::close(const Node& n) {
  Status s = driver_.ipc_close(n.mapped, n.device);
  if (!s) {
    ++counters_.close_failures;
    detail::log_failure(LogLevel::warn, "IpcMappingCache", s);
  }
}

void IpcMappingCache::trim() {
  while (lru_.size() > config_.max_entries || bytes_ > config_.max_bytes) {
    auto victim = lru_.end();
    for (auto it = lru_.end(); it != lru_.begin();) {
      --it;
      if (it->refs == 0) {
        victim = it;
        break;
      }
    }
    if (victim == lru_.end()) return;  // all leased: over the bound until releases
    index_.erase(Key{victim->peer, victim->base, victim->device});
    bytes_ -= victim->size;
    close(*victim);
    lru_.erase(victim);
    ++counters_.evictions;
  }
}

void IpcMappingCache::purge_peer(uint32_t peer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto o = index_.lower_bound(Key{peer, 0, INT_MIN});
       o != index_.end() && std::get<0>(o->first) == peer;) {
    auto next = std::next(o);
    withdraw(o->second);
    o = next;
  }
}

}  // namespace gpuwire::cuda
