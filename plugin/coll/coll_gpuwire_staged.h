/*
 * What the staged algorithm (coll_gpuwire_staged.c), the requests of the
 * non-blocking forms (coll_gpuwire_requests.c) and the persistent forms
 * (coll_gpuwire_persistent.c) share: the staging of one call's regions in
 * host memory, and the state of a request of ours. Separate so that each of
 * the three files holds one way a call runs.
 */
#ifndef COLL_GPUWIRE_STAGED_H
#define COLL_GPUWIRE_STAGED_H

#include <stdbool.h>
#include <stdint.h>

#include "coll_gpuwire_dispatch.h"

typedef struct {
    gw_coll_region_t region;
    gw_coll_host_buf_t host; /* host.ptr NULL: not staged */
    uint64_t ticket;         /* the copy queued last for this region (in, then back) */
    bool queued;             /* that copy has not been seen finished yet */
} gw_stage_t;

typedef struct {
    gw_stage_t s[GW_REGION_COUNT];
} gw_staging_t;

/* Gives back the host memory of every staged region. */
void gw_coll_stage_release(gw_staging_t *st);
/* Polls the copies queued for st; *done when none is left. */
int gw_coll_stage_poll(gw_staging_t *st, bool query, bool *done, const char *what);
/* Whether a copy queued for st has not been seen finished yet. */
bool gw_coll_stage_queued(const gw_staging_t *st);
/* Takes host memory for every device region and queues the copies in;
 * returns before they have finished. */
int gw_coll_stage_in_start(gw_coll_region_t r[GW_REGION_COUNT], gw_staging_t *st);
/* The pointer the host module gets for region i. */
void *gw_coll_stage_host_view(const gw_staging_t *st, int i, const void *user);
/* Queues the copies back of the regions the call wrote. */
int gw_coll_stage_out_start(gw_staging_t *st);
/* Counts a staged call (MPI_T counters). */
void gw_coll_stage_count(const gw_staging_t *st);

typedef enum {
    GW_REQ_COPY_IN,
    GW_REQ_READY,
    GW_REQ_FAILED,
    GW_REQ_INNER,
    GW_REQ_COPY_OUT,
    GW_REQ_JOB, /* an algorithm's own steps (gw_coll_nb_job) */
} gw_req_state_t;

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
    ompi_request_t *mpi;                /* the object this state belongs to */
    struct gw_coll_request *next;       /* in the pending list, oldest first */
    struct gw_coll_request *next_start; /* in the module's FIFO of requests not started */
    mca_coll_gpuwire_module_t *module;  /* alive: the communicator is retained */
    gw_coll_args_t args;                /* as the application passed them */
    const void *sbuf;                   /* what the previous module gets: host copies, */
    void *rbuf;                         /* or the application's buffers */
    ompi_request_t *inner;              /* the previous module's request */
    gw_staging_t st;
    void *send_copy;                    /* in-place alltoallv/w: see request_start */
    const gw_coll_job_ops_t *job_ops; /* GW_REQ_JOB: the algorithm's steps */
    void *job;                        /* and its state, until job_release */
    gw_coll_region_t r[GW_REGION_COUNT]; /* GW_REQ_JOB: the call's, for staging it instead */
    bool in_fifo;                     /* GW_REQ_JOB: in the module's FIFO */
    bool staged_only;                 /* persistent: starts run gw_coll_dispatch_staged */
    gw_req_state_t state;
    int error; /* MPI error code */
    unsigned polls;
    bool done;  /* completed: MPI_Request_free releases it */
    bool freed; /* MPI_Request_free came first (erroneous for collectives, tolerated) */
} gw_coll_request_t;

/* The state of a request of ours (after libmpi's request in the object). */
gw_coll_request_t *gw_coll_request_of(ompi_request_t *r);
/* The lock of the pending requests (not taken again by the thread whose
 * progress function holds it). */
void gw_coll_requests_lock(void);
void gw_coll_requests_unlock(void);
/* Makes r a request of ours for a call on m; it retains the communicator. */
gw_coll_request_t *gw_coll_request_init(ompi_request_t *r, mca_coll_gpuwire_module_t *m,
                                        const gw_coll_args_t *a);
/* Persistent requests freed, kept for reuse until the component closes:
 * one back in, and one out (NULL: none). */
void gw_coll_request_spare_put(gw_coll_request_t *req);
gw_coll_request_t *gw_coll_request_spare_take(void);
/* The staged algorithm's non-blocking forms: a request of ours. */
int gw_coll_staged_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request);

#endif
