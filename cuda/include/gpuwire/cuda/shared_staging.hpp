// Staging through host memory shared by two processes of one node.
//
// A device message that cannot go by CUDA IPC would otherwise cross host
// memory three times: a DMA into the sender's memory, a CPU copy between the
// processes (UCX shared memory: about 9 GB/s on the target) and a DMA into
// the GPU. Here the sender's DMA lands in a slot of a POSIX shared-memory
// segment it owns (its outbox), pinned in both processes; the receiver maps
// that segment once and its DMA reads the slot directly. No CPU copy.
//
// Segment layout: a 4 KiB header page (magic, slot count and size, one
// 32-bit flag per slot), then the slots, each a multiple of 4 KiB. A slot's
// flag is 1 while a reader owns it: the owner sets it before telling the
// reader about the slot (release order), the reader stores 0 when it has
// copied the slot out; the owner sees the 0 (acquire order) and reuses it.
//
// Names: the segment is created as /gpuwire-ss.<uid>.<pid>.<serial> (O_EXCL,
// mode 0600) and the name is removed at once: nothing is left in /dev/shm
// even when a process is killed. The owner keeps the descriptor open, and a
// reader opens the segment through /proc/<pid>/fd/<fd> (as UCX's posix
// transport does), which the kernel allows a process of the same user. A
// reader maps only segments owned by its own user and checks every size and
// index.
//
// Ownership: SharedOutbox owns its segment (mapping, pinning, name);
// SharedInbox owns the mappings of its peers' segments. The DriverApi may be
// null: nothing is pinned then (a process without a GPU reads with memcpy).
// Threading: not synchronised; the owner serialises calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

constexpr uint32_t kSharedSlotsMax = 256;

// Which segment: the owner's process ID and its descriptor of the segment.
struct SharedSegmentId {
  uint32_t pid = 0;
  uint32_t fd = 0;
  bool operator<(const SharedSegmentId& o) const { return pid != o.pid ? pid < o.pid : fd < o.fd; }
};

// Where a reader opens it: /proc/<pid>/fd/<fd>.
std::string shared_segment_path(const SharedSegmentId& id);

struct SharedOutboxCounters {
  uint64_t lent = 0;  // slots handed to a reader
  uint64_t busy = 0;  // acquire() found every slot with a reader
};

class SharedOutbox {
 public:
  // Creates, maps and pins a segment of `slots` slots of `slot_bytes` (rounded
  // up to 4 KiB); `device`'s context pins it.
  static Result<std::unique_ptr<SharedOutbox>> create(DriverApi* driver, size_t slot_bytes,
                                                      size_t slots, int device);
  ~SharedOutbox();
  SharedOutbox(const SharedOutbox&) = delete;
  SharedOutbox& operator=(const SharedOutbox&) = delete;

  const SharedSegmentId& id() const { return id_; }
  size_t slot_bytes() const { return slot_bytes_; }
  size_t slots() const { return state_.size(); }

  // A slot the owner may fill: free, or given back by its reader. -1 when
  // every slot is with a reader (try again after progress).
  int acquire();
  void* slot(int index) const { return data_ + size_t(index) * slot_bytes_; }
  // Hands a filled slot to the reader (sets its flag).
  void lend(int index);
  // Takes back a slot acquired but never lent (a failed copy).
  void abandon(int index) { state_[size_t(index)] = State::free; }
  // Slots now with a reader (their flag not yet cleared).
  size_t lent_now();
  SharedOutboxCounters counters() const { return counters_; }

 private:
  enum class State : uint8_t { free, filling, lent };
  SharedOutbox() = default;
  // A lent slot whose reader has cleared its flag is free again.
  void reclaim(size_t index);

  DriverApi* driver_ = nullptr;
  SharedSegmentId id_;
  int fd_ = -1;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  bool pinned_ = false;
  char* data_ = nullptr;
  size_t slot_bytes_ = 0;
  std::vector<State> state_;
  size_t next_ = 0;  // where acquire() starts looking
  SharedOutboxCounters counters_;
};

class SharedInbox {
 public:
  // At most `max_segments` peers' segments mapped at once (a peer has one).
  SharedInbox(DriverApi* driver, int device, size_t max_segments = 1024)
      : driver_(driver), device_(device), max_segments_(max_segments) {}
  ~SharedInbox();
  SharedInbox(const SharedInbox&) = delete;
  SharedInbox& operator=(const SharedInbox&) = delete;

  // The first `bytes` of slot `index` of segment `id`, mapping (and pinning)
  // the segment the first time: invalid_argument for a segment that is not
  // this user's, a bad index or size; the system's or driver's error otherwise.
  Result<const void*> slot(const SharedSegmentId& id, uint32_t index, size_t bytes);
  // Gives a slot back to its owner (clears its flag).
  void release(const SharedSegmentId& id, uint32_t index);
  size_t segments() const { return maps_.size(); }

 private:
  struct Mapped {
    void* map = nullptr;
    size_t bytes = 0;
    bool pinned = false;
    uint32_t slots = 0;
    size_t slot_bytes = 0;
    size_t data_offset = 0;
  };
  Result<Mapped*> open(const SharedSegmentId& id);
  void unmap(Mapped& m);

  DriverApi* driver_;
  int device_;
  size_t max_segments_;
  std::map<SharedSegmentId, Mapped> maps_;
};

}  // namespace gpuwire::cuda
