/*
 * Open MPI loads any component whose MCA base version matches, whatever
 * release it was built for, and a component built for another release
 * crashes inside MPI. Both gpuwire components call gw_version_check() first,
 * before touching any Open MPI structure, and refuse to load on a mismatch.
 */
#ifndef GPUWIRE_VERSION_H
#define GPUWIRE_VERSION_H

#include <stddef.h>

/* Parses "Open MPI v4.1.4, ..." (MPI_Get_library_version) into numbers.
 * Returns 0 on success. */
int gw_parse_ompi_version(const char *text, int *major, int *minor, int *release);

/* Returns 0 when the running Open MPI has the major.minor the component was
 * built for; otherwise writes a one-line explanation into why and returns -1.
 * built_* are the compile-time numbers, running is the library's string. */
int gw_version_compare(int built_major, int built_minor, int built_release, const char *running,
                       const char *component, char *why, size_t why_len);

#endif
