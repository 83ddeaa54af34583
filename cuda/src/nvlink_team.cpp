#include "gpuwire/cuda/nvlink_team.hpp"

#include <cstdio>
#include <cstring>

#include "internal.hpp"

extern "C" size_t gw_nvl_flags_bytes(void) {
  return sizeof(uint64_t) * GW_NVL_MAX_BLOCKS * GW_NVL_MAX_RANKS;
}

extern "C" int gw_nvl_barriers(const gw_nvl_call_t* call) { return call->direct ? 2 : 1; }

#if !GPUWIRE_HAVE_CUDA
extern "C" bool gw_nvl_fits_slot(const gw_nvl_team_t*, const gw_nvl_call_t*) { return false; }
extern "C" bool gw_nvl_reduce_supported(int, int) { return false; }
extern "C" int gw_nvl_launch(const gw_nvl_team_t*, const gw_nvl_call_t*, void*, char* why,
                             size_t why_len) {
  if (why && why_len) snprintf(why, why_len, "gpuwire built without CUDA");
  return -1;
}
extern "C" int gw_nvl_launch_all(const gw_nvl_all_call_t*, void*, char* why, size_t why_len) {
  if (why && why_len) snprintf(why, why_len, "gpuwire built without CUDA");
  return -1;
}
#endif

