/*
 * osc/gpuwire's target side: an operation applied to the window's memory,
 * host or device (staged through host memory), one at a time per window.
 */
#include "osc_gpuwire.h"

#include <stdlib.h>
#include <string.h>

#include "osc_gpuwire_device.h"
#include "ompi/proc/proc.h"
#include "opal/util/output.h"

/* Where [disp + off, + len) lies in this window, and on which GPU; NULL when
 * outside it. */
static char *locate(gw_osc_module_t *m, int64_t disp, int64_t off, uint64_t len, int *gpu)
{
    if (m->flavor == MPI_WIN_FLAVOR_DYNAMIC) {
        uintptr_t a = (uintptr_t)disp + (uintptr_t)off;
        for (int i = 0; i < m->nregions; i++) {
            gw_osc_region_t *r = &m->regions[i];
            if (a >= (uintptr_t)r->base && a + len <= (uintptr_t)r->base + r->len) {
                *gpu = r->gpu;
                return (char *)a;
            }
        }
        return NULL;
    }
    int64_t at = disp * m->disp_unit + off;
    if (at < 0 || (uint64_t)at + len > m->win_size) return NULL;
    *gpu = m->win_gpu;
    return m->base + at;
}

static int copy_in(char *dst, const char *src, size_t len, int gpu)
{
    if (gpu < 0) {
        memcpy(dst, src, len);
        return 0;
    }
    return gw_osc_dev_copy(dst, src, len, gpu);
}

static int copy_out(char *dst, const char *src, size_t len, int gpu)
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
        int done = gw_osc_dev_reduce(dst, src, len, type, op, gpu);
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
    char *at = h->nblocks == 1 ? locate(m, h->disp, blocks[0].off, blocks[0].len, &gpu) : NULL;
    ompi_proc_t *p = ompi_comm_peer_lookup(m->comm, origin);
    if (at == NULL || gpu < 0 || p == NULL) {
        opal_output(0, "osc:gpuwire: rank %d's accumulate by reference does not fit rank %d's "
                    "device window; dropped", origin, m->rank);
        return -1;
    }
    return gw_osc_dev_reduce_mapped(at, desc, (uint32_t)p->super.proc_name.vpid, blocks[0].len,
                                    type, op, gpu);
}

void gw_osc_apply(gw_osc_module_t *m, int origin, const gw_osc_hdr_t *h, const char *body)
{
    const gw_osc_block_t *blocks = (const gw_osc_block_t *)body;
    const char *payload = body + h->nblocks * sizeof(*blocks);
    bool fetch = h->kind == GW_OSC_GET || h->kind == GW_OSC_GACC || h->kind == GW_OSC_CAS;
    char *reply = NULL;
    int failed = 0;
    MPI_Datatype type = h->type ? PMPI_Type_f2c(h->type) : MPI_BYTE;
    MPI_Op op = h->kind == GW_OSC_ACC || h->kind == GW_OSC_GACC ? PMPI_Op_f2c(h->op) : MPI_OP_NULL;

    if (h->kind == GW_OSC_ACC && h->aux == GW_OSC_BY_REF) {
        (void)apply_by_ref(m, origin, h, blocks, payload, type, op);
        return;
    }
    if (fetch) {
        reply = malloc(h->bytes ? h->bytes : 1);
        if (reply == NULL) {
            opal_output(0, "osc:gpuwire: out of memory for a reply of %llu bytes",
                        (unsigned long long)h->bytes);
            abort();
        }
    }
    size_t pos = 0;
    for (uint32_t i = 0; i < h->nblocks && !failed; i++) {
        int gpu = -1;
        char *at = locate(m, h->disp, blocks[i].off, blocks[i].len, &gpu);
        size_t len = blocks[i].len;
        if (at == NULL) {
            opal_output(0, "osc:gpuwire: rank %d accessed [%lld, +%zu) outside rank %d's window; "
                        "operation dropped", origin, (long long)(h->disp + blocks[i].off), len,
                        m->rank);
            failed = 1;
            break;
        }
        if (fetch) failed |= copy_out(reply + pos, at, len, gpu);
        switch (h->kind) {
        case GW_OSC_PUT:
            failed |= copy_in(at, payload + pos, len, gpu);
            break;
        case GW_OSC_ACC:
        case GW_OSC_GACC:
            if (op != MPI_NO_OP) failed |= combine(at, payload + pos, len, type, op, gpu);
            break;
        case GW_OSC_CAS:
            /* payload: new value, then compare value */
            if (memcmp(reply, payload + len, len) == 0) failed |= copy_in(at, payload, len, gpu);
            break;
        default:
            break;
        }
        pos += len;
    }
    if (failed) {
        opal_output(0, "osc:gpuwire: an operation of kind %u from rank %d failed at rank %d",
                    h->kind, origin, m->rank);
    }
    if (fetch) {
        gw_osc_hdr_t r = {.kind = GW_OSC_REPLY, .bytes = h->bytes, .count = h->count};
        gw_osc_send(m, origin, &r, NULL, 0, reply, h->bytes);
        free(reply);
    }
}
