/*
 * A component's MCA parameters as one table of descriptors (gw_param_t):
 * name, type, default, range, ompi_info level, one-line help, storage. Every
 * use of a parameter comes from that table, so none can disagree:
 *   gw_params_register()      the defaults into storage, then Open MPI's
 *                             registration (what ompi_info --level 9 shows:
 *                             the help with the range appended)
 *   gw_params_check()         the range check at component open
 *   gw_params_warn_unknown()  OMPI_MCA_<type>_<component>_* variables that
 *                             name no parameter, with the closest name
 *   gw_params_component_open()  both at component open, then the output
 *                             stream (gw_params_component_close() at close)
 * The rows come from GW_PINT, GW_PSIZE, GW_PBOOL, GW_PENUM, GW_PVERBOSE.
 * docs/parameters.md is generated from ompi_info's output (ctest
 * docs_parameters, tests/tools/check_params_doc.py), hence from the table.
 *
 * Why the range check: Open MPI reads an integer parameter with strtoull and
 * stores what it got: "-1" given to a size_t parameter becomes
 * 18446744073709551615, and an int parameter takes any int. A value outside
 * its range gives one line and the component declines (its open returns an
 * error), so Open MPI goes on without it instead of running with a value
 * that misbehaves. Booleans and enumerations are left to Open MPI, which
 * accepts only numbers and true/false/yes/no words for the first and the
 * listed names for the second.
 *
 * The part above GW_PARAMS_NO_OPAL needs nothing of Open MPI.
 */
#ifndef GPUWIRE_PARAMS_H
#define GPUWIRE_PARAMS_H

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

#ifndef GW_PARAMS_NO_OPAL
#include <stdlib.h>

#include "gpuwire_help.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/util/output.h"

/* Writes the defaults, then registers every parameter of the table with
 * Open MPI under the component's prefix (<type>_<component>_). */
static inline void gw_params_register(const mca_base_component_t *c, const gw_param_t *table,
                                      size_t n)
{
    gw_params_set_defaults(table, n);
    for (size_t i = 0; i < n; ++i) {
        const gw_param_t *p = &table[i];
        mca_base_var_type_t type = GW_PARAM_SIZE == p->type   ? MCA_BASE_VAR_TYPE_SIZE_T
                                   : GW_PARAM_BOOL == p->type ? MCA_BASE_VAR_TYPE_BOOL
                                                              : MCA_BASE_VAR_TYPE_INT;
        mca_base_var_enum_t *names = NULL;
        if (GW_PARAM_ENUM == p->type) {
            /* Open MPI's value list: the same layout, its own type. */
            mca_base_var_enum_value_t values[8]; /* copied by Open MPI */
            size_t k = 0;
            for (; p->names[k].name && k + 1 < sizeof(values) / sizeof(values[0]); ++k) {
                values[k].value = p->names[k].value;
                values[k].string = p->names[k].name;
            }
            values[k].value = 0;
            values[k].string = NULL;
            char enum_name[128];
            snprintf(enum_name, sizeof(enum_name), "%s_%s_%s", c->mca_type_name,
                     c->mca_component_name, p->name);
            if (OPAL_SUCCESS != mca_base_var_enum_create(enum_name, values, &names)) {
                names = NULL; /* registered as a plain int: numbers only */
            }
        }
        char help[1024];
        gw_param_full_help(p, help, sizeof(help));
        /* Open MPI copies the name and the help. */
        (void)mca_base_component_var_register(
            c, p->name, help, type, names, 0, 0,
            (mca_base_var_info_lvl_t)(OPAL_INFO_LVL_1 + (p->level - 1)),
            p->local ? MCA_BASE_VAR_SCOPE_LOCAL : MCA_BASE_VAR_SCOPE_READONLY, p->storage);
        if (names) OBJ_RELEASE(names);
    }
}

/* Prints "<type>:<component>: declined: <line>" (help topic bad-parameter)
 * naming every parameter out of range, in one message (Open MPI 5.0 shows a
 * help topic once per process); returns how many there were (0: all fine). */
