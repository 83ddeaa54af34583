// The selection table: parsing, lookup, formatting (gpuwire/coll_select.h).
//
// Rows are parsed into a std::vector that every refusal simply drops; only a
// whole table reaches the caller's gw_sel_table_t, which then owns them until
// gw_sel_free. Nothing throws past the C API: running out of memory is one
// more refusal.
#include "gpuwire/coll_select.h"

#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace gpuwire::coll {
// The shipped table's text (select_table.txt, compiled in by sources.cmake).
extern const char kShippedSelectTable[];
}  // namespace gpuwire::coll

namespace {

// Far more than a measured table needs; a bound keeps a stray file small.
constexpr size_t kMaxRows = 4096;
constexpr size_t kFields = 10;
constexpr size_t kMaxLine = 512;           // a line this long or longer is refused
constexpr size_t kMaxFileBytes = 1 << 20;  // a table is a few kilobytes

using Fields = std::array<std::string_view, kFields>;

constexpr std::array<const char *, GW_SEL_COLLS> kCollNames = {
    "allreduce", "bcast", "allgather", "alltoall", "reduce", "reduce_scatter"};
static_assert(GW_SEL_ALLREDUCE == 0 && GW_SEL_REDUCE_SCATTER == 5);

constexpr std::array<const char *, GW_SEL_ALGOS> kAlgoNames = {"auto", "nvlink", "device",
                                                               "chain", "staged"};
static_assert(GW_SEL_AUTO == 0 && GW_SEL_STAGED == 4);

template <size_t N>
int name_index(std::string_view s, const std::array<const char *, N> &names)
{
    for (size_t i = 0; i < N; ++i) {
        if (s == names[i]) return static_cast<int>(i);
    }
    return -1;
}

bool is_blank(char c) { return 0 != std::isspace(static_cast<unsigned char>(c)); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Digits only, all of s, no overflow.
bool parse_digits(std::string_view s, unsigned long long &v)
{
    if (s.empty() || !is_digit(s.front())) return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return std::errc() == ec && end == s.data() + s.size();
}

// A count field: a non-negative int, or '*'. As strtol read it: one sign
// allowed, so "+2" and "-0" are counts.
bool parse_count(std::string_view s, int &v)
{
    if ("*" == s) {
        v = GW_SEL_ANY;
        return true;
    }
    const bool negative = !s.empty() && '-' == s.front();
    if (!s.empty() && ('+' == s.front() || negative)) s.remove_prefix(1);
    unsigned long long x = 0;
    if (!parse_digits(s, x) || (negative && 0 != x) || x > (1ull << 30)) return false;
    v = static_cast<int>(x);
    return true;
}

// A byte count with an optional K, M or G suffix (x 1024), or '*'.
bool parse_bytes(std::string_view s, uint64_t any, uint64_t &v)
{
    if ("*" == s) {
        v = any;
        return true;
    }
    unsigned shift = 0;
    if (!s.empty() && !is_digit(s.back())) {
        switch (std::toupper(static_cast<unsigned char>(s.back()))) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        default: return false;
        }
        s.remove_suffix(1);
    }
    unsigned long long x = 0;
    if (!parse_digits(s, x) || x > (UINT64_MAX >> shift)) return false;
    v = static_cast<uint64_t>(x) << shift;
    return true;
}

// A field as the messages quote it: at most 40 characters.
std::string quoted(std::string_view s) { return "'" + std::string(s.substr(0, 40)) + "'"; }

int fail(char *err, size_t errlen, const char *name, int line, const std::string &what,
         const char *fix)
{
    if (nullptr != err && errlen > 0) {
        std::snprintf(err, errlen, "%s:%d: %s; %s", nullptr != name ? name : "(null)", line,
                      what.c_str(), fix);
    }
    return -1;
}

// Why a row was refused: what is wrong, and the fix.
struct Refusal {
    std::string what;
    const char *fix;
};

// The fields of one line, its comment removed; kFields + 1 when more.
size_t split(std::string_view line, Fields &f)
{
    line = line.substr(0, line.find('#'));
    size_t n = 0, i = 0;
    for (;;) {
        while (i < line.size() && is_blank(line[i])) ++i;
        if (i == line.size()) return n;
        if (kFields == n) return kFields + 1;
        const size_t start = i;
        while (i < line.size() && !is_blank(line[i])) ++i;
        f[n++] = line.substr(start, i - start);
    }
}

bool parse_row(const Fields &f, gw_sel_row_t &r, Refusal &why)
{
    const int c = name_index(f[0], kCollNames);
    if (c < 0) {
        why = {"unknown collective " + quoted(f[0]),
               "use allreduce, bcast, allgather, alltoall, reduce or reduce_scatter"};
        return false;
    }
    r.coll = static_cast<gw_sel_coll_t>(c);
    int *const ints[6] = {&r.ranks, &r.nodes, &r.ppn, &r.gpn, &r.rpg, &r.nvlink};
    static const char *const int_names[6] = {"ranks", "nodes", "ppn", "gpn", "rpg", "nvlink"};
    for (int i = 0; i < 6; ++i) {
        if (!parse_count(f[1 + i], *ints[i]) || (5 == i && r.nvlink > 1)) {
            why = {std::string(int_names[i]) + " " + quoted(f[1 + i]) + " is not a count",
                   5 == i ? "write 0, 1 or *" : "write a whole number or *"};
            return false;
        }
    }
    if (!parse_bytes(f[7], 0, r.lo) || !parse_bytes(f[8], UINT64_MAX, r.hi)) {
        why = {"bytes " + quoted(f[7]) + " " + quoted(f[8]) + " are not byte counts",
               "write numbers (suffix K, M or G) or *"};
        return false;
    }
    if (r.lo > r.hi) {
        why = {"min bytes above max bytes", "write the smaller number first"};
        return false;
    }
    const int a = name_index(f[9], kAlgoNames);
    if (a < 0) {
        why = {"unknown algorithm " + quoted(f[9]), "use nvlink, device, chain, staged or auto"};
        return false;
    }
    if (GW_SEL_CHAIN == a && GW_SEL_BCAST != c) {
        why = {"chain is an algorithm of bcast only", "use device for this collective"};
        return false;
    }
    if (GW_SEL_NVLINK == a && GW_SEL_ALLREDUCE != c && GW_SEL_BCAST != c &&
        GW_SEL_ALLGATHER != c) {
        why = {"nvlink runs allreduce, bcast and allgather only",
               "use device or staged for this collective"};
        return false;
    }
    r.algo = static_cast<gw_sel_algo_t>(a);
    return true;
}

// gw_sel_parse without the catch; line: the line it is at, for a refusal
// thrown as std::bad_alloc.
int parse(std::string_view text, const char *name, gw_sel_table_t *t, char *err, size_t errlen,
          int &line)
{
    std::vector<gw_sel_row_t> rows;
    while (!text.empty()) {
        const size_t nl = text.find('\n');
        const std::string_view ln = text.substr(0, nl);
        text.remove_prefix(std::string_view::npos == nl ? text.size() : nl + 1);
        ++line;
        if (ln.size() >= kMaxLine) {
            return fail(err, errlen, name, line, "line too long", "keep rows under 512 characters");
        }
        Fields f;
        const size_t nf = split(ln, f);
        if (0 == nf) continue;
        if (kFields != nf) {
            return fail(err, errlen, name, line, "not 10 fields",
                        "write: collective ranks nodes ppn gpn rpg nvlink min max algorithm");
        }
        if (kMaxRows == rows.size()) {
            return fail(err, errlen, name, line, "more than 4096 rows",
                        "merge adjacent sizes into ranges");
        }
        gw_sel_row_t r{};
        Refusal why;
        if (!parse_row(f, r, why)) return fail(err, errlen, name, line, why.what, why.fix);
        rows.push_back(r);
    }
    std::unique_ptr<gw_sel_row_t[]> owned;
    if (!rows.empty()) {
        owned.reset(new gw_sel_row_t[rows.size()]);
        std::memcpy(owned.get(), rows.data(), rows.size() * sizeof(gw_sel_row_t));
    }
    gw_sel_free(t);
    t->rows = owned.release();
    t->n = rows.size();
    std::snprintf(t->source, sizeof(t->source), "%s", name);
    return 0;
}

char *c_string(const std::string &s)
{
    char *out = static_cast<char *>(std::malloc(s.size() + 1));
    if (nullptr != out) std::memcpy(out, s.c_str(), s.size() + 1);
    return out;
}

std::string format_row(const gw_sel_row_t &r)
{
    char row[128];
    gw_sel_format_row(&r, row, sizeof(row));
    return row;
}

// Rows joined by sep, each followed by mark where it applies to k.
std::string format(const gw_sel_table_t *t, const gw_sel_key_t *k, std::string_view sep,
                   std::string_view mark, std::string_view empty)
{
    const size_t n = nullptr != t ? t->n : 0;
    if (0 == n) return std::string(empty);
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        out += format_row(t->rows[i]);
        if (nullptr != k && gw_sel_row_matches(&t->rows[i], k)) out += mark;
        if (i + 1 < n) out += sep;
    }
    return out;
}

}  // namespace

