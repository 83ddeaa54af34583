#include "pml_gpuwire_request.h"

#include <stdlib.h>

#include "gpuwire_help.h"
#include "ompi/mca/pml/base/pml_base_bsend.h"
#include "ompi/proc/proc.h"
#include "pml_gpuwire_datatype.h"
#include "pml_gpuwire_devdt.h"

static int request_free(ompi_request_t **rptr);
static int request_cancel(ompi_request_t *req, int flag);
static void request_engine_done(gw_request_t *g);

static void request_construct(mca_pml_gpuwire_request_t *req)
{
    req->ompi.req_type = OMPI_REQUEST_PML;
    req->ompi.req_start = mca_pml_gpuwire_start;
    req->ompi.req_free = request_free;
    req->ompi.req_cancel = request_cancel;
    req->gw.complete_cb = request_engine_done;
    req->gw.flags = 0; /* completing an MPI request may run user code: never under the lock */
    req->staging = NULL;
    req->staging_kind = PML_GW_STAGING_NONE;
}

OBJ_CLASS_INSTANCE(mca_pml_gpuwire_request_t, ompi_request_t, request_construct, NULL);

static inline mca_pml_gpuwire_request_t *from_gw(gw_request_t *g)
{
    return (mca_pml_gpuwire_request_t *)((char *)g - offsetof(mca_pml_gpuwire_request_t, gw));
}

/* Out of line and cold: its name buffer would give every send a stack
 * protector's canary (the build is hardened). */
__attribute__((noinline, cold)) int pml_gw_peer_other_job(ompi_communicator_t *comm, int rank,
                                                          const ompi_proc_t *proc, uint32_t *peer)
{
    if (OMPI_SUCCESS == pml_gw_other_job_add(proc, peer)) return MPI_SUCCESS;
    /* Communicators made by MPI_Comm_spawn/connect have no name. */
    char name[64];
    if ('\0' != comm->c_name[0]) {
        snprintf(name, sizeof(name), "%s", comm->c_name);
    } else {
        snprintf(name, sizeof(name), "(unnamed, context id %u)", (unsigned)gw_comm_cid(comm));
    }
    gw_help(GW_HELP_OTHER_JOB, rank, name);
    return MPI_ERR_UNSUPPORTED_OPERATION;
}

mca_pml_gpuwire_request_t *pml_gw_request_get(int kind, uint8_t flags, void *buf, size_t count,
                                              ompi_datatype_t *dtype, int peer, int tag,
                                              ompi_communicator_t *comm,
                                              mca_pml_base_send_mode_t mode)
{
    mca_pml_gpuwire_request_t *req =
        (mca_pml_gpuwire_request_t *)opal_free_list_get(&mca_pml_gpuwire.requests);
    if (OPAL_UNLIKELY(NULL == req)) return NULL;
    bool persistent = (flags & PML_GW_PERSISTENT) != 0;
    OMPI_REQUEST_INIT(&req->ompi, persistent);
    req->ompi.req_mpi_object.comm = comm;
    req->kind = (uint8_t)kind;
    req->flags = flags;
    req->votes = persistent ? 1 : 0;
    req->buf = buf;
    req->count = count;
    req->dtype = dtype;
    req->peer = peer;
    req->tag = tag;
    req->comm = comm;
    req->mode = mode;
    req->message = NULL;
    req->staging = NULL;
    req->staging_kind = PML_GW_STAGING_NONE;
    /* MPI lets the application free the datatype and the communicator while
     * operations that use them are pending: every request holds a reference
     * to both until it is returned (the engine may still unpack into the
     * layout, or report the communicator's name, after the handles are freed). */
    OBJ_RETAIN(comm);
    OMPI_DATATYPE_RETAIN(dtype);
    req->flags |= PML_GW_DTYPE_HELD;
    return req;
}

