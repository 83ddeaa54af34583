// What the two halves of gpuwire/gpu_device.h (gpu_device.cpp: memory kinds,
// staging, copies, scratch, reductions; gpu_device_team.cpp: NVLink teams)
// share: coll gpuwire's reference on the process's GPU context.
#pragma once

#include <atomic>
#include <mutex>

#include "gpuwire/cuda/gpu_context.hpp"
#include "gpuwire/cuda/status.hpp"
#include "gpuwire/cuda/why.hpp"

namespace gpuwire::cuda::coll {

struct CollDevice {
  GpuContext* ctx = nullptr;  // one reference, given back by gw_coll_device_close
  bool pinned_staging = true; // staging_bytes != 0
  // The collectives' stream: mark() is called under mu only. Also serialises
  // the NVLink teams' set-up and teardown.
  std::mutex mu;
  std::atomic<unsigned long long> plain_allocs{0};
};

// Set between gw_coll_device_open and gw_coll_device_close.
extern CollDevice* g_dev;

inline int fail_status(char* why, size_t why_len, const char* what, const Status& s) {
  return detail::fail(why, why_len, "%s: %s", what, s.message().c_str());
}

}  // namespace gpuwire::cuda::coll