static inline int gw_params_check(const mca_base_component_t *c, const gw_param_t *table,
                                  size_t n)
{
    int bad = 0;
    char all[1536] = "", prefix[128], who[128];
    size_t used = 0;
    snprintf(prefix, sizeof(prefix), "%s_%s_", c->mca_type_name, c->mca_component_name);
    snprintf(who, sizeof(who), "%s:%s", c->mca_type_name, c->mca_component_name);
    for (size_t i = 0; i < n; ++i) {
        char line[384];
        if (!gw_param_describe(prefix, &table[i], line, sizeof(line))) {
            int w = snprintf(all + used, sizeof(all) - used, "%s%s", bad ? " | " : "", line);
            if (w > 0) used = used + (size_t)w < sizeof(all) ? used + (size_t)w : sizeof(all) - 1;
            ++bad;
        }
    }
    if (bad) gw_help(GW_HELP_BAD_PARAMETER, who, all);
    return bad;
}

extern char **environ;

/* Rank 0 of the job (or a process started without mpirun) warns once, one
 * line each, about every OMPI_MCA_<type>_<component>_* variable of its
 * environment that names no parameter of the table, with the closest name:
 * Open MPI ignores such a variable silently. mpirun passes its --mca
 * settings to the processes as these variables, so both forms are covered.
 * Returns how many there were. */
static inline int gw_params_warn_unknown(const mca_base_component_t *c, const gw_param_t *table,
                                         size_t n)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMIX_RANK");
    if (rank && 0 != strcmp(rank, "0")) return 0;
    char env_prefix[160], prefix[128];
    snprintf(prefix, sizeof(prefix), "%s_%s_", c->mca_type_name, c->mca_component_name);
    snprintf(env_prefix, sizeof(env_prefix), "OMPI_MCA_%s", prefix);
    const size_t skip = strlen(env_prefix);
    int unknown = 0;
    for (char **e = environ; e && *e; ++e) {
        if (0 != strncmp(*e, env_prefix, skip)) continue;
        const char *eq = strchr(*e + skip, '=');
        char name[128];
        size_t len = eq ? (size_t)(eq - (*e + skip)) : strlen(*e + skip);
        if (len >= sizeof(name)) len = sizeof(name) - 1;
        memcpy(name, *e + skip, len);
        name[len] = '\0';
        if (gw_param_known(table, n, name)) continue;
        const gw_param_t *near = gw_param_closest(table, n, name);
        opal_output(0, "%s:%s: warning: %s%s is not a parameter of %s %s and is ignored; did you "
                    "mean %s%s? (ompi_info --param %s %s --level 9 lists them)",
                    c->mca_type_name, c->mca_component_name, prefix, name, c->mca_type_name,
                    c->mca_component_name, prefix, near ? near->name : "?", c->mca_type_name,
                    c->mca_component_name);
        ++unknown;
    }
    return unknown;
}

/* A component's open: the unknown variables warned about, the ranges
 * checked (-1: one is out of range, the component must decline), then its
 * output stream opened into *output at verbosity verbose. */
static inline int gw_params_component_open(const mca_base_component_t *c, const gw_param_t *table,
                                           size_t n, int verbose, int *output)
{
    (void)gw_params_warn_unknown(c, table, n);
    if (gw_params_check(c, table, n) != 0) {
        return -1;
    }
    *output = opal_output_open(NULL);
    opal_output_set_verbosity(*output, verbose);
    return 0;
}

/* A component's close: the stream gw_params_component_open opened. */
static inline void gw_params_component_close(int *output)
{
    if (*output >= 0) {
        opal_output_close(*output);
        *output = -1;
    }
}

/* A performance variable the component keeps in an unsigned long long of
 * its own: a counter (MCA_BASE_PVAR_CLASS_COUNTER), a level or a size. */
typedef struct {
    const char *name;
    const char *help;
    unsigned long long *value;
    int var_class;
} gw_pvar_t;

/* Registers every variable of the table as continuous and read-only, under
 * the component's prefix (<type>_<component>_<name>). */
static inline void gw_pvars_register(const mca_base_component_t *c, const gw_pvar_t *table,
                                     size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        (void)mca_base_component_pvar_register(
            c, table[i].name, table[i].help, OPAL_INFO_LVL_4, table[i].var_class,
            MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
            MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, NULL, NULL, NULL,
            table[i].value);
    }
}
#endif

#endif
