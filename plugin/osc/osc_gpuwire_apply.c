/*
 * osc/gpuwire's target side: an operation applied to the window's memory,
 * host or device (staged through host memory), one at a time per window.
 * The blocks are located and applied by the core's one-sided engine
 * (gw_osc_apply_blocks, gpuwire/osc.h); here are what it calls back for --
 * device copies, the reduction of an MPI op (by the core's GPU kernels,
 * gpuwire/osc_direct.h, else MPI_Reduce_local) -- and accumulates sent by
 * reference.
 */
#include "osc_gpuwire.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/proc/proc.h"
#include "opal/util/output.h"

/* The window as the core's one-sided engine sees it (gpuwire/osc.h). */
static gw_osc_window_t window_of(const gw_osc_module_t *m)
{
    return (gw_osc_window_t){.dynamic = m->flavor == MPI_WIN_FLAVOR_DYNAMIC,
                             .base = m->base,
                             .size = m->win_size,
                             .disp_unit = m->disp_unit,
                             .gpu = m->win_gpu,
                             .regions = m->regions,
                             .nregions = m->nregions};
}

static int copy_in(char *dst, const char *src, size_t len, int gpu)
{
    if (gpu < 0) {
        memcpy(dst, src, len);
        return 0;
    }
    return gw_osc_dev_copy(dst, src, len, gpu);
}

/* dst = src op dst over len bytes of type elements. */
static int combine(char *dst, const char *src, size_t len, MPI_Datatype type, MPI_Op op, int gpu)
{
    if (op == MPI_NO_OP) return 0;
    if (op == MPI_REPLACE) return copy_in(dst, src, len, gpu);
    int tsize = 0;
    int rc = PMPI_Type_size(type, &tsize);
    if (rc != MPI_SUCCESS) {
        (void)gw_osc_call_failed("PMPI_Type_size", rc);
        return -1;
    }
    if (tsize <= 0 || len % tsize) return -1;
    char *host = dst;
    if (gpu >= 0) {
        int done =
            gw_osc_dev_reduce(dst, src, len, gw_osc_kernel_op(op), gw_osc_kernel_type(type), gpu);
        if (done != 0) return done > 0 ? 0 : -1;
        /* No kernel for it: through host memory. */
        host = malloc(len);
        if (host == NULL || gw_osc_dev_copy(host, dst, len, gpu) != 0) {
            free(host);
            return -1;
        }
    }
    rc = PMPI_Reduce_local(src, host, (int)(len / tsize), type, op);
    if (rc != MPI_SUCCESS) (void)gw_osc_call_failed("PMPI_Reduce_local", rc);
    if (gpu >= 0) {
        if (rc == MPI_SUCCESS && gw_osc_dev_copy(dst, host, len, gpu) != 0) rc = MPI_ERR_OTHER;
        free(host);
    }
    return rc == MPI_SUCCESS ? 0 : -1;
}

/* An Accumulate sent by reference: payload is the description of the
 * origin's device buffer, on this window's GPU (osc_gpuwire_direct.c). */
static int apply_by_ref(gw_osc_module_t *m, int origin, const gw_osc_hdr_t *h,
                        const gw_osc_block_t *blocks, const char *desc, MPI_Datatype type,
                        MPI_Op op)
{
    int gpu = -1;
    const gw_osc_window_t w = window_of(m);
    char *at = h->nblocks == 1 ? gw_osc_locate(&w, h->disp, blocks[0].off, blocks[0].len, &gpu)
                               : NULL;
    ompi_proc_t *p = ompi_comm_peer_lookup(m->comm, origin);
    if (at == NULL || gpu < 0 || p == NULL) {
        opal_output(0, "osc:gpuwire: rank %d's accumulate by reference does not fit rank %d's "
                    "device window; dropped", origin, m->rank);
        return -1;
    }
    return gw_osc_dev_reduce_mapped(at, desc, (uint32_t)p->super.proc_name.vpid, blocks[0].len,
                                    gw_osc_kernel_op(op), gw_osc_kernel_type(type), gpu);
}

/* What the engine's gw_osc_apply_blocks leaves to Open MPI and the GPU:
 * device copies, and the reduction of op on type. */
typedef struct {
    MPI_Datatype type;
    MPI_Op op;
} apply_ctx_t;

static int mem_copy(void *ctx, void *dst, const void *src, size_t len, int gpu)
{
    (void)ctx;
    return gw_osc_dev_copy(dst, src, len, gpu);
}

