// The selection table of coll gpuwire (gpuwire/coll_select.h, in the
// collective engine): parsing, lookup, what a user parameter takes out of its
// hands, malformed input, and the shipped table itself.
#include "gw_catch.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpuwire/coll_select.h"

namespace {

const char *const kTable =
    "# comment line\n"
    "\n"
    "allreduce 2 1 2 1 2 1   0   1M   nvlink   # trailing comment\n"
    "allreduce 2 1 2 1 2 1   1048577 * device\n"
    "allreduce * * * * * 0   0   *    staged\n"
    "bcast     4 1 4 * * *   64K 64M  chain\n"
    "reduce    2 1 2 1 2 1   0   4095 staged\n"
    "reduce    2 1 2 1 2 1   0   *    device\n";

struct Table {
    gw::SelTable owner;
    gw_sel_table_t &t = *owner.get();
};

gw_sel_key_t key(int ranks, int nodes, int ppn, int gpn, int rpg, int nvlink)
{
    return gw_sel_key_t{ranks, nodes, ppn, gpn, rpg, nvlink};
}

}  // namespace

TEST_CASE("rows parse with comments, blanks, '*' and size suffixes", "[select]")
{
    Table t;
    char err[256] = "";
    REQUIRE(gw_sel_parse(kTable, "t.txt", &t.t, err, sizeof(err)) == 0);
    REQUIRE(t.t.n == 6);
    CHECK(std::string(t.t.source) == "t.txt");
    CHECK(t.t.rows[0].coll == GW_SEL_ALLREDUCE);
    CHECK(t.t.rows[0].hi == (1u << 20));
    CHECK(t.t.rows[1].hi == UINT64_MAX);
    CHECK(t.t.rows[2].ranks == GW_SEL_ANY);
    CHECK(t.t.rows[3].lo == 64 * 1024);
    CHECK(t.t.rows[3].algo == GW_SEL_CHAIN);
}

TEST_CASE("lookup: the first matching row, by topology and size", "[select]")
{
    Table t;
    char err[256];
    REQUIRE(gw_sel_parse(kTable, "t.txt", &t.t, err, sizeof(err)) == 0);
    const gw_sel_key_t mps2 = key(2, 1, 2, 1, 2, 1);
    int row = -2;
    CHECK(gw_sel_lookup(&t.t, GW_SEL_ALLREDUCE, &mps2, 8, &row) == GW_SEL_NVLINK);
    CHECK(row == 0);
    CHECK(gw_sel_lookup(&t.t, GW_SEL_ALLREDUCE, &mps2, 1 << 20, nullptr) == GW_SEL_NVLINK);
    CHECK(gw_sel_lookup(&t.t, GW_SEL_ALLREDUCE, &mps2, (1 << 20) + 1, &row) == GW_SEL_DEVICE);
    CHECK(row == 1);
    // Reduce: the staged row comes first below 4096, the device row after.
    CHECK(gw_sel_lookup(&t.t, GW_SEL_REDUCE, &mps2, 4095, nullptr) == GW_SEL_STAGED);
    CHECK(gw_sel_lookup(&t.t, GW_SEL_REDUCE, &mps2, 4096, nullptr) == GW_SEL_DEVICE);
    // Team unusable: the wildcard row with nvlink 0.
    const gw_sel_key_t noteam = key(2, 1, 2, 1, 2, 0);
    CHECK(gw_sel_lookup(&t.t, GW_SEL_ALLREDUCE, &noteam, 8, nullptr) == GW_SEL_STAGED);
    // Unmeasured topology or collective: auto (the built-in rules).
    const gw_sel_key_t four = key(4, 1, 4, 4, 1, 1);
    CHECK(gw_sel_lookup(&t.t, GW_SEL_ALLREDUCE, &four, 8, &row) == GW_SEL_AUTO);
    CHECK(row == -1);
    CHECK(gw_sel_lookup(&t.t, GW_SEL_ALLTOALL, &mps2, 8, nullptr) == GW_SEL_AUTO);
    CHECK(gw_sel_lookup(&t.t, GW_SEL_BCAST, &four, 1024, nullptr) == GW_SEL_AUTO);
    CHECK(gw_sel_lookup(&t.t, GW_SEL_BCAST, &four, 1 << 20, nullptr) == GW_SEL_CHAIN);
    CHECK(gw_sel_measured(&t.t, &mps2));
    CHECK(gw_sel_measured(&t.t, &four));  // the bcast row (gpn *) matches
    const gw_sel_key_t two_nodes = key(4, 2, 2, 1, 2, 1);
    CHECK(!gw_sel_measured(&t.t, &two_nodes));
}

