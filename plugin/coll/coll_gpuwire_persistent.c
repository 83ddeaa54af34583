/*
 * Persistent collectives (MPI_<op>_init on device buffers): requests of ours
 * whose every start runs the non-blocking form. Separate from the requests
 * of the non-blocking forms (coll_gpuwire_requests.c): their own life cycle
 * (inactive, started, freed while active), kept by the engine's scheduler
 * request (gw_ce_req_set_active, gw_ce_req_finish, gw_ce_req_free).
 *
 * The request keeps the call's arguments. Each MPI_Start runs the
 * non-blocking form through the dispatch it was given (gw_coll_dispatch or
 * gw_coll_dispatch_staged; on device buffers every algorithm
 * answers with a request of ours), and that inner request's completion
 * callback completes the persistent one. A start's inner request is freed
 * by the next start or with the persistent request. Persistent requests
 * come from the component's objects (gw_coll_request_get); those that are
 * freed are kept for the next persistent request (the scheduler's spares),
 * not given back to the non-blocking calls: Open MPI's MPI_<op>_init
 * bindings wrap req_free and read the request after it returned (to release
 * the datatypes and op they retained).
 */
#include "coll_gpuwire_staged.h"

/* Frees the inner request of the last start (ours: given back now, or by
 * the progress function once it has completed). */
static void persistent_drop_inner(gw_coll_request_t *req)
{
    if (NULL != req->inner) ompi_request_free(&req->inner);
}

/* Gives back what an inactive (or freed and now complete) persistent request
 * holds and keeps the object for reuse. */
static void persistent_release(gw_coll_request_t *req)
{
    ompi_request_t *r = req->mpi;
    struct ompi_communicator_t *comm = req->args.comm;
    persistent_drop_inner(req);
    OMPI_REQUEST_FINI(r);
    OBJ_RELEASE(comm);
    gw_ce_sched_spare_put(gw_coll_sched(), req->ce);
}

/* The inner request's completion callback (in the thread that completes it,
 * outside the scheduler's lock). */
static int persistent_inner_done(ompi_request_t *inner)
{
    gw_coll_request_t *req = inner->req_complete_cb_data;
    req->mpi->req_status.MPI_ERROR = inner->req_status.MPI_ERROR;
    if (gw_ce_req_finish(req->ce)) {
        persistent_release(req);
    } else {
        ompi_request_complete(req->mpi, true);
    }
    return 0;
}

static int persistent_start(size_t count, ompi_request_t **reqs)
{
    for (size_t i = 0; i < count; ++i) {
        ompi_request_t *r = reqs[i];
        gw_coll_request_t *req = gw_coll_request_of(r);
        persistent_drop_inner(req);
        r->req_status = ompi_status_empty;
        r->req_state = OMPI_REQUEST_ACTIVE;
        r->req_complete = REQUEST_PENDING;
        gw_ce_req_set_active(req->ce, true);
        const int rc = req->start_call(req->module, &req->args, &req->inner);
        if (OMPI_SUCCESS != rc) {
            /* Nothing started: inactive again, and the start fails. */
            req->inner = NULL;
            gw_ce_req_set_active(req->ce, false);
            r->req_state = OMPI_REQUEST_INACTIVE;
            r->req_complete = REQUEST_COMPLETED;
            return rc;
        }
        ompi_request_set_callback(req->inner, persistent_inner_done, req);
    }
    return OMPI_SUCCESS;
}

static int persistent_free(ompi_request_t **rptr)
{
    gw_coll_request_t *req = gw_coll_request_of(*rptr);
    /* Active: released by the completion callback. */
    if (gw_ce_req_free(req->ce)) persistent_release(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

int gw_coll_persistent_new(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                           gw_coll_start_fn start_call, ompi_request_t **request)
{
    gw_ce_req_t *spare = gw_ce_sched_spare_take(gw_coll_sched());
    ompi_request_t *r;
    if (NULL != spare) {
        /* As new: libmpi's constructors clear what the bindings set. */
        r = ((gw_coll_request_t *)gw_ce_req_owner(spare))->mpi;
        opal_obj_run_destructors((opal_object_t *)r);
        opal_obj_run_constructors((opal_object_t *)r);
    } else if (NULL == (r = gw_coll_request_get())) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    gw_coll_request_t *req = gw_coll_request_init(r, m, a);
    OMPI_REQUEST_INIT(r, true); /* inactive, complete */
    r->req_start = persistent_start;
    r->req_free = persistent_free;
    req->start_call = start_call;
    gw_ce_req_set_active(req->ce, false); /* inactive: MPI_Request_free releases it */
    *request = r;
    return OMPI_SUCCESS;
}
