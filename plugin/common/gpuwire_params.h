/*
 * Range checks of a component's MCA parameters, done at component open.
 *
 * Open MPI reads an integer parameter with strtoull and stores what it got:
 * "-1" given to a size_t parameter becomes 18446744073709551615, and an int
 * parameter takes any int. A component lists its numeric parameters with
 * their allowed range in a table; gw_params_check() prints one line for each
 * value outside its range and returns how many there were. The component
 * then declines (its open returns an error), so Open MPI goes on without it
 * instead of running with a value that misbehaves.
 *
 * Boolean parameters are not listed: Open MPI itself accepts only numbers and
 * true/false/yes/no words for them, and stores 0 or 1.
 *
 * Header only; gw_param_describe() needs nothing of Open MPI.
 */
#ifndef GPUWIRE_PARAMS_H
#define GPUWIRE_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Upper bound of message-size thresholds: 1 TiB, above any message an int
 * count of the largest predefined datatypes can describe. */
#define GW_PARAM_MAX_MESSAGE ((int64_t)1 << 40)

typedef enum { GW_PARAM_INT, GW_PARAM_SIZE } gw_param_type_t;

typedef struct {
    const char *name;     /* full MCA name: "pml_gpuwire_ipc_threshold" */
    gw_param_type_t type; /* what value points to: int or size_t */
    const void *value;
    int64_t min, max;     /* allowed, both included; for GW_PARAM_SIZE 0 <= min <= max */
    const char *hint;     /* appended to the error line, or NULL */
} gw_param_range_t;

/* Returns 1 when the value lies in its range. Otherwise returns 0 and, when
 * buf is not NULL, writes one NUL-terminated line that names the parameter,
 * its value, the range and the fix (truncated to len bytes). */
static inline int gw_param_describe(const gw_param_range_t *p, char *buf, size_t len)
{
    int in_range;
    char value[128];
    if (p->type == GW_PARAM_INT) {
        int v = *(const int *)p->value;
        in_range = (int64_t)v >= p->min && (int64_t)v <= p->max;
        snprintf(value, sizeof(value), "%d", v);
    } else {
        size_t v = *(const size_t *)p->value;
        in_range = (uint64_t)v <= (uint64_t)INT64_MAX && (int64_t)v >= p->min &&
                   (int64_t)v <= p->max;
        if ((uint64_t)v > (uint64_t)INT64_MAX) {
            /* What a negative number given on the command line turns into. */
            snprintf(value, sizeof(value), "%zu (%lld read as signed: negative values are "
                     "not allowed)", v, (long long)(int64_t)(uint64_t)v);
        } else {
            snprintf(value, sizeof(value), "%zu", v);
        }
    }
    if (!in_range && buf && len) {
        snprintf(buf, len, "%s = %s is out of range: allowed %lld to %lld; set it within the "
                 "range or leave it unset for the default%s%s",
                 p->name, value, (long long)p->min, (long long)p->max, p->hint ? "; " : "",
                 p->hint ? p->hint : "");
    }
    return in_range;
}

#ifndef GW_PARAMS_NO_OPAL
#include "gpuwire_help.h"

/* Prints "<prefix>: declined: <line>" (help topic bad-parameter) naming every
 * parameter out of range, in one message (Open MPI 5.0 shows a help topic
 * once per process); returns how many there were (0: all fine). prefix is
 * "pml:gpuwire" or "coll:gpuwire". */
static inline int gw_params_check(const char *prefix, const gw_param_range_t *table, size_t n)
{
    int bad = 0;
    char all[1536] = "";
    size_t used = 0;
    for (size_t i = 0; i < n; ++i) {
        char line[384];
        if (!gw_param_describe(&table[i], line, sizeof(line))) {
            int w = snprintf(all + used, sizeof(all) - used, "%s%s", bad ? " | " : "", line);
            if (w > 0) used = used + (size_t)w < sizeof(all) ? used + (size_t)w : sizeof(all) - 1;
            ++bad;
        }
    }
    if (bad) gw_help(GW_HELP_BAD_PARAMETER, prefix, all);
    return bad;
}
#endif

#endif
