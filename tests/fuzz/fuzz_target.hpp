// What every fuzz target shares: the libFuzzer entry point, the check that
// turns a violated property into a crash (so libFuzzer keeps the input and the
// replay test fails), and the splitting of one input into several fields.
//
// A target must return 0 for every input, never read outside `data`, and never
// keep state that changes how a later input behaves (libFuzzer and the replay
// driver call it many times in one process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define GW_FUZZ_REQUIRE(cond) \
  ((cond) ? (void)0 : ::gpuwire::fuzz::property_violated(#cond, __FILE__, __LINE__))

namespace gpuwire::fuzz {

[[noreturn]] inline void property_violated(const char *what, const char *file, int line) {
  std::fprintf(stderr, "%s:%d: property violated: %s\n", file, line, what);
  std::fflush(stderr);
  std::abort();
}

inline std::string_view as_text(const uint8_t *data, size_t size) {
  return std::string_view(reinterpret_cast<const char *>(data), size);
}

// Splits an input into at most `max_fields` fields at NUL bytes; the last
// field keeps the rest of the input, NULs included. Targets that need several
// strings (one per sysfs file) read them this way, so a seed file is written
// as the fields joined with '\0'.
inline std::vector<std::string_view> split_fields(const uint8_t *data, size_t size,
                                                  size_t max_fields) {
  std::vector<std::string_view> fields;
  std::string_view rest = as_text(data, size);
  while (fields.size() + 1 < max_fields) {
    const size_t nul = rest.find('\0');
    if (nul == std::string_view::npos) break;
    fields.push_back(rest.substr(0, nul));
    rest.remove_prefix(nul + 1);
  }
  fields.push_back(rest);
  return fields;
}

}  // namespace gpuwire::fuzz
