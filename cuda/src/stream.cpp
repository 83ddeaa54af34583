#include "gpuwire/cuda/stream.hpp"

#include <cstring>

#include "internal.hpp"

namespace gpuwire::cuda {

namespace {
constexpr size_t kCounterStride = 64;  // one counter per cache line
constexpr int kMaxStreamsPerDevice = 64;
}  // namespace

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    reset();
    handle_ = std::exchange(o.handle_, nullptr);
    device_ = std::exchange(o.device_, -1);
    owned_ = std::exchange(o.owned_, true);
  }
  return *this;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    reset();
    handle_ = std::exchange(o.handle_, nullptr);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}

#if GPUWIRE_HAVE_CUDA

Result<Stream> Stream::create(int device, int priority, bool blocking) {
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  cudaStream_t h = nullptr;
  // A blocking stream: work on it starts only after earlier work on the legacy
  // default stream of this process. An application that writes a buffer with
  // cudaMemcpy (whose DMA may still be running when it returns) and then hands
  // it to MPI relies on that order; users of a non-blocking stream order
  // their work after the legacy stream themselves.
  Status s = rt_check(cudaStreamCreateWithPriority(&h, blocking ? cudaStreamDefault : cudaStreamNonBlocking,
                                                   priority),
                      "cudaStreamCreateWithPriority");
  if (!s) return detail::log_status(LogLevel::error, "Stream", s);
  Stream st;
  st.handle_ = h;
  st.device_ = device;
  return st;
}

Stream Stream::legacy(int device) {
  Stream st;
  st.handle_ = reinterpret_cast<StreamHandle>(cudaStreamLegacy);
  st.device_ = device;
  st.owned_ = false;
  return st;
}

void Stream::reset() {
  if (!handle_) return;
  if (!owned_) {
    handle_ = nullptr;
    device_ = -1;
    owned_ = true;
    return;
  }
  DeviceGuard guard(device_);
  detail::log_failure(LogLevel::warn, "Stream", rt_check(cudaStreamDestroy(handle_), "cudaStreamDestroy"));
  handle_ = nullptr;
  device_ = -1;
}

Status Stream::synchronize() const { return rt_check(cudaStreamSynchronize(handle_), "cudaStreamSynchronize"); }

Result<bool> Stream::idle() const {
  cudaError_t e = cudaStreamQuery(handle_);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  return Status::runtime_error("cudaStreamQuery", e);
}

Result<Event> Event::create(int device, bool timing) {
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  cudaEvent_t h = nullptr;
  Status s = rt_check(cudaEventCreateWithFlags(&h, timing ? cudaEventDefault : cudaEventDisableTiming),
                      "cudaEventCreateWithFlags");
  if (!s) return s;
  Event ev;
  ev.handle_ = h;
  ev.device_ = device;
  return ev;
}

void Event::reset() {
  if (!handle_) return;
  DeviceGuard guard(device_);
  detail::log_failure(LogLevel::warn, "Event", rt_check(cudaEventDestroy(handle_), "cudaEventDestroy"));
  handle_ = nullptr;
  device_ = -1;
}

Status Event::record(const Stream& stream) {
  return rt_check(cudaEventRecord(handle_, stream.handle()), "cudaEventRecord");
}

Result<bool> Event::done() const {
  cudaError_t e = cudaEventQuery(handle_);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  return Status::runtime_error("cudaEventQuery", e);
}

Status Event::synchronize() const { return rt_check(cudaEventSynchronize(handle_), "cudaEventSynchronize"); }

Result<float> Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  Status s = rt_check(cudaEventElapsedTime(&ms, start.handle_, end.handle_), "cudaEventElapsedTime");
  if (!s) return s;
  return ms;
}

Status enqueue_write_value64(void* stream, int device, uint64_t* device_ptr, uint64_t value,
                             bool memop) {
  if (memop) {
    return drv_check(Driver::instance().entry_points()->cuStreamWriteValue64(
                         static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(device_ptr),
                         value, CU_STREAM_WRITE_VALUE_DEFAULT),
                     "cuStreamWriteValue64");
  }
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  return rt_check(launch_write_value64(static_cast<cudaStream_t>(stream),
                                       reinterpret_cast<unsigned long long*>(device_ptr), value),
                  "write_value64<<<1,1>>>");
}

Result<uint64_t> TrackedStream::mark() {
  const uint64_t ticket = issued_ + 1;
  Status s = enqueue_write_value64(handle(), device(), device_counter_, ticket, memop_);
  if (!s) return detail::log_status(LogLevel::error, "TrackedStream::mark", s);
  issued_ = ticket;
  return ticket;
}

Result<uint64_t> TrackedStream::copy_and_mark(const CopyItem* items, int n) {
  if (!arrivals_) return Status::error(Errc::not_supported, "copy_and_mark: stream without an arrival counter");
  const uint64_t ticket = issued_ + 1;
  DeviceGuard guard(device());
  Status s = guard.status();
  if (s)
    s = rt_check(launch_copy_signal(static_cast<cudaStream_t>(handle()), items, n, arrivals_,
                                    reinterpret_cast<unsigned long long*>(device_counter_), ticket),
                 "copy_signal<<<>>>");
  if (!s) return detail::log_status(LogLevel::error, "TrackedStream::copy_and_mark", s);
  issued_ = ticket;
  return ticket;
}