extern "C" {

const char *gw_sel_coll_name(gw_sel_coll_t c)
{
    return static_cast<unsigned>(c) < GW_SEL_COLLS ? kCollNames[c] : "?";
}

const char *gw_sel_algo_name(gw_sel_algo_t a)
{
    return static_cast<unsigned>(a) < GW_SEL_ALGOS ? kAlgoNames[a] : "?";
}

int gw_sel_parse(const char *text, const char *name, gw_sel_table_t *t, char *err, size_t errlen)
{
    int line = 0;
    try {
        return parse(nullptr != text ? text : "", name, t, err, errlen, line);
    } catch (const std::bad_alloc &) {
        return fail(err, errlen, name, line, "out of memory", "retry with a smaller table");
    }
}

int gw_sel_load_file(const char *path, gw_sel_table_t *t, char *err, size_t errlen)
{
    std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path, "r"), &std::fclose);
    if (!f) {
        char what[128];
        std::snprintf(what, sizeof(what), "cannot read the file (%s)", std::strerror(errno));
        return fail(err, errlen, path, 0, what, "set coll_gpuwire_select_file to a readable file");
    }
    std::string text;
    size_t got = 0;
    bool bad = false;
    try {
        text.resize(kMaxFileBytes + 1);
        got = std::fread(text.data(), 1, text.size(), f.get());
        bad = 0 != std::ferror(f.get());
    } catch (const std::bad_alloc &) {
        bad = true;
    }
    f.reset();
    if (bad || got > kMaxFileBytes) {
        return fail(err, errlen, path, 0, bad ? "cannot read the file" : "larger than 1 MiB",
                    "point coll_gpuwire_select_file at a table written by ci/gpu_coll_select.sh");
    }
    text.resize(got);
    // As a C string: the text ends at a NUL byte, as a file read by C would.
    return gw_sel_parse(text.c_str(), path, t, err, errlen);
}