static int mem_combine(void *ctx, void *dst, const void *src, size_t len, int32_t type,
                       int32_t op, int gpu)
{
    (void)type;
    (void)op;
    const apply_ctx_t *c = ctx;
    return combine(dst, src, len, c->type, c->op, gpu);
}

/* Whether an element of type has a gap between its parts (MPI_SHORT_INT: a
 * short, two bytes of padding, an int): the target's blocks then split
 * elements, which combine() cannot reduce piece by piece. */
static bool gapped(MPI_Datatype type)
{
    return ompi_datatype_is_predefined(type) && !ompi_datatype_is_contiguous_memory_layout(type, 1);
}

/* Moves the packed bytes of the target's blocks between the window and
 * packed (to_window: into the window). */
static int blocks_move(const gw_osc_window_t *w, const gw_osc_hdr_t *h,
                       const gw_osc_block_t *blocks, char *packed, bool to_window,
                       gw_osc_miss_t *miss)
{
    size_t pos = 0;
    for (uint32_t i = 0; i < h->nblocks; i++) {
        int gpu = -1;
        char *at = gw_osc_locate(w, h->disp, blocks[i].off, blocks[i].len, &gpu);
        if (at == NULL) {
            miss->at = h->disp + blocks[i].off;
            miss->len = blocks[i].len;
            return GW_OSC_ERR_RANGE;
        }
        if (to_window ? copy_in(at, packed + pos, blocks[i].len, gpu) != 0
                      : (gpu < 0 ? (memcpy(packed + pos, at, blocks[i].len), 0)
                                 : gw_osc_dev_copy(packed + pos, at, blocks[i].len, gpu)) != 0) {
            return GW_OSC_ERR_FAILED;
        }
        pos += blocks[i].len;
    }
    return 0;
}

/* mine_packed = theirs_packed op mine_packed over n whole elements of type,
 * packed both (bytes each); mine and theirs are scratch of n extents each,
 * where the elements are unpacked whole. Returns an MPI error code. */
static int reduce_packed(char *mine_packed, const char *theirs_packed, size_t bytes, int n,
                         MPI_Datatype type, MPI_Op op, MPI_Aint lb, MPI_Aint extent,
                         char *mine, char *theirs)
{
    int pos = 0, rc = PMPI_Unpack(mine_packed, (int)bytes, &pos, mine - lb, n, type,
                                  MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) return gw_osc_call_failed("PMPI_Unpack", rc);
    pos = 0;
    rc = PMPI_Unpack(theirs_packed, (int)bytes, &pos, theirs - lb, n, type, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) return gw_osc_call_failed("PMPI_Unpack", rc);
    if (op == MPI_REPLACE) {
        memcpy(mine, theirs, (size_t)n * extent);
    } else if ((rc = PMPI_Reduce_local(theirs - lb, mine - lb, n, type, op)) != MPI_SUCCESS) {
        return gw_osc_call_failed("PMPI_Reduce_local", rc);
    }
    pos = 0;
    rc = PMPI_Pack(mine - lb, n, type, mine_packed, (int)bytes, &pos, MPI_COMM_SELF);
    return rc == MPI_SUCCESS ? MPI_SUCCESS : gw_osc_call_failed("PMPI_Pack", rc);
}

/* Accumulate or Get_accumulate of elements with a gap (gapped()): the
 * target's bytes are gathered packed (and kept for the reply when the origin
 * fetches), unpacked into whole elements beside the origin's, reduced by
 * MPI_Reduce_local, packed and written back. */
static int apply_gapped(const gw_osc_window_t *w, const gw_osc_hdr_t *h, const char *body,
                        char *reply, const apply_ctx_t *c, gw_osc_miss_t *miss)
{
    const gw_osc_block_t *blocks = (const gw_osc_block_t *)body;
    const char *payload = body + h->nblocks * sizeof(*blocks);
    int tsize = 0;
    MPI_Aint lb = 0, extent = 0;
    if (PMPI_Type_size(c->type, &tsize) != MPI_SUCCESS || tsize <= 0 ||
        PMPI_Type_get_extent(c->type, &lb, &extent) != MPI_SUCCESS || h->bytes % tsize) {
        return GW_OSC_ERR_FAILED;
    }
    const int n = (int)(h->bytes / tsize);
    if (n == 0) return 0;
    char *old = malloc(h->bytes);
    char *mine = malloc((size_t)n * extent), *theirs = malloc((size_t)n * extent);
    int rc = old == NULL || mine == NULL || theirs == NULL ? GW_OSC_ERR_FAILED : 0;
    if (rc == 0) rc = blocks_move(w, h, blocks, old, false, miss);
    if (rc == 0 && reply != NULL) memcpy(reply, old, h->bytes);
    if (rc == 0 && c->op != MPI_NO_OP) {
        rc = reduce_packed(old, payload, h->bytes, n, c->type, c->op, lb, extent, mine, theirs) ==
                     MPI_SUCCESS
                 ? blocks_move(w, h, blocks, old, true, miss)
                 : GW_OSC_ERR_FAILED;
    }
    free(old);
    free(mine);
    free(theirs);
    return rc;
}

