// The congestion counters (ucx_glue/fabric: CongestionCounterReader), read
// from hw_counters files whose content is the input: what a poll reports, and
// the deltas between two polls.
//
// Input: up to 18 NUL-separated fields; fields 0-8 are the nine counter files
// for the first poll, 9-17 their content for the second (a missing field
// leaves the file as it was).
#include <string>

#include "fuzz_target.hpp"
#include "gpuwire/fabric/congestion_counters.hpp"
#include "scratch_sysfs.hpp"

namespace {

using namespace gpuwire::fabric;
constexpr size_t kCount = kCongestionCounterCount;
const char *const kPort = "sys/class/infiniband/mlx5_0/ports/1/hw_counters";

// What a poll may report for a file: the reader reads at most 32 bytes.
std::optional<uint64_t> expected_value(std::string_view content) {
  if (content.empty()) return std::nullopt;
  return parse_unsigned(content.substr(0, 32));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const gpuwire::fuzz::ScratchSysfs scratch;
  const auto fields = gpuwire::fuzz::split_fields(data, size, 2 * kCount);
  std::string content[kCount];
  for (size_t i = 0; i < kCount; ++i) {
    const auto name = counter_file_name(static_cast<CongestionCounter>(i));
    content[i] = i < fields.size() ? std::string(fields[i]) : std::string("0\n");
    scratch.write(std::filesystem::path(kPort) / name, content[i]);
  }

  size_t lines = 0;
  const LogSink sink = [&lines](LogLevel, std::string_view line) {
    GW_FUZZ_REQUIRE(!line.empty());
    ++lines;
  };
  CongestionCounterReader reader(SysfsRoot(scratch.root()), "mlx5_0", 1, sink);
  GW_FUZZ_REQUIRE(reader.any_available());

  const CounterValues first = reader.read();
  for (size_t i = 0; i < kCount; ++i) {
    const auto want = expected_value(content[i]);
    GW_FUZZ_REQUIRE(first.valid[i] == want.has_value());
    if (want) GW_FUZZ_REQUIRE(first.value[i] == *want);
  }
  const CounterValues deltas0 = reader.poll();
  GW_FUZZ_REQUIRE(deltas0.valid.none());

  std::string second[kCount];
  for (size_t i = 0; i < kCount; ++i) {
    second[i] = content[i];
    if (kCount + i < fields.size()) {
      second[i] = std::string(fields[kCount + i]);
      const auto name = counter_file_name(static_cast<CongestionCounter>(i));
      scratch.write(std::filesystem::path(kPort) / name, second[i]);
    }
  }
  const CounterValues deltas = reader.poll();
  for (size_t i = 0; i < kCount; ++i) {
    const auto counter = static_cast<CongestionCounter>(i);
    const auto before = expected_value(content[i]);
    const auto now = expected_value(second[i]);
    GW_FUZZ_REQUIRE(deltas.valid[i] == (before && now));
    if (!deltas.valid[i]) {
      GW_FUZZ_REQUIRE(deltas.value[i] == 0);
      continue;
    }
    const uint64_t d = deltas.value[i];
    GW_FUZZ_REQUIRE(d == counter_delta(*before, *now, counter_width(counter)));
    if (counter_width(counter) == CounterWidth::Bits32) GW_FUZZ_REQUIRE(d <= 0xffffffffULL);
    // Adding the delta to the old value gives the new one, modulo the width.
    const uint64_t mask = counter_width(counter) == CounterWidth::Bits32 ? 0xffffffffULL : ~0ULL;
    GW_FUZZ_REQUIRE(((*before + d) & mask) == (*now & mask));
  }
  // A file that reads garbage is reported, once per file, and never more
  // often than there are files.
  GW_FUZZ_REQUIRE(lines <= kCount);
  return 0;
}
