#include "coll_gpuwire_transport.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
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
int gw_coll_request_test(void *ctx, void **req, bool *done)
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
    t->test = gw_coll_request_test;
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

/* The typed transport's request: the pml's, and the bytes a receive must
 * bring (SIZE_MAX: a send). */
typedef struct {
    ompi_request_t *r;
    size_t want;
} typed_req_t;

static int typed_post(gw_coll_typed_tp_t *c, bool send, void *buf, size_t bytes, int peer, int tag,
                      void **req)
{
    const size_t size = send ? c->ssize : c->rsize;
    struct ompi_datatype_t *dt = send ? c->sdt : c->rdt;
    if (0 == size || bytes % size || bytes / size > (size_t)INT_MAX) return GW_CE_ERR_ARG;
    typed_req_t *w = malloc(sizeof(*w));
    if (NULL == w) return GW_CE_ERR_NOMEM;
    w->r = MPI_REQUEST_NULL;
    w->want = send ? SIZE_MAX : bytes;
    const int count = (int)(bytes / size);
    int rc = send ? MCA_PML_CALL(isend(buf, count, dt, peer, tag, MCA_PML_BASE_SEND_STANDARD,
                                       c->comm, &w->r))
                  : MCA_PML_CALL(irecv(buf, count, dt, peer, tag, c->comm, &w->r));
    if (OMPI_SUCCESS != rc) {
        free(w);
        return rc;
    }
    *req = w;
    return GW_CE_OK;
}

static int typed_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
{
    return typed_post(ctx, true, (void *)buf, bytes, peer, tag, req);
}

static int typed_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
{
    return typed_post(ctx, false, buf, bytes, peer, tag, req);
}

/* A completed request's outcome: its code, or a short receive's failure. */
static int typed_done(gw_coll_typed_tp_t *c, typed_req_t *w, int rc, const ompi_status_public_t *st)
{
    if (OMPI_SUCCESS == rc && SIZE_MAX != w->want && st->_ucount != w->want) {
        if (!c->shorted) {
            c->shorted = true;
            c->short_src = st->MPI_SOURCE;
            c->short_got = st->_ucount;
            c->short_want = w->want;
        }
        rc = OMPI_ERROR;
    }
    free(w);
    return rc;
}

static int typed_test(void *ctx, void **req, bool *done)
{
    typed_req_t *w = *req;
    ompi_status_public_t st;
    int flag = 0;
    int rc = ompi_request_test(&w->r, &flag, &st);
    *done = 0 != flag;
    if (!*done) return rc;
    *req = NULL;
    return typed_done(ctx, w, rc, &st);
}

static int typed_wait_all(void *ctx, void **reqs, size_t n)
{
    int first = OMPI_SUCCESS;
    for (size_t i = 0; i < n; ++i) {
        typed_req_t *w = reqs[i];
        if (NULL == w) continue;
        ompi_status_public_t st;
        int rc = typed_done(ctx, w, ompi_request_wait(&w->r, &st), &st);
        reqs[i] = NULL;
        if (OMPI_SUCCESS == first) first = rc;
    }
    return first;
}

static void typed_cancel(void *ctx, void **req)
{
    typed_req_t *w = *req;
    if (NULL == w) return;
    tp_cancel(ctx, (void **)&w->r);
    free(w);
    *req = NULL;
}

void gw_coll_transport_init_typed(gw_ce_transport_t *t, gw_coll_typed_tp_t *ctx,
                                  struct ompi_communicator_t *comm, struct ompi_datatype_t *sdt,
                                  struct ompi_datatype_t *rdt)
{
    *ctx = (gw_coll_typed_tp_t){.comm = comm, .sdt = sdt, .rdt = rdt};
    ompi_datatype_type_size(sdt, &ctx->ssize);
    ompi_datatype_type_size(rdt, &ctx->rsize);
    gw_coll_transport_init(t, comm);
    t->ctx = ctx;
    t->isend = typed_isend;
    t->irecv = typed_irecv;
    t->test = typed_test;
    t->wait_all = typed_wait_all;
    t->cancel = typed_cancel;
}
