// The line protocol between test_cuda_ipc.cpp and its peer process: a blob as
// hex on one line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gw_test {

inline std::string to_hex(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(digits[p[i] >> 4]);
    s.push_back(digits[p[i] & 15]);
  }
  return s;
}

inline bool from_hex(const std::string& s, std::vector<uint8_t>* out) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (s.size() % 2) return false;
  out->clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = nibble(s[i]), lo = nibble(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return true;
}

}  // namespace gw_test
