/*
 * A component's MCA parameters as one table of descriptors (gw_param_t):
 * name, type, default, range, ompi_info level, one-line help, storage; and
 * what needs nothing of Open MPI: the defaults into storage, the range of a
 * value and the line that names it, the help with its range, the closest
 * name to a misspelt one. plugin/common/gpuwire_params.h adds Open MPI's
 * registration, the range check at component open and the warning for
 * unknown names, from the same table.
 * The rows come from GW_PINT, GW_PSIZE, GW_PBOOL, GW_PENUM, GW_PVERBOSE.
 */
#ifndef GPUWIRE_PARAM_TABLE_H
#define GPUWIRE_PARAM_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Upper bound of message-size thresholds: 1 TiB, above any message an int
 * count of the largest predefined datatypes can describe. */
#define GW_PARAM_MAX_MESSAGE ((int64_t)1 << 40)

typedef enum { GW_PARAM_INT, GW_PARAM_SIZE, GW_PARAM_BOOL, GW_PARAM_ENUM } gw_param_type_t;

/* One name of an enumeration (GW_PARAM_ENUM), a list ended by {0, NULL}. */
typedef struct {
    int value;
    const char *name;
} gw_param_enum_value_t;

typedef struct {
    const char *name;     /* after the component's prefix: "ipc_threshold" */
    gw_param_type_t type; /* storage: int (INT, ENUM), size_t (SIZE), bool (BOOL) */
    int64_t def;          /* default, written into storage before registration */
    int64_t min, max;     /* allowed, both included; checked for INT and SIZE */
    int level;            /* ompi_info level, 1 (end user) to 9 (developer) */
    bool local;           /* MCA scope local (may differ per process), else read-only */
    const char *help;     /* one line; the details are in docs/ */
    const char *hint;     /* appended to an out-of-range line, or NULL */
    const gw_param_enum_value_t *names; /* GW_PARAM_ENUM only */
    void *storage;
} gw_param_t;

#define GW_PARAM_COUNT(table) (sizeof(table) / sizeof((table)[0]))

/* Rows of a component's table: parameter n is stored in the field n of
 * GW_PARAMS_STORE, which the component defines (its parameters' struct)
 * before the table. Every row is read-only across processes but verbose's,
 * which is the same in every component but for its help. */
#define GW_PARAM_ROW(n, type, def, min, max, lvl, help, hint, names)                               \
    {#n, type, (int64_t)(def), min, max, lvl, false, help, hint, names, &GW_PARAMS_STORE.n}
#define GW_PINT(n, def, min, max, lvl, help, hint)                                                 \
    GW_PARAM_ROW(n, GW_PARAM_INT, def, min, max, lvl, help, hint, NULL)
#define GW_PSIZE(n, def, min, max, lvl, help, hint)                                                \
    GW_PARAM_ROW(n, GW_PARAM_SIZE, def, min, max, lvl, help, hint, NULL)
#define GW_PBOOL(n, def, lvl, help) GW_PARAM_ROW(n, GW_PARAM_BOOL, def, 0, 1, lvl, help, NULL, NULL)
#define GW_PENUM(n, def, lvl, help, names)                                                         \
    GW_PARAM_ROW(n, GW_PARAM_ENUM, def, 0, 0, lvl, help, NULL, names)
#define GW_PVERBOSE(help)                                                                          \
    {"verbose", GW_PARAM_INT, 0, 0, 100, 5, true, help, NULL, NULL, &GW_PARAMS_STORE.verbose}

/* Writes every parameter's default into its storage. */
static inline void gw_params_set_defaults(const gw_param_t *table, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        const gw_param_t *p = &table[i];
        switch (p->type) {
        case GW_PARAM_INT:
        case GW_PARAM_ENUM: *(int *)p->storage = (int)p->def; break;
        case GW_PARAM_SIZE: *(size_t *)p->storage = (size_t)p->def; break;
        case GW_PARAM_BOOL: *(bool *)p->storage = 0 != p->def; break;
        }
    }
}

