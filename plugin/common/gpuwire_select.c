/*
 * The selection table: parsing, lookup, formatting (gpuwire_select.h).
 */
#include "gpuwire_select.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Far more than a measured table needs; a bound keeps a stray file small. */
#define GW_SEL_MAX_ROWS 4096
#define GW_SEL_FIELDS 10

static const char *const coll_names[GW_SEL_COLLS] = {
    [GW_SEL_ALLREDUCE] = "allreduce", [GW_SEL_BCAST] = "bcast",
    [GW_SEL_ALLGATHER] = "allgather", [GW_SEL_ALLTOALL] = "alltoall",
    [GW_SEL_REDUCE] = "reduce",       [GW_SEL_REDUCE_SCATTER] = "reduce_scatter",
};

static const char *const algo_names[GW_SEL_ALGOS] = {
    [GW_SEL_AUTO] = "auto",     [GW_SEL_NVLINK] = "nvlink", [GW_SEL_DEVICE] = "device",
    [GW_SEL_CHAIN] = "chain",   [GW_SEL_STAGED] = "staged",
};

const char *gw_sel_coll_name(gw_sel_coll_t c)
{
    return (unsigned)c < GW_SEL_COLLS ? coll_names[c] : "?";
}

const char *gw_sel_algo_name(gw_sel_algo_t a)
{
    return (unsigned)a < GW_SEL_ALGOS ? algo_names[a] : "?";
}

static int name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; ++i) {
        if (0 == strcmp(s, names[i])) return i;
    }
    return -1;
}

/* A count field: a non-negative int, or '*'. */
static bool parse_int(const char *s, int *v)
{
    if (0 == strcmp(s, "*")) {
        *v = GW_SEL_ANY;
        return true;
    }
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (0 != errno || end == s || '\0' != *end || x < 0 || x > (1L << 30)) return false;
    *v = (int)x;
    return true;
}

/* A byte count with an optional K, M or G suffix (x 1024), or '*'. */
static bool parse_bytes(const char *s, uint64_t any, uint64_t *v)
{
    if (0 == strcmp(s, "*")) {
        *v = any;
        return true;
    }
    if (!isdigit((unsigned char)s[0])) return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (0 != errno || end == s) return false;
    unsigned shift = 0;
    if ('\0' != *end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        default: return false;
        }
        if ('\0' != end[1]) return false;
    }
    if (x > (UINT64_MAX >> shift)) return false;
    *v = (uint64_t)x << shift;
    return true;
}

static int fail(char *err, size_t errlen, const char *name, int line, const char *what,
                const char *fix)
{
    if (NULL != err && errlen > 0) snprintf(err, errlen, "%s:%d: %s; %s", name, line, what, fix);
    return -1;
}

/* Splits one line (comment removed) into at most max fields, in place. */
static int split(char *line, char **fields, int max)
{
    char *hash = strchr(line, '#');
    if (NULL != hash) *hash = '\0';
    int n = 0;
    for (char *p = line; *p;) {
        while (*p && isspace((unsigned char)*p)) *p++ = '\0';
        if (!*p) break;
        if (n == max) return max + 1;
        fields[n++] = p;
        while (*p && !isspace((unsigned char)*p)) ++p;
    }
    return n;
}

static int parse_row(char **f, gw_sel_row_t *r, const char *name, int line, char *err,
                     size_t errlen)
{
    char what[160];
    int c = name_index(f[0], coll_names, GW_SEL_COLLS);
    if (c < 0) {
        snprintf(what, sizeof(what), "unknown collective '%.40s'", f[0]);
        return fail(err, errlen, name, line, what,
                    "use allreduce, bcast, allgather, alltoall, reduce or reduce_scatter");
    }
    r->coll = (gw_sel_coll_t)c;
    int *ints[6] = {&r->ranks, &r->nodes, &r->ppn, &r->gpn, &r->rpg, &r->nvlink};
    static const char *const int_names[6] = {"ranks", "nodes", "ppn", "gpn", "rpg", "nvlink"};
    for (int i = 0; i < 6; ++i) {
        if (!parse_int(f[1 + i], ints[i]) || (5 == i && r->nvlink > 1)) {
            snprintf(what, sizeof(what), "%s '%.40s' is not a count", int_names[i], f[1 + i]);
            return fail(err, errlen, name, line, what,
                        5 == i ? "write 0, 1 or *" : "write a whole number or *");
        }
    }
    if (!parse_bytes(f[7], 0, &r->lo) || !parse_bytes(f[8], UINT64_MAX, &r->hi)) {
        snprintf(what, sizeof(what), "bytes '%.40s' '%.40s' are not byte counts", f[7], f[8]);
        return fail(err, errlen, name, line, what, "write numbers (suffix K, M or G) or *");
    }
    if (r->lo > r->hi) {
        return fail(err, errlen, name, line, "min bytes above max bytes",
                    "write the smaller number first");
    }
    int a = name_index(f[9], algo_names, GW_SEL_ALGOS);
    if (a < 0) {
        snprintf(what, sizeof(what), "unknown algorithm '%.40s'", f[9]);
        return fail(err, errlen, name, line, what, "use nvlink, device, chain, staged or auto");
    }
    if (GW_SEL_CHAIN == a && GW_SEL_BCAST != c) {
        return fail(err, errlen, name, line, "chain is an algorithm of bcast only",
                    "use device for this collective");
    }
    if (GW_SEL_NVLINK == a && GW_SEL_ALLREDUCE != c && GW_SEL_BCAST != c &&
        GW_SEL_ALLGATHER != c) {
        return fail(err, errlen, name, line, "nvlink runs allreduce, bcast and allgather only",
                    "use device or staged for this collective");
    }
    r->algo = (gw_sel_algo_t)a;
    return 0;
}