Status TrackedStream::check() const {
  cudaError_t e = cudaStreamQuery(handle());
  return e == cudaErrorNotReady ? Status{} : rt_check(e, "cudaStreamQuery");
}

Status StreamPool::open(int device) {
  Driver& drv = Driver::instance();
  PerDevice& pd = devices_[device];
  const int n = config_.streams_per_device;  // and one more: the legacy stream, last
  Result<PinnedBuffer> counters = PinnedBuffer::allocate(drv, kCounterStride * (n + 1), device);
  if (!counters) return counters.status();
  std::memset(counters->data(), 0, counters->size());
  void* dev_base = nullptr;
  {
    DeviceGuard guard(device);
    Status s = guard.status();
    if (s) s = rt_check(cudaHostGetDevicePointer(&dev_base, counters->data(), 0), "cudaHostGetDevicePointer");
    if (!s) return s;
  }
  Result<DeviceBuffer> arrivals = DeviceBuffer::allocate(device, sizeof(unsigned) * (n + 1));
  if (!arrivals) return arrivals.status();
  {
    DeviceGuard guard(device);
    Status s = guard.status();
    if (s) s = rt_check(cudaMemset(arrivals->data(), 0, arrivals->size()), "cudaMemset");
    if (!s) return s;
  }
  const bool memop = !config_.force_kernel_signal && drv.stream_write_value64(device);
  std::vector<std::unique_ptr<TrackedStream>> streams;
  for (int i = 0; i <= n; ++i) {
    const bool blocking = !((config_.nonblocking_mask >> i) & 1);
    Result<Stream> st = i < n ? Stream::create(device, config_.priority, blocking) : Stream::legacy(device);
    if (!st) return st.status();
    auto* host = reinterpret_cast<uint64_t*>(static_cast<char*>(counters->data()) + i * kCounterStride);
    auto* dev = reinterpret_cast<uint64_t*>(static_cast<char*>(dev_base) + i * kCounterStride);
    auto* arr = static_cast<unsigned*>(arrivals->data()) + i;
    streams.push_back(std::make_unique<TrackedStream>(std::move(st).value(), host, dev, arr, memop));
  }
  pd.counters = std::move(counters).value();
  pd.arrivals = std::move(arrivals).value();
  pd.streams = std::move(streams);
  return Status{};
}

#else  // !GPUWIRE_HAVE_CUDA

Result<Stream> Stream::create(int, int, bool) { return no_cuda_status(); }
Stream Stream::legacy(int) { return Stream(); }
void Stream::reset() {}
Status Stream::synchronize() const { return no_cuda_status(); }
Result<bool> Stream::idle() const { return no_cuda_status(); }
Result<Event> Event::create(int, bool) { return no_cuda_status(); }
void Event::reset() {}
Status Event::record(const Stream&) { return no_cuda_status(); }
Result<bool> Event::done() const { return no_cuda_status(); }
Status Event::synchronize() const { return no_cuda_status(); }
Result<float> Event::elapsed_ms(const Event&, const Event&) { return no_cuda_status(); }
Result<uint64_t> TrackedStream::mark() { return no_cuda_status(); }
Result<uint64_t> TrackedStream::copy_and_mark(const CopyItem*, int) { return no_cuda_status(); }

Status TrackedStream::check() const { return no_cuda_status(); }
Status StreamPool::open(int) { return no_cuda_status(); }

#endif  // GPUWIRE_HAVE_CUDA

StreamPool::StreamPool(StreamPoolConfig config) : config_(config) {}

StreamPool::~StreamPool() {
  for (PerDevice& pd : devices_)
    for (auto& ts : pd.streams)
      detail::log_failure(LogLevel::warn, "StreamPool", ts->stream().synchronize());
}

Result<TrackedStream*> StreamPool::get(int device, int index) {
  Driver& drv = Driver::instance();
  if (!drv.available()) return Status::error(Errc::no_device, drv.unavailable_reason());
  if (device < 0 || device >= drv.device_count())
    return Status::error(Errc::invalid_argument, "StreamPool: no such device", device);
  if (config_.streams_per_device < 1 || config_.streams_per_device > kMaxStreamsPerDevice)
    return Status::error(Errc::invalid_argument, "StreamPool: streams_per_device out of 1..64");
  if (index < 0 || index >= config_.streams_per_device)
    return Status::error(Errc::invalid_argument, "StreamPool: no such stream", index);
  if (devices_.empty()) devices_.resize(drv.device_count());
  PerDevice& pd = devices_[device];
  if (pd.streams.empty()) {
    Status s = open(device);
    if (!s) return s;
  }
  return pd.streams[index].get();
}

Result<TrackedStream*> StreamPool::next(int device) {
  Result<TrackedStream*> first = get(device, 0);
  if (!first) return first;
  PerDevice& pd = devices_[device];
  TrackedStream* ts = pd.streams[pd.next].get();
  pd.next = (pd.next + 1) % config_.streams_per_device;
  return ts;
}

Result<TrackedStream*> StreamPool::legacy(int device) {
  Result<TrackedStream*> first = get(device, 0);
  if (!first) return first;
  return devices_[device].streams.back().get();
}

}  // namespace gpuwire::cuda
