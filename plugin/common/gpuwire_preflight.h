/*
 * What every gpuwire component's register function does first, before it
 * touches any Open MPI structure: refuse a running Open MPI of another
 * major.minor (the core's gpuwire/ompi_version.h) and pin the library in memory
 * (gpuwire_pin.h). Inline, so each component compiles it with the release
 * numbers it was built for (the refusal test builds a copy claiming another).
 */
#ifndef GPUWIRE_PREFLIGHT_H
#define GPUWIRE_PREFLIGHT_H

#include <stdio.h>

#include "gpuwire_compat.h"
#include "gpuwire_help.h"
#include "gpuwire_pin.h"
#include "gpuwire/ompi_version.h"
#include "opal/util/output.h"

/* Returns 0 to go on; otherwise it has printed one line and the component
 * must not load. */
static inline int gw_component_preflight(const char *framework, const void *component_symbol)
{
    char running[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    char why[320];
    PMPI_Get_library_version(running, &len);
    if (gw_version_compare(GW_BUILT_OMPI_MAJOR, GW_BUILT_OMPI_MINOR, GW_BUILT_OMPI_RELEASE,
                           running, framework, why, sizeof(why)) != 0) {
        /* Straight to stderr: nothing of the running Open MPI (another
         * release: another ABI) is called to say so. Its help machinery, in
         * 5.0 an asynchronous message to the launcher, can also lose the line
         * when MPI_Init fails at once. */
        fprintf(stderr, "%s\n", why);
        fflush(stderr);
        return -1;
    }
    if (gw_pin_self(component_symbol, why, sizeof(why)) != 0) {
        opal_output(0, "%s:gpuwire: %s", framework, why);
        return -1;
    }
    return 0;
}

#endif