int gw_sel_parse(const char *text, const char *name, gw_sel_table_t *t, char *err, size_t errlen)
{
    gw_sel_row_t *rows = NULL;
    size_t n = 0, cap = 0;
    int line = 0;
    const char *p = NULL == text ? "" : text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = NULL == nl ? strlen(p) : (size_t)(nl - p);
        ++line;
        char buf[512];
        if (len >= sizeof(buf)) {
            free(rows);
            return fail(err, errlen, name, line, "line too long",
                        "keep rows under 512 characters");
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        p += len + (NULL == nl ? 0 : 1);
        char *f[GW_SEL_FIELDS];
        const int nf = split(buf, f, GW_SEL_FIELDS);
        if (0 == nf) continue;
        if (GW_SEL_FIELDS != nf) {
            free(rows);
            return fail(err, errlen, name, line, "not 10 fields",
                        "write: collective ranks nodes ppn gpn rpg nvlink min max algorithm");
        }
        if (n == cap) {
            if (cap == GW_SEL_MAX_ROWS) {
                free(rows);
                return fail(err, errlen, name, line, "more than 4096 rows",
                            "merge adjacent sizes into ranges");
            }
            cap = 0 == cap ? 32 : 2 * cap;
            gw_sel_row_t *more = realloc(rows, cap * sizeof(*rows));
            if (NULL == more) {
                free(rows);
                return fail(err, errlen, name, line, "out of memory", "retry with a smaller table");
            }
            rows = more;
        }
        if (0 != parse_row(f, &rows[n], name, line, err, errlen)) {
            free(rows);
            return -1;
        }
        ++n;
    }
    free(t->rows);
    t->rows = rows;
    t->n = n;
    snprintf(t->source, sizeof(t->source), "%s", name);
    return 0;
}

int gw_sel_load_file(const char *path, gw_sel_table_t *t, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        char what[128];
        snprintf(what, sizeof(what), "cannot read the file (%s)", strerror(errno));
        return fail(err, errlen, path, 0, what, "set coll_gpuwire_select_file to a readable file");
    }
    /* A table is a few kilobytes; 1 MiB is a generous bound. */
    enum { MAX_BYTES = 1 << 20 };
    char *text = malloc(MAX_BYTES + 1);
    size_t got = NULL == text ? 0 : fread(text, 1, MAX_BYTES + 1, f);
    const bool bad = NULL == text || ferror(f);
    fclose(f);
    if (bad || got > MAX_BYTES) {
        free(text);
        return fail(err, errlen, path, 0, bad ? "cannot read the file" : "larger than 1 MiB",
                    "point coll_gpuwire_select_file at a table written by ci/gpu_coll_select.sh");
    }
    text[got] = '\0';
    const int rc = gw_sel_parse(text, path, t, err, errlen);
    free(text);
    return rc;
}

void gw_sel_free(gw_sel_table_t *t)
{
    free(t->rows);
    t->rows = NULL;
    t->n = 0;
}

static bool field_matches(int row, int key) { return GW_SEL_ANY == row || row == key; }

bool gw_sel_row_matches(const gw_sel_row_t *r, const gw_sel_key_t *k)
{
    return field_matches(r->ranks, k->ranks) && field_matches(r->nodes, k->nodes) &&
           field_matches(r->ppn, k->ppn) && field_matches(r->gpn, k->gpn) &&
           field_matches(r->rpg, k->rpg) && field_matches(r->nvlink, k->nvlink);
}

gw_sel_algo_t gw_sel_lookup(const gw_sel_table_t *t, gw_sel_coll_t c, const gw_sel_key_t *k,
                            uint64_t bytes, int *row_out)
{
    if (NULL != row_out) *row_out = -1;
    for (size_t i = 0; NULL != t && i < t->n; ++i) {
        const gw_sel_row_t *r = &t->rows[i];
        if (r->coll != c || bytes < r->lo || bytes > r->hi || !gw_sel_row_matches(r, k)) continue;
        if (NULL != row_out) *row_out = (int)i;
        return r->algo;
    }
    return GW_SEL_AUTO;
}

