// The statistics table: the blob each process publishes, and the table one
// process prints from them (gpuwire/stats_table.h). Nothing throws past the
// C API: running out of memory gives NULL.
#include "gpuwire/stats_table.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace {

// Blob: magic, column count, then the counters; all little-endian 64-bit
// words, so that the printing process reads what a peer wrote whatever
// either's byte order.
constexpr uint64_t kMagic = 0x3173777067ull;  // "gpws1"

void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}

// One row of the table: a label and a cell per column (none: "-" in each).
struct Row {
    std::string label;
    const uint64_t *cells;
};

// s right-aligned in width characters.
std::string right(const std::string &s, size_t width)
{
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

std::string format(const char *title, const char *const *columns, size_t ncols,
                   const uint64_t *values, const unsigned char *present, size_t nrows,
                   size_t max_rows, const char *legend)
{
    const size_t npresent = static_cast<size_t>(std::count_if(
        present, present + nrows, [](unsigned char p) { return 0 != p; }));
    std::vector<uint64_t> mins(ncols, UINT64_MAX), maxs(ncols, 0), tots(ncols, 0);
    for (size_t r = 0; r < nrows; ++r) {
        for (size_t c = 0; present[r] && c < ncols; ++c) {
            const uint64_t v = values[r * ncols + c];
            mins[c] = std::min(mins[c], v);
            maxs[c] = std::max(maxs[c], v);
            tots[c] += v;
        }
    }

    const bool per_process = nrows <= max_rows;
    std::vector<Row> rows;
    if (per_process) {
        for (size_t r = 0; r < nrows; ++r) {
            rows.push_back({std::to_string(r), present[r] ? values + r * ncols : nullptr});
        }
    } else {
        rows.push_back({"min", npresent ? mins.data() : nullptr});
        rows.push_back({"max", npresent ? maxs.data() : nullptr});
    }
    rows.push_back({"total", npresent ? tots.data() : nullptr});

    std::vector<size_t> width(ncols + 1);
    width[0] = std::strlen("rank");
    for (size_t c = 0; c < ncols; ++c) width[c + 1] = std::strlen(columns[c]);
    for (const Row &row : rows) {
        width[0] = std::max(width[0], row.label.size());
        for (size_t c = 0; row.cells && c < ncols; ++c) {
            width[c + 1] = std::max(width[c + 1], std::to_string(row.cells[c]).size());
        }
    }

    std::string out = title;
    if (!per_process) out += " (min and max over the processes)";
    if (npresent < nrows) {
        out += " (" + std::to_string(nrows - npresent) + " of " + std::to_string(nrows) +
               " processes published nothing)";
    }
    out += "\n" + right("rank", width[0]);
    for (size_t c = 0; c < ncols; ++c) out += "  " + right(columns[c], width[c + 1]);
    out += "\n";
    for (const Row &row : rows) {
        out += right(row.label, width[0]);
        for (size_t c = 0; c < ncols; ++c) {
            out += "  " + right(row.cells ? std::to_string(row.cells[c]) : "-", width[c + 1]);
        }
        out += "\n";
    }
    if (legend) out += std::string(legend) + "\n";
    return out;
}

}  // namespace

extern "C" {

size_t gw_stats_blob_size(size_t ncols) { return 8 * (ncols + 2); }

void gw_stats_blob_pack(void *blob, const uint64_t *values, size_t ncols)
{
    auto *p = static_cast<unsigned char *>(blob);
    put_u64(p, kMagic);
    put_u64(p + 8, ncols);
    for (size_t c = 0; c < ncols; ++c) put_u64(p + 16 + 8 * c, values[c]);
}

int gw_stats_blob_unpack(const void *blob, size_t size, uint64_t *values, size_t ncols)
{
    const auto *p = static_cast<const unsigned char *>(blob);
    if (!blob || size != gw_stats_blob_size(ncols)) return -1;
    if (get_u64(p) != kMagic || get_u64(p + 8) != ncols) return -1;
    for (size_t c = 0; c < ncols; ++c) values[c] = get_u64(p + 16 + 8 * c);
    return 0;
}

char *gw_stats_table_format(const char *title, const char *const *columns, size_t ncols,
                            const uint64_t *values, const unsigned char *present, size_t nrows,
                            size_t max_rows, const char *legend)
{
    try {
        const std::string s =
            format(title, columns, ncols, values, present, nrows, max_rows, legend);
        char *out = static_cast<char *>(std::malloc(s.size() + 1));
        if (out) std::memcpy(out, s.c_str(), s.size() + 1);
        return out;
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

}  // extern "C"
