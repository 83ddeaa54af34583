// Device memory for the [gpu] kernel tests (CUDA builds only).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gw_catch.hpp"

#define CUDA_OK(call) REQUIRE((call) == cudaSuccess)

namespace gw_test {

// One cudaMalloc, freed with the object.
struct DevMem {
  void* p = nullptr;
  explicit DevMem(size_t bytes) { REQUIRE(cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess); }
  ~DevMem() { cudaFree(p); }
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  char* at(size_t off) const { return static_cast<char*>(p) + off; }
};

// Host bytes to the device, landed before it returns: a cudaMemcpy from
// pageable memory may return before its DMA has, and the kernels under test
// run on non-blocking streams that do not wait for it (an MPI caller must
// likewise hand over complete data).
inline void upload(void* dst, const void* src, size_t n) {
  CUDA_OK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace gw_test
