// The reduction kernels ([gpu]): every op x type of the table against the
// independent reference of tests/unit/cuda/reduce_reference.hpp, for counts
// 0, 1, 7 and 1000003, three-operand and in place, with 16-byte aligned
// pointers (vector path) and pointers one element off (scalar path).
// Skipped (exit 77) without a GPU.
#include <cstdlib>
#include <random>
#include <vector>

#include "gpu_gate.hpp"
#include "reduce_reference.hpp"

#if GPUWIRE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "dev_mem.hpp"

namespace {

using gw_test::DevMem;
using gw_test::upload;

void check_pair(int o, int t, size_t n, size_t offset_elems, cudaStream_t stream, std::mt19937_64& rng) {
  gw_ref::TypeDesc d;
  REQUIRE(gw_ref::describe(t, &d));
  INFO(gw_ref::name(o, t) << ", count " << n << ", offset " << offset_elems << " element(s)");
  const size_t off = offset_elems * d.stride, bytes = n * d.stride;
  std::vector<unsigned char> a, b, out, want;
  gw_ref::fill(d, a, n, rng);
  gw_ref::fill(d, b, n, rng);
  out.assign(bytes, 0x5C);
  want = out;
  gw_ref::expected(o, d, a.data(), b.data(), want.data(), n);
  DevMem da(bytes + off), db(bytes + off), dout(bytes + off);
  upload(da.at(off), a.data(), bytes);
  upload(db.at(off), b.data(), bytes);
  upload(dout.at(off), out.data(), bytes);
  char why[256] = "";
  INFO(why);
  REQUIRE(gw_dev_reduce3(o, t, da.at(off), db.at(off), dout.at(off), n, stream, why, sizeof(why)) == 0);
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaMemcpy(out.data(), dout.at(off), bytes, cudaMemcpyDeviceToHost));
  CHECK(gw_ref::first_difference(out, want, d.stride) == -1);
  // In place: inout = in op inout, in b's memory.
  std::vector<unsigned char> want2 = b, got2(bytes);
  gw_ref::expected(o, d, a.data(), b.data(), want2.data(), n);
  REQUIRE(gw_dev_reduce(o, t, da.at(off), db.at(off), n, stream, why, sizeof(why)) == 0);
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaMemcpy(got2.data(), db.at(off), bytes, cudaMemcpyDeviceToHost));
  CHECK(gw_ref::first_difference(got2, want2, d.stride) == -1);
}

}  // namespace

TEST_CASE("reduce kernels: every op x type against the reference", "[gpu][cuda][reduce]") {
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937_64 rng(777);
  int pairs = 0;
  // GW_REDUCE_LARGE_COUNT: a smaller large count, for runs under compute-sanitizer.
  const char *large_env = std::getenv("GW_REDUCE_LARGE_COUNT");
  const size_t large = large_env ? std::strtoull(large_env, nullptr, 10) : size_t{1000003};
  for (int o = 0; o < GW_OP_COUNT; ++o) {
    for (int t = 0; t < GW_TYPE_COUNT; ++t) {
      if (!gw_reduce_supported(o, t)) continue;
      ++pairs;
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, large}) {
        check_pair(o, t, n, 0, stream, rng);
        if (n > 1) check_pair(o, t, n, 1, stream, rng);
      }
    }
  }
  CHECK(pairs == 104);
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST_CASE("reduce kernels: an op that does not apply is refused with its names", "[gpu][cuda][reduce]") {
  char why[256] = "";
  CHECK(gw_dev_reduce3(GW_OP_BAND, GW_TYPE_FLOAT, nullptr, nullptr, nullptr, 4, nullptr, why, sizeof(why)) == -1);
  CHECK(std::string(why).find("BAND") != std::string::npos);
  CHECK(std::string(why).find("FLOAT") != std::string::npos);
}

#else
// Reached only where the gate did not skip: without CUDA every device
// reduction is refused with a line that says so, and nothing is written.
TEST_CASE("reduce kernels: built without CUDA", "[gpu][cuda][reduce]") {
  CHECK_FALSE(gpuwire::cuda::Driver::instance().available());
  int a = 1, b = 2, out = 0;
  char why[256] = "";
  CHECK(gw_dev_reduce3(GW_OP_SUM, GW_TYPE_INT32, &a, &b, &out, 1, nullptr, why, sizeof(why)) == -1);
  CHECK(std::string(why).find("without CUDA") != std::string::npos);
  CHECK(out == 0);
}
#endif