int gw_sel_load_shipped(gw_sel_table_t *t, char *err, size_t errlen)
{
    return gw_sel_parse(gpuwire::coll::kShippedSelectTable, "shipped", t, err, errlen);
}

void gw_sel_free(gw_sel_table_t *t)
{
    delete[] t->rows;
    t->rows = nullptr;
    t->n = 0;
}

bool gw_sel_row_matches(const gw_sel_row_t *r, const gw_sel_key_t *k)
{
    const auto field = [](int row, int key) { return GW_SEL_ANY == row || row == key; };
    return field(r->ranks, k->ranks) && field(r->nodes, k->nodes) && field(r->ppn, k->ppn) &&
           field(r->gpn, k->gpn) && field(r->rpg, k->rpg) && field(r->nvlink, k->nvlink);
}

gw_sel_algo_t gw_sel_lookup(const gw_sel_table_t *t, gw_sel_coll_t c, const gw_sel_key_t *k,
                            uint64_t bytes, int *row_out)
{
    if (nullptr != row_out) *row_out = -1;
    for (size_t i = 0; nullptr != t && i < t->n; ++i) {
        const gw_sel_row_t &r = t->rows[i];
        if (r.coll != c || bytes < r.lo || bytes > r.hi || !gw_sel_row_matches(&r, k)) continue;
        if (nullptr != row_out) *row_out = static_cast<int>(i);
        return r.algo;
    }
    return GW_SEL_AUTO;
}

