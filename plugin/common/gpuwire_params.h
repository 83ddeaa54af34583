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
 * The table's type and its helpers without Open MPI: gpuwire/param_table.h.
 */
#ifndef GPUWIRE_PARAMS_H
#define GPUWIRE_PARAMS_H

#include <stdlib.h>

#include "gpuwire/param_table.h"
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