void pml_gw_request_release(mca_pml_gpuwire_request_t *req)
{
    /* While the engine is torn down (MPI_Finalize) the requests it still
     * holds end here after Open MPI has destructed its communicators: their
     * references are not touched then. */
    if ((req->flags & PML_GW_DTYPE_HELD) && !mca_pml_gpuwire.closing) {
        OMPI_DATATYPE_RELEASE(req->dtype);
        OBJ_RELEASE(req->comm);
    }
    OMPI_REQUEST_FINI(&req->ompi);
    opal_free_list_return(&mca_pml_gpuwire.requests, &req->ompi.super);
}

/* One vote from the engine (operation done), one from the MPI layer (handle
 * freed); the second one returns the request. */
static inline void request_vote(mca_pml_gpuwire_request_t *req)
{
    if (__atomic_add_fetch(&req->votes, 1, __ATOMIC_ACQ_REL) == 2) pml_gw_request_release(req);
}

void pml_gw_staging_release(mca_pml_gpuwire_request_t *req)
{
    if (req->staging_kind == PML_GW_STAGING_MALLOC) {
        gw_host_buffer_free(req->staging);
    } else if (req->staging_kind == PML_GW_STAGING_BSEND) {
        mca_pml_base_bsend_request_free(req->staging);
    } else if (req->staging_kind == PML_GW_STAGING_DEVICE) {
        gw_dev_temp_put(req->staging);
    } else if (req->staging_kind == PML_GW_STAGING_LAYOUT) {
        pml_gpuwire_layout_fini(&req->layout);
    }
    req->staging = NULL;
    req->staging_kind = PML_GW_STAGING_NONE;
}

/* Non-contiguous layouts on host memory are packed by Open MPI's convertor
 * (the CPU); on GPU memory by a kernel (pml_gpuwire_devdt.h) into a device
 * temporary of the buffer's GPU. Returns the GPU of the message's first byte,
 * -1 for host memory, or -2 (after one line) when the GPU cannot be told. */
static int pml_gw_device_of(mca_pml_gpuwire_request_t *req)
{
    const char *first = (const char *)req->buf + req->dtype->super.true_lb;
    if (!gw_engine_is_device_memory(mca_pml_gpuwire.engine, first, 1)) return -1;
    char why[256];
    int device = gw_dev_pointer_device(first, why, sizeof(why));
    if (device < 0) {
        gw_help(GW_HELP_DEVICE_PACK, ompi_comm_rank(req->comm), req->comm->c_name, why);
        return -2;
    }
    return device;
}

static int pml_gw_device_temp(mca_pml_gpuwire_request_t *req, int device, size_t size)
{
    char why[256];
    void *tmp = NULL;
    if (0 != gw_dev_temp_get(device, size, &tmp, why, sizeof(why))) {
        gw_help(GW_HELP_DEVICE_PACK, ompi_comm_rank(req->comm), req->comm->c_name, why);
        return MPI_ERR_NO_MEM;
    }
    req->staging = tmp;
    req->staging_kind = PML_GW_STAGING_DEVICE;
    req->staging_len = size;
    req->staging_device = device;
    return MPI_SUCCESS;
}