bool gw_sel_measured(const gw_sel_table_t *t, const gw_sel_key_t *k)
{
    for (size_t i = 0; nullptr != t && i < t->n; ++i) {
        if (gw_sel_row_matches(&t->rows[i], k)) return true;
    }
    return false;
}

void gw_sel_format_row(const gw_sel_row_t *r, char *buf, size_t len)
{
    char f[6][16], lo[24], hi[24];
    const int v[6] = {r->ranks, r->nodes, r->ppn, r->gpn, r->rpg, r->nvlink};
    for (int i = 0; i < 6; ++i) {
        if (GW_SEL_ANY == v[i]) std::snprintf(f[i], sizeof(f[i]), "*");
        else std::snprintf(f[i], sizeof(f[i]), "%d", v[i]);
    }
    std::snprintf(lo, sizeof(lo), "%llu", static_cast<unsigned long long>(r->lo));
    if (UINT64_MAX == r->hi) std::snprintf(hi, sizeof(hi), "*");
    else std::snprintf(hi, sizeof(hi), "%llu", static_cast<unsigned long long>(r->hi));
    std::snprintf(buf, len, "%-14s %3s %3s %3s %3s %3s %3s %10s %10s %s",
                  gw_sel_coll_name(r->coll), f[0], f[1], f[2], f[3], f[4], f[5], lo, hi,
                  gw_sel_algo_name(r->algo));
}

char *gw_sel_format(const gw_sel_table_t *t, const gw_sel_key_t *k)
{
    try {
        return c_string(format(t, k, "\n", "  # applies here", "# no rows: the built-in rules") +
                        "\n");
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

char *gw_sel_format_line(const gw_sel_table_t *t)
{
    try {
        const std::string s = format(t, nullptr, "; ", "", "none");
        // One blank between fields: the columns line up in files, not here.
        std::string line;
        for (const char c : s) {
            if (' ' == c && (line.empty() || ' ' == line.back())) continue;
            line += c;
        }
        return c_string(line);
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

unsigned gw_sel_user_mask(const char *param)
{
    constexpr auto B = [](gw_sel_coll_t c) { return 1u << c; };
    static constexpr struct {
        std::string_view param;
        unsigned colls;
    } governs[] = {
        {"nvlink", B(GW_SEL_ALLREDUCE) | B(GW_SEL_BCAST) | B(GW_SEL_ALLGATHER)},
        {"nvlink_oneshot_bytes", B(GW_SEL_ALLREDUCE) | B(GW_SEL_BCAST) | B(GW_SEL_ALLGATHER)},
        {"nvlink_direct", B(GW_SEL_ALLREDUCE) | B(GW_SEL_BCAST) | B(GW_SEL_ALLGATHER)},
        {"reduce_algorithm", B(GW_SEL_ALLREDUCE) | B(GW_SEL_REDUCE) | B(GW_SEL_REDUCE_SCATTER)},
        {"reduce_device_min_bytes",
         B(GW_SEL_ALLREDUCE) | B(GW_SEL_REDUCE) | B(GW_SEL_REDUCE_SCATTER)},
        {"move_algorithm", B(GW_SEL_BCAST) | B(GW_SEL_ALLGATHER) | B(GW_SEL_ALLTOALL)},
        {"bcast_chain_ranks", B(GW_SEL_BCAST)},
        {"bcast_chain_bytes", B(GW_SEL_BCAST)},
    };
    if (nullptr == param) return 0;
    for (const auto &g : governs) {
        if (param == g.param) return g.colls;
    }
    return 0;
}

}  // extern "C"