TEST_CASE("a parameter the user set takes its collectives out of the table", "[select]")
{
    const unsigned ar = 1u << GW_SEL_ALLREDUCE, bc = 1u << GW_SEL_BCAST,
                   ag = 1u << GW_SEL_ALLGATHER, a2a = 1u << GW_SEL_ALLTOALL,
                   red = 1u << GW_SEL_REDUCE, rs = 1u << GW_SEL_REDUCE_SCATTER;
    CHECK(gw_sel_user_mask("nvlink") == (ar | bc | ag));
    CHECK(gw_sel_user_mask("nvlink_direct") == (ar | bc | ag));
    CHECK(gw_sel_user_mask("reduce_algorithm") == (ar | red | rs));
    CHECK(gw_sel_user_mask("move_algorithm") == (bc | ag | a2a));
    CHECK(gw_sel_user_mask("bcast_chain_bytes") == bc);
    CHECK(gw_sel_user_mask("staging_bytes") == 0);
}

TEST_CASE("a malformed table: one line naming file:line and the fix, table unchanged",
          "[select]")
{
    Table t;
    char err[256];
    REQUIRE(gw_sel_parse(kTable, "good", &t.t, err, sizeof(err)) == 0);
    struct {
        const char *text, *expect;
    } bad[] = {
        {"allreduce 2 1 2 1 2 1 0 * nvlink\nbcast 2 1 2 1 2 1 0 *\n",
         "my.txt:2: not 10 fields; write: collective ranks"},
        {"\nallreduse 2 1 2 1 2 1 0 * nvlink\n", "my.txt:2: unknown collective 'allreduse'"},
        {"allreduce 2 1 2 1 2 1 0 * fastest\n", "my.txt:1: unknown algorithm 'fastest'"},
        {"allreduce two 1 2 1 2 1 0 * nvlink\n", "my.txt:1: ranks 'two' is not a count"},
        {"allreduce 2 1 2 1 2 3 0 * nvlink\n", "my.txt:1: nvlink '3' is not a count; write 0, 1"},
        {"allreduce 2 1 2 1 2 1 8X * nvlink\n", "my.txt:1: bytes '8X' '*' are not byte counts"},
        {"allreduce 2 1 2 1 2 1 64 8 nvlink\n", "my.txt:1: min bytes above max bytes"},
        {"alltoall 2 1 2 1 2 1 0 * nvlink\n", "my.txt:1: nvlink runs allreduce, bcast"},
        {"reduce 2 1 2 1 2 1 0 * chain\n", "my.txt:1: chain is an algorithm of bcast only"},
    };
    for (const auto &b : bad) {
        INFO(b.text);
        err[0] = '\0';
        CHECK(gw_sel_parse(b.text, "my.txt", &t.t, err, sizeof(err)) == -1);
        CHECK(std::string(err).rfind(b.expect, 0) == 0);
        CHECK(std::string(err).find('\n') == std::string::npos);
        CHECK(t.t.n == 6);  // the table in use stays
        CHECK(std::string(t.t.source) == "good");
    }
}

TEST_CASE("fields at their limits: signs, suffixes, overflow, long lines, many rows", "[select]")
{
    Table t;
    char err[256] = "";
    // A count reads as strtol would: one sign; a byte count: digits only.
    REQUIRE(gw_sel_parse("bcast +2 -0 1073741824 * * 0 1k 2g chain\n", "t", &t.t, err,
                         sizeof(err)) == 0);
    REQUIRE(t.t.n == 1);
    CHECK(t.t.rows[0].ranks == 2);
    CHECK(t.t.rows[0].nodes == 0);
    CHECK(t.t.rows[0].ppn == (1 << 30));
    CHECK(t.t.rows[0].lo == 1024);
    CHECK(t.t.rows[0].hi == (2ull << 30));
    struct {
        const char *text, *expect;
    } bad[] = {
        {"bcast 1073741825 * * * * * 0 * chain", "t:1: ranks '1073741825' is not a count"},
        {"bcast +-2 * * * * * 0 * chain", "t:1: ranks '+-2' is not a count"},
        {"bcast -1 * * * * * 0 * chain", "t:1: ranks '-1' is not a count"},
        {"bcast 0x10 * * * * * 0 * chain", "t:1: ranks '0x10' is not a count"},
        {"bcast * * * * * * +1 * chain", "t:1: bytes '+1' '*' are not byte counts"},
        {"bcast * * * * * * 0 17179869184G chain",
         "t:1: bytes '0' '17179869184G' are not byte counts"},
        {"bcast * * * * * * 0 18446744073709551616 chain", "t:1: bytes '0' '1844674407"},
        {"bcast * * * * * * 0 1KK chain", "t:1: bytes '0' '1KK' are not byte counts"},
    };
    for (const auto &b : bad) {
        INFO(b.text);
        CHECK(gw_sel_parse(b.text, "t", &t.t, err, sizeof(err)) == -1);
        CHECK(std::string(err).rfind(b.expect, 0) == 0);
    }
    // A line of 512 characters or more, even a comment, is refused.
    const std::string long_line = "\n#" + std::string(511, 'x') + "\n";
    CHECK(gw_sel_parse(long_line.c_str(), "t", &t.t, err, sizeof(err)) == -1);
    CHECK(std::string(err) == "t:2: line too long; keep rows under 512 characters");
    // 4096 rows parse; a 4097th of 10 fields is refused, whatever they hold.
    std::string rows;
    for (int i = 0; i < 4096; ++i) rows += "bcast * * * * * * 0 * device\n";
    CHECK(gw_sel_parse(rows.c_str(), "many", &t.t, err, sizeof(err)) == 0);
    CHECK(t.t.n == 4096);
    rows += "bogus * * * * * * 0 * device\n";
    CHECK(gw_sel_parse(rows.c_str(), "more", &t.t, err, sizeof(err)) == -1);
    CHECK(std::string(err) == "more:4097: more than 4096 rows; merge adjacent sizes into ranges");
    CHECK(t.t.n == 4096);
    // An error buffer too small for the line: cut, still a string.
    char small[8];
    CHECK(gw_sel_parse("x", "t", &t.t, small, sizeof(small)) == -1);
    CHECK(std::string(small) == "t:1: no");
}

