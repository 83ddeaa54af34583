// The one-line reason written into a caller's `why` buffer by the C functions
// of the cuda module and of the coll component's device part; returns -1 so
// a caller can `return fail(...)`.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdio>

namespace gpuwire::cuda::detail {

inline int fail(char* why, size_t why_len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
inline int fail(char* why, size_t why_len, const char* fmt, ...) {
  if (why && why_len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

}  // namespace gpuwire::cuda::detail
