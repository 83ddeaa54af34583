// Streams, events and cheap completion.
//
// On the target a query of an event or a stream costs 1.5 us, so completions
// are not found by querying: a TrackedStream owns a 64-bit counter in pinned,
// device-mapped host memory, and mark() enqueues behind the work already
// submitted a write of the next ticket into it (cuStreamWriteValue64, or a
// one-thread kernel where streams cannot write values). reached(ticket) is one
// load: work submitted before mark() has finished when it returns true.
// A stream that fails never writes its ticket; when a ticket is overdue, ask
// check() (a real query) whether the stream is in error.
//
// Ownership: Stream and Event are move-only owners that destroy what they
// hold, with one exception: a Stream made by Stream::legacy() only names the
// legacy default stream (CUDA owns it; it is never destroyed). StreamPool
// keeps one such Stream per device, the last of its TrackedStreams, for work
// that must follow the application's (StreamPool::legacy). A moved Stream
// takes its ownership along; a moved-from or reset Stream holds nothing.
// StreamPool owns its TrackedStreams and their counters; pointers it
// returns stay valid until the pool is destroyed, and destruction waits for
// each stream (its counter must not be freed under a pending write).
// Threading: none of these is synchronised; the owner serialises use.
// Blocking: only synchronize(), wait-free everything else.
//
// Order against the legacy default stream: a stream is created blocking (its
// work starts after earlier work on the legacy stream) or not. The engine's
// streams are non-blocking: once a device-to-device copy has run on a blocking
// stream, every later wait for or query of the legacy stream costs 1.4-1.7 us
// instead of 0.3 (measured on the target, with and without MPS), and the
// engine orders its copies after the application's work by such a wait on the
// CPU (DevicePath::order_after_user).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gpuwire/cuda/device_buffer.hpp"
#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/pinned_pool.hpp"
#include "gpuwire/cuda/status.hpp"

struct CUevent_st;

namespace gpuwire::cuda {

class Stream {
 public:
  Stream() = default;
  // blocking: ordered after earlier work on the legacy default stream.
  static Result<Stream> create(int device, int priority = 0, bool blocking = true);
  // The legacy default stream of `device`, not owned (never destroyed).
  static Stream legacy(int device);
  ~Stream() { reset(); }
  Stream(Stream&& o) noexcept { *this = std::move(o); }
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  StreamHandle handle() const { return handle_; }
  int device() const { return device_; }
  explicit operator bool() const { return handle_ != nullptr; }
  Status synchronize() const;
  // cudaStreamQuery: true when idle. 1.5 us on the target: not for polling.
  Result<bool> idle() const;
  void reset();

 private:
  StreamHandle handle_ = nullptr;
  int device_ = -1;
  bool owned_ = true;  // false only for Stream::legacy(): reset() forgets, never destroys
};

class Event {
 public:
  Event() = default;
  static Result<Event> create(int device, bool timing = false);
  ~Event() { reset(); }
  Event(Event&& o) noexcept { *this = std::move(o); }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Status record(const Stream& stream);
  Result<bool> done() const;  // cudaEventQuery (1.5 us on the target)
  Status synchronize() const;
  // Milliseconds between two recorded timing events.
  static Result<float> elapsed_ms(const Event& start, const Event& end);
  CUevent_st* handle() const { return handle_; }
  void reset();

 private:
  CUevent_st* handle_ = nullptr;
  int device_ = -1;
};

// One copy of TrackedStream::copy_and_mark().
struct CopyItem {
  void* dst;
  const void* src;
  size_t len;
};
constexpr int kCopyBatchMax = 64;  // items of one copy_and_mark() (they travel as kernel arguments)

class TrackedStream {
 public:
  const Stream& stream() const { return stream_; }
  StreamHandle handle() const { return stream_.handle(); }
  int device() const { return stream_.device(); }

  // Enqueues the write of the next ticket behind all work submitted so far and
  // returns that ticket.
  Result<uint64_t> mark();
  // Copies every item (device-accessible memory at both ends, the items
  // disjoint) with one kernel that writes the next ticket itself once all of
  // them have landed: one submission for the copies and the signal, where
  // cudaMemcpyAsync and mark() are two. 1 <= n <= kCopyBatchMax.
  Result<uint64_t> copy_and_mark(const CopyItem* items, int n);
  // No CUDA call: one acquire load of the pinned counter.
  bool reached(uint64_t ticket) const { return completed() >= ticket; }
  uint64_t completed() const { return __atomic_load_n(counter_, __ATOMIC_ACQUIRE); }
  uint64_t issued() const { return issued_; }
  // Slow path for overdue tickets: the stream's error, if any (cudaStreamQuery).
  Status check() const;
  // For loops that spin on reached(): check() on one call in 16384, OK on the
  // others. A query costs 1.5 us on the target; one per spin would delay
  // seeing the ticket by as much (and slows every other poll of the loop).
  Status check_sometimes() const { return (++stalls_ & 0x3fff) ? Status{} : check(); }
  bool signals_by_kernel() const { return !memop_; }

  TrackedStream(Stream stream, uint64_t* counter, uint64_t* device_counter, unsigned* arrivals,
                bool memop)
      : stream_(std::move(stream)),
        counter_(counter),
        device_counter_(device_counter),
        arrivals_(arrivals),
        memop_(memop) {}

 private:
  Stream stream_;
  uint64_t* counter_;         // host view of the pinned counter
  uint64_t* device_counter_;  // the same counter as the device addresses it
  unsigned* arrivals_;        // device memory: blocks of copy_and_mark() done so far
  uint64_t issued_ = 0;
  mutable uint32_t stalls_ = 0;  // check_sometimes() calls
  bool memop_;
};

struct StreamPoolConfig {
  int streams_per_device = 4;  // at most 64
  int priority = 0;
  bool force_kernel_signal = false;  // use the kernel even where memops work
  uint64_t nonblocking_mask = 0;     // stream i is created non-blocking where bit i is set
};

class StreamPool {
 public:
  explicit StreamPool(StreamPoolConfig config = {});
  ~StreamPool();  // waits for every stream, then destroys them
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  // The device's streams in turn; the first call for a device creates them.
  Result<TrackedStream*> next(int device);
  Result<TrackedStream*> get(int device, int index);
  // A TrackedStream over the device's legacy default stream: work on it is
  // ordered after the application's work there without a wait on the CPU.
  Result<TrackedStream*> legacy(int device);

 private:
  struct PerDevice {
    PinnedBuffer counters;
    DeviceBuffer arrivals;  // one copy_and_mark() block counter per stream
    std::vector<std::unique_ptr<TrackedStream>> streams;
    size_t next = 0;
  };
  Status open(int device);

  const StreamPoolConfig config_;
  std::vector<PerDevice> devices_;
};

}  // namespace gpuwire::cuda