TEST_CASE("a file: read, or an error naming it", "[select]")
{
    Table t;
    char err[256];
    CHECK(gw_sel_load_file("/nonexistent/gw_select.txt", &t.t, err, sizeof(err)) == -1);
    CHECK(std::string(err).rfind("/nonexistent/gw_select.txt:0: cannot read the file", 0) == 0);
    char path[] = "/tmp/gw_select_XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    FILE *f = fdopen(fd, "w");
    REQUIRE(f != nullptr);
    std::fputs("alltoall 2 1 2 1 2 * 0 * device\nalltoall 2 1 2 1 2 * 0 * bogus\n", f);
    std::fclose(f);
    CHECK(gw_sel_load_file(path, &t.t, err, sizeof(err)) == -1);
    CHECK(std::string(err) == std::string(path) +
                                  ":2: unknown algorithm 'bogus'; use nvlink, device, chain, "
                                  "staged or auto");
    std::remove(path);
}

TEST_CASE("formatting: the file's format back, rows that apply marked", "[select]")
{
    Table t, again;
    char err[256];
    REQUIRE(gw_sel_parse(kTable, "t", &t.t, err, sizeof(err)) == 0);
    const gw_sel_key_t mps2 = key(2, 1, 2, 1, 2, 1);
    char *text = gw_sel_format(&t.t, &mps2);
    REQUIRE(text != nullptr);
    const std::string s(text);
    std::free(text);
    CHECK(s.find("allreduce        2   1   2   1   2   1          0    1048576 nvlink  # applies "
                 "here\n") != std::string::npos);
    CHECK(s.find("bcast            4   1   4   *   *   *      65536   67108864 chain\n") !=
          std::string::npos);
    // What it prints parses to the same rows.
    REQUIRE(gw_sel_parse(s.c_str(), "again", &again.t, err, sizeof(err)) == 0);
    REQUIRE(again.t.n == t.t.n);
    for (size_t i = 0; i < t.t.n; ++i) {
        CHECK(again.t.rows[i].lo == t.t.rows[i].lo);
        CHECK(again.t.rows[i].hi == t.t.rows[i].hi);
        CHECK(again.t.rows[i].algo == t.t.rows[i].algo);
    }
    char *line = gw_sel_format_line(&t.t);
    REQUIRE(line != nullptr);
    CHECK(std::string(line).find('\n') == std::string::npos);
    CHECK(std::string(line).rfind("allreduce 2 1 2 1 2 1 0 1048576 nvlink; allreduce 2 ", 0) == 0);
    CHECK(std::string(line).find("; bcast 4 1 4 * * * 65536 67108864 chain;") != std::string::npos);
    std::free(line);
    gw_sel_table_t empty{};
    line = gw_sel_format_line(&empty);
    CHECK(std::string(line) == "none");
    std::free(line);
}

TEST_CASE("the shipped table parses", "[select]")
{
    Table t;
    char err[256] = "";
    INFO(err);
    CHECK(gw_sel_load_shipped(&t.t, err, sizeof(err)) == 0);
    CHECK(std::string(t.t.source) == "shipped");
}
