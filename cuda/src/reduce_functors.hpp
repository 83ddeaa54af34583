// The reduction functors, compiled for the GPU (reduce.cu) and the CPU
// (reduce_host.cpp) from this one header. Semantics and the op x type table:
// gpuwire/cuda/reduce.h.
//
// Each functor is `T apply(T a, T b)` for scalar types; pair types (MINLOC,
// MAXLOC) are combined field by field through `combine(const T& a, const T& b,
// T* out)`, so that padding bytes of out are never written.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "gpuwire/cuda/reduce.h"

#ifdef __CUDACC__
#define GW_HD __host__ __device__ __forceinline__
#else
#define GW_HD inline
#endif

namespace gpuwire::cuda::reduce {

enum class Class { INT, FLOAT, BOOL, BYTE, PAIR };

// The class rule: which op applies to which class of type. The only place
// that says so; gw_reduce_supported() and the kernel tables are built on it.
constexpr bool op_applies(int op, Class c) {
  switch (op) {
    case GW_OP_SUM:
    case GW_OP_PROD:
    case GW_OP_MIN:
    case GW_OP_MAX:
      return c == Class::INT || c == Class::FLOAT;
    case GW_OP_LAND:
    case GW_OP_LOR:
    case GW_OP_LXOR:
      return c == Class::INT || c == Class::BOOL;
    case GW_OP_BAND:
    case GW_OP_BOR:
    case GW_OP_BXOR:
      return c == Class::INT || c == Class::BYTE;
    case GW_OP_MINLOC:
    case GW_OP_MAXLOC:
      return c == Class::PAIR;
    default:
      return false;
  }
}

// Type traits from the table: storage type and class of each type id.
template <int Type>
struct TypeOf;
#define GW_X_TRAIT(name, ctype, cls)             \
  template <>                                    \
  struct TypeOf<GW_TYPE_##name> {                \
    using type = ctype;                          \
    static constexpr Class klass = Class::cls;   \
  };
GW_REDUCE_TYPES(GW_X_TRAIT)
#undef GW_X_TRAIT

template <int Op, int Type>
constexpr bool applies() {
  return op_applies(Op, TypeOf<Type>::klass);
}

// Integer arithmetic wraps: do it in the unsigned type of the same width.
template <class T>
struct Unsigned { using type = T; };
template <> struct Unsigned<int8_t> { using type = uint8_t; };
template <> struct Unsigned<int16_t> { using type = uint16_t; };
template <> struct Unsigned<int32_t> { using type = uint32_t; };
template <> struct Unsigned<int64_t> { using type = uint64_t; };

template <class T, Class C>
GW_HD T add(T a, T b) {
  if constexpr (C == Class::INT) {
    using U = typename Unsigned<T>::type;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <class T, Class C>
GW_HD T mul(T a, T b) {
  if constexpr (C == Class::INT) {
    using U = typename Unsigned<T>::type;
    // uint16_t * uint16_t promotes to int and may overflow it: widen first.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                         static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

// One scalar step of op on class C; a is the lower ranks' operand.
template <int Op, class T, Class C>
GW_HD T apply(T a, T b) {
  if constexpr (Op == GW_OP_SUM) return add<T, C>(a, b);
  else if constexpr (Op == GW_OP_PROD) return mul<T, C>(a, b);
  else if constexpr (Op == GW_OP_MIN) return b < a ? b : a;
  else if constexpr (Op == GW_OP_MAX) return b > a ? b : a;
  else if constexpr (Op == GW_OP_LAND) return static_cast<T>((a != 0) && (b != 0));
  else if constexpr (Op == GW_OP_LOR) return static_cast<T>((a != 0) || (b != 0));
  else if constexpr (Op == GW_OP_LXOR) return static_cast<T>((a != 0) != (b != 0));
  else if constexpr (Op == GW_OP_BAND) return static_cast<T>(a & b);
  else if constexpr (Op == GW_OP_BOR) return static_cast<T>(a | b);
  else if constexpr (Op == GW_OP_BXOR) return static_cast<T>(a ^ b);
  else return b;
}

// MINLOC / MAXLOC on a pair: value and index written separately.
template <int Op, class P>
GW_HD void combine_pair(const P& a, const P& b, P* out) {
  const bool a_wins = Op == GW_OP_MAXLOC ? (a.v > b.v) : (a.v < b.v);
  if (a_wins) {
    out->v = a.v;
    out->k = a.k;
  } else if (a.v == b.v) {
    out->v = b.v;
    out->k = b.k < a.k ? b.k : a.k;
  } else {
    out->v = b.v;
    out->k = b.k;
  }
}

// out[i] = a[i] op b[i] for one element, scalar or pair.
template <int Op, int Type>
GW_HD void element(const typename TypeOf<Type>::type* a, const typename TypeOf<Type>::type* b,
                   typename TypeOf<Type>::type* out, size_t i) {
  using T = typename TypeOf<Type>::type;
  constexpr Class C = TypeOf<Type>::klass;
  if constexpr (C == Class::PAIR) {
    combine_pair<Op>(a[i], b[i], &out[i]);
  } else {
    out[i] = apply<Op, T, C>(a[i], b[i]);
  }
}

// Dispatch tables [op][type] generated from the table's enums: Make<Op, Type>
// ::get() gives the entry for a supported pair and nullptr for any other, so
// nothing is instantiated for a pair the class rule excludes.
template <class Fn, template <int, int> class Make, int Op, int... Types>
constexpr std::array<Fn, GW_TYPE_COUNT> make_row(std::integer_sequence<int, Types...>) {
  return {{Make<Op, Types>::get()...}};
}
template <class Fn, template <int, int> class Make, int... Ops>
constexpr std::array<std::array<Fn, GW_TYPE_COUNT>, GW_OP_COUNT> make_table(
    std::integer_sequence<int, Ops...>) {
  return {{make_row<Fn, Make, Ops>(std::make_integer_sequence<int, GW_TYPE_COUNT>{})...}};
}
template <class Fn, template <int, int> class Make>
constexpr std::array<std::array<Fn, GW_TYPE_COUNT>, GW_OP_COUNT> make_table() {
  return make_table<Fn, Make>(std::make_integer_sequence<int, GW_OP_COUNT>{});
}

}  // namespace gpuwire::cuda::reduce
