// A fake sysfs tree for the fabric fuzz targets: a private folder (in
// /dev/shm when there is one, so writing a file per input stays cheap),
// created on first use and removed when the process exits.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "fuzz_target.hpp"

namespace gpuwire::fuzz {

class ScratchSysfs {
 public:
  ScratchSysfs() {
    const char *tmp = std::getenv("TMPDIR");
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                       : tmp                                    ? tmp
                                                                                : "/tmp";
    remove_stale(base);
    std::string pattern =
        (base / ("gpuwire-fuzz-" + std::to_string(::getpid()) + "-XXXXXX")).string();
    GW_FUZZ_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    root_ = pattern;
  }
  ~ScratchSysfs() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  ScratchSysfs(const ScratchSysfs &) = delete;
  ScratchSysfs &operator=(const ScratchSysfs &) = delete;

  const std::filesystem::path &root() const { return root_; }

  // Writes `content` as the whole file `relative`, making folders as needed
  // and replacing a folder of that name. The common case (the file is there)
  // costs one open, one write and one close.
  void write(const std::filesystem::path &relative, std::string_view content) const {
    const auto file = root_ / relative;
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::error_code ec;
      std::filesystem::remove_all(file, ec);
      std::filesystem::create_directories(file.parent_path(), ec);
      fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    GW_FUZZ_REQUIRE(fd >= 0);
    size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
      GW_FUZZ_REQUIRE(n > 0);
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }

  // Removes a file, or a folder with what it holds.
  void remove(const std::filesystem::path &relative) const {
    const auto path = root_ / relative;
    if (::unlink(path.c_str()) == 0 || errno == ENOENT) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }

 private:
  // A process that crashed, or that libFuzzer ended without running static
  // destructors, leaves its folder behind: remove those whose process is gone.
  static void remove_stale(const std::filesystem::path &base) {
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator(base, ec)) {
      const std::string name = entry.path().filename().string();
      const std::string prefix = "gpuwire-fuzz-";
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string pid = name.substr(prefix.size(), name.find('-', prefix.size()) - prefix.size());
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      if (std::filesystem::exists("/proc/" + pid, ec)) continue;
      std::filesystem::remove_all(entry.path(), ec);
    }
  }

  std::filesystem::path root_;
};

}  // namespace gpuwire::fuzz
