// Reading sysfs through a configurable root directory.
//
// Every path the fabric layer reads is built from a SysfsRoot, so unit tests
// point it at a temporary directory holding a fake
// sys/class/{infiniband,net} tree. Readers never fail loudly: a missing or
// unreadable attribute is std::nullopt and the caller decides what it means.
//
// Threading: all functions are re-entrant; SysfsRoot is an immutable value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuwire::fabric {

class SysfsRoot {
 public:
  // `root` is the directory that holds "sys/"; "/" on a real system.
  explicit SysfsRoot(std::filesystem::path root = "/") : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path infiniband_dir() const { return root_ / "sys/class/infiniband"; }
  std::filesystem::path net_dir() const { return root_ / "sys/class/net"; }
  std::filesystem::path device_dir(std::string_view device) const {
    return infiniband_dir() / device;
  }
  std::filesystem::path port_dir(std::string_view device, unsigned port) const {
    return device_dir(device) / "ports" / std::to_string(port);
  }

 private:
  std::filesystem::path root_;
};

// The whole content of a small attribute file with surrounding whitespace
// removed; nullopt when the file is missing or the read fails (sysfs answers
// EINVAL for unused GID slots, for instance). Reads at most 4 KiB.
std::optional<std::string> read_attribute(const std::filesystem::path& file);

// Strict decimal: digits only (surrounding whitespace allowed), no sign, no
// overflow. "12abc", "", "-1", "0x10" are all nullopt.
std::optional<std::uint64_t> parse_unsigned(std::string_view text);

// read_attribute + parse_unsigned.
std::optional<std::uint64_t> read_unsigned(const std::filesystem::path& file);

// Names of the entries of `dir`, sorted in natural order (so "mlx5_10" comes
// after "mlx5_2" and "10" after "9"); empty when `dir` is missing.
std::vector<std::string> list_directory(const std::filesystem::path& dir);

// "a < b" in natural order: runs of digits compare by value.
bool natural_less(std::string_view a, std::string_view b);

}  // namespace gpuwire::fabric
