// The reduction table's host side: the class rule, names and sizes, and the
// functors as CPU loops (gw_host_reduce3). In a build without CUDA, the GPU
// entry points answer "built without CUDA".
#include <cstdarg>
#include <cstdio>

#include "gpuwire/cuda/reduce.h"
#include "gpuwire/cuda/why.hpp"
#include "reduce_functors.hpp"

namespace gpuwire::cuda::reduce {
namespace {

using HostFn = void (*)(const void*, const void*, void*, size_t);

template <int Op, int Type>
void host_loop(const void* a, const void* b, void* out, size_t count) {
  using T = typename TypeOf<Type>::type;
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  T* po = static_cast<T*>(out);
  for (size_t i = 0; i < count; ++i) element<Op, Type>(pa, pb, po, i);
}

template <int Op, int Type>
struct MakeHost {
  static constexpr HostFn get() {
    if constexpr (applies<Op, Type>()) {
      return &host_loop<Op, Type>;
    } else {
      return nullptr;
    }
  }
};

constexpr auto host_table = make_table<HostFn, MakeHost>();

constexpr std::array<Class, GW_TYPE_COUNT> classes = {{
#define GW_X_CLASS(name, ctype, cls) Class::cls,
    GW_REDUCE_TYPES(GW_X_CLASS)
#undef GW_X_CLASS
}};

constexpr std::array<size_t, GW_TYPE_COUNT> sizes = {{
#define GW_X_SIZE(name, ctype, cls) sizeof(ctype),
    GW_REDUCE_TYPES(GW_X_SIZE)
#undef GW_X_SIZE
}};

using gpuwire::cuda::detail::fail;

}  // namespace
}  // namespace gpuwire::cuda::reduce

namespace red = gpuwire::cuda::reduce;

extern "C" {

int gw_reduce_supported(int op, int type) {
  if (op < 0 || op >= GW_OP_COUNT || type < 0 || type >= GW_TYPE_COUNT) return 0;
  return red::op_applies(op, red::classes[type]) ? 1 : 0;
}

size_t gw_reduce_type_size(int type) {
  return type >= 0 && type < GW_TYPE_COUNT ? red::sizes[type] : 0;
}

const char* gw_reduce_op_name(int op) {
  static const char* const names[GW_OP_COUNT] = {
#define GW_X_OPNAME(name) #name,
      GW_REDUCE_OPS(GW_X_OPNAME)
#undef GW_X_OPNAME
  };
  return op >= 0 && op < GW_OP_COUNT ? names[op] : "?";
}

const char* gw_reduce_type_name(int type) {
  static const char* const names[GW_TYPE_COUNT] = {
#define GW_X_TYPENAME(name, ctype, cls) #name,
      GW_REDUCE_TYPES(GW_X_TYPENAME)
#undef GW_X_TYPENAME
  };
  return type >= 0 && type < GW_TYPE_COUNT ? names[type] : "?";
}

int gw_host_reduce3(int op, int type, const void* a, const void* b, void* out, size_t count,
                    char* why, size_t why_len) {
  if (!gw_reduce_supported(op, type)) {
    return red::fail(why, why_len, "no reduction %s on %s: the op does not apply to the type",
                     gw_reduce_op_name(op), gw_reduce_type_name(type));
  }
  red::host_table[op][type](a, b, out, count);
  return 0;
}

#if !GPUWIRE_HAVE_CUDA
int gw_dev_reduce3(int, int, const void*, const void*, void*, size_t, void*, char* why,
                   size_t why_len) {
  return red::fail(why, why_len, "GPU reduction: gpuwire built without CUDA");
}
int gw_dev_reduce(int, int, const void*, void*, size_t, void*, char* why, size_t why_len) {
  return red::fail(why, why_len, "GPU reduction: gpuwire built without CUDA");
}
int gw_dev_cas(void*, const void*, const void*, void*, size_t, void*, char* why, size_t why_len) {
  return red::fail(why, why_len, "GPU compare-and-swap: gpuwire built without CUDA");
}
#endif

}  // extern "C"
