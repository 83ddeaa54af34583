#include "fake_sysfs.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace gpuwire::fabric::testing {

FakeSysfs::FakeSysfs() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gw-fake-sysfs-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = pattern;
}

FakeSysfs::~FakeSysfs() {
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

void FakeSysfs::write(const std::string& relative, std::string_view content) const {
  const auto file = root_ / relative;
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

void FakeSysfs::remove(const std::string& relative) const {
  std::filesystem::remove_all(root_ / relative);
}

void FakeSysfs::make_dir(const std::string& relative) const {
  std::filesystem::create_directories(root_ / relative);
}

std::string FakeSysfs::port_path(const std::string& device, unsigned port) const {
  return "sys/class/infiniband/" + device + "/ports/" + std::to_string(port);
}

void FakeSysfs::add_port(const std::string& device, unsigned port, std::string_view link_layer,
                         std::string_view state, std::string_view rate) const {
  const auto dir = port_path(device, port);
  write(dir + "/link_layer", std::string(link_layer) + "\n");
  write(dir + "/state", std::string(state) + "\n");
  write(dir + "/rate", std::string(rate) + "\n");
  make_dir(dir + "/gids");
}

void FakeSysfs::add_gid(const std::string& device, unsigned port, unsigned index,
                        std::string_view gid, std::string_view type,
                        std::string_view netdev) const {
  const auto dir = port_path(device, port);
  const auto i = std::to_string(index);
  write(dir + "/gids/" + i, std::string(gid) + "\n");
  if (!type.empty()) write(dir + "/gid_attrs/types/" + i, std::string(type) + "\n");
  if (!netdev.empty()) write(dir + "/gid_attrs/ndevs/" + i, std::string(netdev) + "\n");
}

void FakeSysfs::set_counter(const std::string& device, unsigned port, const std::string& name,
                            std::string_view value) const {
  write(port_path(device, port) + "/hw_counters/" + name, std::string(value) + "\n");
}

void FakeSysfs::set_ecn(const std::string& netdev, const std::string& role, unsigned priority,
                        std::string_view value) const {
  write("sys/class/net/" + netdev + "/ecn/" + role + "/enable/" + std::to_string(priority),
        std::string(value) + "\n");
}

std::string sysfs_gid(std::string_view ipv6) {
  in6_addr a{};
  if (::inet_pton(AF_INET6, std::string(ipv6).c_str(), &a) != 1) {
    throw std::runtime_error("bad IPv6 literal in a test");
  }
  std::string out;
  char group[8];
  for (int g = 0; g < 8; ++g) {
    std::snprintf(group, sizeof group, "%s%02x%02x", g ? ":" : "", a.s6_addr[2 * g],
                  a.s6_addr[2 * g + 1]);
    out += group;
  }
  return out;
}

std::string mapped_gid(std::string_view ipv4) { return sysfs_gid("::ffff:" + std::string(ipv4)); }

std::size_t LogCapture::count(LogLevel level) const {
  std::size_t n = 0;
  for (const auto& [l, text] : lines) n += l == level;
  return n;
}

bool LogCapture::any_contains(std::string_view text) const {
  for (const auto& [l, line] : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace gpuwire::fabric::testing
