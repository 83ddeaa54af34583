/*
 * The requests of coll gpuwire's non-blocking forms as Open MPI sees them:
 * the object, its free and cancel callbacks, its completion, and the
 * progress function registered with opal_progress. What moves a request on
 * -- staging through host copies, each communicator's order of starts, the
 * algorithms' jobs -- is the collective engine's scheduler
 * (gpuwire/coll_sched.h, ucx_glue/coll/sched); this file gives it the
 * previous module's collectives as the host collective it starts, and maps
 * its failures to MPI error codes.
 *
 * Initiation takes the staging, queues the copies in on the device's stream
 * and returns a request of ours at once; it waits for nothing (but the
 * legacy default stream with coll_gpuwire_device_sync, as the blocking forms
 * do). A non-blocking collective with nothing to stage (host buffers,
 * Ibarrier) goes straight to the previous module when nothing initiated
 * earlier on the communicator waits for its start, and joins the order
 * otherwise (gw_coll_nb_passthrough): libnbc matches the messages of its
 * collectives by a tag taken when one starts.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire_staged.h"
#include "gpuwire_help.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/errhandler/errcode-internal.h"
#include "ompi/op/op.h"
#include "opal/class/opal_free_list.h"
#include "opal/runtime/opal.h"
#include "opal/runtime/opal_progress.h"

OBJ_CLASS_INSTANCE(gw_nbc_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static size_t state_offset, ce_offset;
static gw_ce_sched_t *sched;
static bool progress_registered;
/* The objects of our requests: taken at initiation, given back when a
 * request is released, and freed when the component closes, so that a
 * steady stream of calls allocates nothing. */
static opal_free_list_t objects;

gw_coll_request_t *gw_coll_request_of(ompi_request_t *r)
{
    return (gw_coll_request_t *)((char *)r + state_offset);
}

gw_ce_sched_t *gw_coll_sched(void) { return sched; }

ompi_request_t *gw_coll_request_get(void)
{
    opal_free_list_item_t *item = opal_free_list_get(&objects);
    if (NULL == item) return NULL;
    /* As new: libmpi's constructors clear what its bindings left in the
     * object at its last use (retained ops and datatypes, chained callbacks). */
    opal_obj_run_destructors(&item->super.super);
    opal_obj_run_constructors(&item->super.super);
    return (ompi_request_t *)item;
}

void gw_coll_request_put(ompi_request_t *r) { opal_free_list_return(&objects, &r->super); }

/* MPI lets the application free a datatype or an op while a call that uses
 * it is pending, and a request may start its call later: it holds a
 * reference to each (released with hold false). Predefined ones need none. */
static void hold_types(gw_coll_request_t *req, bool hold)
{
    gw_coll_args_t *a = &req->args;
    /* Only the types MPI makes significant on this rank: the others may be
     * anything (a non-root's receive type of Gather, an in-place send type). */
    const bool inter = OMPI_COMM_IS_INTER(a->comm);
    const bool gather = GW_COLL_GATHER == a->id || GW_COLL_GATHERV == a->id;
    const bool scatter = GW_COLL_SCATTER == a->id || GW_COLL_SCATTERV == a->id;
    const bool root = inter ? MPI_ROOT == a->root : ompi_comm_rank(a->comm) == a->root;
    /* An inter-communicator's rooted call: its arguments are insignificant
     * at MPI_PROC_NULL (the calls without a root have root 0 here). */
    const bool none = inter && MPI_PROC_NULL == a->root;
    const bool send = !none && MPI_IN_PLACE != a->sbuf && !(scatter && !root) &&
                      !(gather && inter && root);
    const bool recv = !none && MPI_IN_PLACE != a->rbuf && !(gather && !root) &&
                      !(scatter && inter && root);
    struct ompi_datatype_t *one[3] = {none ? NULL : a->dtype, send ? a->sdtype : NULL,
                                      recv ? a->rdtype : NULL};
    for (int i = 0; i < 3; ++i) {
        if (NULL == one[i]) continue;
        if (hold) {
            OMPI_DATATYPE_RETAIN(one[i]);
        } else {
            OMPI_DATATYPE_RELEASE_NO_NULLIFY(one[i]);
        }
    }
    struct ompi_datatype_t *const *w[2] = {a->sdtypes, a->rdtypes};
    for (int k = 0; k < 2; ++k) {
        for (int i = 0; NULL != w[k] && i < req->kept_types; ++i) {
            if (NULL == w[k][i]) continue;
            if (hold) {
                OMPI_DATATYPE_RETAIN(w[k][i]);
            } else {
                OMPI_DATATYPE_RELEASE_NO_NULLIFY(w[k][i]);
            }
        }
    }
    if (!none && NULL != a->op && !ompi_op_is_intrinsic(a->op)) {
        if (hold) {
            OBJ_RETAIN(a->op);
        } else {
            OBJ_RELEASE_NO_NULLIFY(a->op);
        }
    }
}

