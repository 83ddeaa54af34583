// The delegated form's pieces on one GPU ([gpu]), in one process: the kernel
// of gw_nvl_launch_all on n "ranks'" buffers (Allreduce SUM on float and MAX
// on int32, Bcast from every root, Allgather, in place and not, 16-byte
// aligned and one element off) against host results, and the board
// (NvlBoard): created, opened a second time as another rank would, the same
// words seen through both, the GPU's address of a completion word landing in
// it. Skipped (exit 77) without a GPU.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "gpu_gate.hpp"
#include "gpuwire/cuda/nvlink_board.hpp"
#include "gpuwire/cuda/nvlink_coll.h"
#include "gpuwire/cuda/reduce.h"

#if GPUWIRE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "dev_mem.hpp"

namespace {

using gw_test::DevMem;
using gw_test::upload;

float fval(int r, size_t e) { return static_cast<float>(static_cast<int>((e * 7 + r * 13) % 101) - 50); }
int32_t ival(int r, size_t e) { return static_cast<int32_t>((e * 31 + r * 17) % 1009) - 500; }

void run(const gw_nvl_all_call_t& c) {
  char why[256] = "";
  INFO(why);
  REQUIRE(gw_nvl_launch_all(&c, nullptr, why, sizeof(why)) == 0);
  CUDA_OK(cudaDeviceSynchronize());
}

void check_allreduce(int n, size_t count, size_t off, bool in_place) {
  INFO(n << " ranks, " << count << " elements, offset " << off << ", in place " << in_place);
  std::vector<std::unique_ptr<DevMem>> fin, fout, iin, iout;
  gw_nvl_all_call_t f{}, m{};
  f.coll = m.coll = GW_NVL_ALLREDUCE;
  f.op = GW_OP_SUM;
  f.type = GW_TYPE_FLOAT;
  m.op = GW_OP_MAX;
  m.type = GW_TYPE_INT32;
  f.nranks = m.nranks = n;
  f.bytes = count * sizeof(float);
  m.bytes = count * sizeof(int32_t);
  for (int r = 0; r < n; ++r) {
    std::vector<float> hf(count);
    std::vector<int32_t> hi(count);
    for (size_t e = 0; e < count; ++e) {
      hf[e] = fval(r, e);
      hi[e] = ival(r, e);
    }
    fout.push_back(std::make_unique<DevMem>(f.bytes + off * 4));
    iout.push_back(std::make_unique<DevMem>(m.bytes + off * 4));
    f.out[r] = fout.back()->at(off * 4);
    m.out[r] = iout.back()->at(off * 4);
    if (in_place) {
      f.in[r] = f.out[r];
      m.in[r] = m.out[r];
    } else {
      fin.push_back(std::make_unique<DevMem>(f.bytes + off * 4));
      iin.push_back(std::make_unique<DevMem>(m.bytes + off * 4));
      f.in[r] = fin.back()->at(off * 4);
      m.in[r] = iin.back()->at(off * 4);
    }
    upload(const_cast<void*>(f.in[r]), hf.data(), f.bytes);
    upload(const_cast<void*>(m.in[r]), hi.data(), m.bytes);
  }
  run(f);
  run(m);
  for (int r = 0; r < n; ++r) {
    std::vector<float> gf(count);
    std::vector<int32_t> gi(count);
    CUDA_OK(cudaMemcpy(gf.data(), f.out[r], f.bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(gi.data(), m.out[r], m.bytes, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t e = 0; e < count; ++e) {
      float ws = 0;
      int32_t wm = ival(0, e);
      for (int q = 0; q < n; ++q) {
        ws += fval(q, e);
        wm = ival(q, e) > wm ? ival(q, e) : wm;
      }
      bad += gf[e] != ws;
      bad += gi[e] != wm;
    }
    INFO("rank " << r);
    CHECK(bad == 0);
  }
}

void check_moves(int n, size_t bytes, size_t off, bool in_place) {
  INFO(n << " ranks, " << bytes << " bytes, offset " << off << ", in place " << in_place);
  std::vector<std::unique_ptr<DevMem>> bufs, ins, outs;
  // Bcast from every root.
  for (int root = 0; root < n; ++root) {
    gw_nvl_all_call_t c{};
    c.coll = GW_NVL_BCAST;
    c.bytes = bytes;
    c.root = root;
    c.nranks = n;
    bufs.clear();
    for (int r = 0; r < n; ++r) {
      std::vector<unsigned char> h(bytes, 0xEE);
      if (r == root) {
        for (size_t e = 0; e < bytes; ++e) h[e] = static_cast<unsigned char>(e * 3 + root);
      }
      bufs.push_back(std::make_unique<DevMem>(bytes + off));
      c.out[r] = bufs.back()->at(off);
      c.in[r] = c.out[r];
      upload(c.out[r], h.data(), bytes);
    }
    run(c);
    for (int r = 0; r < n; ++r) {
      std::vector<unsigned char> g(bytes);
      CUDA_OK(cudaMemcpy(g.data(), c.out[r], bytes, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t e = 0; e < bytes; ++e) bad += g[e] != static_cast<unsigned char>(e * 3 + root);
      INFO("bcast from " << root << " into rank " << r);
      CHECK(bad == 0);
    }
  }
  // Allgather.
  gw_nvl_all_call_t c{};
  c.coll = GW_NVL_ALLGATHER;
  c.bytes = bytes;
  c.nranks = n;
  for (int r = 0; r < n; ++r) {
    std::vector<unsigned char> h(bytes);
    for (size_t e = 0; e < bytes; ++e) h[e] = static_cast<unsigned char>(e + 31 * r);
    outs.push_back(std::make_unique<DevMem>(n * bytes + off));
    c.out[r] = outs.back()->at(off);
    if (in_place) {
      c.in[r] = static_cast<char*>(c.out[r]) + r * bytes;
    } else {
      ins.push_back(std::make_unique<DevMem>(bytes + off));
      c.in[r] = ins.back()->at(off);
    }
    upload(const_cast<void*>(c.in[r]), h.data(), bytes);
  }
  run(c);
  for (int r = 0; r < n; ++r) {
    std::vector<unsigned char> g(n * bytes);
    CUDA_OK(cudaMemcpy(g.data(), c.out[r], n * bytes, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (int q = 0; q < n; ++q) {
      for (size_t e = 0; e < bytes; ++e) bad += g[q * bytes + e] != static_cast<unsigned char>(e + 31 * q);
    }
    INFO("allgather into rank " << r);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("delegated kernels: the whole call on every rank's buffers", "[gpu][cuda][nvlink]") {
  for (int n : {2, 3, 8}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, (size_t{1} << 20) + 3}) {
      for (size_t off : {size_t{0}, size_t{1}}) {
        check_allreduce(n, count, off, false);
        check_allreduce(n, count, off, true);
        check_moves(n, count, off, off == 0);
      }
    }
  }
}

TEST_CASE("delegated kernels: arguments refused", "[gpu][cuda][nvlink]") {
  gw_nvl_all_call_t c{};
  c.coll = GW_NVL_BCAST;
  c.nranks = 2;
  c.root = 2;
  c.bytes = 8;
  char why[256] = "";
  CHECK(gw_nvl_launch_all(&c, nullptr, why, sizeof(why)) == -1);
  c.coll = GW_NVL_ALLREDUCE;
  c.root = 0;
  c.op = GW_OP_SUM;
  c.type = GW_TYPE_INT32;
  c.bytes = 6;  // not whole elements
  CHECK(gw_nvl_launch_all(&c, nullptr, why, sizeof(why)) == -1);
  CHECK(std::string(why).find("whole") != std::string::npos);
}

TEST_CASE("board: shared by two openings, the GPU's address of a word lands in it",
          "[gpu][cuda][nvlink]") {
  using gpuwire::cuda::NvlBoard;
  const std::string name = "/gwnvl-test-" + std::to_string(getpid());
  auto a = NvlBoard::open(name, true, 3, 0);
  REQUIRE(static_cast<bool>(a));
  auto b = NvlBoard::open(name, false, 3, 0);
  REQUIRE(static_cast<bool>(b));
  NvlBoard::unlink(name);
  CHECK_FALSE(static_cast<bool>(NvlBoard::open(name, false, 3, 0)));  // the name is gone
  NvlBoard& x = **a;
  NvlBoard& y = **b;
  __atomic_fetch_add(x.arrived(5), 1, __ATOMIC_ACQ_REL);
  CHECK(__atomic_load_n(y.arrived(5), __ATOMIC_ACQUIRE) == 1);
  CHECK(y.arrived(5 + NvlBoard::kEntries) == y.arrived(5));  // an entry per call in turn
  std::memcpy(x.in_desc(7, 2), "abc", 4);
  CHECK(std::memcmp(y.in_desc(7, 2), "abc", 4) == 0);
  const uint64_t v = 42;
  CUDA_OK(cudaMemcpy(x.done_device(9), &v, sizeof(v), cudaMemcpyHostToDevice));
  CHECK(__atomic_load_n(y.done(9), __ATOMIC_ACQUIRE) == 42);
  // A board of another team size is refused.
  const std::string other = name + "-b";
  auto c = NvlBoard::open(other, true, 2, 0);
  REQUIRE(static_cast<bool>(c));
  CHECK_FALSE(static_cast<bool>(NvlBoard::open(other, false, 3, 0)));
  NvlBoard::unlink(other);
}

#else
TEST_CASE("delegated kernels: built without CUDA", "[gpu][cuda][nvlink]") {
  CHECK_FALSE(gpuwire::cuda::Driver::instance().available());
  gw_nvl_all_call_t c{};
  char why[256] = "";
  CHECK(gw_nvl_launch_all(&c, nullptr, why, sizeof(why)) == -1);
}
#endif
