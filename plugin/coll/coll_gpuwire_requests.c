/*
 * The requests of coll gpuwire's non-blocking forms, the progress function
 * that moves them on, and each communicator's order of starts. Separate from
 * the staged algorithm (coll_gpuwire_staged.c): every non-blocking call of
 * ours, staged or an algorithm's own job (gw_coll_nb_job), becomes one of
 * these requests.
 *
 * Non-blocking: initiation takes the staging, queues the copies in on the
 * device's stream and returns a request of ours at once; it waits for
 * nothing (but the legacy default stream with coll_gpuwire_device_sync, as
 * the blocking forms do). The progress function registered with
 * opal_progress then moves each request on:
 *
 *   COPY_IN    copies to host staging queued: polls their tickets
 *   READY      host copies complete (or nothing to copy in): waits for its
 *              turn on the communicator, then starts the previous module's
 *              non-blocking collective on the host copies
 *   INNER      polls that collective; when it is complete, queues the
 *              copies back
 *   COPY_OUT   polls the copies' tickets; when they are reached, the
 *              staging goes back and the request completes
 *   FAILED     an error before the start: leaves the order in its turn and
 *              completes with the error
 *   JOB        an algorithm's own non-blocking steps (the NVLink kernels,
 *              gw_coll_nb_job): polled until they say done. Outside the
 *              FIFO, since no previous module's collective starts, unless
 *              the job may still decline (ordered): it then keeps its place
 *              until it is the head and no longer may; one that declines
 *              is staged (COPY_IN or READY) in its place
 *
 * Order. MPI makes every rank start the collectives of a communicator in the
 * same order, and libnbc matches the messages of its collectives by a tag
 * taken when one starts. So the previous module's non-blocking collectives
 * start in initiation order, whatever order their copies finish in: each
 * module (one per communicator) keeps a FIFO of its requests not started
 * yet, and only the head starts. A non-blocking collective with nothing to
 * stage (host buffers, Ibarrier) goes straight to the previous module when
 * that FIFO is empty, and joins it otherwise (gw_coll_nb_passthrough).
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire_staged.h"
#include "gpuwire_help.h"
#include "ompi/errhandler/errcode-internal.h"
#include "opal/runtime/opal_progress.h"

OBJ_CLASS_INSTANCE(gw_nbc_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static size_t state_offset;

gw_coll_request_t *gw_coll_request_of(ompi_request_t *r)
{
    return (gw_coll_request_t *)((char *)r + state_offset);
}

static struct {
    opal_mutex_t lock;
    gw_coll_request_t *first;  /* pending: oldest first */
    gw_coll_request_t **lastp; /* the next field of the newest, or &first */
    gw_coll_request_t *spares; /* persistent requests freed, kept for reuse */
    bool busy;                 /* the progress function runs: not entered again */
    bool progress_registered;
    bool initialized;
} requests;

/* Set while this thread's requests_progress holds requests.lock: a job's
 * poll may start collectives of its own on other communicators
 * (gw_coll_nb_job, request_enqueue) and free their requests, which take the
 * lock, not recursive, themselves. */
static _Thread_local bool requests_held;

void gw_coll_requests_lock(void)
{
    if (!requests_held) OPAL_THREAD_LOCK(&requests.lock);
}

void gw_coll_requests_unlock(void)
{
    if (!requests_held) OPAL_THREAD_UNLOCK(&requests.lock);
}

static void job_release(gw_coll_request_t *req)
{
    if (NULL != req->job) req->job_ops->release(req->job);
    req->job = NULL;
}

/* Gives back everything a request holds; its copies have finished. */
static void request_release(gw_coll_request_t *req)
{
    ompi_request_t *r = req->mpi;
    struct ompi_communicator_t *comm = req->args.comm;
    gw_coll_stage_release(&req->st);
    free(req->send_copy);
    job_release(req);
    OMPI_REQUEST_FINI(r);
    OBJ_RELEASE(r);
    OBJ_RELEASE(comm);
}

