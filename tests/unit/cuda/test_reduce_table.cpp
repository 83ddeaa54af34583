// The reduction table's rules and its CPU functors (gw_host_reduce3, which
// the simulated device of tests/mpi_coll runs) against an independent
// reference. No GPU needed; tests/gpu/test_reduce_gpu.cpp runs the same
// checks on the kernels.
#include <random>
#include <vector>

#include "gw_catch.hpp"
#include "reduce_reference.hpp"

TEST_CASE("reduce table: MPI's op/type rules, sizes and names", "[cuda][reduce]") {
  for (int t = 0; t < GW_TYPE_COUNT; ++t) {
    gw_ref::TypeDesc d;
    INFO(gw_reduce_type_name(t));
    REQUIRE(gw_ref::describe(t, &d));
    CHECK(gw_reduce_type_size(t) == d.stride);
    for (int o = 0; o < GW_OP_COUNT; ++o) {
      INFO(gw_reduce_op_name(o));
      CHECK(gw_reduce_supported(o, t) == (gw_ref::mpi_allows(o, d.kind) ? 1 : 0));
    }
  }
  CHECK(gw_reduce_supported(-1, 0) == 0);
  CHECK(gw_reduce_supported(0, GW_TYPE_COUNT) == 0);
  CHECK(gw_reduce_type_size(GW_TYPE_COUNT) == 0);
  CHECK(std::string(gw_reduce_op_name(GW_OP_MAXLOC)) == "MAXLOC");
  CHECK(std::string(gw_reduce_type_name(GW_TYPE_SHORT_INT)) == "SHORT_INT");
  char why[200] = "";
  int x = 1, y = 2, z = 0;
  CHECK(gw_host_reduce3(GW_OP_MINLOC, GW_TYPE_INT32, &x, &y, &z, 1, why, sizeof(why)) == -1);
  CHECK(std::string(why).find("MINLOC") != std::string::npos);
}

TEST_CASE("reduce table: every op x type on the CPU", "[cuda][reduce]") {
  std::mt19937_64 rng(12345);
  int pairs = 0;
  for (int o = 0; o < GW_OP_COUNT; ++o) {
    for (int t = 0; t < GW_TYPE_COUNT; ++t) {
      if (!gw_reduce_supported(o, t)) continue;
      ++pairs;
      gw_ref::TypeDesc d;
      REQUIRE(gw_ref::describe(t, &d));
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}}) {
        INFO(gw_ref::name(o, t) << ", count " << n);
        std::vector<unsigned char> a, b, out, want;
        gw_ref::fill(d, a, n, rng);
        gw_ref::fill(d, b, n, rng);
        out.assign(n * d.stride, 0x5C);
        want = out;
        gw_ref::expected(o, d, a.data(), b.data(), want.data(), n);
        char why[200] = "";
        REQUIRE(gw_host_reduce3(o, t, a.data(), b.data(), out.data(), n, why, sizeof(why)) == 0);
        CHECK(gw_ref::first_difference(out, want, d.stride) == -1);
        // In place: inout = in op inout.
        std::vector<unsigned char> inout = b, want2 = b;
        gw_ref::expected(o, d, a.data(), b.data(), want2.data(), n);
        REQUIRE(gw_host_reduce3(o, t, a.data(), inout.data(), inout.data(), n, why, sizeof(why)) == 0);
        CHECK(gw_ref::first_difference(inout, want2, d.stride) == -1);
      }
    }
  }
  CHECK(pairs == 104);
}
