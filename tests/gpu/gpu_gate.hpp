// Included by exactly one source of each [gpu] test program: before any test
// runs, a program on a machine without a usable GPU prints one line and exits
// 77, which CTest reports as skipped.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "gpuwire/cuda/driver.hpp"
// Catch2 2.x declares listener bases only with this; include this header first.
#ifndef CATCH_CONFIG_EXTERNAL_INTERFACES
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#endif
#include "gw_catch.hpp"

namespace gw_test {

inline void skip_without_gpu() {
  gpuwire::cuda::Driver& d = gpuwire::cuda::Driver::instance();
  if (d.available()) return;
  std::printf("SKIP: no GPU (CUDA driver or device absent): %s\n", d.unavailable_reason());
  std::fflush(stdout);
  std::exit(77);
}

#if GPUWIRE_CATCH_VERSION == 3
struct GpuGate : Catch::EventListenerBase {
  using EventListenerBase::EventListenerBase;
  void testRunStarting(Catch::TestRunInfo const&) override { skip_without_gpu(); }
};
#else
struct GpuGate : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(Catch::TestRunInfo const&) override { skip_without_gpu(); }
};
#endif
CATCH_REGISTER_LISTENER(GpuGate)

}  // namespace gw_test
