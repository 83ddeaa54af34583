// The NIC's congestion counters, read cheaply and turned into deltas.
//
//   sys/class/infiniband/<dev>/ports/<port>/hw_counters/<name>
//
// CongestionCounterReader opens each wanted counter file once and keeps the
// descriptor; a poll is one pread() at offset 0 per counter (sysfs regenerates
// the value on every read at offset 0), no open/close, no allocation. A
// sysfs pread costs about a microsecond, so a reader on the pacer's path
// opens only rp_cnp_handled, and polls about once per CNP interval (50 us).
// Counters are cumulative and wrap: congestion counters of mlx5 are 64-bit,
// the per-QP error counters 32-bit; deltas are taken modulo the width.
//
// Threading: a reader is owned by one thread (the progress thread); it is
// move-only and closes its descriptors when destroyed.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "gpuwire/fabric/log_sink.hpp"
#include "gpuwire/fabric/sysfs.hpp"

namespace gpuwire::fabric {

enum class CongestionCounter : std::size_t {
  NpCnpSent,               // CNPs this port sent as notification point (receiver)
  NpEcnMarkedRocePackets,  // ECN-marked RoCE packets received
  RpCnpHandled,            // CNPs this port acted on as reaction point (sender)
  RpCnpIgnored,            // CNPs received but not acted on
  OutOfSequence,           // packets received out of sequence (a sign of drops)
  PacketSeqErr,            // NAKs for sequence errors received
  LocalAckTimeoutErr,      // transport retries after an ACK timeout
  ImpliedNakSeqErr,
  DuplicateRequest,
  Count
};

inline constexpr std::size_t kCongestionCounterCount =
    static_cast<std::size_t>(CongestionCounter::Count);

enum class CounterWidth { Bits32, Bits64, Auto };

// Which counters a reader opens.
using CounterSelection = std::bitset<kCongestionCounterCount>;
CounterSelection all_counters();
CounterSelection only_counters(std::initializer_list<CongestionCounter> counters);

// The sysfs file name ("np_cnp_sent") and the width the hardware counts in.
std::string_view counter_file_name(CongestionCounter counter);
CounterWidth counter_width(CongestionCounter counter);

// current - previous modulo the counter's width. Auto treats the counter as
// 32-bit while both values fit in 32 bits and as 64-bit otherwise (right for
// wrap, wrong only for a 64-bit counter reset to a smaller value, which the
// driver does not do while the device is up).
std::uint64_t counter_delta(std::uint64_t previous, std::uint64_t current, CounterWidth width);

// One poll's worth of values. `valid` is false for a counter that is absent
// or read garbage this time.
struct CounterValues {
  std::array<std::uint64_t, kCongestionCounterCount> value{};
  std::bitset<kCongestionCounterCount> valid;

  std::uint64_t operator[](CongestionCounter c) const { return value[static_cast<std::size_t>(c)]; }
  bool has(CongestionCounter c) const { return valid[static_cast<std::size_t>(c)]; }
};

class CongestionCounterReader {
 public:
  // Opens hw_counters/<name> for each counter in `which` present on the
  // port. Missing counters (or a missing hw_counters folder) are not an
  // error: the reader reports them unavailable and, when none of `which`
  // exists, says so once at Info level.
  CongestionCounterReader(const SysfsRoot& root, const std::string& device, unsigned port_number,
                          const LogSink& sink, CounterSelection which = all_counters());
  ~CongestionCounterReader();
  CongestionCounterReader(CongestionCounterReader&& other) noexcept;
  CongestionCounterReader& operator=(CongestionCounterReader&& other) noexcept;
  CongestionCounterReader(const CongestionCounterReader&) = delete;
  CongestionCounterReader& operator=(const CongestionCounterReader&) = delete;

  bool available(CongestionCounter c) const { return fds_[static_cast<std::size_t>(c)] >= 0; }
  bool any_available() const;

  // Reads the current value of every open counter. A value that does not
  // parse is left out of `valid` and warned about once per file.
  CounterValues read();

  // read() and the change since the previous poll() (the first poll's deltas
  // are all zero and invalid: there is no previous value). A counter that
  // read garbage keeps its last good value as the base for the next delta.
  const CounterValues& poll();

 private:
  std::array<int, kCongestionCounterCount> fds_;
  std::array<std::string, kCongestionCounterCount> paths_;
  CounterValues last_good_;
  CounterValues deltas_;
  OnceFilter garbage_reported_;
  LogSink sink_;
};

}  // namespace gpuwire::fabric
