#include "gpuwire/cuda/shared_staging.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace gpuwire::cuda {
namespace {

constexpr uint32_t kMagic = 0x53535747u;  // "GWSS" in memory order
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;

struct Header {
  uint32_t magic;
  uint32_t version;
  uint32_t slots;
  uint32_t reserved;
  uint64_t slot_bytes;
  uint64_t data_offset;
  uint32_t flag[kSharedSlotsMax];
};
static_assert(sizeof(Header) <= kPage);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

std::atomic<uint32_t>& flag_of(void* map, size_t index) {
  return *reinterpret_cast<std::atomic<uint32_t>*>(&static_cast<Header*>(map)->flag[index]);
}

Status sys_error(const char* call, int err) {
  detail::log(LogLevel::warn, "shared staging: %s failed: %s", call, std::strerror(err));
  return Status::error(Errc::not_supported, call, err);
}

uint32_t next_serial() {
  static std::atomic<uint32_t> serial{0};
  return serial.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

std::string shared_segment_path(const SharedSegmentId& id) {
  return "/proc/" + std::to_string(id.pid) + "/fd/" + std::to_string(id.fd);
}

// ---------------------------------------------------------------------------
// SharedOutbox
// ---------------------------------------------------------------------------

Result<std::unique_ptr<SharedOutbox>> SharedOutbox::create(DriverApi* driver, size_t slot_bytes,
                                                           size_t slots, int device) {
  if (slots == 0 || slots > kSharedSlotsMax || slot_bytes == 0 || slot_bytes > (size_t{1} << 30))
    return Status::error(Errc::invalid_argument, "SharedOutbox: bad slot geometry");
  slot_bytes = (slot_bytes + kPage - 1) & ~(kPage - 1);
  std::unique_ptr<SharedOutbox> o(new SharedOutbox);
  o->driver_ = driver;
  o->slot_bytes_ = slot_bytes;
  o->map_bytes_ = kPage + slots * slot_bytes;

  // The name lives only between these two calls.
  const std::string name = "/gpuwire-ss." + std::to_string(geteuid()) + "." +
                           std::to_string(getpid()) + "." + std::to_string(next_serial());
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return sys_error("shm_open", errno);
  shm_unlink(name.c_str());
  o->fd_ = fd;  // from here the destructor closes it
  o->id_ = SharedSegmentId{uint32_t(getpid()), uint32_t(fd)};
  if (ftruncate(fd, off_t(o->map_bytes_)) != 0) return sys_error("ftruncate", errno);
  void* map = mmap(nullptr, o->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return sys_error("mmap", errno);
  o->map_ = map;  // from here the destructor unmaps
  auto* h = static_cast<Header*>(map);
  std::memset(h, 0, sizeof(Header));
  h->slots = uint32_t(slots);
  h->slot_bytes = slot_bytes;
  h->data_offset = kPage;
  h->version = kVersion;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  o->data_ = static_cast<char*>(map) + kPage;
  o->state_.assign(slots, State::free);
  if (driver) {
    Status s = driver->host_register(map, o->map_bytes_, device);
    if (!s) return detail::log_status(LogLevel::warn, "SharedOutbox", s);
    o->pinned_ = true;
  }
  return o;
}

SharedOutbox::~SharedOutbox() {
  if (pinned_) detail::log_failure(LogLevel::warn, "SharedOutbox", driver_->host_unregister(map_));
  if (map_) munmap(map_, map_bytes_);
  if (fd_ >= 0) close(fd_);
}

void SharedOutbox::reclaim(size_t i) {
  if (state_[i] == State::lent && flag_of(map_, i).load(std::memory_order_acquire) == 0)
    state_[i] = State::free;
}

int SharedOutbox::acquire() {
  const size_t n = state_.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_ + k) % n;
    reclaim(i);
    if (state_[i] == State::free) {
      state_[i] = State::filling;
      next_ = (i + 1) % n;
      return int(i);
    }
  }
  ++counters_.busy;
  return -1;
}

void SharedOutbox::lend(int index) {
  state_[size_t(index)] = State::lent;
  flag_of(map_, size_t(index)).store(1, std::memory_order_release);
  ++counters_.lent;
}

size_t SharedOutbox::lent_now() {
  size_t n = 0;
  for (size_t i = 0; i < state_.size(); ++i) {
    reclaim(i);
    n += state_[i] == State::lent;
  }
  return n;
}

// ---------------------------------------------------------------------------
// SharedInbox
// ---------------------------------------------------------------------------

SharedInbox::~SharedInbox() {
  for (auto& [id, m] : maps_) unmap(m);
}

void SharedInbox::unmap(Mapped& m) {
  if (m.pinned) detail::log_failure(LogLevel::warn, "SharedInbox", driver_->host_unregister(m.map));
  if (m.map) munmap(m.map, m.bytes);
  m = Mapped{};
}

Result<SharedInbox::Mapped*> SharedInbox::open(const SharedSegmentId& id) {
  auto it = maps_.find(id);
  if (it != maps_.end()) return &it->second;
  if (maps_.size() >= max_segments_)
    return Status::error(Errc::busy, "SharedInbox: too many peer segments");
  const std::string path = shared_segment_path(id);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return sys_error("open of a peer's /proc/<pid>/fd/<fd>", errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return sys_error("fstat", err);
  }
  if (st.st_uid != geteuid() || size_t(st.st_size) < kPage) {
    close(fd);
    return Status::error(Errc::invalid_argument, "SharedInbox: segment of another user or too small");
  }
  Mapped m;
  m.bytes = size_t(st.st_size);
  void* map = mmap(nullptr, m.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (map == MAP_FAILED) return sys_error("mmap", err);
  m.map = map;
  const auto* h = static_cast<const Header*>(map);
  const bool sane = h->magic == kMagic && h->version == kVersion && h->slots > 0 &&
                    h->slots <= kSharedSlotsMax && h->slot_bytes > 0 &&
                    h->slot_bytes <= (uint64_t{1} << 30) && h->data_offset == kPage &&
                    h->data_offset + uint64_t(h->slots) * h->slot_bytes <= m.bytes;
  if (!sane) {
    unmap(m);
    return Status::error(Errc::invalid_argument, "SharedInbox: malformed segment header");
  }
  m.slots = h->slots;
  m.slot_bytes = size_t(h->slot_bytes);
  m.data_offset = size_t(h->data_offset);
  if (driver_) {
    Status s = driver_->host_register(map, m.bytes, device_);
    if (!s) {
      unmap(m);
      return detail::log_status(LogLevel::warn, "SharedInbox", s);
    }
    m.pinned = true;
  }
  return &maps_.emplace(id, m).first->second;
}

Result<const void*> SharedInbox::slot(const SharedSegmentId& id, uint32_t index, size_t bytes) {
  Result<Mapped*> m = open(id);
  if (!m) return m.status();
  const Mapped& s = **m;
  if (index >= s.slots || bytes > s.slot_bytes)
    return Status::error(Errc::invalid_argument, "SharedInbox: slot index or size out of range");
  return static_cast<const void*>(static_cast<const char*>(s.map) + s.data_offset +
                                  size_t(index) * s.slot_bytes);
}

void SharedInbox::release(const SharedSegmentId& id, uint32_t index) {
  auto it = maps_.find(id);
  if (it == maps_.end() || index >= it->second.slots) return;
  flag_of(it->second.map, index).store(0, std::memory_order_release);
}

}  // namespace gpuwire::cuda
