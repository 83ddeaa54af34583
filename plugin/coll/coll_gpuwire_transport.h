/*
 * The collective engine's transport over the selected pml (gpuwire/
 * coll_engine.h): messages of bytes (MPI_BYTE) on a communicator, MPI
 * requests behind the engine's opaque ones, opal_progress for progress.
 */
#ifndef COLL_GPUWIRE_TRANSPORT_H
#define COLL_GPUWIRE_TRANSPORT_H

#include "gpuwire/coll_engine.h"

struct ompi_communicator_t;

/* Fills t for comm (rank, size, the functions). Holds no reference: comm
 * must outlive every use of t. */
void gw_coll_transport_init(gw_ce_transport_t *t, struct ompi_communicator_t *comm);

/* The engine's codes as Open MPI's. */
int gw_coll_ce_to_ompi(int ce_rc);

#endif
