/*
 * Where a component's help file lies: beside the component's shared object,
 * wherever that was installed (~/.openmpi/components, Open MPI's own folder,
 * a build tree). No Open MPI needed here.
 */
#ifndef GPUWIRE_HELP_DIR_H
#define GPUWIRE_HELP_DIR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes into dir the folder of the shared object that holds symbol; returns
 * 0 when file is readable there, -1 otherwise (or when dir is too small). */
int gw_help_dir_of(const void *symbol, const char *file, char *dir, size_t dir_len);

#ifdef __cplusplus
}
#endif

#endif
