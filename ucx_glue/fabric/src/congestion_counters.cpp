#include "gpuwire/fabric/congestion_counters.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

namespace gpuwire::fabric {
namespace {

struct CounterInfo {
  std::string_view file;
  CounterWidth width;
};

// Widths as mlx5 counts them: the congestion counters come from a 64-bit
// firmware query, the transport (Q) counters are 32-bit.
constexpr CounterInfo kCounters[kCongestionCounterCount] = {
    {"np_cnp_sent", CounterWidth::Bits64},
    {"np_ecn_marked_roce_packets", CounterWidth::Bits64},
    {"rp_cnp_handled", CounterWidth::Bits64},
    {"rp_cnp_ignored", CounterWidth::Bits64},
    {"out_of_sequence", CounterWidth::Bits32},
    {"packet_seq_err", CounterWidth::Bits32},
    {"local_ack_timeout_err", CounterWidth::Bits32},
    {"implied_nak_seq_err", CounterWidth::Bits32},
    {"duplicate_request", CounterWidth::Bits32},
};

constexpr std::uint64_t kMax32 = 0xffffffffULL;

}  // namespace

std::string_view counter_file_name(CongestionCounter counter) {
  return kCounters[static_cast<std::size_t>(counter)].file;
}

CounterWidth counter_width(CongestionCounter counter) {
  return kCounters[static_cast<std::size_t>(counter)].width;
}

CounterSelection all_counters() { return CounterSelection().set(); }

CounterSelection only_counters(std::initializer_list<CongestionCounter> counters) {
  CounterSelection which;
  for (const auto c : counters) which.set(static_cast<std::size_t>(c));
  return which;
}

std::uint64_t counter_delta(std::uint64_t previous, std::uint64_t current, CounterWidth width) {
  if (width == CounterWidth::Auto) {
    width = (previous <= kMax32 && current <= kMax32) ? CounterWidth::Bits32 : CounterWidth::Bits64;
  }
  if (width == CounterWidth::Bits32) {
    // A 32-bit counter read as a wider number still only moves in its low bits.
    return (current - previous) & kMax32;
  }
  return current - previous;  // unsigned arithmetic is modulo 2^64
}

CongestionCounterReader::CongestionCounterReader(const SysfsRoot& root, const std::string& device,
                                                 unsigned port_number, const LogSink& sink,
                                                 CounterSelection which)
    : sink_(sink) {
  fds_.fill(-1);
  const auto dir = root.port_dir(device, port_number) / "hw_counters";
  for (std::size_t i = 0; i < kCongestionCounterCount; ++i) {
    paths_[i] = (dir / kCounters[i].file).string();
    if (which[i]) fds_[i] = ::open(paths_[i].c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (!any_available()) {
    emit(sink_, LogLevel::Info,
         "fabric: no congestion counters under " + dir.string() +
             "; the pacer will not see CNPs from this port");
  }
}

CongestionCounterReader::~CongestionCounterReader() {
  for (const int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

CongestionCounterReader::CongestionCounterReader(CongestionCounterReader&& other) noexcept
    : fds_(other.fds_),
      paths_(std::move(other.paths_)),
      last_good_(other.last_good_),
      deltas_(other.deltas_),
      garbage_reported_(std::move(other.garbage_reported_)),
      sink_(std::move(other.sink_)) {
  other.fds_.fill(-1);
}

CongestionCounterReader& CongestionCounterReader::operator=(
    CongestionCounterReader&& other) noexcept {
  if (this != &other) {
    for (const int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
    fds_ = other.fds_;
    other.fds_.fill(-1);
    paths_ = std::move(other.paths_);
    last_good_ = other.last_good_;
    deltas_ = other.deltas_;
    garbage_reported_ = std::move(other.garbage_reported_);
    sink_ = std::move(other.sink_);
  }
  return *this;
}

bool CongestionCounterReader::any_available() const {
  for (const int fd : fds_) {
    if (fd >= 0) return true;
  }
  return false;
}

CounterValues CongestionCounterReader::read() {
  CounterValues values;
  for (std::size_t i = 0; i < kCongestionCounterCount; ++i) {
    if (fds_[i] < 0) continue;
    char buffer[32];
    const ssize_t got = ::pread(fds_[i], buffer, sizeof buffer, 0);
    const auto parsed =
        got > 0 ? parse_unsigned(std::string_view(buffer, static_cast<std::size_t>(got)))
                : std::nullopt;
    if (!parsed) {
      emit_once(garbage_reported_, paths_[i], sink_, LogLevel::Warning,
                "fabric: " + paths_[i] + " does not read as a counter; ignoring it until it does");
      continue;
    }
    values.value[i] = *parsed;
    values.valid[i] = true;
  }
  return values;
}

const CounterValues& CongestionCounterReader::poll() {
  const CounterValues current = read();
  for (std::size_t i = 0; i < kCongestionCounterCount; ++i) {
    deltas_.value[i] = 0;
    deltas_.valid[i] = false;
    if (!current.valid[i]) continue;
    if (last_good_.valid[i]) {
      deltas_.value[i] = counter_delta(last_good_.value[i], current.value[i], kCounters[i].width);
      deltas_.valid[i] = true;
    }
    last_good_.value[i] = current.value[i];
    last_good_.valid[i] = true;
  }
  return deltas_;
}

}  // namespace gpuwire::fabric