bool gw_sel_measured(const gw_sel_table_t *t, const gw_sel_key_t *k)
{
    for (size_t i = 0; NULL != t && i < t->n; ++i) {
        if (gw_sel_row_matches(&t->rows[i], k)) return true;
    }
    return false;
}

static void fmt_int(int v, char *buf, size_t len)
{
    if (GW_SEL_ANY == v) snprintf(buf, len, "*");
    else snprintf(buf, len, "%d", v);
}

static void fmt_bytes(uint64_t v, bool is_max, char *buf, size_t len)
{
    if (is_max && UINT64_MAX == v) snprintf(buf, len, "*");
    else snprintf(buf, len, "%llu", (unsigned long long)v);
}

void gw_sel_format_row(const gw_sel_row_t *r, char *buf, size_t len)
{
    char f[6][16], lo[24], hi[24];
    const int v[6] = {r->ranks, r->nodes, r->ppn, r->gpn, r->rpg, r->nvlink};
    for (int i = 0; i < 6; ++i) fmt_int(v[i], f[i], sizeof(f[i]));
    fmt_bytes(r->lo, false, lo, sizeof(lo));
    fmt_bytes(r->hi, true, hi, sizeof(hi));
    snprintf(buf, len, "%-14s %3s %3s %3s %3s %3s %3s %10s %10s %s", gw_sel_coll_name(r->coll),
             f[0], f[1], f[2], f[3], f[4], f[5], lo, hi, gw_sel_algo_name(r->algo));
}

/* Rows joined by sep, each followed by mark where it applies to k. */
static char *format(const gw_sel_table_t *t, const gw_sel_key_t *k, const char *sep,
                    const char *mark, const char *empty)
{
    const size_t row_len = 128 + strlen(sep) + strlen(mark);
    size_t cap = (t->n + 1) * row_len + strlen(empty) + 1;
    char *out = malloc(cap);
    if (NULL == out) return NULL;
    size_t used = 0;
    out[0] = '\0';
    if (0 == t->n) used += (size_t)snprintf(out, cap, "%s", empty);
    for (size_t i = 0; i < t->n; ++i) {
        char row[128];
        gw_sel_format_row(&t->rows[i], row, sizeof(row));
        const bool here = NULL != k && gw_sel_row_matches(&t->rows[i], k);
        used += (size_t)snprintf(out + used, cap - used, "%s%s%s", row, here ? mark : "",
                                 i + 1 < t->n ? sep : "");
    }
    return out;
}

char *gw_sel_format(const gw_sel_table_t *t, const gw_sel_key_t *k)
{
    char *body = format(t, k, "\n", "  # applies here", "# no rows: the built-in rules");
    if (NULL == body) return NULL;
    const size_t len = strlen(body) + 2;
    char *out = realloc(body, len);
    if (NULL == out) return body;
    strcat(out, "\n");
    return out;
}

char *gw_sel_format_line(const gw_sel_table_t *t)
{
    char *s = format(t, NULL, "; ", "", "none");
    if (NULL == s) return NULL;
    /* One blank between fields: the columns line up in files, not here. */
    char *w = s;
    for (const char *r = s; *r; ++r) {
        if (' ' == *r && (w == s || ' ' == w[-1])) continue;
        *w++ = *r;
    }
    *w = '\0';
    return s;
}

unsigned gw_sel_user_mask(const char *param)
{
    static const struct {
        const char *param;
        unsigned colls;
    } governs[] = {
#define B(c) (1u << GW_SEL_##c)
        {"nvlink", B(ALLREDUCE) | B(BCAST) | B(ALLGATHER)},
        {"nvlink_oneshot_bytes", B(ALLREDUCE) | B(BCAST) | B(ALLGATHER)},
        {"nvlink_direct", B(ALLREDUCE) | B(BCAST) | B(ALLGATHER)},
        {"reduce_algorithm", B(ALLREDUCE) | B(REDUCE) | B(REDUCE_SCATTER)},
        {"reduce_device_min_bytes", B(ALLREDUCE) | B(REDUCE) | B(REDUCE_SCATTER)},
        {"move_algorithm", B(BCAST) | B(ALLGATHER) | B(ALLTOALL)},
        {"bcast_chain_ranks", B(BCAST)},
        {"bcast_chain_bytes", B(BCAST)},
#undef B
    };
    for (size_t i = 0; i < sizeof(governs) / sizeof(governs[0]); ++i) {
        if (0 == strcmp(param, governs[i].param)) return governs[i].colls;
    }
    return 0;
}
