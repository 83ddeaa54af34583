/*
 * The collective engine's transport over the selected pml (gpuwire/
 * coll_engine.h): messages of bytes (MPI_BYTE) on a communicator, MPI
 * requests behind the engine's opaque ones, opal_progress for progress.
 */
#ifndef COLL_GPUWIRE_TRANSPORT_H
#define COLL_GPUWIRE_TRANSPORT_H

#include "gpuwire/coll_engine.h"

#include <stdbool.h>
#include <stddef.h>

struct ompi_communicator_t;
struct ompi_datatype_t;

/* Fills t for comm (rank, size, the functions). Holds no reference: comm
 * must outlive every use of t. */
void gw_coll_transport_init(gw_ce_transport_t *t, struct ompi_communicator_t *comm);

/* A transport whose messages are in a call's datatypes, as Open MPI's own
 * algorithms post them (the data movement, coll_gpuwire_devmove.c): a block
 * of bytes is bytes / type size elements at the pointer, of sdt for sends
 * and rdt for receives, so non-contiguous datatypes go on the wire whole. A
 * receive that completes with fewer bytes than posted fails; the first
 * such is recorded in short_* (the ranks ran different algorithms). */
typedef struct {
    struct ompi_communicator_t *comm;
    struct ompi_datatype_t *sdt, *rdt;
    size_t ssize, rsize;
    bool shorted;
    int short_src;
    size_t short_got, short_want;
} gw_coll_typed_tp_t;
/* Fills t over ctx (which must outlive every use of t) for comm. */
void gw_coll_transport_init_typed(gw_ce_transport_t *t, gw_coll_typed_tp_t *ctx,
                                  struct ompi_communicator_t *comm, struct ompi_datatype_t *sdt,
                                  struct ompi_datatype_t *rdt);

/* The engine's test of a request (gw_ce_transport_t.test) over an MPI
 * request, without progress: *done once it has completed, and then it is
 * freed, *req set to NULL and its status returned. ctx is unused. */
int gw_coll_request_test(void *ctx, void **req, bool *done);

/* The engine's codes as Open MPI's. */
int gw_coll_ce_to_ompi(int ce_rc);

#endif
