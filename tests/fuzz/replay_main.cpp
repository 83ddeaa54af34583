// Runs a fuzz target over its seed corpus without libFuzzer, so every build
// (gcc included) replays the corpus as an ordinary test. Arguments are files
// or folders of inputs. Besides each input as it is, every prefix of it and
// every single-bit change of it is run: cheap for small seeds, and it walks
// the size and field checks of a decoder the way a fuzzer's first minutes do.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "fuzz_target.hpp"

namespace {

// Named in the crash report: which input (and which variant of it) failed.
char g_current[512] = "";

void on_abort(int sig) {
  static const char prefix[] = "replay: failing input: ";
  (void)!::write(2, prefix, sizeof prefix - 1);
  (void)!::write(2, g_current, std::strlen(g_current));
  (void)!::write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run(const std::vector<uint8_t> &input) {
  // An exact-size heap copy, so a read past the input's end is one past an
  // allocation (what AddressSanitizer sees), as under libFuzzer.
  auto *copy = new uint8_t[input.size() ? input.size() : 1];
  if (!input.empty()) std::memcpy(copy, input.data(), input.size());
  LLVMFuzzerTestOneInput(copy, input.size());
  delete[] copy;
}

size_t run_with_variants(const std::string &name, const std::vector<uint8_t> &input,
                         bool variants) {
  std::snprintf(g_current, sizeof g_current, "%s", name.c_str());
  run(input);
  if (!variants) return 1;
  size_t runs = 1;
  for (size_t n = 0; n < input.size(); ++n) {
    std::snprintf(g_current, sizeof g_current, "%s truncated to %zu bytes", name.c_str(), n);
    run(std::vector<uint8_t>(input.begin(), input.begin() + static_cast<long>(n)));
    ++runs;
  }
  std::vector<uint8_t> flipped = input;
  for (size_t byte = 0; byte < flipped.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::snprintf(g_current, sizeof g_current, "%s with bit %d of byte %zu flipped",
                    name.c_str(), bit, byte);
      flipped[byte] ^= static_cast<uint8_t>(1u << bit);
      run(flipped);
      flipped[byte] ^= static_cast<uint8_t>(1u << bit);
      ++runs;
    }
  }
  return runs;
}

std::vector<uint8_t> read_file(const std::filesystem::path &file) {
  std::ifstream in(file, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

int main(int argc, char **argv) {
  std::signal(SIGABRT, on_abort);
  std::signal(SIGSEGV, on_abort);
  bool variants = true;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-variants") {
      variants = false;
      continue;
    }
    if (std::filesystem::is_directory(arg)) {
      for (const auto &entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(arg)) {
      files.emplace_back(arg);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a folder\n", arg.c_str());
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs given\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  size_t runs = run_with_variants("the empty input", {}, false);
  for (const auto &file : files) runs += run_with_variants(file.string(), read_file(file), variants);
  std::printf("replay: %zu files, %zu runs, no property violated\n", files.size(), runs);
  return 0;
}
