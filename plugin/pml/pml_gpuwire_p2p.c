/*
 * pml/gpuwire's point-to-point entry points: non-blocking and persistent
 * operations (MPI requests from pml_gpuwire_request.c), blocking ones (the
 * engine request on the stack), probes and matched receives. Separate from
 * pml_gpuwire.c, which opens and closes the engine and handles processes and
 * communicators: these are the per-message paths.
 */
#include "pml_gpuwire_p2p.h"

#include "opal/runtime/opal_progress.h"
#include "pml_gpuwire_datatype.h"
#include "pml_gpuwire_request.h"

/* ------------------------------------------------------------------------
 * Non-blocking and persistent operations
 * ------------------------------------------------------------------------ */

static int pml_post(int kind, uint8_t flags, const void *buf, size_t count, ompi_datatype_t *dtype,
                    int peer, int tag, mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                    ompi_request_t **request)
{
    mca_pml_gpuwire_request_t *req =
        pml_gw_request_get(kind, flags, (void *)buf, count, dtype, peer, tag, comm, mode);
    if (OPAL_UNLIKELY(NULL == req)) return OMPI_ERR_OUT_OF_RESOURCE;
    if (flags & PML_GW_PERSISTENT) {
        *request = &req->ompi;
        return OMPI_SUCCESS;
    }
    req->ompi.req_state = OMPI_REQUEST_ACTIVE;
    int rc = pml_gw_request_start(req);
    if (OPAL_UNLIKELY(MPI_SUCCESS != rc)) {
        ompi_request_t *r = &req->ompi;
        req->votes = 1;
        r->req_free(&r);
        return rc;
    }
    *request = &req->ompi;
    return OMPI_SUCCESS;
}

int mca_pml_gpuwire_isend(const void *buf, size_t count, ompi_datatype_t *dtype, int dst, int tag,
                          mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                          ompi_request_t **request)
{
    return pml_post(PML_GW_SEND, 0, buf, count, dtype, dst, tag, mode, comm, request);
}

int mca_pml_gpuwire_isend_init(const void *buf, size_t count, ompi_datatype_t *dtype, int dst,
                               int tag, mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                               ompi_request_t **request)
{
    return pml_post(PML_GW_SEND, PML_GW_PERSISTENT, buf, count, dtype, dst, tag, mode, comm, request);
}

int mca_pml_gpuwire_irecv(void *buf, size_t count, ompi_datatype_t *dtype, int src, int tag,
                          ompi_communicator_t *comm, ompi_request_t **request)
{
    return pml_post(PML_GW_RECV, 0, buf, count, dtype, src, tag, MCA_PML_BASE_SEND_STANDARD, comm,
                request);
}

int mca_pml_gpuwire_irecv_init(void *buf, size_t count, ompi_datatype_t *dtype, int src, int tag,
                               ompi_communicator_t *comm, ompi_request_t **request)
{
    return pml_post(PML_GW_RECV, PML_GW_PERSISTENT, buf, count, dtype, src, tag,
                MCA_PML_BASE_SEND_STANDARD, comm, request);
}

/* ------------------------------------------------------------------------
 * Blocking operations: the engine request lives on the stack.
 * ------------------------------------------------------------------------ */

typedef struct {
    mca_pml_gpuwire_request_t req; /* only the non-MPI fields are used */
    int done;
} blocking_t;

/* gw_request_t::user of a blocking operation points at its done flag. */
static void blocking_done(gw_request_t *g)
{
    __atomic_store_n((int *)g->user, 1, __ATOMIC_RELEASE);
}

/* Spins on the engine itself, as pml/ucx does on its worker; Open MPI's
 * progress loop (other components, events) runs every 64 turns. */
static inline void blocking_wait_flag(int *done)
{
    unsigned turns = 0;
    while (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
        if ((++turns & 63) == 0) {
            opal_progress();
        } else {
            gw_engine_progress(mca_pml_gpuwire.engine);
        }
    }
}