namespace gpuwire::cuda {

namespace {
constexpr uint16_t kNvlTeamVersion = 1;
}

NvlTeamDesc unusable_nvl_team_desc() {
  NvlTeamDesc d{};
  d.magic = kNvlTeamMagic;
  d.version = kNvlTeamVersion;
  d.ok = 0;
  d.device = -1;
  return d;
}

Status decode_nvl_team_desc(const void* data, size_t size, NvlTeamDesc* out) {
  if (data == nullptr || size != sizeof(NvlTeamDesc)) {
    return Status::error(Errc::invalid_argument, "NVLink team description: wrong size");
  }
  NvlTeamDesc d;
  std::memcpy(&d, data, sizeof(d));
  if (d.magic != kNvlTeamMagic || d.version != kNvlTeamVersion || d.reserved != 0 || d.ok > 1) {
    return Status::error(Errc::invalid_argument, "NVLink team description: bad header");
  }
  if (d.ok == 1) {
    const uint64_t flags = gw_nvl_flags_bytes();
    if (d.slot_bytes == 0 || d.slot_bytes > (uint64_t{1} << 40) ||
        d.workspace_bytes < flags + 2 * d.slot_bytes) {
      return Status::error(Errc::invalid_argument, "NVLink team description: bad workspace size");
    }
  }
  *out = d;
  return Status{};
}

#if GPUWIRE_HAVE_CUDA

Result<std::unique_ptr<NvlTeam>> NvlTeam::open(DriverApi& driver, int device, int rank,
                                               int nranks, size_t slot_bytes,
                                               uint64_t timeout_ns) {
  if (nranks < 1 || nranks > GW_NVL_MAX_RANKS || rank < 0 || rank >= nranks || slot_bytes == 0 ||
      slot_bytes % 256 != 0) {
    return Status::error(Errc::invalid_argument, "NvlTeam::open: ranks or slot size out of range");
  }
  std::unique_ptr<NvlTeam> t(new NvlTeam(driver, device));
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  const size_t flags = gw_nvl_flags_bytes();
  const size_t bytes = flags + 2 * slot_bytes;
  Status s = rt_check(cudaMalloc(&t->workspace_, bytes), "cudaMalloc");
  if (s) s = rt_check(cudaMemset(t->workspace_, 0, flags), "cudaMemset");
  if (s) s = rt_check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  void* err = nullptr;
  // The error word, then the completion counter 8 bytes in.
  if (s) s = rt_check(cudaHostAlloc(&err, 2 * sizeof(uint64_t), cudaHostAllocMapped), "cudaHostAlloc");
  if (s) {
    std::memset(err, 0, 2 * sizeof(uint64_t));
    t->error_host_ = static_cast<unsigned*>(err);
    t->done_host_ = static_cast<uint64_t*>(err) + 1;
    void* dev = nullptr;
    s = rt_check(cudaHostGetDevicePointer(&dev, err, 0), "cudaHostGetDevicePointer");
    t->team_.error = static_cast<unsigned*>(dev);
    t->done_device_ = static_cast<uint64_t*>(dev) + 1;
    t->memop_ = Driver::instance().stream_write_value64(device);
  }
  cudaStream_t stream = nullptr;
  // Default flags: the stream waits for the legacy default stream.
  if (s) s = rt_check(cudaStreamCreateWithFlags(&stream, cudaStreamDefault), "cudaStreamCreateWithFlags");
  t->stream_ = stream;
  t->desc_ = unusable_nvl_team_desc();
  if (s) s = driver.ipc_get_handle(reinterpret_cast<uintptr_t>(t->workspace_), device, &t->desc_.workspace);
  if (s) s = driver.device_uuid(device, t->desc_.uuid);
  if (!s) return detail::log_status(LogLevel::warn, "NvlTeam", s);
  t->desc_.ok = 1;
  t->desc_.device = device;
  t->desc_.workspace_bytes = bytes;
  t->desc_.slot_bytes = slot_bytes;
  t->team_.nranks = nranks;
  t->team_.rank = rank;
  t->team_.slot_bytes = slot_bytes;
  t->team_.timeout_ns = timeout_ns;
  t->team_.flags[rank] = static_cast<uint64_t*>(t->workspace_);
  t->team_.slots[rank] = static_cast<char*>(t->workspace_) + flags;
  return t;
}

Status NvlTeam::connect(const NvlTeamDesc* all, size_t n, bool allow_shared_gpu) {
  if (n != static_cast<size_t>(team_.nranks)) {
    return Status::error(Errc::invalid_argument, "NvlTeam::connect: wrong number of ranks");
  }
  // Ranks sharing a GPU can wait for each other inside a kernel only when
  // their kernels run at once: under MPS. Without it the contexts take turns
  // (each GPU-side barrier waits for a switch): allowed for testing only.
  allow_shared_gpu = allow_shared_gpu || driver_.mps_enabled(device_);
  for (size_t r = 0; r < n; ++r) {
    if (all[r].ok != 1) return Status::error(Errc::not_supported, "a rank has no NVLink workspace");
    if (all[r].slot_bytes != team_.slot_bytes) {
      return Status::error(Errc::invalid_argument, "ranks differ in NVLink slot size");
    }
    for (size_t q = 0; q < r && !allow_shared_gpu; ++q) {
      if (std::memcmp(all[r].uuid, all[q].uuid, sizeof(all[r].uuid)) == 0) {
        return Status::error(Errc::not_supported, "two ranks share a GPU");
      }
    }
  }
  const size_t flags = gw_nvl_flags_bytes();
  for (size_t r = 0; r < n; ++r) {
    if (static_cast<int>(r) == team_.rank) continue;
    uintptr_t p = 0;
    Status s = driver_.ipc_open(all[r].workspace, device_, &p);
    if (!s) return s;
    mapped_.push_back(p);
    team_.flags[r] = reinterpret_cast<uint64_t*>(p);
    team_.slots[r] = reinterpret_cast<char*>(p) + flags;
  }
  return Status{};
}

// The kernel only, with the current device set: the call's number (calls_)
// once it is queued.
Status NvlTeam::launch_kernel(gw_nvl_call_t call) {
  if (broken_) {
    return Status::error(Errc::not_supported, "NVLink collective: the team failed earlier");
  }
  call.seq = seq_;
  call.slot = static_cast<int>(calls_ & 1);
  char why[256];
  if (gw_nvl_launch(&team_, &call, stream_, why, sizeof(why)) != 0) {
    detail::log(LogLevel::error, "NvlTeam: %s", why);
    return Status::error(Errc::invalid_argument, "NVLink collective launch");
  }
  seq_ += static_cast<uint64_t>(gw_nvl_barriers(&call));
  ++calls_;
  return Status{};
}

Result<uint64_t> NvlTeam::launch(gw_nvl_call_t call) {
  DeviceGuard guard(device_);
  if (!guard.status()) return guard.status();
  Status s = launch_kernel(call);
  if (!s) return s;
  // The counter takes the newest number: it covers the calls run() made
  // without a signal too.
  s = signal(calls_);
  if (!s) {
    // The kernel is queued but its completion can never be seen.
    broken_ = true;
    return s;
  }
  return calls_;
}

Status NvlTeam::signal(uint64_t ticket) {
  return enqueue_write_value64(stream_, device_, done_device_, ticket, memop_);
}

Result<bool> NvlTeam::finished(uint64_t ticket, bool query) {
  if (__atomic_load_n(done_host_, __ATOMIC_ACQUIRE) >= ticket) {
    if (__atomic_load_n(error_host_, __ATOMIC_ACQUIRE) != 0) {
      broken_ = true;
      return Status::error(Errc::busy, "NVLink collective: a peer did not arrive in time");
    }
    return true;
  }
  if (query) {
    const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
    if (e != cudaSuccess && e != cudaErrorNotReady) {
      broken_ = true;
      return rt_check(e, "cudaStreamQuery");
    }
  }
  return false;
}

Status NvlTeam::run(gw_nvl_call_t call) {
  // No completion signal: the synchronize is the wait (one submission less
  // on the small calls' latency).
  DeviceGuard guard(device_);
  if (!guard.status()) return guard.status();
  Status s = launch_kernel(call);
  if (!s) return s;
  s = rt_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
  if (!s) {
    broken_ = true;
    return s;
  }
  if (__atomic_load_n(error_host_, __ATOMIC_ACQUIRE) != 0) {
    broken_ = true;
    return Status::error(Errc::busy, "NVLink collective: a peer did not arrive in time");
  }
  return Status{};
}

Status NvlTeam::launch_all(const gw_nvl_all_call_t& call, uint64_t* done_device,
                           uint64_t value) {
  DeviceGuard guard(device_);
  if (!guard.status()) return guard.status();
  char why[256];
  if (gw_nvl_launch_all(&call, stream_, why, sizeof(why)) != 0) {
    detail::log(LogLevel::error, "NvlTeam: %s", why);
    return Status::error(Errc::invalid_argument, "NVLink delegated call launch");
  }
  return enqueue_write_value64(stream_, device_, done_device, value, memop_);
}

Status NvlTeam::stream_status() {
  DeviceGuard guard(device_);
  if (!guard.status()) return guard.status();
  const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
  return e == cudaErrorNotReady ? Status{} : rt_check(e, "cudaStreamQuery");
}

Status NvlTeam::wait_idle() {
  DeviceGuard guard(device_);
  if (!guard.status()) return guard.status();
  return rt_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)),
                  "cudaStreamSynchronize");
}

