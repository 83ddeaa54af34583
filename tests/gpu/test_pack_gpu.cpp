// The pack/unpack kernel of gpuwire/cuda/pack.h ([gpu]): random block lists
// (short and long blocks, every alignment, negative user offsets, blocks
// longer than the kernel's chunk) against a host reference, byte for byte,
// including that bytes outside the blocks are left untouched; the device
// temporaries' reuse. Skipped (exit 77) without a GPU.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_gate.hpp"
#include "gpuwire/cuda/pack.h"

#if GPUWIRE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "dev_mem.hpp"

namespace {

using gw_test::DevMem;
using gw_test::upload;

// A random layout: non-overlapping blocks in a user region of `span` bytes,
// visited in random order (packed order is the list's order). user_off is
// relative to a base `lead` bytes into the region, so some are negative.
std::vector<gw_block_t> random_layout(std::mt19937_64& rng, size_t span, size_t lead,
                                      size_t max_len, size_t* packed_size) {
  std::vector<gw_block_t> blocks;
  size_t pos = std::uniform_int_distribution<size_t>(0, 15)(rng);
  std::uniform_int_distribution<size_t> len_d(1, max_len), gap_d(0, 40);
  while (true) {
    const size_t len = len_d(rng);
    if (pos + len > span) break;
    blocks.push_back(gw_block_t{static_cast<int64_t>(pos) - static_cast<int64_t>(lead), 0, len});
    pos += len + gap_d(rng);
  }
  std::shuffle(blocks.begin(), blocks.end(), rng);
  size_t packed = 0;
  for (auto& b : blocks) {
    b.packed_off = packed;
    packed += b.len;
  }
  *packed_size = packed;
  return blocks;
}

void check_layout(std::mt19937_64& rng, size_t span, size_t max_len, size_t user_shift) {
  const size_t lead = span / 3;
  size_t packed_size = 0;
  std::vector<gw_block_t> blocks = random_layout(rng, span, lead, max_len, &packed_size);
  INFO("blocks " << blocks.size() << ", packed " << packed_size << ", span " << span
                 << ", max_len " << max_len << ", user shift " << user_shift);
  std::vector<unsigned char> user(span), packed_init(packed_size + 32);
  for (auto& c : user) c = static_cast<unsigned char>(rng());
  for (auto& c : packed_init) c = static_cast<unsigned char>(rng());
  DevMem duser(span + 16), dpacked(packed_size + 32 + 16);
  char* ubase = duser.at(user_shift);
  char* pbase = dpacked.at(user_shift % 3);
  upload(ubase, user.data(), span);
  upload(pbase, packed_init.data(), packed_init.size());
  int device = 0;
  CUDA_OK(cudaGetDevice(&device));
  char why[512] = "";

  // Pack: packed bytes as the reference says, the 32 bytes past them untouched.
  std::vector<unsigned char> want = packed_init;
  for (const auto& b : blocks) std::memcpy(&want[b.packed_off], &user[lead + b.user_off], b.len);
  REQUIRE(gw_dev_pack(pbase, ubase + lead, blocks.data(), blocks.size(), device, why,
                      sizeof(why)) == 0);
  std::vector<unsigned char> got(packed_init.size());
  CUDA_OK(cudaMemcpy(got.data(), pbase, got.size(), cudaMemcpyDeviceToHost));
  CHECK(got == want);

  // Unpack new bytes into the user region: blocks replaced, gaps untouched.
  std::vector<unsigned char> fresh(packed_size);
  for (auto& c : fresh) c = static_cast<unsigned char>(rng());
  upload(pbase, fresh.data(), packed_size);
  std::vector<unsigned char> want_user = user;
  for (const auto& b : blocks) std::memcpy(&want_user[lead + b.user_off], &fresh[b.packed_off], b.len);
  REQUIRE(gw_dev_unpack(ubase + lead, pbase, blocks.data(), blocks.size(), device, why,
                        sizeof(why)) == 0);
  std::vector<unsigned char> got_user(span);
  CUDA_OK(cudaMemcpy(got_user.data(), ubase, span, cudaMemcpyDeviceToHost));
  CHECK(got_user == want_user);
}

}  // namespace

TEST_CASE("pack kernel: random block lists against the host reference", "[gpu][cuda][pack]") {
  std::mt19937_64 rng(20261201);
  for (size_t shift : {size_t{0}, size_t{1}, size_t{4}, size_t{8}}) {
    check_layout(rng, 4096, 8, shift);             // many tiny blocks
    check_layout(rng, 1 << 16, 100, shift);        // short, odd lengths
    check_layout(rng, 1 << 20, 5000, shift);       // medium
    check_layout(rng, 3 << 20, 200000, shift);     // long blocks, cut into chunks
  }
}

TEST_CASE("pack kernel: an empty list succeeds and launches nothing", "[gpu][cuda][pack]") {
  char why[256] = "";
  CHECK(gw_dev_pack(nullptr, nullptr, nullptr, 0, 0, why, sizeof(why)) == 0);
  CHECK(gw_dev_unpack(nullptr, nullptr, nullptr, 0, 0, why, sizeof(why)) == 0);
}

TEST_CASE("pack kernel: a bad device is refused with one line", "[gpu][cuda][pack]") {
  gw_block_t b{0, 0, 8};
  char why[256] = "";
  CHECK(gw_dev_pack(nullptr, nullptr, &b, 1, 1000, why, sizeof(why)) == -1);
  CHECK(std::string(why).find("device 1000") != std::string::npos);
}

TEST_CASE("pack: the GPU of a pointer and device temporaries", "[gpu][cuda][pack]") {
  int device = 0;
  CUDA_OK(cudaGetDevice(&device));
  char why[256] = "";
  DevMem m(1024);
  CHECK(gw_dev_pointer_device(m.at(100), why, sizeof(why)) == device);
  std::vector<char> host(16);
  CHECK(gw_dev_pointer_device(host.data(), why, sizeof(why)) == -1);
  CHECK(std::string(why).find("not GPU memory") != std::string::npos);

  void* a = nullptr;
  void* b = nullptr;
  REQUIRE(gw_dev_temp_get(device, 1000, &a, why, sizeof(why)) == 0);
  REQUIRE(gw_dev_temp_get(device, 1000, &b, why, sizeof(why)) == 0);
  CHECK(a != b);  // both in use: two temporaries
  CHECK(gw_dev_pointer_device(a, why, sizeof(why)) == device);
  CUDA_OK(cudaMemset(a, 1, 1000));
  gw_dev_temp_put(a);
  void* c = nullptr;
  REQUIRE(gw_dev_temp_get(device, 500, &c, why, sizeof(why)) == 0);
  CHECK(c == a);  // reused
  gw_dev_temp_put(b);
  gw_dev_temp_put(c);
  gw_dev_temp_drain();
}

#else
TEST_CASE("pack kernel: built without CUDA answers no CUDA", "[gpu][cuda][pack]") {
  char why[256] = "";
  gw_block_t b{0, 0, 8};
  char x[8] = {0}, y[8] = {0};
  CHECK(gw_dev_pack(x, y, &b, 1, 0, why, sizeof(why)) == -1);
  CHECK(std::string(why).find("no CUDA") != std::string::npos);
}
#endif
