// A fake sysfs tree in a fresh temporary directory, removed on destruction,
// plus a LogSink that records what the library said.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuwire/fabric/log_sink.hpp"

namespace gpuwire::fabric::testing {

class FakeSysfs {
 public:
  FakeSysfs();
  ~FakeSysfs();
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  const std::filesystem::path& root() const { return root_; }

  // Writes `content` to root/<relative>, creating directories; overwrites in
  // place (same inode), as sysfs values change under an open descriptor.
  void write(const std::string& relative, std::string_view content) const;
  void remove(const std::string& relative) const;
  void make_dir(const std::string& relative) const;

  // sys/class/infiniband/<device>/ports/<port>/{link_layer,state,rate}
  void add_port(const std::string& device, unsigned port, std::string_view link_layer,
                std::string_view state = "4: ACTIVE",
                std::string_view rate = "100 Gb/sec (4X EDR)") const;
  // gids/<index>, gid_attrs/types/<index>, gid_attrs/ndevs/<index>; an empty
  // type or netdev leaves that file out.
  void add_gid(const std::string& device, unsigned port, unsigned index, std::string_view gid,
               std::string_view type, std::string_view netdev) const;
  void set_counter(const std::string& device, unsigned port, const std::string& name,
                   std::string_view value) const;
  // sys/class/net/<netdev>/ecn/<role>/enable/<priority>, role "roce_np" or "roce_rp".
  void set_ecn(const std::string& netdev, const std::string& role, unsigned priority,
               std::string_view value) const;
  std::string port_path(const std::string& device, unsigned port) const;

 private:
  std::filesystem::path root_;
};

// sysfs' full form of an IPv4-mapped GID ("0000:...:ffff:c000:0207").
std::string mapped_gid(std::string_view ipv4);
// sysfs' full form of any IPv6 address.
std::string sysfs_gid(std::string_view ipv6);

struct LogCapture {
  std::vector<std::pair<LogLevel, std::string>> lines;

  LogSink sink() {
    return [this](LogLevel level, std::string_view line) { lines.emplace_back(level, line); };
  }
  std::size_t count(LogLevel level) const;
  bool any_contains(std::string_view text) const;
};

}  // namespace gpuwire::fabric::testing
