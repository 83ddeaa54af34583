// gpuwire_incast_sim: runs the simulator over the standard scenarios and
// prints a Markdown table; optionally writes CSV for plots.
//
//   gpuwire_incast_sim [--ideal-us T] [--csv DIR] [--trace N@GBPS] [--trace-ideal-us T] [--quick]
//
//   --ideal-us T        size messages so the busiest link needs T us at line rate (default 2000)
//   --csv DIR           write DIR/results.csv, and DIR/trace_{dcqcn,gpuwire}.csv for one incast
//   --trace N@GBPS      the incast to trace over time (default 8@100)
//   --trace-ideal-us T  its length, long enough to show DCQCN settle (default 10000)
//   --quick             only N = 2, 16, 64 and the all-to-all
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fabric_sim.hpp"

using namespace gpuwire::sim;

namespace {

struct Options {
  std::uint64_t ideal_us = 2000;
  std::string csv_dir;
  std::uint32_t trace_senders = 8;
  double trace_gbps = 100;
  std::uint64_t trace_ideal_us = 10'000;
  bool quick = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gpuwire_incast_sim: %s\n"
               "usage: gpuwire_incast_sim [--ideal-us T] [--csv DIR] [--trace N@GBPS] "
               "[--trace-ideal-us T] [--quick]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    if (arg == "--ideal-us") {
      o.ideal_us = std::strtoull(value().c_str(), nullptr, 10);
      if (o.ideal_us < 10 || o.ideal_us > 1'000'000) usage("--ideal-us must be in [10, 1000000]");
    } else if (arg == "--csv") {
      o.csv_dir = value();
    } else if (arg == "--trace") {
      const std::string v = value();
      if (std::sscanf(v.c_str(), "%u@%lf", &o.trace_senders, &o.trace_gbps) != 2 ||
          o.trace_senders < 1 || o.trace_senders > 1024 ||
          !(o.trace_gbps > 0 && o.trace_gbps <= 3200)) {
        usage("--trace wants N@GBPS, e.g. 8@100");
      }
    } else if (arg == "--trace-ideal-us") {
      o.trace_ideal_us = std::strtoull(value().c_str(), nullptr, 10);
      if (o.trace_ideal_us < 10 || o.trace_ideal_us > 1'000'000) {
        usage("--trace-ideal-us must be in [10, 1000000]");
      }
    } else if (arg == "--quick") {
      o.quick = true;
    } else {
      usage(("unknown argument " + arg).c_str());
    }
  }
  return o;
}

struct Row {
  std::string scenario;
  double gbps;
  PacingMode mode;
  SimResult result;
};

void print_row(const Row& r) {
  const SimResult& s = r.result;
  std::printf(
      "| %-16s | %4.0f | %-17s | %7.1f | %7.1f | %6llu | %5.1f | %5.3f | %8.1f | %8.1f |%s\n",
      r.scenario.c_str(), r.gbps, pacing_mode_name(r.mode), s.peak_queue_bytes / 1e3,
      s.mean_queue_bytes / 1e3, static_cast<unsigned long long>(s.pfc_pause_frames),
      100.0 * s.utilization, s.jain_fairness, s.completion_ns / 1e3, s.ideal_completion_ns / 1e3,
      s.finished ? "" : " (unfinished)");
  std::fflush(stdout);
}

void write_results_csv(const std::string& path, const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) usage(("cannot write " + path).c_str());
  std::fprintf(f,
               "scenario,link_gbps,mode,peak_queue_bytes,mean_queue_bytes,pfc_pause_frames,"
               "utilization,jain,late_jain,completion_ns,ideal_ns,cnps,ecn_marked\n");
  for (const Row& r : rows) {
    const SimResult& s = r.result;
    std::fprintf(f, "%s,%g,%s,%llu,%.0f,%llu,%.4f,%.4f,%.4f,%llu,%llu,%llu,%llu\n",
                 r.scenario.c_str(), r.gbps, pacing_mode_name(r.mode),
                 (unsigned long long)s.peak_queue_bytes, s.mean_queue_bytes,
                 (unsigned long long)s.pfc_pause_frames, s.utilization, s.jain_fairness,
                 s.late_jain_fairness, (unsigned long long)s.completion_ns,
                 (unsigned long long)s.ideal_completion_ns, (unsigned long long)s.cnps_sent,
                 (unsigned long long)s.ecn_marked_packets);
  }
  std::fclose(f);
}