static inline void blocking_wait(blocking_t *b) { blocking_wait_flag(&b->done); }

/* The engine request of a blocking operation on one contiguous range: no
 * MPI request, no staging. */
typedef struct {
    gw_request_t gw;
    int done;
} blocking_contig_t;

static inline void blocking_contig_init(blocking_contig_t *b)
{
    b->done = 0;
    b->gw.complete_cb = blocking_done;
    b->gw.user = &b->done;
    b->gw.flags = GW_REQ_INLINE_CB; /* it only sets the flag */
}

static inline void blocking_init(blocking_t *b, int kind, const void *buf, size_t count,
                                 ompi_datatype_t *dtype, int peer, int tag,
                                 ompi_communicator_t *comm, mca_pml_base_send_mode_t mode)
{
    b->done = 0;
    b->req.kind = (uint8_t)kind;
    b->req.flags = 0;
    b->req.buf = (void *)buf;
    b->req.count = count;
    b->req.dtype = dtype;
    b->req.peer = peer;
    b->req.tag = tag;
    b->req.comm = comm;
    b->req.mode = mode;
    b->req.message = NULL;
    b->req.staging = NULL;
    b->req.staging_kind = PML_GW_STAGING_NONE;
    b->req.gw.complete_cb = blocking_done;
    b->req.gw.user = &b->done;
    b->req.gw.flags = GW_REQ_INLINE_CB; /* it only sets b->done */
}

int mca_pml_gpuwire_send(const void *buf, size_t count, ompi_datatype_t *dtype, int dst, int tag,
                         mca_pml_base_send_mode_t mode, ompi_communicator_t *comm)
{
    if (OPAL_UNLIKELY(mode == MCA_PML_BASE_SEND_BUFFERED)) {
        /* The data is copied into the attached buffer and sent from there. */
        mca_pml_gpuwire_request_t *shadow = pml_gw_request_get(
            PML_GW_SEND, PML_GW_INTERNAL, (void *)buf, count, dtype, dst, tag, comm, mode);
        if (NULL == shadow) return MPI_ERR_NO_MEM;
        int rc = pml_gw_request_start(shadow);
        if (MPI_SUCCESS != rc) pml_gw_request_release(shadow);
        return rc;
    }
    if (OPAL_LIKELY(opal_datatype_is_contiguous_memory_layout(&dtype->super, (int32_t)count))) {
        /* The common case: the bytes as they are, straight to the engine. */
        uint32_t peer;
        int rc = pml_gw_peer_index(comm, dst, &peer);
        if (OPAL_UNLIKELY(MPI_SUCCESS != rc)) return rc;
        blocking_contig_t c;
        blocking_contig_init(&c);
        gw_status_t st = gw_isend(mca_pml_gpuwire.engine, &c.gw, peer, gw_comm_cid(comm),
                                  ompi_comm_rank(comm), tag, (const char *)buf + dtype->super.true_lb,
                                  pml_gpuwire_packed_size(dtype, count),
                                  mode == MCA_PML_BASE_SEND_SYNCHRONOUS ? GW_SEND_SYNC : 0);
        if (OPAL_UNLIKELY(GW_OK != st)) return mca_pml_gpuwire_mpi_error(st);
        blocking_wait_flag(&c.done);
        return OPAL_LIKELY(GW_OK == c.gw.status) ? MPI_SUCCESS
                                                 : mca_pml_gpuwire_mpi_error(c.gw.status);
    }
    blocking_t b;
    blocking_init(&b, PML_GW_SEND, buf, count, dtype, dst, tag, comm, mode);
    int rc = pml_gw_issue(&b.req);
    if (OPAL_UNLIKELY(MPI_SUCCESS != rc)) return rc;
    blocking_wait(&b);
    pml_gw_staging_release(&b.req);
    return mca_pml_gpuwire_mpi_error(b.req.gw.status);
}

