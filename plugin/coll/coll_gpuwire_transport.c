#include "coll_gpuwire_transport.h"

#include <limits.h>

#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/request/request.h"
#include "opal/runtime/opal_progress.h"

/* One message carries at most INT_MAX bytes (an MPI count of MPI_BYTE); the
 * engine cuts its messages into segments far below that. */
static int post(void *ctx, bool send, void *buf, size_t bytes, int peer, int tag, void **req)
{
    struct ompi_communicator_t *comm = ctx;
    if (bytes > (size_t)INT_MAX) return GW_CE_ERR_ARG;
    ompi_request_t *r = MPI_REQUEST_NULL;
    int rc = send ? MCA_PML_CALL(isend(buf, (int)bytes, MPI_BYTE, peer, tag,
                                       MCA_PML_BASE_SEND_STANDARD, comm, &r))
                  : MCA_PML_CALL(irecv(buf, (int)bytes, MPI_BYTE, peer, tag, comm, &r));
    if (OMPI_SUCCESS != rc) return rc;
    *req = r;
    return GW_CE_OK;
}

static int tp_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
{
    return post(ctx, true, (void *)buf, bytes, peer, tag, req);
}

static int tp_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
{
    return post(ctx, false, buf, bytes, peer, tag, req);
}

/* A load, not ompi_request_test: that one runs opal_progress when the
 * request is not complete, and the engine's jobs are polled from MPI's
 * progress (the engine's blocking forms call progress() themselves). */
static int tp_test(void *ctx, void **req, bool *done)
{
    (void)ctx;
    ompi_request_t *r = *req;
    *done = REQUEST_COMPLETE(r);
    if (!*done) return GW_CE_OK;
    const int rc = r->req_status.MPI_ERROR;
    ompi_request_free(&r);
    *req = NULL;
    return rc;
}

static int tp_wait_all(void *ctx, void **reqs, size_t n)
{
    int first = OMPI_SUCCESS;
    for (size_t i = 0; i < n; ++i) {
        if (NULL == reqs[i]) continue;
        ompi_request_t *r = reqs[i];
        int rc = ompi_request_wait(&r, MPI_STATUS_IGNORE);
        reqs[i] = NULL;
        if (OMPI_SUCCESS == first) first = rc;
    }
    return first;
}

/* A message that will not be waited for: the pml completes it in its own
 * time and then releases it. */
static void tp_cancel(void *ctx, void **req)
{
    ompi_request_t *r = *req;
    if (NULL != r && MPI_REQUEST_NULL != r) ompi_request_free(&r);
    *req = NULL;
}

static void tp_progress(void *ctx) { opal_progress(); }

void gw_coll_transport_init(gw_ce_transport_t *t, struct ompi_communicator_t *comm)
{
    t->ctx = comm;
    t->rank = ompi_comm_rank(comm);
    t->size = ompi_comm_size(comm);
    t->isend = tp_isend;
    t->irecv = tp_irecv;
    t->test = tp_test;
    t->wait_all = tp_wait_all;
    t->cancel = tp_cancel;
    t->progress = tp_progress;
}

int gw_coll_ce_to_ompi(int ce_rc)
{
    switch (ce_rc) {
    case GW_CE_OK: return OMPI_SUCCESS;
    case GW_CE_ERR_NOMEM: return OMPI_ERR_OUT_OF_RESOURCE;
    case GW_CE_ERR_ARG: return OMPI_ERR_BAD_PARAM;
    default: return ce_rc > 0 || ce_rc < -3 ? ce_rc : OMPI_ERROR;
    }
}
