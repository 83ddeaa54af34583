// An independent reference for the reduction table (gpuwire/cuda/reduce.h):
// MPI's rules on which op applies to which type, random inputs for every
// type, and the expected result of each op, written out per type without
// the functors under test. Shared by the CPU test (tests/unit/cuda) and the
// GPU test (tests/gpu).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpuwire/cuda/reduce.h"

namespace gw_ref {

enum class Kind { Int, Float, Double, Bool, Byte, Pair };

struct TypeDesc {
  Kind kind;
  int bytes;       // value width (pairs: of the value field)
  bool is_signed;  // Int, and the value of integer pairs
  Kind value;      // pairs: Int, Float or Double
  size_t stride;   // element size
  size_t koff;     // pairs: offset of the int index
};

// Every type id of the table, described here independently; a new table
// entry without a line here fails the tests.
inline bool describe(int type, TypeDesc* d) {
  switch (type) {
    case GW_TYPE_INT8: *d = {Kind::Int, 1, true, Kind::Int, 1, 0}; return true;
    case GW_TYPE_UINT8: *d = {Kind::Int, 1, false, Kind::Int, 1, 0}; return true;
    case GW_TYPE_INT16: *d = {Kind::Int, 2, true, Kind::Int, 2, 0}; return true;
    case GW_TYPE_UINT16: *d = {Kind::Int, 2, false, Kind::Int, 2, 0}; return true;
    case GW_TYPE_INT32: *d = {Kind::Int, 4, true, Kind::Int, 4, 0}; return true;
    case GW_TYPE_UINT32: *d = {Kind::Int, 4, false, Kind::Int, 4, 0}; return true;
    case GW_TYPE_INT64: *d = {Kind::Int, 8, true, Kind::Int, 8, 0}; return true;
    case GW_TYPE_UINT64: *d = {Kind::Int, 8, false, Kind::Int, 8, 0}; return true;
    case GW_TYPE_FLOAT: *d = {Kind::Float, 4, true, Kind::Float, 4, 0}; return true;
    case GW_TYPE_DOUBLE: *d = {Kind::Double, 8, true, Kind::Double, 8, 0}; return true;
    case GW_TYPE_BOOL: *d = {Kind::Bool, 1, false, Kind::Bool, 1, 0}; return true;
    case GW_TYPE_BYTE: *d = {Kind::Byte, 1, false, Kind::Byte, 1, 0}; return true;
    case GW_TYPE_FLOAT_INT: *d = {Kind::Pair, 4, true, Kind::Float, 8, 4}; return true;
    case GW_TYPE_DOUBLE_INT: *d = {Kind::Pair, 8, true, Kind::Double, 16, 8}; return true;
    case GW_TYPE_LONG_INT: *d = {Kind::Pair, 8, true, Kind::Int, 16, 8}; return true;
    case GW_TYPE_2INT: *d = {Kind::Pair, 4, true, Kind::Int, 8, 4}; return true;
    case GW_TYPE_SHORT_INT: *d = {Kind::Pair, 2, true, Kind::Int, 8, 4}; return true;
    default: return false;
  }
}

// MPI's groups: arithmetic and min/max on integers and floating point,
// logical ops on integers and bool, bitwise ops on integers and byte,
// MINLOC/MAXLOC on the pair types.
inline bool mpi_allows(int op, Kind k) {
  switch (op) {
    case GW_OP_SUM: case GW_OP_PROD: case GW_OP_MIN: case GW_OP_MAX:
      return k == Kind::Int || k == Kind::Float || k == Kind::Double;
    case GW_OP_LAND: case GW_OP_LOR: case GW_OP_LXOR: return k == Kind::Int || k == Kind::Bool;
    case GW_OP_BAND: case GW_OP_BOR: case GW_OP_BXOR: return k == Kind::Int || k == Kind::Byte;
    case GW_OP_MINLOC: case GW_OP_MAXLOC: return k == Kind::Pair;
    default: return false;
  }
}

inline uint64_t load_int(const unsigned char* p, int bytes, bool is_signed) {
  uint64_t v = 0;
  std::memcpy(&v, p, bytes);  // little-endian
  if (is_signed && bytes < 8 && (v >> (8 * bytes - 1))) v |= ~((uint64_t{1} << (8 * bytes)) - 1);
  return v;
}
inline bool int_less(uint64_t a, uint64_t b, bool is_signed) {
  return is_signed ? static_cast<int64_t>(a) < static_cast<int64_t>(b) : a < b;
}

// Random inputs: integers over their whole range (a third zero), small
// floating values, pair values from {0..3} so that ties are common.
inline void fill(const TypeDesc& d, std::vector<unsigned char>& buf, size_t n, std::mt19937_64& rng) {
  buf.assign(n * d.stride, 0xA5);  // pair padding stays 0xA5
  for (size_t i = 0; i < n; ++i) {
    unsigned char* p = buf.data() + i * d.stride;
    uint64_t r = rng();
    switch (d.kind) {
      case Kind::Int: {
        uint64_t v = (r % 3 == 0) ? 0 : rng();
        std::memcpy(p, &v, d.bytes);
        break;
      }
      case Kind::Float: { float f = static_cast<float>(static_cast<int>(r % 2001) - 1000) / 8; std::memcpy(p, &f, 4); break; }
      case Kind::Double: { double f = static_cast<double>(static_cast<int>(r % 2001) - 1000) / 8; std::memcpy(p, &f, 8); break; }
      case Kind::Bool: { unsigned char b = (r % 3 == 0) ? 0 : static_cast<unsigned char>(1 + r % 5); *p = b; break; }
      case Kind::Byte: *p = static_cast<unsigned char>(r); break;
      case Kind::Pair: {
        int32_t k = static_cast<int32_t>((r >> 8) % 100000) - 50000;
        if (d.value == Kind::Float) { float f = static_cast<float>(r % 4); std::memcpy(p, &f, 4); }
        else if (d.value == Kind::Double) { double f = static_cast<double>(r % 4); std::memcpy(p, &f, 8); }
        else { uint64_t v = r % 4; std::memcpy(p, &v, d.bytes); }
        std::memcpy(p + d.koff, &k, 4);
        break;
      }
    }
  }
}

// expect[i] = a[i] op b[i] (a: the lower ranks' operand). expect must hold
// out's bytes before the call: pair padding is expected unchanged.
inline void expected(int op, const TypeDesc& d, const unsigned char* a, const unsigned char* b,
                     unsigned char* expect, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const unsigned char* pa = a + i * d.stride;
    const unsigned char* pb = b + i * d.stride;
    unsigned char* po = expect + i * d.stride;
    if (d.kind == Kind::Pair) {
      int32_t ka, kb;
      std::memcpy(&ka, pa + d.koff, 4);
      std::memcpy(&kb, pb + d.koff, 4);
      int cmp;  // sign of a.v - b.v
      if (d.value == Kind::Float) { float x, y; std::memcpy(&x, pa, 4); std::memcpy(&y, pb, 4); cmp = (x > y) - (x < y); }
      else if (d.value == Kind::Double) { double x, y; std::memcpy(&x, pa, 8); std::memcpy(&y, pb, 8); cmp = (x > y) - (x < y); }
      else { uint64_t x = load_int(pa, d.bytes, true), y = load_int(pb, d.bytes, true); cmp = int_less(y, x, true) - int_less(x, y, true); }
      const bool a_wins = op == GW_OP_MAXLOC ? cmp > 0 : cmp < 0;
      const unsigned char* w = a_wins ? pa : pb;
      int32_t k = cmp == 0 ? (ka < kb ? ka : kb) : (a_wins ? ka : kb);
      std::memcpy(po, w, d.bytes);
      std::memcpy(po + d.koff, &k, 4);
      continue;
    }
    if (d.kind == Kind::Float || d.kind == Kind::Double) {
      double x, y, r = 0;
      if (d.kind == Kind::Float) { float fx, fy; std::memcpy(&fx, pa, 4); std::memcpy(&fy, pb, 4); x = fx; y = fy; }
      else { std::memcpy(&x, pa, 8); std::memcpy(&y, pb, 8); }
      switch (op) {
        case GW_OP_SUM: r = x + y; break;  // exact: eighths of small integers
        case GW_OP_PROD: r = x * y; break;
        case GW_OP_MIN: r = y < x ? y : x; break;
        case GW_OP_MAX: r = y > x ? y : x; break;
      }
      if (d.kind == Kind::Float) { float f = static_cast<float>(r); std::memcpy(po, &f, 4); }
      else std::memcpy(po, &r, 8);
      continue;
    }
    const bool sgn = d.kind == Kind::Int && d.is_signed;
    const uint64_t x = load_int(pa, d.bytes, sgn), y = load_int(pb, d.bytes, sgn);
    uint64_t r = 0;
    switch (op) {
      case GW_OP_SUM: r = x + y; break;
      case GW_OP_PROD: r = x * y; break;
      case GW_OP_MIN: r = int_less(y, x, sgn) ? y : x; break;
      case GW_OP_MAX: r = int_less(x, y, sgn) ? y : x; break;
      case GW_OP_LAND: r = (x != 0) && (y != 0); break;
      case GW_OP_LOR: r = (x != 0) || (y != 0); break;
      case GW_OP_LXOR: r = (x != 0) != (y != 0); break;
      case GW_OP_BAND: r = x & y; break;
      case GW_OP_BOR: r = x | y; break;
      case GW_OP_BXOR: r = x ^ y; break;
    }
    std::memcpy(po, &r, d.bytes);  // low bytes: modulo 2^bits
  }
}

// The first element whose bytes differ, or -1.
inline long first_difference(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want, size_t stride) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return static_cast<long>(i / stride);
  }
  return -1;
}

inline std::string name(int op, int type) {
  return std::string(gw_reduce_op_name(op)) + " on " + gw_reduce_type_name(type);
}

}  // namespace gw_ref