static int pml_recv_blocking(void *buf, size_t count, ompi_datatype_t *dtype, int src, int tag,
                             ompi_communicator_t *comm, gw_message_t *msg,
                             ompi_status_public_t *status)
{
    blocking_t b;
    blocking_init(&b, PML_GW_RECV, buf, count, dtype, src, tag, comm, MCA_PML_BASE_SEND_STANDARD);
    b.req.message = msg;
    int rc = pml_gw_issue(&b.req);
    if (OPAL_UNLIKELY(MPI_SUCCESS != rc)) return rc;
    blocking_wait(&b);
    ompi_status_public_t local;
    return pml_gw_recv_finish(&b.req, MPI_STATUS_IGNORE == status ? &local : status);
}

int mca_pml_gpuwire_recv(void *buf, size_t count, ompi_datatype_t *dtype, int src, int tag,
                         ompi_communicator_t *comm, ompi_status_public_t *status)
{
    if (OPAL_LIKELY(opal_datatype_is_contiguous_memory_layout(&dtype->super, (int32_t)count))) {
        /* The common case: UCX lands the bytes where they belong. */
        blocking_contig_t c;
        blocking_contig_init(&c);
        const size_t size = pml_gpuwire_packed_size(dtype, count);
        gw_status_t st = gw_irecv(mca_pml_gpuwire.engine, &c.gw, gw_comm_cid(comm), src, tag,
                                  size ? (char *)buf + dtype->super.true_lb : NULL, size);
        if (OPAL_UNLIKELY(GW_OK != st)) return mca_pml_gpuwire_mpi_error(st);
        blocking_wait_flag(&c.done);
        ompi_status_public_t local;
        return pml_gw_recv_status(&c.gw, size, MPI_STATUS_IGNORE == status ? &local : status);
    }
    return pml_recv_blocking(buf, count, dtype, src, tag, comm, NULL, status);
}

/* ------------------------------------------------------------------------
 * Probes and matched receives
 * ------------------------------------------------------------------------ */

static void probe_status(const gw_probe_info_t *info, ompi_status_public_t *status)
{
    if (MPI_STATUS_IGNORE == status) return;
    status->MPI_SOURCE = info->source;
    status->MPI_TAG = info->tag; /* MPI_ERROR stays as the caller set it */
    status->_ucount = info->length;
    status->_cancelled = 0;
}

/* A probe for one process that failed (peer failure detection on) and of
 * which nothing waits: no message of it will ever match. The error a receive
 * posted for it gets, and one line. */
static int probe_gone(const char *call, int src, ompi_communicator_t *comm,
                      ompi_status_public_t *status)
{
    int err = mca_pml_gpuwire_mpi_error(GW_ERR_UNREACHABLE);
    opal_output(0, "pml:gpuwire: %s for rank %d of %s failed: that process failed and "
                "no message of it waits (%s)", call, src, comm->c_name,
                gw_status_string(GW_ERR_UNREACHABLE));
    if (MPI_STATUS_IGNORE != status) {
        status->MPI_SOURCE = src;
        status->MPI_ERROR = err;
    }
    return err;
}

int mca_pml_gpuwire_iprobe(int src, int tag, ompi_communicator_t *comm, int *matched,
                           ompi_status_public_t *status)
{
    gw_probe_info_t info;
    gw_engine_t *e = mca_pml_gpuwire.engine;
    int rc = gw_iprobe(e, gw_comm_cid(comm), src, tag, &info);
    if (0 == rc) {
        opal_progress();
        rc = gw_iprobe(e, gw_comm_cid(comm), src, tag, &info);
    }
    *matched = rc > 0;
    if (OPAL_UNLIKELY(rc < 0)) return probe_gone("MPI_Iprobe", src, comm, status);
    if (*matched) probe_status(&info, status);
    return OMPI_SUCCESS;
}