// Throughput in the CSV is averaged over this window: a flow that gets one
// 64 KiB chunk every few tens of microseconds looks like a comb in shorter bins.
constexpr std::uint64_t kRateWindowNs = 200'000;

void write_trace_csv(const std::string& path, const SimResult& result) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) usage(("cannot write " + path).c_str());
  const auto& trace = result.trace;
  const std::size_t flows = trace.empty() ? 0 : trace[0].delivered_bytes.size();
  std::fprintf(f, "time_us,queue_kb");
  for (std::size_t i = 0; i < flows; ++i) std::fprintf(f, ",flow%zu_gbps", i);
  for (std::size_t i = 0; i < flows; ++i) std::fprintf(f, ",nic%zu_gbps", i);
  std::fprintf(f, "\n");
  std::size_t back = 0;  // the sample one rate window earlier
  for (std::size_t s = 0; s < trace.size(); ++s) {
    while (trace[s].time_ns - trace[back].time_ns > kRateWindowNs) ++back;
    const double span_ns = double(trace[s].time_ns - trace[back].time_ns);
    std::fprintf(f, "%.1f,%.2f", trace[s].time_ns / 1e3, trace[s].queue_bytes / 1e3);
    for (std::size_t i = 0; i < flows; ++i) {
      const double bytes = double(trace[s].delivered_bytes[i] - trace[back].delivered_bytes[i]);
      std::fprintf(f, ",%.3f", span_ns > 0 ? bytes * 8.0 / span_ns : 0.0);
    }
    for (double v : trace[s].nic_rate_gbps) std::fprintf(f, ",%.3f", v);
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const std::vector<PacingMode> modes = {PacingMode::NicDcqcnOnly, PacingMode::GpuwirePacer,
                                         PacingMode::SenderPacerOnly};
  std::vector<std::uint32_t> senders = {2, 4, 8, 16, 32, 64};
  if (options.quick) senders = {2, 16, 64};

  std::printf(
      "| scenario         | Gb/s | mode              | peak KB | mean KB | PFC    | util%% | Jain  "
      "| done us  | ideal us |\n");
  std::printf(
      "|------------------|------|-------------------|---------|---------|--------|-------|-------|"
      "----------|----------|\n");
  std::vector<Row> rows;
  for (double gbps : {100.0, 400.0}) {
    const auto busiest_bytes = std::uint64_t(gbps / 8.0 * 1e3 * double(options.ideal_us));
    std::vector<Scenario> scenarios;
    for (std::uint32_t n : senders) scenarios.push_back(make_incast(n, busiest_bytes / n));
    scenarios.push_back(make_all_to_all(16, busiest_bytes / 15));
    for (const Scenario& scenario : scenarios) {
      for (PacingMode mode : modes) {
        SimConfig config;
        config.link_gbps = gbps;
        config.mode = mode;
        if (auto bad = check_sim_config(config); !bad.empty()) usage(bad.c_str());
        rows.push_back({scenario.name, gbps, mode, run_simulation(scenario, config)});
        print_row(rows.back());
      }
    }
  }
  if (!options.csv_dir.empty()) {
    write_results_csv(options.csv_dir + "/results.csv", rows);
    const auto bytes =
        std::uint64_t(options.trace_gbps / 8.0 * 1e3 * double(options.trace_ideal_us));
    const Scenario traced = make_incast(options.trace_senders, bytes / options.trace_senders);
    for (PacingMode mode : {PacingMode::NicDcqcnOnly, PacingMode::GpuwirePacer}) {
      SimConfig config;
      config.link_gbps = options.trace_gbps;
      config.mode = mode;
      config.trace_interval_ns = 20'000;
      const char* tag = mode == PacingMode::NicDcqcnOnly ? "dcqcn" : "gpuwire";
      write_trace_csv(options.csv_dir + "/trace_" + tag + ".csv", run_simulation(traced, config));
    }
  }
  return 0;
}
