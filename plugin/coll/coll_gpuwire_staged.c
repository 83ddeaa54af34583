/*
 * The staged algorithm: correct for every collective, datatype and op, and
 * slow. Device regions are copied into host memory, the previous (host)
 * module runs the collective on the host copies, results are copied back.
 * Reductions, user-defined ops included, run on the host copies.
 *
 * Blocking: copy in, call, copy out, return.
 *
 * Non-blocking: the copy in is synchronous at initiation (the application may
 * reuse nothing until completion anyway); then the previous module's
 * non-blocking collective starts on the host copies and the caller gets a
 * request of ours at once. The progress function registered with
 * opal_progress watches the inner request; when it has completed, the copies
 * back are queued on the device's stream, and when their ticket is reached
 * our request completes. Nothing blocks after initiation and the CPU never
 * touches device memory.
 */
#include <string.h>

#include "coll_gpuwire_device.h"
#include "coll_gpuwire_dispatch.h"
#include "gpuwire_help.h"
#include "opal/runtime/opal_progress.h"

typedef struct {
    gw_coll_region_t region;
    gw_coll_host_buf_t host; /* host.ptr NULL: not staged */
    uint64_t ticket;         /* the copy back, once queued */
} gw_stage_t;

typedef struct {
    gw_stage_t s[GW_REGION_COUNT];
} gw_staging_t;

static void staging_release(gw_staging_t *st)
{
    for (int i = 0; i < GW_REGION_COUNT; ++i) gw_coll_staging_put(&st->s[i].host);
}

static int device_failed(const char *what, const char *why)
{
    opal_output(0, "coll:gpuwire: %s: %s", what, why);
    return OMPI_ERROR;
}

/* Takes host memory for every device region and copies in what the call
 * reads (and the gaps of receive regions that have them). Waits for the
 * copies. */
static int stage_in(gw_coll_region_t r[GW_REGION_COUNT], gw_staging_t *st)
{
    char why[256];
    int synced_gpu = -1;
    memset(st, 0, sizeof(*st));
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        gw_stage_t *s = &st->s[i];
        s->region = r[i];
        if (!r[i].on_gpu) continue;
        if ((s->region.flags & GW_STAGE_OUT) && !s->region.dense) s->region.flags |= GW_STAGE_IN;
        const size_t len = gw_region_bytes(&s->region);
        if (0 != gw_coll_staging_get(len, s->region.gpu, &s->host, why, sizeof(why))) {
            return device_failed("host staging", why);
        }
        /* The application's work on the default stream (cudaMemcpy D2D,
         * kernels) comes before MPI reads or writes its buffers. */
        if (mca_coll_gpuwire.device_sync && synced_gpu != s->region.gpu) {
            if (0 != gw_coll_device_wait_user(s->region.gpu, why, sizeof(why))) {
                return device_failed("device sync", why);
            }
            synced_gpu = s->region.gpu;
        }
        if (s->region.flags & GW_STAGE_IN) {
            uint64_t t;
            const char *src = (const char *)s->region.user + s->region.lo;
            if (0 != gw_coll_copy_start(s->host.ptr, src, len, s->region.gpu, &t, why,
                                        sizeof(why)) ||
                0 != gw_coll_copy_wait(s->region.gpu, t, why, sizeof(why))) {
                return device_failed("copy to host", why);
            }
        }
    }
    return OMPI_SUCCESS;
}

/* The pointer the host module gets for region i: the staging buffer moved
 * back by lo, so that the datatype's displacements land inside it. */
static void *host_view(const gw_staging_t *st, int i, const void *user)
{
    const gw_stage_t *s = &st->s[i];
    if (NULL == s->host.ptr) return (void *)user;
    return (void *)((uintptr_t)s->host.ptr - (uintptr_t)s->region.lo);
}

static bool copies_back(const gw_stage_t *s)
{
    return NULL != s->host.ptr && (s->region.flags & GW_STAGE_OUT);
}