void gw_osc_apply(gw_osc_module_t *m, int origin, const gw_osc_hdr_t *h, const char *body)
{
    const gw_osc_block_t *blocks = (const gw_osc_block_t *)body;
    const char *payload = body + h->nblocks * sizeof(*blocks);
    const bool fetch = gw_osc_fetches(h->kind);
    const size_t rlen = sizeof(gw_osc_hdr_t) + h->bytes;
    char *rmsg = NULL, *reply = NULL; /* the reply message; its payload */
    apply_ctx_t c = {
        .type = h->type ? PMPI_Type_f2c(h->type) : MPI_BYTE,
        .op = h->kind == GW_OSC_ACC || h->kind == GW_OSC_GACC ? PMPI_Op_f2c(h->op) : MPI_OP_NULL};

    if (h->kind == GW_OSC_ACC && h->aux == GW_OSC_BY_REF) {
        (void)apply_by_ref(m, origin, h, blocks, payload, c.type, c.op);
        return;
    }
    if (fetch) {
        /* The old bytes are read straight into the reply message. */
        rmsg = gw_osc_buf_get(rlen);
        if (rmsg == NULL) {
            opal_output(0, "osc:gpuwire: out of memory for a reply of %llu bytes",
                        (unsigned long long)h->bytes);
            abort();
        }
        reply = rmsg + sizeof(gw_osc_hdr_t);
    }
    const gw_osc_window_t w = window_of(m);
    const gw_osc_mem_ops_t ops = {.copy = mem_copy, .combine = mem_combine, .ctx = &c};
    gw_osc_miss_t miss = {0, 0};
    int rc = (h->kind == GW_OSC_ACC || h->kind == GW_OSC_GACC) && gapped(c.type)
                 ? apply_gapped(&w, h, body, reply, &c, &miss)
                 : gw_osc_apply_blocks(&w, h, body, reply, &ops, &miss);
    if (rc == GW_OSC_ERR_RANGE) {
        opal_output(0, "osc:gpuwire: rank %d accessed [%lld, +%llu) outside rank %d's window; "
                    "operation dropped", origin, (long long)miss.at,
                    (unsigned long long)miss.len, m->rank);
    }
    if (rc != 0) {
        opal_output(0, "osc:gpuwire: an operation of kind %u from rank %d failed at rank %d",
                    h->kind, origin, m->rank);
    }
    if (fetch) {
        const gw_osc_hdr_t r = {.kind = GW_OSC_REPLY, .bytes = h->bytes, .count = h->count};
        memcpy(rmsg, &r, sizeof(r));
        (void)gw_osc_send_buf(m, origin, rmsg, rlen); /* (a failure has its line) */
    }
}

int gw_osc_apply_direct(gw_osc_module_t *m, int *word, uint32_t kind, int target,
                        ptrdiff_t tdisp, int64_t off, size_t bytes, const void *origin,
                        const void *compare, void *result, MPI_Datatype el, MPI_Op op, int *rc)
{
    apply_ctx_t c = {.type = el, .op = kind == GW_OSC_CAS ? MPI_OP_NULL : op};
    const gw_osc_mem_ops_t ops = {.copy = mem_copy, .combine = mem_combine, .ctx = &c};
    int erc = 0;
    /* (The kernels' ids for a device window; combine takes the handles.) */
    int r = gw_osc_direct_acc(m->direct, word, kind, target, tdisp, off, bytes, origin, compare,
                              result, gw_osc_kernel_type(el), gw_osc_kernel_op(op), &ops, &erc);
    if (r == GW_OSC_DIRECT_BUSY) {
        gw_osc_count(&gw_osc_state.acc_word_busy, 1);
        return GW_OSC_DIRECT_NO;
    }
    if (r != GW_OSC_DIRECT_NO) {
        gw_osc_count(&gw_osc_state.direct_accs, 1);
        *rc = gw_osc_rc(erc);
    }
    return r;
}
