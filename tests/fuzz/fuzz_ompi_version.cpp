// The Open MPI library version string (gpuwire/ompi_version.h:
// gw_parse_ompi_version), and the refusal line built from it
// (gw_version_compare) into a caller's buffer of any size.
//
// Input: the first byte picks the size of the refusal buffer (0-255); the
// rest, NUL-terminated, is the version string.
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_target.hpp"

#include "gpuwire/ompi_version.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const size_t why_len = data[0];
  const std::string text(reinterpret_cast<const char *>(data + 1), size - 1);

  int major = -7, minor = -7, release = -7;
  const int rc = gw_parse_ompi_version(text.c_str(), &major, &minor, &release);
  GW_FUZZ_REQUIRE(rc == 0 || rc == -1);
  if (rc == 0) {
    GW_FUZZ_REQUIRE(std::strstr(text.c_str(), "Open MPI v") != nullptr);
    GW_FUZZ_REQUIRE(major >= 0 && minor >= 0 && release >= 0);
  } else {
    GW_FUZZ_REQUIRE(major == -7 && minor == -7 && release == -7);
  }

  // A heap buffer of exactly why_len bytes: a write past it is caught.
  std::vector<char> why(why_len ? why_len : 1, 'x');
  const int cmp = gw_version_compare(4, 1, 4, text.c_str(), "pml", why.data(), why_len);
  GW_FUZZ_REQUIRE(cmp == 0 || cmp == -1);
  if (cmp == 0) GW_FUZZ_REQUIRE(rc == 0 && major == 4 && minor == 1);
  if (rc == 0 && major == 4 && minor == 1) GW_FUZZ_REQUIRE(cmp == 0);
  if (cmp == -1 && why_len > 0) {
    GW_FUZZ_REQUIRE(std::memchr(why.data(), '\0', why_len) != nullptr);
  }
  return 0;
}
