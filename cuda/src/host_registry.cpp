#include "gpuwire/cuda/host_registry.hpp"

#include <ucm/api/ucm.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

namespace {

void on_vm_unmapped(ucm_event_type_t, ucm_event_t* event, void* arg) {
  static_cast<HostRegistry*>(arg)->unmapped(event->vm_unmapped.address, event->vm_unmapped.size);
}

}  // namespace

bool watch_unmaps(HostRegistry* r) {
  return ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 1000, on_vm_unmapped, r) == UCS_OK;
}

void unwatch_unmaps(HostRegistry* r) {
  ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_vm_unmapped, r);
}

HostRegistry::~HostRegistry() {
  for (Slot& s : slots_) drop(s, evicted_);
}

void HostRegistry::configure(size_t max_bytes, size_t min_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  max_bytes_ = max_bytes;
  min_bytes_ = min_bytes ? min_bytes : 1;
  make_room(0);
}

bool HostRegistry::drop(Slot& s, std::atomic<uint64_t>& why) noexcept {
  int live = kLive;
  if (!s.state.compare_exchange_strong(live, kBusy, std::memory_order_acq_rel)) return false;
  const uintptr_t lo = s.lo.load(std::memory_order_relaxed);
  const uintptr_t hi = s.hi.load(std::memory_order_relaxed);
  Status st = api_.host_unregister(reinterpret_cast<void*>(lo));
  if (!st) detail::log_failure(LogLevel::error, "host registry", st);
  bytes_.fetch_sub(hi - lo, std::memory_order_relaxed);
  why.fetch_add(1, std::memory_order_relaxed);
  s.state.store(kFree, std::memory_order_release);
  return true;
}

void HostRegistry::unmapped(const void* addr, size_t len) noexcept {
  if (len == 0 || bytes_.load(std::memory_order_acquire) == 0) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t hi = lo + len < lo ? UINTPTR_MAX : lo + len;
  for (Slot& s : slots_) {
    if (s.state.load(std::memory_order_acquire) != kLive) continue;
    if (s.lo.load(std::memory_order_relaxed) < hi && lo < s.hi.load(std::memory_order_relaxed))
      drop(s, unmapped_);
  }
}

// Least recently used out until `bytes` more fit; false if they never can.
bool HostRegistry::make_room(size_t bytes) {
  if (bytes > max_bytes_) {
    if (max_bytes_ == 0)
      for (Slot& s : slots_) drop(s, evicted_);
    return false;
  }
  while (bytes_.load(std::memory_order_relaxed) + bytes > max_bytes_) {
    Slot* oldest = least_recent();
    if (!oldest) return false;
    drop(*oldest, evicted_);
  }
  return true;
}

HostRegistry::Slot* HostRegistry::least_recent() {
  Slot* oldest = nullptr;
  for (Slot& s : slots_)
    if (s.state.load(std::memory_order_acquire) == kLive &&
        (!oldest || s.last_use < oldest->last_use))
      oldest = &s;
  return oldest;
}

HostRegistry::Candidate* HostRegistry::seen(uintptr_t ptr, size_t len) {
  for (Candidate& c : candidates_)
    if (c.ptr == ptr && c.len != 0) {
      if (len > c.len) {  // the same buffer, used longer: pinned at its longest
        c.len = len;
        c.refused = false;
      }
      return &c;
    }
  Candidate& c = candidates_[next_candidate_++ % kCandidates];
  c = Candidate{ptr, len, false};
  return nullptr;
}

