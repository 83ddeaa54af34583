/*
 * Open MPI loads any component whose MCA base version matches, whatever
 * release it was built for, and a component built for another release
 * crashes inside MPI. Every gpuwire component therefore compares the running
 * release with the one it was built for first, before touching any Open MPI
 * structure, and refuses to load on a mismatch (plugin/common/
 * gpuwire_preflight.h); gpuwire-info gives the same verdict. Plain text
 * handling, no Open MPI needed: it lives in the core (ucx_glue/common), and
 * the components compile in only the numbers they were built for.
 */
#ifndef GPUWIRE_OMPI_VERSION_H
#define GPUWIRE_OMPI_VERSION_H

#include <stddef.h>

#include "gpuwire/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses "Open MPI v4.1.4, ..." (MPI_Get_library_version) into numbers.
 * Returns 0 on success; on failure -1, the outputs untouched. */
GW_CORE_API int gw_parse_ompi_version(const char *text, int *major, int *minor, int *release);

/* Returns 0 when the running Open MPI has the major.minor the component was
 * built for; otherwise writes a one-line explanation into why and returns -1.
 * built_* are the compile-time numbers, running is the library's string. */
GW_CORE_API int gw_version_compare(int built_major, int built_minor, int built_release,
                                   const char *running, const char *component, char *why,
                                   size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