static int stage_out_start(gw_staging_t *st)
{
    char why[256];
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        gw_stage_t *s = &st->s[i];
        if (!copies_back(s)) continue;
        char *dst = (char *)s->region.user + s->region.lo;
        if (0 != gw_coll_copy_start(dst, s->host.ptr, gw_region_bytes(&s->region), s->region.gpu,
                                    &s->ticket, why, sizeof(why))) {
            return device_failed("copy to device", why);
        }
    }
    return OMPI_SUCCESS;
}

static int stage_out_wait(gw_staging_t *st)
{
    char why[256];
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        gw_stage_t *s = &st->s[i];
        if (!copies_back(s)) continue;
        if (0 != gw_coll_copy_wait(s->region.gpu, s->ticket, why, sizeof(why))) {
            return device_failed("copy to device", why);
        }
    }
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Requests of the non-blocking forms
 * ------------------------------------------------------------------------ */

typedef enum { GW_REQ_WAIT_INNER, GW_REQ_WAIT_COPY } gw_req_state_t;

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

static OBJ_CLASS_INSTANCE(gw_nbc_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

typedef struct gw_coll_request {
    ompi_request_t *mpi;          /* the object this state belongs to */
    struct gw_coll_request *next; /* in the pending list */
    ompi_request_t *inner;        /* the previous module's request */
    gw_staging_t st;
    gw_req_state_t state;
    int error;
    unsigned polls;
    bool done;  /* left the pending list */
    bool freed; /* MPI_Request_free came first (erroneous for collectives, tolerated) */
} gw_coll_request_t;

static size_t state_offset;

static gw_coll_request_t *state_of(ompi_request_t *r)
{
    return (gw_coll_request_t *)((char *)r + state_offset);
}

static struct {
    opal_mutex_t lock;
    gw_coll_request_t *pending; /* newest first */
    bool progress_registered;
    bool initialized;
} requests;

static void request_release(gw_coll_request_t *req)
{
    ompi_request_t *r = req->mpi;
    staging_release(&req->st);
    OMPI_REQUEST_FINI(r);
    OBJ_RELEASE(r);
}

static int request_free(ompi_request_t **rptr)
{
    gw_coll_request_t *req = state_of(*rptr);
    bool release = true;
    OPAL_THREAD_LOCK(&requests.lock);
    if (!req->done) {
        req->freed = true;
        release = false;
    }
    OPAL_THREAD_UNLOCK(&requests.lock);
    if (release) request_release(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int request_cancel(ompi_request_t *request, int complete)
{
    return MPI_ERR_REQUEST; /* collectives cannot be cancelled */
}

/* Advances one request; returns true when it has finished. Called with
 * requests.lock held. */
static bool request_advance(gw_coll_request_t *req)
{
    char why[256];
    if (GW_REQ_WAIT_INNER == req->state) {
        if (!REQUEST_COMPLETE(req->inner)) return false;
        req->error = req->inner->req_status.MPI_ERROR;
        ompi_request_free(&req->inner);
        if (MPI_SUCCESS != req->error) return true;
        if (OMPI_SUCCESS != stage_out_start(&req->st)) {
            req->error = MPI_ERR_OTHER;
            return true;
        }
        req->state = GW_REQ_WAIT_COPY;
    }
    /* A failed stream never reaches its ticket: ask CUDA now and then. */
    const bool query = 0 == (++req->polls & 1023);
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        gw_stage_t *s = &req->st.s[i];
        if (!copies_back(s)) continue;
        bool done = false;
        if (0 != gw_coll_copy_done(s->region.gpu, s->ticket, query, &done, why, sizeof(why))) {
            device_failed("copy to device", why);
            req->error = MPI_ERR_OTHER;
            return true;
        }
        if (!done) return false;
    }
    return true;
}

static int requests_progress(void)
{
    if (NULL == __atomic_load_n(&requests.pending, __ATOMIC_RELAXED)) return 0;
    if (OPAL_THREAD_TRYLOCK(&requests.lock)) return 0;
    gw_coll_request_t *finished = NULL;
    for (gw_coll_request_t **p = &requests.pending; NULL != *p;) {
        gw_coll_request_t *req = *p;
        if (request_advance(req)) {
            *p = req->next;
            req->next = finished;
            finished = req;
            req->done = true;
        } else {
            p = &req->next;
        }
    }
    OPAL_THREAD_UNLOCK(&requests.lock);

    int n = 0;
    while (NULL != finished) {
        gw_coll_request_t *req = finished;
        finished = req->next;
        ++n;
        /* Staging goes back before the application can see completion. */
        staging_release(&req->st);
        if (req->freed) {
            request_release(req);
            continue;
        }
        req->mpi->req_status.MPI_ERROR = req->error;
        ompi_request_complete(req->mpi, true);
    }
    return n;
}

int mca_coll_gpuwire_requests_init(void)
{
    if (requests.initialized) return OMPI_SUCCESS;
    const size_t align = 16;
    state_offset = (ompi_coll_base_nbc_request_t_class.cls_sizeof + align - 1) & ~(align - 1);
    gw_nbc_request_t_class.cls_sizeof = state_offset + sizeof(gw_coll_request_t);
    OBJ_CONSTRUCT(&requests.lock, opal_mutex_t);
    requests.pending = NULL;
    requests.progress_registered = false;
    requests.initialized = true;
    return OMPI_SUCCESS;
}

void mca_coll_gpuwire_requests_fini(void)
{
    if (!requests.initialized) return;
    if (requests.progress_registered) opal_progress_unregister(requests_progress);
    if (NULL != requests.pending) {
        gw_help(GW_HELP_COLL_PENDING);
    }
    OBJ_DESTRUCT(&requests.lock);
    requests.initialized = false;
}

static int start_nonblocking(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                             gw_staging_t *st, const void *hs, void *hr,
                             ompi_request_t **request)
{
    gw_nbc_request_t *obj = OBJ_NEW(gw_nbc_request_t);
    if (NULL == obj) return OMPI_ERR_OUT_OF_RESOURCE;
    ompi_request_t *r = &obj->super;
    gw_coll_request_t *req = state_of(r);
    memset(req, 0, sizeof(*req));
    req->mpi = r;
    int rc = gw_coll_call_previous(m, a, hs, hr, &req->inner);
    if (OMPI_SUCCESS != rc) {
        OBJ_RELEASE(obj);
        return rc;
    }
    OMPI_REQUEST_INIT(r, false);
    r->req_type = OMPI_REQUEST_COLL;
    r->req_state = OMPI_REQUEST_ACTIVE;
    r->req_free = request_free;
    r->req_cancel = request_cancel;
    r->req_mpi_object.comm = a->comm;
    r->req_status = ompi_status_empty;
    req->st = *st; /* the request owns the staging from here */
    req->state = GW_REQ_WAIT_INNER;
    req->error = MPI_SUCCESS;
    req->polls = 0;
    req->done = false;
    req->freed = false;

    OPAL_THREAD_LOCK(&requests.lock);
    if (!requests.progress_registered) {
        opal_progress_register(requests_progress);
        requests.progress_registered = true;
    }
    req->next = requests.pending;
    requests.pending = req;
    OPAL_THREAD_UNLOCK(&requests.lock);

    *request = r;
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */

static int staged_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    gw_staging_t st;
    int rc = stage_in(r, &st);
    if (OMPI_SUCCESS != rc) {
        staging_release(&st);
        return rc;
    }
    __atomic_fetch_add(&mca_coll_gpuwire.staged_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&mca_coll_gpuwire.staged_bytes,
                       (unsigned long long)(st.s[0].host.len + st.s[1].host.len),
                       __ATOMIC_RELAXED);
    const void *hs = host_view(&st, GW_REGION_SEND, a->sbuf);
    void *hr = host_view(&st, GW_REGION_RECV, a->rbuf);

    if (NULL != request) {
        rc = start_nonblocking(m, a, &st, hs, hr, request);
        if (OMPI_SUCCESS != rc) staging_release(&st);
        return rc;
    }
    rc = gw_coll_call_previous(m, a, hs, hr, NULL);
    if (OMPI_SUCCESS == rc) rc = stage_out_start(&st);
    if (OMPI_SUCCESS == rc) rc = stage_out_wait(&st);
    staging_release(&st);
    return rc;
}

const gw_coll_algorithm_t gw_coll_staged = {"staged", NULL, staged_run};
