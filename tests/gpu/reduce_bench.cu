// Bandwidth of the reduction kernels: out = a op b over 256 MiB operands
// (3 x 256 MiB of memory traffic per call), median of 20 calls, printed as
// GB/s of traffic and as a fraction of the device's peak memory bandwidth
// (bus width x memory clock x 2). Not a test: run by hand on the GPU machine.
//   cuda_reduce_bench [MiB]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpuwire/cuda/reduce.h"

#define CK(call)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                  \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const size_t bytes = mib << 20;
  int dev = 0, bus = 0, clock_khz = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, dev));
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev));
  const double peak = 2.0 * clock_khz * 1e3 * (bus / 8.0) / 1e9;
  void *a, *b, *out;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMalloc(&out, bytes));
  CK(cudaMemset(a, 1, bytes));
  CK(cudaMemset(b, 2, bytes));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::printf("peak memory bandwidth %.0f GB/s; %zu MiB operands\n", peak, mib);
  std::printf("%-8s %-10s %10s %8s\n", "op", "type", "GB/s", "of peak");
  const int cases[][2] = {{GW_OP_SUM, GW_TYPE_FLOAT}, {GW_OP_SUM, GW_TYPE_DOUBLE},
                          {GW_OP_SUM, GW_TYPE_INT32}, {GW_OP_MAX, GW_TYPE_INT8},
                          {GW_OP_BXOR, GW_TYPE_UINT64}, {GW_OP_PROD, GW_TYPE_INT16},
                          {GW_OP_MINLOC, GW_TYPE_FLOAT_INT}, {GW_OP_MAXLOC, GW_TYPE_DOUBLE_INT}};
  for (const auto& c : cases) {
    const size_t n = bytes / gw_reduce_type_size(c[1]);
    char why[256];
    std::vector<float> ms;
    for (int i = 0; i < 22; ++i) {
      CK(cudaEventRecord(e0, s));
      if (gw_dev_reduce3(c[0], c[1], a, b, out, n, s, why, sizeof(why)) != 0) {
        std::fprintf(stderr, "%s\n", why);
        return 1;
      }
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float t = 0;
      CK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 2) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double gbs = 3.0 * n * gw_reduce_type_size(c[1]) / (ms[ms.size() / 2] * 1e-3) / 1e9;
    std::printf("%-8s %-10s %10.0f %7.0f%%\n", gw_reduce_op_name(c[0]), gw_reduce_type_name(c[1]),
                gbs, 100.0 * gbs / peak);
  }
  return 0;
}
