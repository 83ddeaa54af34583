// The parameter table's helpers without Open MPI (gpuwire/param_table.h):
// defaults, range lines, the help's range, and the closest name offered for
// a misspelt parameter.
#include "gpuwire/param_table.h"

#include <string>

#include "gw_catch.hpp"

namespace {

int priority_value, verbose_value;
size_t threshold_value;
bool stats_value;

const gw_param_t table[] = {
    {"priority", GW_PARAM_INT, 5, 0, 1000, 3, false, "Selection priority", "below 0 never", nullptr,
     &priority_value},
    {"verbose", GW_PARAM_INT, 0, 0, 100, 5, true, "Verbosity", nullptr, nullptr, &verbose_value},
    {"ipc_threshold", GW_PARAM_SIZE, 0, 0, GW_PARAM_MAX_MESSAGE, 5, false, "IPC from this size",
     nullptr, nullptr, &threshold_value},
    {"stats", GW_PARAM_BOOL, 1, 0, 1, 3, false, "Statistics table", nullptr, nullptr,
     &stats_value},
};
constexpr size_t n = GW_PARAM_COUNT(table);

}  // namespace

TEST_CASE("defaults come from the table", "[plugin][params]") {
  priority_value = -7;
  threshold_value = 99;
  stats_value = false;
  gw_params_set_defaults(table, n);
  CHECK(priority_value == 5);
  CHECK(verbose_value == 0);
  CHECK(threshold_value == 0);
  CHECK(stats_value);
}

TEST_CASE("a value out of range gives one line with the range and the hint", "[plugin][params]") {
  gw_params_set_defaults(table, n);
  char line[384];
  CHECK(gw_param_describe("pml_gpuwire_", &table[0], line, sizeof(line)) == 1);
  priority_value = 1001;
  REQUIRE(gw_param_describe("pml_gpuwire_", &table[0], line, sizeof(line)) == 0);
  CHECK(std::string(line) ==
        "pml_gpuwire_priority = 1001 is out of range: allowed 0 to 1000; set it within the range "
        "or leave it unset for the default; below 0 never");
  threshold_value = size_t(-1);
  REQUIRE(gw_param_describe("pml_gpuwire_", &table[2], line, sizeof(line)) == 0);
  CHECK(std::string(line).find("(-1 read as signed") != std::string::npos);
  stats_value = true;
  CHECK(gw_param_describe("pml_gpuwire_", &table[3], line, sizeof(line)) == 1);  // not checked
}

TEST_CASE("the help ends with the range, powers of two as 2^N", "[plugin][params]") {
  char help[256];
  gw_param_full_help(&table[2], help, sizeof(help));
  CHECK(std::string(help) == "IPC from this size; allowed 0 to 2^40");
  gw_param_full_help(&table[0], help, sizeof(help));
  CHECK(std::string(help) == "Selection priority; allowed 0 to 1000");
  gw_param_full_help(&table[3], help, sizeof(help));
  CHECK(std::string(help) == "Statistics table");
}

TEST_CASE("a misspelt name is matched to the closest parameter", "[plugin][params]") {
  CHECK(gw_param_distance("stat", "stats") == 1);
  CHECK(gw_param_distance("ipc_treshold", "ipc_threshold") == 1);
  CHECK(gw_param_distance("", "abc") == 3);
  CHECK(gw_param_distance("verbose", "verbose") == 0);
  CHECK(gw_param_known(table, n, "stats"));
  CHECK_FALSE(gw_param_known(table, n, "stat"));
  CHECK(std::string(gw_param_closest(table, n, "stat")->name) == "stats");
  CHECK(std::string(gw_param_closest(table, n, "ipc_treshold")->name) == "ipc_threshold");
  CHECK(std::string(gw_param_closest(table, n, "verbosity")->name) == "verbose");
  CHECK(std::string(gw_param_closest(table, n, "prority")->name) == "priority");
}
