/* The running Open MPI against the one built for (gpuwire/ompi_version.h). */
#include "gpuwire/ompi_version.h"

#include <stdio.h>
#include <string.h>

/* Reads a decimal number of at most 9 digits at *p (no sign, no space: sscanf's
 * %d accepts both, and an out-of-range %d is undefined behaviour). */
static int parse_number(const char **p, int *value)
{
    const char *s = *p;
    int v = 0, digits = 0;
    while (*s >= '0' && *s <= '9') {
        if (++digits > 9) return -1;
        v = v * 10 + (*s - '0');
        ++s;
    }
    if (digits == 0) return -1;
    *value = v;
    *p = s;
    return 0;
}

int gw_parse_ompi_version(const char *text, int *major, int *minor, int *release)
{
    const char *v = text ? strstr(text, "Open MPI v") : NULL;
    if (!v) return -1;
    const char *p = v + strlen("Open MPI v");
    int a = 0, b = 0, c = 0;
    if (parse_number(&p, &a) != 0 || *p++ != '.' || parse_number(&p, &b) != 0) return -1;
    if (*p == '.') {
        ++p;
        if (parse_number(&p, &c) != 0) c = 0;
    }
    *major = a;
    *minor = b;
    *release = c;
    return 0;
}

int gw_version_compare(int built_major, int built_minor, int built_release, const char *running,
                       const char *component, char *why, size_t why_len)
{
    int major, minor, release;
    if (gw_parse_ompi_version(running, &major, &minor, &release) != 0) {
        snprintf(why, why_len,
                 "gpuwire %s: cannot tell which Open MPI is running (\"%.60s\"); "
                 "refusing to load a component built for %d.%d.%d",
                 component, running ? running : "", built_major, built_minor, built_release);
        return -1;
    }
    if (major != built_major || minor != built_minor) {
        snprintf(why, why_len,
                 "gpuwire %s was built for Open MPI %d.%d.%d but Open MPI %d.%d.%d is running; "
                 "rebuild gpuwire against this Open MPI's headers",
                 component, built_major, built_minor, built_release, major, minor, release);
        return -1;
    }
    return 0;
}