/* Gives back everything a request holds; its copies have finished. */
static void request_release(gw_coll_request_t *req)
{
    ompi_request_t *r = req->mpi;
    struct ompi_communicator_t *comm = req->args.comm;
    hold_types(req, false);
    gw_ce_req_fini(req->ce);
    free(req->send_copy);
    free(req->kept);
    OMPI_REQUEST_FINI(r);
    gw_coll_request_put(r);
    OBJ_RELEASE(comm);
}

static int request_free(ompi_request_t **rptr)
{
    gw_coll_request_t *req = gw_coll_request_of(*rptr);
    if (gw_ce_req_free(req->ce)) request_release(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int request_cancel(ompi_request_t *request, int complete)
{
    return MPI_ERR_REQUEST; /* collectives cannot be cancelled */
}

/* Copies of the call's count, displacement and type arrays, for a->args
 * to use after the initiation has returned: a call that starts later (after
 * an agreement, behind calls before it, after its copies to host memory, or
 * at each start of a persistent request) must not read the application's
 * arrays then. MPI asks applications to keep them until completion, but
 * clients free them at once (mpi4py's temporaries), and Open MPI's own
 * modules copy what they need at the initiation. Only the arrays MPI makes
 * significant on this rank are read. One block; false: no memory. */
static bool args_keep(gw_coll_args_t *a, void **block)
{
    *block = NULL;
    struct ompi_communicator_t *c = a->comm;
    const bool inter = OMPI_COMM_IS_INTER(c);
    const int n = inter && GW_COLL_REDUCE_SCATTER != a->id ? ompi_comm_remote_size(c)
                                                           : ompi_comm_size(c);
    const bool root = inter ? MPI_ROOT == a->root : ompi_comm_rank(c) == a->root;
    const bool in_place = MPI_IN_PLACE == a->sbuf;
    bool rc = false, rd = false, sc = false, sd = false, types = false;
    switch (a->id) {
    case GW_COLL_REDUCE_SCATTER: rc = true; break;
    case GW_COLL_ALLGATHERV: rc = rd = true; break;
    case GW_COLL_GATHERV: rc = rd = root; break;
    case GW_COLL_SCATTERV: sc = sd = root; break;
    case GW_COLL_ALLTOALLW: types = true; /* fall through */
    case GW_COLL_ALLTOALLV:
        rc = rd = true;
        sc = sd = !in_place;
        if (in_place) { /* ignored by MPI: never read later */
            a->scounts = a->sdispls = NULL;
            a->sdtypes = NULL;
        }
        break;
    default: return true;
    }
    const int *const *ints[] = {rc ? &a->rcounts : NULL, rd ? &a->rdispls : NULL,
                                sc ? &a->scounts : NULL, sd ? &a->sdispls : NULL};
    struct ompi_datatype_t *const **dts[] = {types ? &a->rdtypes : NULL,
                                             types && !in_place ? &a->sdtypes : NULL};
    const size_t nn = n > 0 ? (size_t)n : 0;
    size_t bytes = 0;
    for (int i = 0; i < 2; ++i) bytes += NULL != dts[i] && NULL != *dts[i] ? nn * sizeof(void *) : 0;
    for (int i = 0; i < 4; ++i) bytes += NULL != ints[i] && NULL != *ints[i] ? nn * sizeof(int) : 0;
    if (0 == bytes) return true;
    char *p = malloc(bytes);
    if (NULL == p) return false;
    *block = p;
    for (int i = 0; i < 2; ++i) { /* pointers first: aligned */
        if (NULL == dts[i] || NULL == *dts[i]) continue;
        memcpy(p, *dts[i], nn * sizeof(void *));
        *(struct ompi_datatype_t *const **)dts[i] = (struct ompi_datatype_t *const *)p;
        p += nn * sizeof(void *);
    }
    for (int i = 0; i < 4; ++i) {
        if (NULL == ints[i] || NULL == *ints[i]) continue;
        memcpy(p, *ints[i], nn * sizeof(int));
        *(const int **)ints[i] = (const int *)p;
        p += nn * sizeof(int);
    }
    return true;
}

/* Makes r a request of ours for a call on m; it retains the communicator
 * (and so the module and the modules below it) until it is released. NULL:
 * no memory for the copies of the call's arrays (r is not touched then). */
gw_coll_request_t *gw_coll_request_init(ompi_request_t *r, mca_coll_gpuwire_module_t *m,
                                        const gw_coll_args_t *a)
{
    gw_coll_args_t kept = *a;
    void *block = NULL;
    if (!args_keep(&kept, &block)) return NULL;
    gw_coll_request_t *req = gw_coll_request_of(r);
    memset(req, 0, sizeof(*req));
    req->mpi = r;
    req->module = m;
    req->args = kept;
    req->kept = block;
    /* Alltoallw's type arrays were copied whole when significant. */
    if (GW_COLL_ALLTOALLW == kept.id && NULL != block) {
        req->kept_types = OMPI_COMM_IS_INTER(a->comm) ? ompi_comm_remote_size(a->comm)
                                                      : ompi_comm_size(a->comm);
    }
    hold_types(req, true);
    req->ce = gw_ce_req_init((char *)r + ce_offset, sched, &m->nb_order, req, a->sbuf, a->rbuf);
    OMPI_REQUEST_INIT(r, false);
    r->req_type = OMPI_REQUEST_COLL;
    r->req_state = OMPI_REQUEST_ACTIVE;
    r->req_free = request_free;
    r->req_cancel = request_cancel;
    r->req_mpi_object.comm = a->comm;
    r->req_status = ompi_status_empty;
    OBJ_RETAIN(a->comm);
    return req;
}

gw_coll_request_t *gw_coll_request_new(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a)
{
    ompi_request_t *r = gw_coll_request_get();
    if (NULL == r) return NULL;
    gw_coll_request_t *req = gw_coll_request_init(r, m, a);
    if (NULL == req) gw_coll_request_put(r);
    return req;
}

/* The scheduler's host collective: the previous module's non-blocking one.
 * Open MPI 4.1's libnbc schedules in-place Ialltoallv/w (and the persistent
 * forms) wrongly when a peer's count is 0: the skipped operation carried the
 * round's end, so a send of its temporary is still in flight when the next
 * round copies the next block into it (docs/coll.md). The previous module
 * gets a separate host send copy of the receive region instead (the staged
 * one, or the application's host buffer), with the receive counts,
 * displacements and types: the same exchange in MPI terms. The copy is
 * taken at the start: the receive region is ours until completion. */
static int request_start(void *ctx, gw_ce_req_t *ce, const void *sbuf, void *rbuf, void **inner)
{
    gw_coll_request_t *req = gw_ce_req_owner(ce);
    gw_coll_args_t a = req->args;
    const gw_ce_stage_t *s = &gw_ce_req_staging(ce)->s[GW_REGION_RECV];
    const size_t len = gw_region_bytes(&s->region);
    if (gw_coll_inplace_alltoallvw(&a) && len > 0) {
        if (NULL == req->send_copy && NULL == (req->send_copy = malloc(len))) {
            COLL_GPUWIRE_VERBOSE(1, "i%s in place: no host memory for the send copy (%zu "
                                    "bytes); free memory or pass a separate send buffer",
                                 gw_coll_name(a.id), len);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        /* Staged: the copies in have finished (READY), the region is whole. */
        const char *from = NULL != s->host.ptr ? (const char *)s->host.ptr
                                               : (const char *)s->region.user + s->region.lo;
        memcpy(req->send_copy, from, len);
        sbuf = (const char *)req->send_copy - s->region.lo;
        a.scounts = a.rcounts;
        a.sdispls = a.rdispls;
        a.sdtype = a.rdtype;
        a.sdtypes = a.rdtypes;
    }
    return gw_coll_call_previous(req->module, &a, sbuf, rbuf, (ompi_request_t **)inner);
}

static int request_test(void *ctx, void **inner, bool *done)
{
    ompi_request_t *r = *inner;
    *done = REQUEST_COMPLETE(r);
    if (!*done) return MPI_SUCCESS;
    const int status = r->req_status.MPI_ERROR;
    ompi_request_free(&r);
    *inner = NULL;
    return status;
}

static int request_error(void *ctx, gw_ce_req_t *ce, gw_ce_fail_t kind, int rc, const char *why)
{
    gw_coll_request_t *req = gw_ce_req_owner(ce);
    switch (kind) {
    case GW_CE_FAIL_COPY:
        opal_output(0, "coll:gpuwire: %s", why);
        return MPI_ERR_OTHER;
    case GW_CE_FAIL_START:
        COLL_GPUWIRE_VERBOSE(1, "i%s: the previous module's collective did not start (%d)",
                             gw_coll_name(req->args.id), rc);
        return ompi_errcode_get_mpi_code(rc);
    case GW_CE_FAIL_JOB:
        break;
    }
    return ompi_errcode_get_mpi_code(GW_COLL_DECLINED == rc ? OMPI_ERROR : rc);
}

static void request_complete(void *ctx, gw_ce_req_t *ce, int status)
{
    gw_coll_request_t *req = gw_ce_req_owner(ce);
    req->mpi->req_status.MPI_ERROR = status;
    ompi_request_complete(req->mpi, true);
}

static void request_release_ce(void *ctx, gw_ce_req_t *ce) { request_release(gw_ce_req_owner(ce)); }

static int requests_progress(void) { return gw_ce_sched_progress(sched); }

int mca_coll_gpuwire_requests_init(void)
{
    if (NULL != sched) return OMPI_SUCCESS;
    const size_t align = 16;
    state_offset = (ompi_coll_base_nbc_request_t_class.cls_sizeof + align - 1) & ~(align - 1);
    ce_offset = (state_offset + sizeof(gw_coll_request_t) + align - 1) & ~(align - 1);
    gw_nbc_request_t_class.cls_sizeof = ce_offset + gw_ce_req_size();
    OBJ_CONSTRUCT(&objects, opal_free_list_t);
    int rc = opal_free_list_init(&objects, gw_nbc_request_t_class.cls_sizeof,
                                 (size_t)opal_cache_line_size, OBJ_CLASS(gw_nbc_request_t), 0,
                                 (size_t)opal_cache_line_size, 0, -1, 8, NULL, 0, NULL, NULL, NULL);
    if (OMPI_SUCCESS != rc) {
        OBJ_DESTRUCT(&objects);
        return rc;
    }
    const gw_ce_sched_ops_t ops = {
        .start = request_start,
        .test = request_test,
        .error = request_error,
        .complete = request_complete,
        .release = request_release_ce,
        .device_sync = mca_coll_gpuwire.device_sync,
        .pending = &mca_coll_gpuwire.nb_pending,
        .deferred_starts = &mca_coll_gpuwire.nb_deferred_starts,
        .staged_calls = &gw_core_counters()->coll_staged_calls,
        .staged_bytes = &mca_coll_gpuwire.staged_bytes,
    };
    sched = gw_ce_sched_new(&ops);
    if (NULL == sched) {
        OBJ_DESTRUCT(&objects);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    progress_registered = false;
    return OMPI_SUCCESS;
}

void mca_coll_gpuwire_requests_fini(void)
{
    if (NULL == sched) return;
    if (progress_registered) opal_progress_unregister(requests_progress);
    const bool busy = gw_ce_sched_busy(sched);
    if (busy) gw_help(GW_HELP_COLL_PENDING);
    for (gw_ce_req_t *ce; NULL != (ce = gw_ce_sched_spare_take(sched));) {
        gw_coll_request_put(((gw_coll_request_t *)gw_ce_req_owner(ce))->mpi);
    }
    gw_ce_sched_free(sched);
    sched = NULL;
    /* The objects go with the list (those the application never freed
     * too), unless a request has not finished: what it waits for may still
     * reach its memory, which stays. */
    if (!busy) OBJ_DESTRUCT(&objects);
}

/* The progress function is registered with the first request. */
static void progress_register(void)
{
    if (!__atomic_exchange_n(&progress_registered, true, __ATOMIC_ACQ_REL)) {
        opal_progress_register(requests_progress);
    }
}

/* Hands req (READY or COPY_IN) to the scheduler and the request to the
 * application. On a failed start here, req is released and the error
 * returned. */
static int request_enqueue(gw_coll_request_t *req, ompi_request_t **request)
{
    progress_register();
    const int rc = gw_ce_req_enqueue(req->ce);
    if (OMPI_SUCCESS != rc) {
        request_release(req);
        return rc;
    }
    *request = req->mpi;
    return OMPI_SUCCESS;
}

int gw_coll_nb_job(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                   gw_coll_region_t r[GW_REGION_COUNT], const gw_coll_job_ops_t *ops, void *job,
                   bool ordered, ompi_request_t **request)
{
    if (NULL != a->adopt) {
        /* The request of a call decided after its agreement: job runs in
         * its place (ordered or not, it leaves the order as its head). */
        gw_coll_request_t *req = a->adopt;
        gw_ce_req_replace_job(req->ce, ops, job);
        *request = req->mpi;
        return OMPI_SUCCESS;
    }
    gw_coll_request_t *req = gw_coll_request_new(m, a);
    if (NULL == req) {
        ops->release(job);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    gw_coll_request_job(req, ops, job, r, ordered);
    *request = req->mpi;
    return OMPI_SUCCESS;
}

void gw_coll_request_job(gw_coll_request_t *req, const gw_coll_job_ops_t *ops, void *job,
                         gw_coll_region_t r[GW_REGION_COUNT], bool ordered)
{
    progress_register();
    gw_ce_req_job(req->ce, ops, job, r, ordered);
}

void gw_coll_nb_drain(mca_coll_gpuwire_module_t *m)
{
    while (!gw_ce_order_empty(&m->nb_order)) opal_progress();
}

int gw_coll_nb_passthrough(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                           ompi_request_t **request)
{
    const bool inplace = gw_coll_inplace_alltoallvw(a);
    if (!inplace && gw_ce_order_empty(&m->nb_order)) {
        return gw_coll_call_previous(m, a, a->sbuf, a->rbuf, request);
    }
    gw_coll_request_t *req = gw_coll_request_new(m, a);
    if (NULL == req) return OMPI_ERR_OUT_OF_RESOURCE;
    if (inplace) {
        /* Host buffers: request_start copies the receive region. */
        gw_coll_region_t r[GW_REGION_COUNT];
        gw_coll_regions(a, r);
        gw_ce_req_staging(req->ce)->s[GW_REGION_RECV].region = r[GW_REGION_RECV];
    }
    return request_enqueue(req, request);
}

int gw_coll_staged_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    gw_coll_request_t *req = gw_coll_request_new(m, a);
    if (NULL == req) return OMPI_ERR_OUT_OF_RESOURCE;
    char why[320];
    if (GW_CE_OK != gw_ce_req_stage(req->ce, r, why, sizeof(why))) {
        opal_output(0, "coll:gpuwire: %s", why);
        request_release(req);
        return OMPI_ERROR;
    }
    return request_enqueue(req, request);
}
