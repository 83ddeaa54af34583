#define _GNU_SOURCE /* open_memstream */
#include "gpuwire_stats_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blob: magic, column count, then the counters; all little-endian 64-bit
 * words, so that the printing process reads what a peer wrote whatever
 * either's byte order. */
#define GW_STATS_MAGIC 0x3173777067ull /* "gpws1" */

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

size_t gw_stats_blob_size(size_t ncols) { return 8 * (ncols + 2); }

void gw_stats_blob_pack(void *blob, const uint64_t *values, size_t ncols)
{
    unsigned char *p = blob;
    put_u64(p, GW_STATS_MAGIC);
    put_u64(p + 8, ncols);
    for (size_t c = 0; c < ncols; ++c) put_u64(p + 16 + 8 * c, values[c]);
}

int gw_stats_blob_unpack(const void *blob, size_t size, uint64_t *values, size_t ncols)
{
    const unsigned char *p = blob;
    if (!blob || size != gw_stats_blob_size(ncols)) return -1;
    if (get_u64(p) != GW_STATS_MAGIC || get_u64(p + 8) != ncols) return -1;
    for (size_t c = 0; c < ncols; ++c) values[c] = get_u64(p + 16 + 8 * c);
    return 0;
}

/* One row of the table: a label and a cell per column (NULL cells print "-"). */
typedef struct {
    char label[24];
    const uint64_t *cells;
} table_row_t;

static size_t digits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        ++n;
    }
    return n;
}

char *gw_stats_table_format(const char *title, const char *const *columns, size_t ncols,
                            const uint64_t *values, const unsigned char *present, size_t nrows,
                            size_t max_rows, const char *legend)
{
    size_t npresent = 0;
    for (size_t r = 0; r < nrows; ++r) npresent += present[r] ? 1 : 0;
    int per_process = nrows <= max_rows;
    size_t nout = (per_process ? nrows : 2) + 1;

    uint64_t *agg = calloc(3 * (ncols ? ncols : 1), sizeof(uint64_t)); /* min, max, total */
    table_row_t *rows = calloc(nout, sizeof(table_row_t));
    size_t *width = calloc(ncols + 1, sizeof(size_t));
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = NULL;
    if (!agg || !rows || !width) goto done;

    uint64_t *mins = agg, *maxs = agg + ncols, *tots = agg + 2 * ncols;
    for (size_t c = 0; c < ncols; ++c) mins[c] = UINT64_MAX;
    for (size_t r = 0; r < nrows; ++r) {
        if (!present[r]) continue;
        for (size_t c = 0; c < ncols; ++c) {
            uint64_t v = values[r * ncols + c];
            if (v < mins[c]) mins[c] = v;
            if (v > maxs[c]) maxs[c] = v;
            tots[c] += v;
        }
    }

    size_t k = 0;
    if (per_process) {
        for (size_t r = 0; r < nrows; ++r, ++k) {
            snprintf(rows[k].label, sizeof(rows[k].label), "%zu", r);
            rows[k].cells = present[r] ? values + r * ncols : NULL;
        }
    } else {
        snprintf(rows[k].label, sizeof(rows[k].label), "min");
        rows[k++].cells = npresent ? mins : NULL;
        snprintf(rows[k].label, sizeof(rows[k].label), "max");
        rows[k++].cells = npresent ? maxs : NULL;
    }
    snprintf(rows[k].label, sizeof(rows[k].label), "total");
    rows[k].cells = npresent ? tots : NULL;

    width[0] = strlen("rank");
    for (size_t c = 0; c < ncols; ++c) width[c + 1] = strlen(columns[c]);
    for (size_t i = 0; i < nout; ++i) {
        if (strlen(rows[i].label) > width[0]) width[0] = strlen(rows[i].label);
        for (size_t c = 0; c < ncols && rows[i].cells; ++c) {
            size_t d = digits(rows[i].cells[c]);
            if (d > width[c + 1]) width[c + 1] = d;
        }
    }

    f = open_memstream(&out, &out_len);
    if (!f) goto done;
    fprintf(f, "%s", title);
    if (!per_process) fprintf(f, " (min and max over the processes)");
    if (npresent < nrows) {
        fprintf(f, " (%zu of %zu processes published nothing)", nrows - npresent, nrows);
    }
    fputc('\n', f);
    fprintf(f, "%*s", (int)width[0], "rank");
    for (size_t c = 0; c < ncols; ++c) fprintf(f, "  %*s", (int)width[c + 1], columns[c]);
    fputc('\n', f);
    for (size_t i = 0; i < nout; ++i) {
        fprintf(f, "%*s", (int)width[0], rows[i].label);
        for (size_t c = 0; c < ncols; ++c) {
            if (rows[i].cells) {
                fprintf(f, "  %*llu", (int)width[c + 1], (unsigned long long)rows[i].cells[c]);
            } else {
                fprintf(f, "  %*s", (int)width[c + 1], "-");
            }
        }
        fputc('\n', f);
    }
    if (legend) fprintf(f, "%s\n", legend);
    if (fclose(f) != 0) {
        free(out);
        out = NULL;
    }

done:
    free(agg);
    free(rows);
    free(width);
    return out;
}
