/*
 * The functions Open MPI calls: one per provided collective, blocking and
 * non-blocking. Each packs its arguments and hands them to the dispatch.
 */
#ifndef COLL_GPUWIRE_ENTRY_H
#define COLL_GPUWIRE_ENTRY_H

#include "coll_gpuwire.h"

/* Puts every entry point into the module's function table. */
void gw_coll_entry_install(mca_coll_base_module_t *module);

#endif