/* "2^40" for powers of two from 2^20 up, else the decimal number. */
static inline void gw_param_bound(int64_t v, char *buf, size_t len)
{
    if (v >= ((int64_t)1 << 20) && 0 == (v & (v - 1))) {
        int e = 0;
        while (((int64_t)1 << e) != v) ++e;
        snprintf(buf, len, "2^%d", e);
    } else {
        snprintf(buf, len, "%lld", (long long)v);
    }
}

/* The help line Open MPI shows: the table's help, then for INT and SIZE
 * parameters the allowed range ("; allowed 0 to 2^40"). */
static inline void gw_param_full_help(const gw_param_t *p, char *buf, size_t len)
{
    if (GW_PARAM_INT == p->type || GW_PARAM_SIZE == p->type) {
        char lo[32], hi[32];
        gw_param_bound(p->min, lo, sizeof(lo));
        gw_param_bound(p->max, hi, sizeof(hi));
        snprintf(buf, len, "%s; allowed %s to %s", p->help, lo, hi);
    } else {
        snprintf(buf, len, "%s", p->help);
    }
}

/* Returns 1 when the value lies in its range (always for BOOL and ENUM).
 * Otherwise returns 0 and, when buf is not NULL, writes one NUL-terminated
 * line that names the parameter (prefix + name), its value, the range and the
 * fix (truncated to len bytes). */
static inline int gw_param_describe(const char *prefix, const gw_param_t *p, char *buf,
                                    size_t len)
{
    int in_range;
    char value[128];
    if (GW_PARAM_INT == p->type) {
        int v = *(const int *)p->storage;
        in_range = (int64_t)v >= p->min && (int64_t)v <= p->max;
        snprintf(value, sizeof(value), "%d", v);
    } else if (GW_PARAM_SIZE == p->type) {
        size_t v = *(const size_t *)p->storage;
        in_range = (uint64_t)v <= (uint64_t)INT64_MAX && (int64_t)v >= p->min &&
                   (int64_t)v <= p->max;
        if ((uint64_t)v > (uint64_t)INT64_MAX) {
            /* What a negative number given on the command line turns into. */
            snprintf(value, sizeof(value), "%zu (%lld read as signed: negative values are "
                     "not allowed)", v, (long long)(int64_t)(uint64_t)v);
        } else {
            snprintf(value, sizeof(value), "%zu", v);
        }
    } else {
        return 1;
    }
    if (!in_range && buf && len) {
        snprintf(buf, len, "%s%s = %s is out of range: allowed %lld to %lld; set it within the "
                 "range or leave it unset for the default%s%s",
                 prefix, p->name, value, (long long)p->min, (long long)p->max,
                 p->hint ? "; " : "", p->hint ? p->hint : "");
    }
    return in_range;
}

/* Edit distance (insertions, deletions, substitutions) of two names, capped
 * at 63 characters each (longer tails count as differences). */
static inline size_t gw_param_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), extra = 0;
    if (la > 63) extra += la - 63, la = 63;
    if (lb > 63) extra += lb - 63, lb = 63;
    size_t row[64];
    for (size_t j = 0; j <= lb; ++j) row[j] = j;
    for (size_t i = 1; i <= la; ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; ++j) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] + extra;
}

/* The table entry whose name is closest to name (both without the prefix). */
static inline const gw_param_t *gw_param_closest(const gw_param_t *table, size_t n,
                                                 const char *name)
{
    const gw_param_t *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; ++i) {
        size_t d = gw_param_distance(name, table[i].name);
        if (d < best_d) best_d = d, best = &table[i];
    }
    return best;
}

/* Whether name (without the prefix) is in the table. */
static inline bool gw_param_known(const gw_param_t *table, size_t n, const char *name)
{
    for (size_t i = 0; i < n; ++i) {
        if (0 == strcmp(table[i].name, name)) return true;
    }
    return false;
}

#endif
