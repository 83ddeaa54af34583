// The statistics table of pml_gpuwire_stats: the blob each process publishes
// and the table process 0 prints from them.
#include "gw_catch.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include "gpuwire/stats_table.h"

namespace {

const char *const kColumns[] = {"sent", "sent B"};

std::string format(const std::vector<uint64_t> &values, const std::vector<unsigned char> &present,
                   size_t max_rows)
{
    char *t = gw_stats_table_format("title", kColumns, 2, values.data(), present.data(),
                                    present.size(), max_rows, "legend");
    REQUIRE(t != nullptr);
    std::string s(t);
    std::free(t);
    return s;
}

}  // namespace

TEST_CASE("a blob carries the counters and refuses another layout", "[stats]")
{
    const uint64_t in[3] = {1, 0xffffffffffffffffull, 42};
    std::vector<unsigned char> blob(gw_stats_blob_size(3));
    gw_stats_blob_pack(blob.data(), in, 3);
    uint64_t out[3] = {};
    REQUIRE(gw_stats_blob_unpack(blob.data(), blob.size(), out, 3) == 0);
    CHECK(out[0] == 1);
    CHECK(out[1] == 0xffffffffffffffffull);
    CHECK(out[2] == 42);

    uint64_t other[2] = {7, 7};
    CHECK(gw_stats_blob_unpack(blob.data(), blob.size(), other, 2) == -1);  // other column count
    CHECK(other[0] == 7);
    blob[0] ^= 1;  // not a statistics blob
    CHECK(gw_stats_blob_unpack(blob.data(), blob.size(), out, 3) == -1);
    CHECK(gw_stats_blob_unpack(nullptr, 0, out, 3) == -1);
}

TEST_CASE("one row per process, aligned, with a total", "[stats]")
{
    std::string t = format({3, 100, 12, 40960, 5, 7}, {1, 1, 1}, 32);
    CHECK(t ==
          "title\n"
          " rank  sent  sent B\n"
          "    0     3     100\n"
          "    1    12   40960\n"
          "    2     5       7\n"
          "total    20   41067\n"
          "legend\n");
}

TEST_CASE("a process that published nothing shows as - and counts for nothing", "[stats]")
{
    std::string t = format({3, 100, 0, 0}, {1, 0}, 32);
    CHECK(t ==
          "title (1 of 2 processes published nothing)\n"
          " rank  sent  sent B\n"
          "    0     3     100\n"
          "    1     -       -\n"
          "total     3     100\n"
          "legend\n");
}

TEST_CASE("above max_rows processes: min and max rows", "[stats]")
{
    std::string t = format({3, 100, 12, 40960, 5, 7, 0, 0}, {1, 1, 1, 0}, 2);
    CHECK(t ==
          "title (min and max over the processes) (1 of 4 processes published nothing)\n"
          " rank  sent  sent B\n"
          "  min     3       7\n"
          "  max    12   40960\n"
          "total    20   41067\n"
          "legend\n");
}
