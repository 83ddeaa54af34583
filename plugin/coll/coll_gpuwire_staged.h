/*
 * A request of ours as Open MPI sees it: libmpi's request object, then our
 * state (the call, the previous module's), then the collective engine's
 * scheduler request (gpuwire/coll_sched.h), which stages the call and orders
 * its start. Shared by the non-blocking forms (coll_gpuwire_requests.c), the
 * persistent ones (coll_gpuwire_persistent.c) and the staged algorithm
 * (coll_gpuwire_staged.c).
 */
#ifndef COLL_GPUWIRE_STAGED_H
#define COLL_GPUWIRE_STAGED_H

#include <stdbool.h>

#include "coll_gpuwire_dispatch.h"
#include "gpuwire/coll_sched.h"

/* Open MPI's MPI_I* bindings treat the request a collective returns as an
 * ompi_coll_base_nbc_request_t: they store retained ops and datatypes in the
 * fields after ompi_request_t and chain a completion callback that releases
 * them. Its layout differs between 4.1 and 5.0, and its header includes
 * Fortran headers that distributions' devel packages lack, so the request is
 * built on libmpi's own class (exported in both) and sized at run time: the
 * object is libmpi's request, followed by our state at state_offset. */
OMPI_DECLSPEC extern opal_class_t ompi_coll_base_nbc_request_t_class;

typedef struct {
    ompi_request_t super; /* the start of libmpi's request; its size is the class's */
} gw_nbc_request_t;

OBJ_CLASS_DECLARATION(gw_nbc_request_t);

typedef struct gw_coll_request {
    ompi_request_t *mpi;               /* the object this state belongs to */
    mca_coll_gpuwire_module_t *module; /* alive: the communicator is retained */
    gw_coll_args_t args;               /* as the application passed them */
    void *send_copy;                   /* in-place alltoallv/w: see request_start */
    void *kept;                        /* args' count, displacement and type arrays */
    int kept_types;                    /* entries of args' type arrays held (alltoallw) */
    ompi_request_t *inner;             /* persistent: the last start's request */
    gw_coll_start_fn start_call;       /* persistent: what each start runs */
    gw_ce_req_t *ce;                   /* the scheduler's, in the same object */
} gw_coll_request_t;

/* The state of a request of ours (after libmpi's request in the object). */
gw_coll_request_t *gw_coll_request_of(ompi_request_t *r);
/* The component's scheduler of non-blocking calls. */
gw_ce_sched_t *gw_coll_sched(void);
/* An object for a request of ours, as new (NULL: out of memory), from the
 * component's free list; put gives it back (its request finished with
 * OMPI_REQUEST_FINI, nothing reads it any more). */
ompi_request_t *gw_coll_request_get(void);
void gw_coll_request_put(ompi_request_t *r);
/* Makes r a request of ours for a call on m; it retains the communicator. */
gw_coll_request_t *gw_coll_request_init(ompi_request_t *r, mca_coll_gpuwire_module_t *m,
                                        const gw_coll_args_t *a);
/* gw_coll_request_init on a new object (NULL: out of memory). */
gw_coll_request_t *gw_coll_request_new(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a);
/* Hands req to the scheduler as job (gw_coll_nb_job on a request of ours). */
void gw_coll_request_job(gw_coll_request_t *req, const gw_coll_job_ops_t *ops, void *job,
                         gw_coll_region_t r[GW_REGION_COUNT], bool ordered);
/* The staged algorithm's non-blocking forms: a request of ours. */
int gw_coll_staged_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request);
/* Counts a staged blocking call (MPI_T counters). */
void gw_coll_stage_count(const gw_ce_staging_t *st);

#endif