void NvlTeam::release() {
  DeviceGuard guard(device_);
  for (uintptr_t p : mapped_) {
    detail::log_failure(LogLevel::warn, "NvlTeam", driver_.ipc_close(p, device_));
  }
  mapped_.clear();
  if (stream_) {
    detail::log_failure(LogLevel::warn, "NvlTeam",
                        rt_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)),
                                 "cudaStreamSynchronize"));
    detail::log_failure(LogLevel::warn, "NvlTeam",
                        rt_check(cudaStreamDestroy(static_cast<cudaStream_t>(stream_)),
                                 "cudaStreamDestroy"));
  }
  if (error_host_) {
    detail::log_failure(LogLevel::warn, "NvlTeam", rt_check(cudaFreeHost(error_host_), "cudaFreeHost"));
  }
  if (workspace_) {
    detail::log_failure(LogLevel::warn, "NvlTeam", rt_check(cudaFree(workspace_), "cudaFree"));
  }
  stream_ = nullptr;
  error_host_ = nullptr;
  done_host_ = nullptr;
  done_device_ = nullptr;
  workspace_ = nullptr;
}

#else  // !GPUWIRE_HAVE_CUDA

Result<std::unique_ptr<NvlTeam>> NvlTeam::open(DriverApi&, int, int, int, size_t, uint64_t) {
  return no_cuda_status();
}
Status NvlTeam::connect(const NvlTeamDesc*, size_t, bool) { return no_cuda_status(); }
Result<uint64_t> NvlTeam::launch(gw_nvl_call_t) { return no_cuda_status(); }
Result<bool> NvlTeam::finished(uint64_t, bool) { return no_cuda_status(); }
Status NvlTeam::run(gw_nvl_call_t) { return no_cuda_status(); }
Status NvlTeam::launch_all(const gw_nvl_all_call_t&, uint64_t*, uint64_t) {
  return no_cuda_status();
}
Status NvlTeam::stream_status() { return no_cuda_status(); }
Status NvlTeam::wait_idle() { return Status{}; }
void NvlTeam::release() {}

#endif  // GPUWIRE_HAVE_CUDA

NvlTeam::~NvlTeam() { release(); }

}  // namespace gpuwire::cuda