bool HostRegistry::pin(const void* ptr, size_t len, int device) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (len == 0 || p + len < p) return false;
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& s : slots_) {
    if (s.state.load(std::memory_order_acquire) == kLive &&
        s.lo.load(std::memory_order_relaxed) <= p &&
        p + len <= s.hi.load(std::memory_order_relaxed)) {
      s.last_use = ++clock_;
      hits_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  if (max_bytes_ == 0 || len < min_bytes_) return false;
  Candidate* c = seen(p, len);
  if (!c || c->refused) return false;
  uintptr_t lo = 0, hi = 0;
  if (!own_mapping(p, len, &lo, &hi) || hi - lo > max_bytes_) {
    c->refused = true;  // asked again only if the buffer is used longer
    failed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // A range the driver holds may not overlap another: what this one covers
  // goes first (a mapping that grew since).
  for (Slot& s : slots_)
    if (s.state.load(std::memory_order_acquire) == kLive &&
        s.lo.load(std::memory_order_relaxed) < hi && lo < s.hi.load(std::memory_order_relaxed))
      drop(s, evicted_);
  if (!make_room(hi - lo)) return false;
  Slot* slot = nullptr;
  for (Slot& s : slots_) {
    int free = kFree;
    if (s.state.compare_exchange_strong(free, kBusy, std::memory_order_acq_rel)) {
      slot = &s;
      break;
    }
  }
  if (!slot) {  // every slot live: the least recently used one goes
    Slot* oldest = least_recent();
    if (!oldest || !drop(*oldest, evicted_)) return false;
    int free = kFree;
    if (!oldest->state.compare_exchange_strong(free, kBusy, std::memory_order_acq_rel))
      return false;
    slot = oldest;
  }
  Status st = api_.host_register(reinterpret_cast<void*>(lo), hi - lo, device);
  if (!st) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    c->refused = true;
    detail::log_failure(LogLevel::debug, "host registry", st);
    slot->state.store(kFree, std::memory_order_release);
    return false;
  }
  slot->lo.store(lo, std::memory_order_relaxed);
  slot->hi.store(hi, std::memory_order_relaxed);
  slot->last_use = ++clock_;
  bytes_.fetch_add(hi - lo, std::memory_order_relaxed);
  pinned_.fetch_add(1, std::memory_order_relaxed);
  slot->state.store(kLive, std::memory_order_release);
  return p + len <= hi;
}

namespace {

// One line of /proc/self/maps: "lo-hi perms offset dev inode [path]".
struct Vma {
  uintptr_t lo = 0, hi = 0;
  char perms[5] = {};
  unsigned long inode = 0;
  bool named = false;
};

bool parse_vma(const char* line, Vma* v) {
  int path_at = 0;
  unsigned long long lo = 0, hi = 0, off = 0;
  char dev[16] = {};
  if (std::sscanf(line, "%llx-%llx %4s %llx %15s %lu %n", &lo, &hi, v->perms, &off, dev, &v->inode,
                  &path_at) < 6)
    return false;
  v->lo = static_cast<uintptr_t>(lo);
  v->hi = static_cast<uintptr_t>(hi);
  v->named = path_at > 0 && line[path_at] != '\0' && line[path_at] != '\n';
  return true;
}

// glibc's large allocations (malloc, posix_memalign over M_MMAP_THRESHOLD)
// are mmapped chunks: 16 bytes before the pointer, the chunk's offset from its
// mapping's start (page alignment padding) and its size with IS_MMAPPED (2) as
// the only flag; the chunk runs to a page boundary. Such a chunk is the
// application's allocation alone until free() unmaps it, while the kernel
// may have merged its mapping with neighbours the driver pinned already (its
// own pinned host memory): then only the chunk can be registered. Checked
// strictly (aligned start and end inside the mapping, holding the buffer);
// an interior pointer or another allocator's memory does not pass.
bool malloc_chunk(uintptr_t p, size_t len, const Vma& v, uintptr_t* lo, uintptr_t* hi) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  if (p % 16 != 0 || p < v.lo + 16) return false;
  size_t header[2];
  std::memcpy(header, reinterpret_cast<const void*>(p - 16), sizeof header);
  const size_t offset = header[0], size = header[1] & ~size_t{7};
  if ((header[1] & 7) != 2 || size < len + 16 || offset > size) return false;
  const uintptr_t chunk = p - 16, start = chunk - offset, end = chunk + size;
  if (offset > chunk - v.lo || end > v.hi || end < chunk || start % page || end % page) return false;
  *lo = start;
  *hi = end;
  return true;
}

}  // namespace

bool HostRegistry::own_mapping(uintptr_t p, size_t len, uintptr_t* lo, uintptr_t* hi) const {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return false;
  char line[512];
  Vma v, next;
  bool found = false, arena = false;
  const char* refused = "no mapping holds it";
  while (std::fgets(line, sizeof(line), f)) {
    if (!found) {
      if (!parse_vma(line, &v) || p < v.lo || p >= v.hi) continue;
      found = true;
      // Private, anonymous, writable, and holding the whole buffer.
      const bool anon_rw = v.perms[0] == 'r' && v.perms[1] == 'w' && v.perms[3] == 'p' &&
                           v.inode == 0 && !v.named;
      refused = !anon_rw ? "not a private anonymous writable mapping"
                : p + len > v.hi ? "the buffer spans more than one mapping"
                                 : nullptr;
      continue;
    }
    // A thread arena's heap: malloc reserves 64 MiB aligned to 64 MiB and
    // grows into the inaccessible rest of the reservation, which follows the
    // heap up to an aligned end. (A thread stack's guard page may follow a
    // mapping too; it does not end a 64 MiB reservation.)
    constexpr uintptr_t kArenaHeap = uintptr_t{64} << 20;
    arena = parse_vma(line, &next) && next.lo == v.hi && next.perms[0] == '-' &&
            next.perms[1] == '-' && next.hi % kArenaHeap == 0;
    break;
  }
  std::fclose(f);
  // malloc's own chunk first: an arena heap's chunks never pass its check
  // (they carry NON_MAIN_ARENA), while a chunk's mapping may happen to lie
  // right below inaccessible memory that ends on a 64 MiB boundary.
  uintptr_t chunk_lo = 0, chunk_hi = 0;
  if (!refused && malloc_chunk(p, len, v, &chunk_lo, &chunk_hi)) {
    *lo = chunk_lo;
    *hi = chunk_hi;
    return true;
  }
  if (!refused && arena) refused = "a thread arena's heap";
  // Not a mapping much larger than the buffer (other data pinned with it).
  const size_t bound = std::max<size_t>(size_t{64} << 20, 4 * len);
  if (!refused && v.hi - v.lo > bound) refused = "its mapping is much larger than the buffer";
  if (refused) {
    if (detail::log_enabled())
      detail::log(LogLevel::debug, "host registry: %p (%zu B) not pinned: %s (mapping %#lx-%#lx %s)",
                  reinterpret_cast<void*>(p), len, refused, found ? static_cast<unsigned long>(v.lo) : 0UL,
                  found ? static_cast<unsigned long>(v.hi) : 0UL, found ? v.perms : "-");
    return false;
  }
  *lo = v.lo;
  *hi = v.hi;
  return true;
}

HostRegistryCounters HostRegistry::counters() const {
  HostRegistryCounters c;
  c.pinned = pinned_.load(std::memory_order_relaxed);
  c.hits = hits_.load(std::memory_order_relaxed);
  c.evicted = evicted_.load(std::memory_order_relaxed);
  c.unmapped = unmapped_.load(std::memory_order_relaxed);
  c.failed = failed_.load(std::memory_order_relaxed);
  c.bytes = bytes_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace gpuwire::cuda
