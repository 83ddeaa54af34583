#include "gpuwire/fabric/sysfs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <system_error>

namespace gpuwire::fabric {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::string> read_attribute(const std::filesystem::path& file) {
  // Plain POSIX I/O: sysfs attributes are small, and a stream would hide the
  // errno that tells "slot unused" (EINVAL) from "no such file".
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[4096];
  std::size_t used = 0;
  bool failed = false;
  while (used < sizeof buffer) {
    const ssize_t got = ::read(fd, buffer + used, sizeof buffer - used);
    if (got < 0) {
      failed = true;
      break;
    }
    if (got == 0) break;
    used += static_cast<std::size_t>(got);
  }
  ::close(fd);
  if (failed) return std::nullopt;
  return std::string(trim(std::string_view(buffer, used)));
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;  // would overflow
    value = value * 10 + digit;
  }
  return value;
}

std::optional<std::uint64_t> read_unsigned(const std::filesystem::path& file) {
  const auto text = read_attribute(file);
  if (!text) return std::nullopt;
  return parse_unsigned(*text);
}

bool natural_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      // Compare the digit runs by value: skip leading zeros, then by length,
      // then lexically.
      std::size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      std::string_view ra = a.substr(i, ei - i), rb = b.substr(j, ej - j);
      while (ra.size() > 1 && ra.front() == '0') ra.remove_prefix(1);
      while (rb.size() > 1 && rb.front() == '0') rb.remove_prefix(1);
      if (ra.size() != rb.size()) return ra.size() < rb.size();
      if (ra != rb) return ra < rb;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

std::vector<std::string> list_directory(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return names;
  for (const auto& entry : it) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end(),
            [](const std::string& x, const std::string& y) { return natural_less(x, y); });
  return names;
}

}  // namespace gpuwire::fabric