static int pml_gw_send_prepare_device(mca_pml_gpuwire_request_t *req, int device, size_t size,
                                      const void **addr)
{
    if (req->mode == MCA_PML_BASE_SEND_BUFFERED) {
        gw_help(GW_HELP_BSEND_DEVICE, ompi_comm_rank(req->comm), req->comm->c_name);
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    int rc = pml_gw_device_temp(req, device, size);
    if (MPI_SUCCESS != rc) return rc;
    char why[256];
    if (OMPI_SUCCESS != pml_gw_devdt_pack(req->dtype, req->count, req->buf, device, req->staging,
                                          why, sizeof(why))) {
        gw_help(GW_HELP_DEVICE_PACK, ompi_comm_rank(req->comm), req->comm->c_name, why);
        pml_gw_staging_release(req);
        return MPI_ERR_INTERN;
    }
    *addr = req->staging;
    return MPI_SUCCESS;
}

int pml_gw_send_prepare(mca_pml_gpuwire_request_t *req, const void **addr, size_t *len)
{
    size_t size = pml_gpuwire_packed_size(req->dtype, req->count);
    void *contig;
    *len = size;
    if (req->mode != MCA_PML_BASE_SEND_BUFFERED &&
        pml_gpuwire_contiguous(req->dtype, req->count, req->buf, &contig)) {
        *addr = contig;
        return MPI_SUCCESS;
    }
    if (size == 0) {
        *addr = NULL;
        return MPI_SUCCESS;
    }
    int device = pml_gw_device_of(req);
    if (OPAL_UNLIKELY(device == -2)) return MPI_ERR_INTERN;
    if (device >= 0) return pml_gw_send_prepare_device(req, device, size, addr);
    void *staging;
    if (req->mode == MCA_PML_BASE_SEND_BUFFERED) {
        staging = mca_pml_base_bsend_request_alloc_buf(size);
        if (NULL == staging) {
            PML_GPUWIRE_VERBOSE(1, "buffered send of %zu bytes: no room in the attached buffer",
                                size);
            return MPI_ERR_BUFFER;
        }
        req->staging_kind = PML_GW_STAGING_BSEND;
    } else {
        staging = gw_host_buffer_alloc(size);
        if (NULL == staging) return MPI_ERR_NO_MEM;
        req->staging_kind = PML_GW_STAGING_MALLOC;
    }
    req->staging = staging;
    req->staging_len = size;
    if (pml_gpuwire_pack(req->dtype, req->count, req->buf, staging, size) != OMPI_SUCCESS) {
        pml_gw_staging_release(req);
        return MPI_ERR_INTERN;
    }
    *addr = staging;
    return MPI_SUCCESS;
}

int pml_gw_recv_prepare(mca_pml_gpuwire_request_t *req, void **addr, size_t *cap)
{
    size_t size = pml_gpuwire_packed_size(req->dtype, req->count);
    *cap = size;
    if (pml_gpuwire_contiguous(req->dtype, req->count, req->buf, addr) || size == 0) {
        if (size == 0) *addr = NULL;
        return MPI_SUCCESS;
    }
    int device = pml_gw_device_of(req);
    if (OPAL_UNLIKELY(device == -2)) return MPI_ERR_INTERN;
    if (device >= 0) {
        int rc = pml_gw_device_temp(req, device, size);
        if (MPI_SUCCESS != rc) return rc;
        *addr = req->staging;
        return MPI_SUCCESS;
    }
    req->staging = gw_host_buffer_alloc(size);
    if (NULL == req->staging) return MPI_ERR_NO_MEM;
    req->staging_kind = PML_GW_STAGING_MALLOC;
    req->staging_len = size;
    *addr = req->staging;
    return MPI_SUCCESS;
}

/* Unpacks a staged receive of len bytes into the user's buffer. */
static int pml_gw_recv_unpack(mca_pml_gpuwire_request_t *req, size_t len)
{
    if (req->staging_kind == PML_GW_STAGING_DEVICE) {
        char why[256];
        if (OMPI_SUCCESS != pml_gw_devdt_unpack(req->dtype, req->count, req->buf,
                                                req->staging_device, req->staging, len, why,
                                                sizeof(why))) {
            gw_help(GW_HELP_DEVICE_PACK, ompi_comm_rank(req->comm), req->comm->c_name, why);
            return MPI_ERR_INTERN;
        }
        return MPI_SUCCESS;
    }
    return pml_gpuwire_unpack(req->dtype, req->count, req->buf, req->staging, len) == OMPI_SUCCESS
               ? MPI_SUCCESS
               : MPI_ERR_INTERN;
}

int pml_gw_recv_finish(mca_pml_gpuwire_request_t *req, ompi_status_public_t *status)
{
    gw_request_t *g = &req->gw;
    int err = pml_gw_recv_status(g, pml_gpuwire_packed_size(req->dtype, req->count), status);
    if (req->staging && g->status == GW_OK) {
        int rc = pml_gw_recv_unpack(req, g->length);
        if (MPI_SUCCESS != rc) err = rc;
    }
    pml_gw_staging_release(req);
    return err;
}

static void request_engine_done(gw_request_t *g)
{
    mca_pml_gpuwire_request_t *req = from_gw(g);
    if (req->kind == PML_GW_RECV) {
        req->ompi.req_status.MPI_ERROR = pml_gw_recv_finish(req, &req->ompi.req_status);
    } else {
        pml_gw_staging_release(req);
        req->ompi.req_status.MPI_ERROR = mca_pml_gpuwire_mpi_error(g->status);
        if (g->status != GW_OK) {
            opal_output(0, "pml:gpuwire: send to rank %d of %s failed: %s", req->peer,
                        req->comm->c_name, gw_status_string(g->status));
        }
    }
    if (req->flags & PML_GW_INTERNAL) {
        pml_gw_request_release(req);
        return;
    }
    ompi_request_complete(&req->ompi, true);
    request_vote(req);
}

static int request_free(ompi_request_t **rptr)
{
    mca_pml_gpuwire_request_t *req = (mca_pml_gpuwire_request_t *)*rptr;
    *rptr = MPI_REQUEST_NULL;
    request_vote(req);
    return OMPI_SUCCESS;
}

/* Receives not yet matched are cancelled; sends are never cancelled (MPI
 * allows a cancel to fail): MPI_Test_cancelled reports false and the message
 * is delivered. */
static int request_cancel(ompi_request_t *ompi_req, int flag)
{
    mca_pml_gpuwire_request_t *req = (mca_pml_gpuwire_request_t *)ompi_req;
    if (req->kind == PML_GW_RECV && !REQUEST_COMPLETE(ompi_req) && NULL == req->message) {
        gw_cancel_recv(mca_pml_gpuwire.engine, &req->gw);
    }
    return OMPI_SUCCESS;
}

/* A buffered send completes for MPI as soon as the data is copied: the copy
 * travels in an internal request that frees the buffer space when done. */
static int start_buffered(mca_pml_gpuwire_request_t *req)
{
    mca_pml_gpuwire_request_t *shadow =
        pml_gw_request_get(PML_GW_SEND, PML_GW_INTERNAL, req->buf, req->count, req->dtype,
                           req->peer, req->tag, req->comm, MCA_PML_BASE_SEND_BUFFERED);
    if (NULL == shadow) return MPI_ERR_NO_MEM;
    int rc = pml_gw_request_start(shadow);
    if (MPI_SUCCESS != rc) {
        pml_gw_request_release(shadow);
        return rc;
    }
    req->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
    ompi_request_complete(&req->ompi, true);
    request_vote(req);
    return MPI_SUCCESS;
}

/* A large non-contiguous message on host memory goes to the engine as a
 * layout, packed or unpacked as UCX moves it. 1 when it was not (small,
 * contiguous, buffered, GPU memory, or the engine needs one range): then it
 * is staged; else an MPI error code. */
static int pml_gw_issue_layout(mca_pml_gpuwire_request_t *req, uint32_t peer)
{
    const size_t size = pml_gpuwire_packed_size(req->dtype, req->count);
    if (size < PML_GPUWIRE_LAYOUT_MIN || req->mode == MCA_PML_BASE_SEND_BUFFERED ||
        req->message != NULL ||
        opal_datatype_is_contiguous_memory_layout(&req->dtype->super, (int32_t)req->count) ||
        pml_gw_device_of(req) != -1) {
        return 1;
    }
    const bool send = req->kind == PML_GW_SEND;
    if (OMPI_SUCCESS != pml_gpuwire_layout_init(&req->layout, send, req->dtype, req->count,
                                                req->buf)) {
        return MPI_ERR_INTERN;
    }
    gw_engine_t *engine = mca_pml_gpuwire.engine;
    gw_status_t st =
        send ? gw_isend_layout(engine, &req->gw, peer, gw_comm_cid(req->comm),
                               ompi_comm_rank(req->comm), req->tag, &req->layout.gw,
                               req->mode == MCA_PML_BASE_SEND_SYNCHRONOUS ? GW_SEND_SYNC : 0)
             : gw_irecv_layout(engine, &req->gw, gw_comm_cid(req->comm), req->peer, req->tag,
                               &req->layout.gw);
    if (GW_OK == st) {
        req->staging_kind = PML_GW_STAGING_LAYOUT;
        return MPI_SUCCESS;
    }
    pml_gpuwire_layout_fini(&req->layout);
    return GW_ERR_UNSUPPORTED == st ? 1 : mca_pml_gpuwire_mpi_error(st);
}

int pml_gw_issue(mca_pml_gpuwire_request_t *req)
{
    gw_engine_t *engine = mca_pml_gpuwire.engine;
    gw_status_t st;
    int rc;
    if (req->kind == PML_GW_SEND) {
        uint32_t peer;
        const void *addr;
        size_t len;
        rc = pml_gw_peer_index(req->comm, req->peer, &peer);
        if (OPAL_UNLIKELY(MPI_SUCCESS != rc)) return rc;
        rc = pml_gw_issue_layout(req, peer);
        if (1 != rc) return rc;
        rc = pml_gw_send_prepare(req, &addr, &len);
        if (OPAL_UNLIKELY(MPI_SUCCESS != rc)) return rc;
        unsigned flags = req->mode == MCA_PML_BASE_SEND_SYNCHRONOUS ? GW_SEND_SYNC : 0;
        st = gw_isend(engine, &req->gw, peer, gw_comm_cid(req->comm), ompi_comm_rank(req->comm),
                      req->tag, addr, len, flags);
    } else {
        void *addr;
        size_t cap;
        rc = pml_gw_issue_layout(req, 0);
        if (1 != rc) return rc;
        rc = pml_gw_recv_prepare(req, &addr, &cap);
        if (OPAL_UNLIKELY(MPI_SUCCESS != rc)) return rc;
        st = req->message ? gw_imrecv(engine, &req->gw, req->message, addr, cap)
                          : gw_irecv(engine, &req->gw, gw_comm_cid(req->comm), req->peer,
                                     req->tag, addr, cap);
    }
    if (OPAL_UNLIKELY(GW_OK != st)) {
        pml_gw_staging_release(req);
        return mca_pml_gpuwire_mpi_error(st);
    }
    return MPI_SUCCESS;
}

int pml_gw_request_start(mca_pml_gpuwire_request_t *req)
{
    req->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
    req->ompi.req_status._cancelled = 0;
    req->ompi.req_status._ucount = 0;
    if (req->kind == PML_GW_SEND && req->mode == MCA_PML_BASE_SEND_BUFFERED &&
        !(req->flags & PML_GW_INTERNAL)) {
        return start_buffered(req);
    }
    return pml_gw_issue(req);
}

int mca_pml_gpuwire_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; ++i) {
        ompi_request_t *r = requests[i];
        if (NULL == r || MPI_REQUEST_NULL == r) continue;
        if (r->req_start != mca_pml_gpuwire_start) {
            /* Not ours (e.g. a persistent request to MPI_PROC_NULL). */
            int rc = r->req_start(1, &requests[i]);
            if (MPI_SUCCESS != rc) return rc;
            continue;
        }
        mca_pml_gpuwire_request_t *req = (mca_pml_gpuwire_request_t *)r;
        if (OPAL_UNLIKELY(req->ompi.req_state == OMPI_REQUEST_ACTIVE)) return MPI_ERR_REQUEST;
        req->ompi.req_state = OMPI_REQUEST_ACTIVE;
        req->ompi.req_complete = REQUEST_PENDING;
        req->votes = 0;
        int rc = pml_gw_request_start(req);
        if (OPAL_UNLIKELY(MPI_SUCCESS != rc)) {
            req->ompi.req_status.MPI_ERROR = rc;
            ompi_request_complete(&req->ompi, true);
            request_vote(req);
            return rc;
        }
    }
    return MPI_SUCCESS;
}