static int request_free(ompi_request_t **rptr)
{
    gw_coll_request_t *req = gw_coll_request_of(*rptr);
    bool release = true;
    gw_coll_requests_lock();
    if (!req->done) {
        req->freed = true;
        release = false;
    }
    gw_coll_requests_unlock();
    if (release) request_release(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int request_cancel(ompi_request_t *request, int complete)
{
    return MPI_ERR_REQUEST; /* collectives cannot be cancelled */
}

/* Makes r a request of ours for a call on m; it retains the communicator
 * (and so the module and the modules below it) until it is released. */
gw_coll_request_t *gw_coll_request_init(ompi_request_t *r, mca_coll_gpuwire_module_t *m,
                                        const gw_coll_args_t *a)
{
    gw_coll_request_t *req = gw_coll_request_of(r);
    memset(req, 0, sizeof(*req));
    req->mpi = r;
    req->module = m;
    req->args = *a;
    req->sbuf = a->sbuf;
    req->rbuf = a->rbuf;
    req->state = GW_REQ_READY;
    req->error = MPI_SUCCESS;
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

static gw_coll_request_t *request_new(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a)
{
    gw_nbc_request_t *obj = OBJ_NEW(gw_nbc_request_t);
    return NULL == obj ? NULL : gw_coll_request_init(&obj->super, m, a);
}

/* Open MPI 4.1's libnbc schedules in-place Ialltoallv/w (and the persistent
 * forms) wrongly when a peer's count is 0: the skipped operation carried the
 * round's end, so a send of its temporary is still in flight when the next
 * round copies the next block into it (docs/coll.md). The previous module
 * gets a separate host send copy of the receive region instead (the staged
 * one, or the application's host buffer), with the receive counts,
 * displacements and types: the same exchange in MPI terms. The copy is
 * taken at the start: the receive region is ours until completion. */
static int request_start(gw_coll_request_t *req)
{
    gw_coll_args_t a = req->args;
    const void *sbuf = req->sbuf;
    const gw_stage_t *s = &req->st.s[GW_REGION_RECV];
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
    return gw_coll_call_previous(req->module, &a, sbuf, req->rbuf, &req->inner);
}

/* Stages req's call: queues the copies in of regions r and points the
 * previous module at the host copies; COPY_IN or READY. */
static int request_stage(gw_coll_request_t *req, gw_coll_region_t r[GW_REGION_COUNT])
{
    int rc = gw_coll_stage_in_start(r, &req->st);
    if (OMPI_SUCCESS != rc) return rc;
    gw_coll_stage_count(&req->st);
    req->sbuf = gw_coll_stage_host_view(&req->st, GW_REGION_SEND, req->args.sbuf);
    req->rbuf = gw_coll_stage_host_view(&req->st, GW_REGION_RECV, req->args.rbuf);
    req->state = gw_coll_stage_queued(&req->st) ? GW_REQ_COPY_IN : GW_REQ_READY;
    return OMPI_SUCCESS;
}

/* The module's FIFO of requests not started; under requests.lock. The head
 * is also read without the lock (gw_coll_nb_passthrough, request_enqueue):
 * only the thread initiating on the communicator makes it non-NULL. */
static void order_push(mca_coll_gpuwire_module_t *m, gw_coll_request_t *req)
{
    req->next_start = NULL;
    if (NULL == m->nb_last) {
        __atomic_store_n(&m->nb_first, req, __ATOMIC_RELAXED);
    } else {
        m->nb_last->next_start = req;
    }
    m->nb_last = req;
}

static void order_pop(mca_coll_gpuwire_module_t *m)
{
    gw_coll_request_t *head = m->nb_first;
    __atomic_store_n(&m->nb_first, head->next_start, __ATOMIC_RELAXED);
    if (NULL == head->next_start) m->nb_last = NULL;
    head->next_start = NULL;
}

/* Advances one request as far as it goes now; returns true when it has
 * finished. Called with requests.lock held, in initiation order, so that a
 * request whose predecessors on its communicator start in this pass starts
 * in it as well. */
static bool request_advance(gw_coll_request_t *req)
{
    /* A failed stream never reaches its ticket: ask CUDA now and then. */
    const bool query = 0 == (++req->polls & 1023);
    bool done = false;
    for (;;) {
        switch (req->state) {
        case GW_REQ_COPY_IN:
            if (OMPI_SUCCESS != gw_coll_stage_poll(&req->st, query, &done, "copy to host")) {
                req->error = MPI_ERR_OTHER;
                req->state = GW_REQ_FAILED;
            } else if (done) {
                req->state = GW_REQ_READY;
            } else {
                return false;
            }
            continue;
        case GW_REQ_READY:
        case GW_REQ_FAILED:
            if (req->module->nb_first != req) return false;
            order_pop(req->module);
            if (GW_REQ_FAILED == req->state) {
                /* Never started: the copies still queued are waited for,
                 * then it completes with the error. */
                req->state = GW_REQ_COPY_OUT;
                continue;
            }
            {
                int rc = request_start(req);
                if (OMPI_SUCCESS != rc) {
                    req->error = ompi_errcode_get_mpi_code(rc);
                    COLL_GPUWIRE_VERBOSE(1, "i%s: the previous module's collective did not start "
                                            "(%d)",
                                         gw_coll_name(req->args.id), rc);
                    return true;
                }
            }
            req->state = GW_REQ_INNER;
            continue;
        case GW_REQ_INNER:
            if (!REQUEST_COMPLETE(req->inner)) return false;
            req->error = req->inner->req_status.MPI_ERROR;
            ompi_request_free(&req->inner);
            if (MPI_SUCCESS != req->error) return true;
            /* After a failure, what was queued is still waited for. */
            if (OMPI_SUCCESS != gw_coll_stage_out_start(&req->st)) req->error = MPI_ERR_OTHER;
            req->state = GW_REQ_COPY_OUT;
            continue;
        case GW_REQ_COPY_OUT:
            if (OMPI_SUCCESS != gw_coll_stage_poll(&req->st, query, &done, "copy to device")) {
                req->error = MPI_ERR_OTHER;
            }
            return done;
        case GW_REQ_JOB: {
            const int rc = req->job_ops->poll(req->job, query, &done);
            if (GW_COLL_DECLINED == rc && req->in_fifo) {
                /* Staged in its place in the order (READY or COPY_IN pop it
                 * there; in_fifo is the JOB state's). */
                job_release(req);
                req->in_fifo = false;
                if (OMPI_SUCCESS != request_stage(req, req->r)) {
                    req->error = MPI_ERR_OTHER;
                    req->state = GW_REQ_FAILED;
                }
                continue;
            }
            if (OMPI_SUCCESS != rc) {
                req->error = ompi_errcode_get_mpi_code(GW_COLL_DECLINED == rc ? OMPI_ERROR : rc);
                if (!req->in_fifo) return true;
                /* Completes with the error once it leaves the order in its
                 * turn (FAILED; in_fifo is the JOB state's). */
                job_release(req);
                req->in_fifo = false;
                req->state = GW_REQ_FAILED;
                continue;
            }
            if (req->in_fifo && req->module->nb_first == req && !req->job_ops->ordered(req->job)) {
                order_pop(req->module);
                req->in_fifo = false;
            }
            /* A request leaves the pending list only out of the FIFO. */
            return done && !req->in_fifo;
        }
        }
        return false;
    }
}

static int requests_progress(void)
{
    if (NULL == __atomic_load_n(&requests.first, __ATOMIC_RELAXED)) return 0;
    if (OPAL_THREAD_TRYLOCK(&requests.lock)) return 0;
    /* A collective started from here may progress MPI; without threads the
     * lock is no lock. */
    if (requests.busy) {
        OPAL_THREAD_UNLOCK(&requests.lock);
        return 0;
    }
    requests.busy = true;
    requests_held = true;
    gw_coll_request_t *finished = NULL, **finished_last = &finished;
    for (gw_coll_request_t **p = &requests.first; NULL != *p;) {
        gw_coll_request_t *req = *p;
        if (request_advance(req)) {
            *p = req->next;
            if (NULL == *p) requests.lastp = p;
            req->next = NULL;
            *finished_last = req;
            finished_last = &req->next;
            __atomic_fetch_sub(&mca_coll_gpuwire.nb_pending, 1, __ATOMIC_RELAXED);
        } else {
            p = &req->next;
        }
    }
    requests_held = false;
    requests.busy = false;
    OPAL_THREAD_UNLOCK(&requests.lock);

    int n = 0;
    while (NULL != finished) {
        gw_coll_request_t *req = finished;
        finished = req->next;
        ++n;
        /* Staging goes back before the application can see completion. */
        gw_coll_stage_release(&req->st);
        job_release(req);
        gw_coll_requests_lock();
        bool freed = req->freed;
        gw_coll_requests_unlock();
        if (!freed) {
            req->mpi->req_status.MPI_ERROR = req->error;
            ompi_request_complete(req->mpi, true);
            /* Freed by another thread between the completion and here:
             * released here. */
            gw_coll_requests_lock();
            req->done = true;
            freed = req->freed;
            gw_coll_requests_unlock();
        }
        if (freed) request_release(req);
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
    requests.first = NULL;
    requests.lastp = &requests.first;
    requests.spares = NULL;
    requests.busy = false;
    requests.progress_registered = false;
    requests.initialized = true;
    return OMPI_SUCCESS;
}

void gw_coll_request_spare_put(gw_coll_request_t *req)
{
    gw_coll_requests_lock();
    req->next = requests.spares;
    requests.spares = req;
    gw_coll_requests_unlock();
}

gw_coll_request_t *gw_coll_request_spare_take(void)
{
    gw_coll_requests_lock();
    gw_coll_request_t *spare = requests.spares;
    if (NULL != spare) requests.spares = spare->next;
    gw_coll_requests_unlock();
    return spare;
}

void mca_coll_gpuwire_requests_fini(void)
{
    if (!requests.initialized) return;
    if (requests.progress_registered) opal_progress_unregister(requests_progress);
    if (NULL != requests.first) {
        gw_help(GW_HELP_COLL_PENDING);
    }
    while (NULL != requests.spares) {
        gw_coll_request_t *req = requests.spares;
        requests.spares = req->next;
        /* req lives inside its MPI request: OBJ_RELEASE clears the pointer
         * it is given, which must not be req->mpi (freed by then). */
        ompi_request_t *mpi = req->mpi;
        OBJ_RELEASE(mpi);
    }
    OBJ_DESTRUCT(&requests.lock);
    requests.initialized = false;
}

/* Adds req to the requests the progress function moves on, and to its
 * communicator's FIFO of requests not started when ordered. */
static void request_pend(gw_coll_request_t *req, bool ordered)
{
    gw_coll_requests_lock();
    if (!requests.progress_registered) {
        opal_progress_register(requests_progress);
        requests.progress_registered = true;
    }
    if (ordered) order_push(req->module, req);
    req->next = NULL;
    *requests.lastp = req;
    requests.lastp = &req->next;
    __atomic_fetch_add(&mca_coll_gpuwire.nb_pending, 1, __ATOMIC_RELAXED);
    gw_coll_requests_unlock();
}

/* Hands req (READY or COPY_IN) to the progress function and the request to
 * the application. A READY request with nothing before it on its
 * communicator starts here; otherwise it joins the communicator's FIFO and
 * starts in its turn. On a failed start here, req is released and the
 * error returned. */
static int request_enqueue(gw_coll_request_t *req, ompi_request_t **request)
{
    mca_coll_gpuwire_module_t *m = req->module;
    if (GW_REQ_READY == req->state && NULL == __atomic_load_n(&m->nb_first, __ATOMIC_RELAXED)) {
        int rc = request_start(req);
        if (OMPI_SUCCESS != rc) {
            request_release(req);
            return rc;
        }
        req->state = GW_REQ_INNER;
    } else {
        __atomic_fetch_add(&mca_coll_gpuwire.nb_deferred_starts, 1, __ATOMIC_RELAXED);
    }

    request_pend(req, GW_REQ_INNER != req->state);
    *request = req->mpi;
    return OMPI_SUCCESS;
}

int gw_coll_nb_job(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                   gw_coll_region_t r[GW_REGION_COUNT], const gw_coll_job_ops_t *ops, void *job,
                   bool ordered, ompi_request_t **request)
{
    gw_coll_request_t *req = request_new(m, a);
    if (NULL == req) {
        ops->release(job);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    req->job_ops = ops;
    req->job = job;
    memcpy(req->r, r, sizeof(req->r));
    req->in_fifo = ordered;
    req->state = GW_REQ_JOB;
    if (ordered) __atomic_fetch_add(&mca_coll_gpuwire.nb_deferred_starts, 1, __ATOMIC_RELAXED);
    request_pend(req, ordered);
    *request = req->mpi;
    return OMPI_SUCCESS;
}

void gw_coll_nb_drain(mca_coll_gpuwire_module_t *m)
{
    while (NULL != __atomic_load_n(&m->nb_first, __ATOMIC_ACQUIRE)) opal_progress();
}

int gw_coll_nb_passthrough(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                           ompi_request_t **request)
{
    const bool inplace = gw_coll_inplace_alltoallvw(a);
    if (!inplace && NULL == __atomic_load_n(&m->nb_first, __ATOMIC_RELAXED)) {
        return gw_coll_call_previous(m, a, a->sbuf, a->rbuf, request);
    }
    gw_coll_request_t *req = request_new(m, a);
    if (NULL == req) return OMPI_ERR_OUT_OF_RESOURCE;
    if (inplace) {
        /* Host buffers: request_start copies the receive region. */
        gw_coll_region_t r[GW_REGION_COUNT];
        gw_coll_regions(a, r);
        req->st.s[GW_REGION_RECV].region = r[GW_REGION_RECV];
    }
    return request_enqueue(req, request);
}

int gw_coll_staged_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    gw_coll_request_t *req = request_new(m, a);
    if (NULL == req) return OMPI_ERR_OUT_OF_RESOURCE;
    int rc = request_stage(req, r);
    if (OMPI_SUCCESS != rc) {
        request_release(req);
        return rc;
    }
    return request_enqueue(req, request);
}