int mca_pml_gpuwire_probe(int src, int tag, ompi_communicator_t *comm, ompi_status_public_t *status)
{
    gw_probe_info_t info;
    int rc;
    while (0 == (rc = gw_iprobe(mca_pml_gpuwire.engine, gw_comm_cid(comm), src, tag, &info))) {
        opal_progress();
    }
    if (OPAL_UNLIKELY(rc < 0)) return probe_gone("MPI_Probe", src, comm, status);
    probe_status(&info, status);
    return OMPI_SUCCESS;
}

static ompi_message_t *make_message(ompi_communicator_t *comm, gw_message_t *m,
                                    const gw_probe_info_t *info)
{
    ompi_message_t *msg = ompi_message_alloc();
    if (NULL == msg) return NULL;
    msg->comm = comm;
    msg->req_ptr = m;
    msg->peer = info->source;
    msg->count = info->length;
    return msg;
}

int mca_pml_gpuwire_improbe(int src, int tag, ompi_communicator_t *comm, int *matched,
                            ompi_message_t **message, ompi_status_public_t *status)
{
    gw_probe_info_t info;
    gw_message_t *m = NULL;
    gw_engine_t *e = mca_pml_gpuwire.engine;
    int rc = gw_improbe(e, gw_comm_cid(comm), src, tag, &info, &m);
    if (0 == rc) {
        opal_progress();
        rc = gw_improbe(e, gw_comm_cid(comm), src, tag, &info, &m);
    }
    *matched = rc > 0;
    if (OPAL_UNLIKELY(rc < 0)) return probe_gone("MPI_Improbe", src, comm, status);
    if (!*matched) return OMPI_SUCCESS;
    *message = make_message(comm, m, &info);
    if (NULL == *message) return OMPI_ERR_OUT_OF_RESOURCE;
    probe_status(&info, status);
    return OMPI_SUCCESS;
}

int mca_pml_gpuwire_mprobe(int src, int tag, ompi_communicator_t *comm, ompi_message_t **message,
                           ompi_status_public_t *status)
{
    gw_probe_info_t info;
    gw_message_t *m = NULL;
    int rc;
    while (0 == (rc = gw_improbe(mca_pml_gpuwire.engine, gw_comm_cid(comm), src, tag, &info, &m))) {
        opal_progress();
    }
    if (OPAL_UNLIKELY(rc < 0)) return probe_gone("MPI_Mprobe", src, comm, status);
    *message = make_message(comm, m, &info);
    if (NULL == *message) return OMPI_ERR_OUT_OF_RESOURCE;
    probe_status(&info, status);
    return OMPI_SUCCESS;
}

int mca_pml_gpuwire_imrecv(void *buf, size_t count, ompi_datatype_t *dtype,
                           ompi_message_t **message, ompi_request_t **request)
{
    ompi_message_t *msg = *message;
    mca_pml_gpuwire_request_t *req = pml_gw_request_get(
        PML_GW_RECV, 0, buf, count, dtype, msg->peer, 0, msg->comm, MCA_PML_BASE_SEND_STANDARD);
    if (NULL == req) return OMPI_ERR_OUT_OF_RESOURCE;
    req->message = (gw_message_t *)msg->req_ptr;
    *message = MPI_MESSAGE_NULL;
    ompi_message_return(msg);
    req->ompi.req_state = OMPI_REQUEST_ACTIVE;
    int rc = pml_gw_request_start(req);
    *request = &req->ompi;
    return rc;
}

int mca_pml_gpuwire_mrecv(void *buf, size_t count, ompi_datatype_t *dtype, ompi_message_t **message,
                          ompi_status_public_t *status)
{
    ompi_message_t *msg = *message;
    gw_message_t *m = (gw_message_t *)msg->req_ptr;
    ompi_communicator_t *comm = msg->comm;
    *message = MPI_MESSAGE_NULL;
    ompi_message_return(msg);
    return pml_recv_blocking(buf, count, dtype, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, m, status);
}
