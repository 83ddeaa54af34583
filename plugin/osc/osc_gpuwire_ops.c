/*
 * osc/gpuwire's operations: a contiguous Put or Get to a target whose window
 * this rank has mapped is one copy (the core's direct path, osc_gpuwire_direct.c); otherwise the
 * origin packs its data (staging device buffers through host memory) and
 * sends it with the target's layout; the target applies it to its window
 * (osc_gpuwire_apply.c) and answers the fetching kinds with a reply that the
 * origin unpacks here.
 */
#include "osc_gpuwire.h"

#include <stdlib.h>
#include <string.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/util/output.h"

/* The blocks (offset from the target address, bytes) of count x dt, adjacent
 * ones merged (the core's gw_osc_blocks_add): *l, to be given back with
 * gw_osc_blocks_fini. */
static int flatten(ompi_datatype_t *dt, int count, gw_osc_blocks_t *l)
{
    /* A made-up base: the convertor turns offsets into addresses from it. */
    char *const fake = (char *)((uintptr_t)1 << 40);
    opal_convertor_t conv;
    if (gw_osc_blocks_init(l) != 0) return OMPI_ERR_OUT_OF_RESOURCE;
    if (ompi_datatype_is_contiguous_memory_layout(dt, count)) {
        /* The common case, without a convertor: one block (none when empty). */
        if (gw_osc_blocks_add(l, dt->super.true_lb, (uint64_t)count * dt->super.size) != 0) {
            gw_osc_blocks_fini(l);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        return OMPI_SUCCESS;
    }
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    int rc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dt->super,
                                                      count, fake, 0, &conv);
    int done = rc == OPAL_SUCCESS ? 0 : -1;
    while (done == 0) {
        struct iovec iov[32];
        uint32_t niov = 32;
        size_t len = 0;
        done = opal_convertor_raw(&conv, iov, &niov, &len);
        for (uint32_t i = 0; i < niov && done >= 0; i++) {
            if (gw_osc_blocks_add(l, (char *)iov[i].iov_base - fake, iov[i].iov_len) != 0) {
                done = -1;
            }
        }
    }
    OBJ_DESTRUCT(&conv);
    if (done < 0) {
        gw_osc_blocks_fini(l);
        return OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

/* The predefined type a datatype is made of (accumulates allow one) in *el;
 * MPI_DATATYPE_NULL when it has none. Returns an MPI error code. */
static int element_type(MPI_Datatype dt, MPI_Datatype *el)
{
    *el = MPI_DATATYPE_NULL;
    if (ompi_datatype_is_predefined(dt)) {
        *el = dt;
        return MPI_SUCCESS;
    }
    int ni, na, nd, combiner;
    int rc = PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner);
    if (rc != MPI_SUCCESS) return gw_osc_call_failed("PMPI_Type_get_envelope", rc);
    if (combiner == MPI_COMBINER_NAMED) {
        *el = dt;
        return MPI_SUCCESS;
    }
    if (nd <= 0) return MPI_SUCCESS;
    int *ints = malloc((ni + 1) * sizeof(int));
    MPI_Aint *aints = malloc((na + 1) * sizeof(MPI_Aint));
    MPI_Datatype *dts = malloc(nd * sizeof(MPI_Datatype));
    if (ints == NULL || aints == NULL || dts == NULL) {
        rc = OMPI_ERR_OUT_OF_RESOURCE;
    } else if ((rc = PMPI_Type_get_contents(dt, ni, na, nd, ints, aints, dts)) != MPI_SUCCESS) {
        rc = gw_osc_call_failed("PMPI_Type_get_contents", rc);
    } else {
        rc = element_type(dts[0], el);
        /* The derived types among dts are new handles of ours. (Own
         * variables: nd bounds this loop.) */
        for (int i = 0; i < nd; i++) {
            int ni_i, na_i, nd_i, comb_i;
            int frc = PMPI_Type_get_envelope(dts[i], &ni_i, &na_i, &nd_i, &comb_i);
            if (frc != MPI_SUCCESS) {
                frc = gw_osc_call_failed("PMPI_Type_get_envelope", frc);
            } else if (comb_i != MPI_COMBINER_NAMED &&
                       (frc = PMPI_Type_free(&dts[i])) != MPI_SUCCESS) {
                frc = gw_osc_call_failed("PMPI_Type_free", frc);
            }
            if (rc == MPI_SUCCESS) rc = frc;
        }
    }
    free(ints);
    free(aints);
    free(dts);
    if (rc != MPI_SUCCESS) *el = MPI_DATATYPE_NULL;
    return rc;
}

/* Where count x dt at addr lies: from its first byte (addr + true lower
 * bound) over span bytes, on GPU gpu (-1: host memory); contig when those
 * bytes are all data, so that they can be copied as they are. */
typedef struct {
    MPI_Aint tlb;
    char *first;
    size_t span;
    bool contig;
    int gpu;
} gw_osc_layout_t;

static int layout_of(const void *addr, int count, ompi_datatype_t *dt, gw_osc_layout_t *l)
{
    MPI_Aint lb, extent, textent;
    int rc = PMPI_Type_get_extent(dt, &lb, &extent);
    if (rc != MPI_SUCCESS) return gw_osc_call_failed("PMPI_Type_get_extent", rc);
    rc = PMPI_Type_get_true_extent(dt, &l->tlb, &textent);
    if (rc != MPI_SUCCESS) return gw_osc_call_failed("PMPI_Type_get_true_extent", rc);
    l->first = (char *)addr + l->tlb;
    l->span = (size_t)(count - 1) * extent + textent;
    l->contig = (size_t)textent == dt->super.size &&
                ((size_t)extent == dt->super.size || count == 1);
    l->gpu = gw_osc_dev_where(l->first, l->span);
    return MPI_SUCCESS;
}

/* Host bytes of count x dt at addr, packed. *tmp is set when memory was
 * allocated (free it); device buffers are staged over their whole span. */
static int pack_origin(const void *addr, int count, ompi_datatype_t *dt, size_t bytes,
                       const void **packed, void **tmp)
{
    *tmp = NULL;
    *packed = NULL;
    if (bytes == 0) return OMPI_SUCCESS;
    gw_osc_layout_t l;
    int rc = layout_of(addr, count, dt, &l);
    if (rc != MPI_SUCCESS) return rc;
    const char *src = l.first;
    if (l.gpu < 0 && l.contig) {
        *packed = src;
        return OMPI_SUCCESS;
    }
    char *staged = NULL;
    if (l.gpu >= 0) {
        staged = malloc(l.span);
        if (staged == NULL) return OMPI_ERR_OUT_OF_RESOURCE;
        if (gw_osc_dev_copy(staged, src, l.span, l.gpu) != 0) {
            free(staged);
            return OMPI_ERROR;
        }
        if (l.contig) {
            *packed = *tmp = staged;
            return OMPI_SUCCESS;
        }
        src = staged;
    }
    char *out = malloc(bytes);
    int pos = 0;
    rc = out == NULL ? OMPI_ERR_OUT_OF_RESOURCE
                     : PMPI_Pack(src - l.tlb, count, dt, out, (int)bytes, &pos, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) {
        if (out != NULL) rc = gw_osc_call_failed("PMPI_Pack", rc);
        free(out);
        free(staged);
        return rc;
    }
    free(staged);
    *packed = *tmp = out;
    return OMPI_SUCCESS;
}

/* The reverse: packed host bytes into count x dt at addr. */
static int unpack_result(const char *bytes_in, size_t bytes, void *addr, int count,
                         ompi_datatype_t *dt)
{
    if (bytes == 0) return OMPI_SUCCESS;
    gw_osc_layout_t l;
    int rc = layout_of(addr, count, dt, &l);
    if (rc != MPI_SUCCESS) return rc;
    char *dst = l.first;
    if (l.contig) {
        size_t len = bytes < l.span ? bytes : l.span;
        if (l.gpu < 0) {
            memcpy(dst, bytes_in, len);
            return OMPI_SUCCESS;
        }
        return gw_osc_dev_copy(dst, bytes_in, len, l.gpu) == 0 ? OMPI_SUCCESS : OMPI_ERROR;
    }
    char *host = dst;
    if (l.gpu >= 0) {
        /* Keep the gaps: bring the span over, unpack into it, send it back. */
        host = malloc(l.span);
        if (host == NULL || gw_osc_dev_copy(host, dst, l.span, l.gpu) != 0) {
            free(host);
            return OMPI_ERROR;
        }
    }
    int pos = 0;
    rc = PMPI_Unpack(bytes_in, (int)bytes, &pos, host - l.tlb, count, dt, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) rc = gw_osc_call_failed("PMPI_Unpack", rc);
    if (l.gpu >= 0) {
        if (rc == MPI_SUCCESS && gw_osc_dev_copy(dst, host, l.span, l.gpu) != 0)
            rc = MPI_ERR_OTHER;
        free(host);
    }
    return rc == MPI_SUCCESS ? OMPI_SUCCESS : OMPI_ERROR;
}

static int greq_query(void *extra, MPI_Status *status)
{
    (void)extra;
    int rc = PMPI_Status_set_elements(status, MPI_BYTE, 0);
    if (rc != MPI_SUCCESS) return gw_osc_call_failed("PMPI_Status_set_elements", rc);
    rc = PMPI_Status_set_cancelled(status, 0);
    if (rc != MPI_SUCCESS) return gw_osc_call_failed("PMPI_Status_set_cancelled", rc);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int greq_free(void *extra)
{
    (void)extra;
    return MPI_SUCCESS;
}
static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* The request of an R* operation: a generalized request that
 * greq_complete() completes. */
static int greq_start(ompi_request_t **request)
{
    int rc = PMPI_Grequest_start(greq_query, greq_free, greq_cancel, NULL, request);
    return rc == MPI_SUCCESS ? rc : gw_osc_call_failed("PMPI_Grequest_start", rc);
}

static int greq_complete(ompi_request_t *request)
{
    int rc = PMPI_Grequest_complete(request);
    return rc == MPI_SUCCESS ? rc : gw_osc_call_failed("PMPI_Grequest_complete", rc);
}

/* An R* operation that is done at once. */
static int greq_done(ompi_request_t **request)
{
    int rc = greq_start(request);
    return rc == MPI_SUCCESS ? greq_complete(*request) : rc;
}

typedef struct {
    uint32_t kind;
    const void *oaddr;
    int ocount;
    ompi_datatype_t *odt;
    const void *compare;
    void *raddr;
    int rcount;
    ompi_datatype_t *rdt;
    int target;
    ptrdiff_t tdisp;
    int tcount;
    ompi_datatype_t *tdt;
    struct ompi_op_t *op;
    ompi_request_t **request; /* R* forms */
} gw_osc_call_t;

/* count x dt is one contiguous run of bytes (dt NULL: no). */
static bool one_run(int count, const ompi_datatype_t *dt, size_t bytes)
{
    return dt != NULL && (size_t)count * dt->super.size == bytes &&
           ompi_datatype_is_contiguous_memory_layout(dt, count);
}

/* An accumulate of predefined elements, each buffer one contiguous run, to
 * a window this rank reaches (host, in shared memory or by cross-memory
 * attach, or device): done here
 * (gw_osc_apply_direct), unless an operation this rank sent target as a
 * message may still be unapplied (it must land first: MPI orders one
 * origin's accumulates). A target without a word mapped here (another
 * node) costs one look-up. */
static bool acc_direct(gw_osc_module_t *m, const gw_osc_call_t *c, int *rc)
{
    int *word = gw_osc_lockwords_acc(m->locks, c->target);
    if (word == NULL || !ompi_datatype_is_predefined(c->tdt)) return false;
    const size_t bytes = (size_t)c->tcount * c->tdt->super.size;
    const bool cas = c->kind == GW_OSC_CAS, noop = c->op == MPI_NO_OP;
    if (!one_run(c->tcount, c->tdt, bytes) ||
        (!cas && !noop && !one_run(c->ocount, c->odt, bytes)) ||
        (gw_osc_fetches(c->kind) && !one_run(c->rcount, c->rdt, bytes))) {
        return false;
    }
    OPAL_THREAD_LOCK(&m->lock);
    const bool settled = m->sync.sent[c->target] == m->sync.acked[c->target];
    OPAL_THREAD_UNLOCK(&m->lock);
    if (!settled) return false;
    const void *o = noop ? NULL : cas ? c->oaddr : (const char *)c->oaddr + c->odt->super.true_lb;
    void *r = c->raddr != NULL ? (char *)c->raddr + c->rdt->super.true_lb : NULL;
    return gw_osc_apply_direct(m, word, c->kind, c->target, c->tdisp, c->tdt->super.true_lb,
                               bytes, o, c->compare, r, c->tdt, c->op, rc) != GW_OSC_DIRECT_NO;
}

static int issue(ompi_win_t *win, const gw_osc_call_t *c)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (c->target == MPI_PROC_NULL) {
        return c->request ? greq_done(c->request) : OMPI_SUCCESS;
    }
    if (c->target < 0 || c->target >= m->size) return OMPI_ERR_RMA_RANGE;
    if ((c->kind == GW_OSC_PUT || c->kind == GW_OSC_GET) && m->direct != NULL) {
        const bool put = c->kind == GW_OSC_PUT;
        int drc = OMPI_SUCCESS;
        if (gw_osc_direct_try(m, put, put ? (void *)c->oaddr : c->raddr,
                              put ? c->ocount : c->rcount, put ? c->odt : c->rdt, c->target,
                              c->tdisp, c->tcount, c->tdt, c->request != NULL, &drc)) {
            if (c->request && drc == OMPI_SUCCESS) drc = greq_done(c->request);
            return drc;
        }
    }
    if (c->kind != GW_OSC_PUT && c->kind != GW_OSC_GET && m->direct != NULL) {
        int drc = OMPI_SUCCESS;
        if (acc_direct(m, c, &drc)) {
            if (c->request && drc == OMPI_SUCCESS) drc = greq_done(c->request);
            return drc;
        }
    }
    /* Outside the target's window: refused here, not dropped there (the
     * direct path above checks its own). */
    if (!gw_osc_in_window(m, c->target, c->tdisp, c->tcount, c->tdt)) {
        opal_output_verbose(1, gw_osc_state.output,
                            "osc:gpuwire: rank %d: an access to rank %d's window at displacement "
                            "%td (%d elements) lies outside it", m->rank, c->target, c->tdisp,
                            c->tcount);
        return OMPI_ERR_RMA_RANGE;
    }
    gw_osc_hdr_t h = {.kind = c->kind, .disp = c->tdisp};
    gw_osc_blocks_t blocks;
    size_t tbytes = (size_t)c->tcount * c->tdt->super.size;
    int rc = flatten(c->tdt, c->tcount, &blocks);
    if (rc != OMPI_SUCCESS) return rc;
    h.nblocks = blocks.n;
    h.bytes = tbytes;
    if (c->op != NULL || c->kind == GW_OSC_CAS) {
        MPI_Datatype el;
        rc = element_type(c->tdt, &el);
        if (rc != MPI_SUCCESS || el == MPI_DATATYPE_NULL) {
            gw_osc_blocks_fini(&blocks);
            return rc != MPI_SUCCESS ? rc : OMPI_ERR_BAD_PARAM;
        }
        h.type = PMPI_Type_c2f(el);
        h.op = c->op ? PMPI_Op_c2f(c->op) : 0;
    }
    const void *payload = NULL;
    void *tmp = NULL;
    size_t plen = 0;
    char cas[2 * 16];
    char ref[GW_OSC_DESC_BYTES];
    if (c->kind == GW_OSC_CAS) {
        /* Origin value, then compare value: one element each (<= 16 bytes). */
        size_t sz = c->tdt->super.size;
        if (sz > 16) {
            gw_osc_blocks_fini(&blocks);
            return OMPI_ERR_BAD_PARAM;
        }
        const void *p1, *p2;
        void *t1 = NULL, *t2 = NULL;
        rc = pack_origin(c->oaddr, 1, c->tdt, sz, &p1, &t1);
        if (rc == OMPI_SUCCESS) rc = pack_origin(c->compare, 1, c->tdt, sz, &p2, &t2);
        if (rc == OMPI_SUCCESS) {
            memcpy(cas, p1, sz);
            memcpy(cas + sz, p2, sz);
        }
        free(t1); /* (also when only the compare value failed) */
        free(t2);
        payload = cas;
        plen = 2 * sz;
    } else if (c->kind == GW_OSC_ACC && c->request == NULL &&
               gw_osc_direct_by_ref(m, c->oaddr, c->ocount, c->odt, c->target, c->tcount,
                                    c->tdt, PMPI_Type_f2c(h.type), c->op, ref)) {
        /* By reference: the target reduces from the origin buffer itself. */
        h.aux = GW_OSC_BY_REF;
        payload = ref;
        plen = sizeof(ref);
    } else if (c->kind != GW_OSC_GET && !(c->op != NULL && c->op == MPI_NO_OP)) {
        plen = (size_t)c->ocount * c->odt->super.size;
        if (plen != tbytes) {
            gw_osc_blocks_fini(&blocks);
            return OMPI_ERR_BAD_PARAM; /* MPI: the type signatures must match */
        }
        rc = pack_origin(c->oaddr, c->ocount, c->odt, plen, &payload, &tmp);
    }
    if (rc != OMPI_SUCCESS) {
        gw_osc_blocks_fini(&blocks);
        return rc;
    }
    if (c->request && (rc = greq_start(c->request)) != MPI_SUCCESS) {
        free(tmp);
        gw_osc_blocks_fini(&blocks);
        return rc;
    }
    opal_mutex_lock(&m->lock);
    if (gw_osc_fetches(c->kind)) {
        gw_osc_pending_t *p = OBJ_NEW(gw_osc_pending_t);
        p->id = h.count = ++m->next_id;
        p->addr = c->raddr;
        p->count = c->rcount;
        p->dt = c->rdt;
        OMPI_DATATYPE_RETAIN(p->dt);
        p->greq = c->request ? *c->request : NULL;
        p->done = false;
        opal_list_append(&m->pending, &p->super);
    }
    m->sync.sent[c->target]++;
    if (h.aux == GW_OSC_BY_REF) {
        rc = gw_osc_sync_ref_sent(&m->sync, c->target);
        if (rc != 0) {
            opal_mutex_unlock(&m->lock);
            gw_osc_blocks_fini(&blocks);
            return gw_osc_rc(rc);
        }
        gw_osc_count(&gw_osc_state.acc_by_ref, 1);
    }
    rc = gw_osc_send(m, c->target, &h, blocks.b, h.nblocks * sizeof(*blocks.b), payload,
                     plen);
    opal_mutex_unlock(&m->lock);
    if (c->request && !gw_osc_fetches(c->kind)) {
        /* Sent from a copy: the origin buffer is free again. */
        int crc = greq_complete(*c->request);
        if (rc == OMPI_SUCCESS) rc = crc;
    }
    free(tmp);
    gw_osc_blocks_fini(&blocks);
    return rc;
}

/* Origin side: the reply to pending get h->count. Caller holds m->lock. */
void gw_osc_reply(gw_osc_module_t *m, const gw_osc_hdr_t *h, const char *body)
{
    gw_osc_pending_t *p;
    OPAL_LIST_FOREACH(p, &m->pending, gw_osc_pending_t) {
        if (p->id != h->count) continue;
        if (unpack_result(body, h->bytes, p->addr, p->count, p->dt) != OMPI_SUCCESS) {
            opal_output(0, "osc:gpuwire: the result of a get could not be stored at %p",
                        p->addr);
        }
        opal_list_remove_item(&m->pending, &p->super);
        if (p->greq) (void)greq_complete(p->greq); /* (a failure has its line) */
        OBJ_RELEASE(p);
        return;
    }
    opal_output(0, "osc:gpuwire: reply %llu matches no get; dropped",
                (unsigned long long)h->count);
}

/* Each blocking form is its R form without a request. */
int gw_osc_put(const void *oaddr, int ocount, ompi_datatype_t *odt, int target,
               ptrdiff_t tdisp, int tcount, ompi_datatype_t *tdt, ompi_win_t *win)
{
    return gw_osc_rput(oaddr, ocount, odt, target, tdisp, tcount, tdt, win, NULL);
}

int gw_osc_rput(const void *oaddr, int ocount, ompi_datatype_t *odt, int target,
                ptrdiff_t tdisp, int tcount, ompi_datatype_t *tdt, ompi_win_t *win,
                ompi_request_t **request)
{
    gw_osc_call_t c = {.kind = GW_OSC_PUT, .oaddr = oaddr, .ocount = ocount, .odt = odt,
                       .target = target, .tdisp = tdisp, .tcount = tcount, .tdt = tdt,
                       .request = request};
    return issue(win, &c);
}

int gw_osc_get(void *oaddr, int ocount, ompi_datatype_t *odt, int target, ptrdiff_t tdisp,
               int tcount, ompi_datatype_t *tdt, ompi_win_t *win)
{
    return gw_osc_rget(oaddr, ocount, odt, target, tdisp, tcount, tdt, win, NULL);
}

int gw_osc_rget(void *oaddr, int ocount, ompi_datatype_t *odt, int target, ptrdiff_t tdisp,
                int tcount, ompi_datatype_t *tdt, ompi_win_t *win, ompi_request_t **request)
{
    gw_osc_call_t c = {.kind = GW_OSC_GET, .raddr = oaddr, .rcount = ocount, .rdt = odt,
                       .target = target, .tdisp = tdisp, .tcount = tcount, .tdt = tdt,
                       .request = request};
    return issue(win, &c);
}

int gw_osc_accumulate(const void *oaddr, int ocount, ompi_datatype_t *odt, int target,
                      ptrdiff_t tdisp, int tcount, ompi_datatype_t *tdt, struct ompi_op_t *op,
                      ompi_win_t *win)
{
    return gw_osc_raccumulate(oaddr, ocount, odt, target, tdisp, tcount, tdt, op, win, NULL);
}

int gw_osc_raccumulate(const void *oaddr, int ocount, ompi_datatype_t *odt, int target,
                       ptrdiff_t tdisp, int tcount, ompi_datatype_t *tdt, struct ompi_op_t *op,
                       ompi_win_t *win, ompi_request_t **request)
{
    gw_osc_call_t c = {.kind = GW_OSC_ACC, .oaddr = oaddr, .ocount = ocount, .odt = odt,
                       .target = target, .tdisp = tdisp, .tcount = tcount, .tdt = tdt,
                       .op = op, .request = request};
    return issue(win, &c);
}

int gw_osc_get_accumulate(const void *oaddr, int ocount, ompi_datatype_t *odt, void *raddr,
                          int rcount, ompi_datatype_t *rdt, int target, ptrdiff_t tdisp,
                          int tcount, ompi_datatype_t *tdt, struct ompi_op_t *op, ompi_win_t *win)
{
    return gw_osc_rget_accumulate(oaddr, ocount, odt, raddr, rcount, rdt, target, tdisp, tcount,
                                  tdt, op, win, NULL);
}

int gw_osc_rget_accumulate(const void *oaddr, int ocount, ompi_datatype_t *odt, void *raddr,
                           int rcount, ompi_datatype_t *rdt, int target, ptrdiff_t tdisp,
                           int tcount, ompi_datatype_t *tdt, struct ompi_op_t *op, ompi_win_t *win,
                           ompi_request_t **request)
{
    gw_osc_call_t c = {.kind = GW_OSC_GACC, .oaddr = oaddr, .ocount = ocount, .odt = odt,
                       .raddr = raddr, .rcount = rcount, .rdt = rdt, .target = target,
                       .tdisp = tdisp, .tcount = tcount, .tdt = tdt, .op = op,
                       .request = request};
    return issue(win, &c);
}

int gw_osc_fetch_and_op(const void *oaddr, void *raddr, ompi_datatype_t *dt, int target,
                        ptrdiff_t tdisp, struct ompi_op_t *op, ompi_win_t *win)
{
    return gw_osc_rget_accumulate(oaddr, 1, dt, raddr, 1, dt, target, tdisp, 1, dt, op, win,
                                  NULL);
}

int gw_osc_compare_and_swap(const void *oaddr, const void *compare, void *raddr,
                            ompi_datatype_t *dt, int target, ptrdiff_t tdisp, ompi_win_t *win)
{
    gw_osc_call_t c = {.kind = GW_OSC_CAS, .oaddr = oaddr, .compare = compare, .raddr = raddr,
                       .rcount = 1, .rdt = dt, .target = target, .tdisp = tdisp, .tcount = 1,
                       .tdt = dt};
    return issue(win, &c);
}
