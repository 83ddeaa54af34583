/* See osc_gpuwire_device.h. */
#include "osc_gpuwire_device.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpuwire/gpu_device.h"
#include "gpuwire/cuda/reduce.h"
#include "opal/util/output.h"

static int ngpus = 0;

static void dev_log(int level, const char *msg)
{
    if (level <= 1) opal_output(0, "osc:gpuwire: %s", msg);
}

int gw_osc_dev_open(char *why, size_t why_len)
{
    /* No pinned staging: this component stages through its own messages. */
    gw_coll_device_params_t p = {.staging_bytes = 0, .log = dev_log};
    int n = gw_coll_device_open(&p, why, why_len);
    ngpus = n > 0 ? n : 0;
    return n;
}

void gw_osc_dev_close(void)
{
    if (ngpus > 0) gw_coll_device_close();
    ngpus = 0;
}

int gw_osc_dev_where_order(const void *p, size_t len, bool *unordered)
{
    *unordered = false;
    if (ngpus <= 0 || p == NULL) return -1;
    gw_coll_mem_t mem;
    char why[256];
    if (gw_coll_device_classify(p, len ? len : 1, &mem, why, sizeof(why)) != 0) {
        opal_output(0, "osc:gpuwire: cannot tell where %p lives (%s); taken as host memory", p,
                    why);
        return -1;
    }
    *unordered = mem.on_gpu && mem.unordered;
    return mem.on_gpu ? mem.gpu : -1;
}

int gw_osc_dev_where(const void *p, size_t len)
{
    bool unordered;
    return gw_osc_dev_where_order(p, len, &unordered);
}

int gw_osc_dev_wait_user(int gpu)
{
    char why[256];
    if (gw_coll_device_wait_user(gpu, why, sizeof(why)) != 0) {
        opal_output(0, "osc:gpuwire: waiting for the application's work on GPU %d failed: %s",
                    gpu, why);
        return -1;
    }
    return 0;
}

_Static_assert(GW_OSC_DESC_BYTES == GW_COLL_BUF_DESC_BYTES, "one description size");

int gw_osc_dev_describe(const void *p, size_t len, void *desc, char *why, size_t why_len)
{
    if (ngpus <= 0) {
        memset(desc, 0, GW_OSC_DESC_BYTES);
        snprintf(why, why_len, "no GPU");
        return -1;
    }
    return gw_coll_buffer_describe(p, len ? len : 1, desc, why, why_len);
}

int gw_osc_dev_map(const void *desc, uint32_t peer_id, void **mapping, void **ptr, int *gpu,
                   char *why, size_t why_len)
{
    gw_coll_peer_mapping_t *m = NULL;
    if (ngpus <= 0) {
        snprintf(why, why_len, "no GPU");
        return -1;
    }
    if (gw_coll_peer_map(desc, peer_id, &m, ptr, gpu, why, why_len) != 0) return -1;
    *mapping = m;
    return 0;
}

void gw_osc_dev_unmap(void *mapping) { gw_coll_peer_unmap((gw_coll_peer_mapping_t *)mapping); }

int gw_osc_dev_copy_start(void *dst, const void *src, size_t len, int gpu, bool both_device,
                          uint64_t *ticket)
{
    char why[256];
    if (gw_coll_copy_device_start(dst, src, len, gpu, both_device, ticket, why, sizeof(why)) !=
        0) {
        opal_output(0, "osc:gpuwire: direct copy of %zu bytes on GPU %d failed: %s", len, gpu,
                    why);
        return -1;
    }
    return 0;
}

int gw_osc_dev_copy_wait(int gpu, uint64_t ticket)
{
    char why[256];
    if (gw_coll_copy_wait(gpu, ticket, why, sizeof(why)) != 0) {
        opal_output(0, "osc:gpuwire: direct copies on GPU %d failed: %s", gpu, why);
        return -1;
    }
    return 0;
}

int gw_osc_dev_copy(void *dst, const void *src, size_t len, int gpu)
{
    uint64_t ticket = 0;
    char why[256];
    if (len == 0) return 0;
    /* Work the application queued on the legacy stream comes first. */
    if (gw_coll_device_wait_user(gpu, why, sizeof(why)) != 0 ||
        gw_coll_copy_start(dst, src, len, gpu, &ticket, why, sizeof(why)) != 0 ||
        gw_coll_copy_wait(gpu, ticket, why, sizeof(why)) != 0) {
        opal_output(0, "osc:gpuwire: device copy of %zu bytes failed: %s", len, why);
        return -1;
    }
    return 0;
}

/* The reduction kernels' op id for an MPI op, or -1. */
static int op_id(MPI_Op op)
{
    const struct { MPI_Op op; int id; } ops[] = {
        {MPI_SUM, GW_OP_SUM},   {MPI_PROD, GW_OP_PROD}, {MPI_MIN, GW_OP_MIN},
        {MPI_MAX, GW_OP_MAX},   {MPI_LAND, GW_OP_LAND}, {MPI_LOR, GW_OP_LOR},
        {MPI_LXOR, GW_OP_LXOR}, {MPI_BAND, GW_OP_BAND}, {MPI_BOR, GW_OP_BOR},
        {MPI_BXOR, GW_OP_BXOR}, {MPI_MINLOC, GW_OP_MINLOC}, {MPI_MAXLOC, GW_OP_MAXLOC},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (ops[i].op == op) return ops[i].id;
    }
    return -1;
}

/* The kernels' type id for an MPI element type, or -1: integers by size and
 * sign, the floating types, bool, byte, and the pairs without a gap. */
