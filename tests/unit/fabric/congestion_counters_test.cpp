#include "gpuwire/fabric/congestion_counters.hpp"

#include "fake_sysfs.hpp"
#include "gw_catch.hpp"

using namespace gpuwire::fabric;
using gpuwire::fabric::testing::FakeSysfs;
using gpuwire::fabric::testing::LogCapture;

TEST_CASE("counter deltas wrap at the counter's width", "[fabric][counters]") {
  CHECK(counter_delta(100, 250, CounterWidth::Bits32) == 150);
  CHECK(counter_delta(0xfffffff0u, 0x10u, CounterWidth::Bits32) == 0x20);
  CHECK(counter_delta(0xffffffffu, 0, CounterWidth::Bits32) == 1);
  CHECK(counter_delta(UINT64_MAX - 5, 10, CounterWidth::Bits64) == 16);
  CHECK(counter_delta(100, 250, CounterWidth::Bits64) == 150);
  // A 64-bit counter passing 2^32 is not a wrap.
  CHECK(counter_delta(0xfffffff0u, 0x100000010ull, CounterWidth::Bits64) == 0x20);
  // Auto: 32-bit while both fit in 32 bits, 64-bit after.
  CHECK(counter_delta(0xfffffff0u, 0x10u, CounterWidth::Auto) == 0x20);
  CHECK(counter_delta(0x100000000ull, 0x100000010ull, CounterWidth::Auto) == 0x10);
  CHECK(counter_delta(UINT64_MAX, 1, CounterWidth::Auto) == 2);
}

TEST_CASE("the known counters have sysfs names and widths", "[fabric][counters]") {
  CHECK(counter_file_name(CongestionCounter::RpCnpHandled) == "rp_cnp_handled");
  CHECK(counter_file_name(CongestionCounter::NpEcnMarkedRocePackets) ==
        "np_ecn_marked_roce_packets");
  CHECK(counter_width(CongestionCounter::NpCnpSent) == CounterWidth::Bits64);
  CHECK(counter_width(CongestionCounter::OutOfSequence) == CounterWidth::Bits32);
}

TEST_CASE("the reader polls open files and computes deltas", "[fabric][counters]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "Ethernet");
  fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "1000");
  fs.set_counter("mlx5_0", 1, "np_cnp_sent", "7");
  fs.set_counter("mlx5_0", 1, "out_of_sequence", "4294967290");  // 2^32 - 6
  LogCapture log;
  CongestionCounterReader reader(SysfsRoot(fs.root()), "mlx5_0", 1, log.sink());

  CHECK(reader.any_available());
  CHECK(reader.available(CongestionCounter::RpCnpHandled));
  CHECK_FALSE(reader.available(CongestionCounter::RpCnpIgnored));
  CHECK(log.lines.empty());

  const CounterValues first = reader.poll();  // no previous value yet
  CHECK_FALSE(first.has(CongestionCounter::RpCnpHandled));
  CHECK(first[CongestionCounter::RpCnpHandled] == 0);

  fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "1025");
  fs.set_counter("mlx5_0", 1, "out_of_sequence", "4");  // wrapped
  const CounterValues second = reader.poll();
  CHECK(second.has(CongestionCounter::RpCnpHandled));
  CHECK(second[CongestionCounter::RpCnpHandled] == 25);
  CHECK(second[CongestionCounter::NpCnpSent] == 0);
  CHECK(second[CongestionCounter::OutOfSequence] == 10);
  CHECK_FALSE(second.has(CongestionCounter::RpCnpIgnored));

  const CounterValues raw = reader.read();
  CHECK(raw[CongestionCounter::RpCnpHandled] == 1025);
  CHECK(raw.has(CongestionCounter::NpCnpSent));
}

TEST_CASE("a reader opens only the counters asked for", "[fabric][counters]") {
  FakeSysfs fs;
  fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "10");
  fs.set_counter("mlx5_0", 1, "np_cnp_sent", "20");
  LogCapture log;
  CongestionCounterReader reader(SysfsRoot(fs.root()), "mlx5_0", 1, log.sink(),
                                 only_counters({CongestionCounter::RpCnpHandled}));
  CHECK(reader.available(CongestionCounter::RpCnpHandled));
  CHECK_FALSE(reader.available(CongestionCounter::NpCnpSent));
  const auto values = reader.read();
  CHECK(values.has(CongestionCounter::RpCnpHandled));
  CHECK_FALSE(values.has(CongestionCounter::NpCnpSent));
  CHECK(log.lines.empty());
  CHECK(all_counters().count() == kCongestionCounterCount);
}

TEST_CASE("a 64-bit counter wraps through the reader", "[fabric][counters]") {
  FakeSysfs fs;
  fs.set_counter("mlx5_0", 1, "np_cnp_sent", "18446744073709551610");
  CongestionCounterReader reader(SysfsRoot(fs.root()), "mlx5_0", 1, {});
  reader.poll();
  fs.set_counter("mlx5_0", 1, "np_cnp_sent", "4");
  CHECK(reader.poll()[CongestionCounter::NpCnpSent] == 10);
}

TEST_CASE("garbage counter values are skipped and warned about once", "[fabric][counters]") {
  FakeSysfs fs;
  fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "100");
  LogCapture log;
  CongestionCounterReader reader(SysfsRoot(fs.root()), "mlx5_0", 1, log.sink());
  reader.poll();
  for (const char* garbage : {"N/A", "", "-3", "12x"}) {
    fs.set_counter("mlx5_0", 1, "rp_cnp_handled", garbage);
    const auto d = reader.poll();
    CHECK_FALSE(d.has(CongestionCounter::RpCnpHandled));
    CHECK(d[CongestionCounter::RpCnpHandled] == 0);
  }
  CHECK(log.count(LogLevel::Warning) == 1);
  CHECK(log.any_contains("hw_counters/rp_cnp_handled"));
  // Back to numbers: the delta is taken from the last good value.
  fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "130");
  const auto d = reader.poll();
  CHECK(d.has(CongestionCounter::RpCnpHandled));
  CHECK(d[CongestionCounter::RpCnpHandled] == 30);
}

TEST_CASE("a port without counters says so once and polls nothing", "[fabric][counters]") {
  FakeSysfs fs;
  fs.add_port("mlx5_0", 1, "Ethernet");
  LogCapture log;
  CongestionCounterReader reader(SysfsRoot(fs.root()), "mlx5_0", 1, log.sink());
  CHECK_FALSE(reader.any_available());
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0].first == LogLevel::Info);
  CHECK(log.any_contains("no congestion counters"));
  CHECK(reader.poll().valid.none());
}

TEST_CASE("a reader moves its descriptors", "[fabric][counters]") {
  FakeSysfs fs;
  fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "5");
  CongestionCounterReader a(SysfsRoot(fs.root()), "mlx5_0", 1, {});
  a.poll();
  CongestionCounterReader b(std::move(a));
  CHECK_FALSE(
      a.any_available());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  fs.set_counter("mlx5_0", 1, "rp_cnp_handled", "9");
  CHECK(b.poll()[CongestionCounter::RpCnpHandled] == 4);
  CongestionCounterReader c(SysfsRoot(fs.root()), "mlx5_1", 1, {});
  c = std::move(b);
  CHECK(c.available(CongestionCounter::RpCnpHandled));
}