static int type_id(MPI_Datatype t)
{
    static const int sints[] = {GW_TYPE_INT8, GW_TYPE_INT16, -1, GW_TYPE_INT32, -1, -1, -1,
                                GW_TYPE_INT64};
    static const int uints[] = {GW_TYPE_UINT8, GW_TYPE_UINT16, -1, GW_TYPE_UINT32, -1, -1, -1,
                                GW_TYPE_UINT64};
    MPI_Datatype s[] = {MPI_SIGNED_CHAR, MPI_SHORT, MPI_INT, MPI_LONG, MPI_LONG_LONG_INT,
                        MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, MPI_AINT,
                        MPI_OFFSET, MPI_COUNT};
    MPI_Datatype u[] = {MPI_UNSIGNED_CHAR, MPI_UNSIGNED_SHORT, MPI_UNSIGNED, MPI_UNSIGNED_LONG,
                        MPI_UNSIGNED_LONG_LONG, MPI_UINT8_T, MPI_UINT16_T, MPI_UINT32_T,
                        MPI_UINT64_T};
    int size = 0;
    int rc = PMPI_Type_size(t, &size);
    if (rc != MPI_SUCCESS) {
        opal_output(0, "osc:gpuwire: PMPI_Type_size failed (%d); reduced on the host", rc);
        return -1; /* as for a type without a kernel */
    }
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        if (s[i] == t && size >= 1 && size <= 8) return sints[size - 1];
    }
    for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
        if (u[i] == t && size >= 1 && size <= 8) return uints[size - 1];
    }
    if (t == MPI_FLOAT) return GW_TYPE_FLOAT;
    if (t == MPI_DOUBLE) return GW_TYPE_DOUBLE;
    if (t == MPI_C_BOOL && size == 1) return GW_TYPE_BOOL;
    if (t == MPI_BYTE) return GW_TYPE_BYTE;
    if (t == MPI_2INT) return GW_TYPE_2INT;
    if (t == MPI_FLOAT_INT) return GW_TYPE_FLOAT_INT;
    return -1;
}

int gw_osc_dev_reduce(void *dst, const void *src, size_t len, MPI_Datatype type, MPI_Op op,
                      int gpu)
{
    int o = op_id(op), t = type_id(type);
    if (o < 0 || t < 0 || !gw_coll_reduce_supported(o, t)) return 0;
    size_t esize = gw_reduce_type_size(t);
    if (esize == 0 || len % esize) return 0;
    gw_coll_dev_buf_t scratch = {0};
    uint64_t ticket = 0;
    char why[256];
    /* The origin's values go to the GPU, the kernel combines them into the
     * window there: the window's bytes never cross to the host. */
    int rc = gw_coll_device_wait_user(gpu, why, sizeof(why));
    if (rc == 0) rc = gw_coll_scratch_get(len, gpu, &scratch, why, sizeof(why));
    if (rc == 0) rc = gw_coll_copy_start(scratch.ptr, src, len, gpu, &ticket, why, sizeof(why));
    if (rc == 0) {
        rc = gw_coll_reduce_start(o, t, scratch.ptr, dst, dst, len / esize, gpu, &ticket, why,
                                  sizeof(why));
    }
    if (rc == 0) rc = gw_coll_copy_wait(gpu, ticket, why, sizeof(why));
    if (scratch.owner != NULL || scratch.ptr != NULL) gw_coll_scratch_put(&scratch);
    if (rc != 0) {
        opal_output(0, "osc:gpuwire: reduction of %zu bytes on GPU %d failed: %s", len, gpu, why);
        return -1;
    }
    return 1;
}

bool gw_osc_dev_reduce_supported(MPI_Datatype type, MPI_Op op)
{
    if (op == MPI_REPLACE) return true;
    int o = op_id(op), t = type_id(type);
    return o >= 0 && t >= 0 && gw_coll_reduce_supported(o, t);
}

int gw_osc_dev_reduce_mapped(void *dst, const void *desc, uint32_t peer_id, size_t len,
                             MPI_Datatype type, MPI_Op op, int gpu)
{
    gw_coll_peer_mapping_t *map = NULL;
    void *src = NULL;
    int mgpu = -1, rc = 0;
    uint64_t ticket = 0;
    char why[256] = "";
    if (gw_coll_peer_map(desc, peer_id, &map, &src, &mgpu, why, sizeof(why)) != 0) {
        rc = -1;
    } else if (mgpu != gpu) {
        snprintf(why, sizeof(why), "the origin buffer is on GPU %d, the window on GPU %d", mgpu,
                 gpu);
        rc = -1;
    } else if (op == MPI_REPLACE) {
        rc = gw_coll_copy_device_start(dst, src, len, gpu, true, &ticket, why, sizeof(why));
    } else {
        int o = op_id(op), t = type_id(type);
        size_t esize = t >= 0 ? gw_reduce_type_size(t) : 0;
        if (o < 0 || esize == 0 || len % esize) {
            snprintf(why, sizeof(why), "no kernel for this op and type");
            rc = -1;
        } else {
            rc = gw_coll_reduce_start(o, t, src, dst, dst, len / esize, gpu, &ticket, why,
                                      sizeof(why));
        }
    }
    /* The origin waits for this operation's acknowledgement before it may
     * reuse its buffer: the reduction must be over before the mapping goes. */
    if (rc == 0) rc = gw_coll_copy_wait(gpu, ticket, why, sizeof(why));
    gw_coll_peer_unmap(map);
    if (rc != 0) {
        opal_output(0, "osc:gpuwire: accumulate of %zu bytes from a mapped origin buffer on GPU "
                    "%d failed: %s", len, gpu, why);
    }
    return rc;
}
