#include "pml_gpuwire_devdt.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "ompi/constants.h"
#include "opal/datatype/opal_convertor.h"

/* iovecs asked of the convertor per call */
#define DEVDT_IOV 128

typedef struct {
    gw_block_t *v;
    size_t n, cap;
} block_list_t;

static int append(block_list_t *l, int64_t user_off, uint64_t packed_off, uint64_t len)
{
    if (l->n > 0) {
        gw_block_t *last = &l->v[l->n - 1];
        if (last->user_off + (int64_t)last->len == user_off &&
            last->packed_off + last->len == packed_off) {
            last->len += len;
            return OMPI_SUCCESS;
        }
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        gw_block_t *v = realloc(l->v, cap * sizeof(*v));
        if (NULL == v) return OMPI_ERR_OUT_OF_RESOURCE;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].user_off = user_off;
    l->v[l->n].packed_off = packed_off;
    l->v[l->n].len = len;
    l->n++;
    return OMPI_SUCCESS;
}

int pml_gw_devdt_blocks(ompi_datatype_t *dtype, size_t count, const void *buf, size_t limit,
                        gw_block_t **blocks, size_t *nblocks)
{
    block_list_t l = {NULL, 0, 0};
    opal_convertor_t conv;
    uint64_t packed = 0;
    int rc;
    *blocks = NULL;
    *nblocks = 0;
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    rc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dtype->super, count,
                                                  buf, 0, &conv);
    while (OPAL_SUCCESS == rc && packed < limit) {
        struct iovec iov[DEVDT_IOV];
        uint32_t niov = DEVDT_IOV;
        size_t length = 0;
        int32_t done = opal_convertor_raw(&conv, iov, &niov, &length);
        if (done < 0) {
            rc = OMPI_ERROR;
            break;
        }
        for (uint32_t i = 0; i < niov && packed < limit && OMPI_SUCCESS == rc; ++i) {
            uint64_t len = iov[i].iov_len;
            if (0 == len) continue;
            if (len > limit - packed) len = limit - packed;
            int64_t off = (int64_t)((intptr_t)iov[i].iov_base - (intptr_t)buf);
            rc = append(&l, off, packed, len);
            packed += len;
        }
        if (done || 0 == niov) break;
    }
    OBJ_DESTRUCT(&conv);
    if (OMPI_SUCCESS != rc) {
        free(l.v);
        return rc;
    }
    *blocks = l.v;
    *nblocks = l.n;
    return OMPI_SUCCESS;
}

/* The kernel of either direction over the blocks of count elements at buf
 * (the first len packed bytes of them). */
static int devdt_run(ompi_datatype_t *dtype, size_t count, void *buf, int device, void *packed,
                     size_t len, bool unpack, char *why, size_t why_len)
{
    gw_block_t *blocks;
    size_t n;
    int rc = pml_gw_devdt_blocks(dtype, count, buf, len, &blocks, &n);
    if (OMPI_SUCCESS != rc) {
        snprintf(why, why_len, "describing datatype %s for the GPU %s failed (%d); "
                 "out of host memory?", dtype->name, unpack ? "unpack" : "pack", rc);
        return rc;
    }
    int failed = unpack ? gw_dev_unpack(buf, packed, blocks, n, device, why, why_len)
                        : gw_dev_pack(packed, buf, blocks, n, device, why, why_len);
    if (0 != failed) rc = OMPI_ERROR;
    free(blocks);
    return rc;
}

int pml_gw_devdt_pack(ompi_datatype_t *dtype, size_t count, const void *buf, int device,
                      void *packed, char *why, size_t why_len)
{
    return devdt_run(dtype, count, (void *)buf, device, packed, SIZE_MAX, false, why, why_len);
}

int pml_gw_devdt_unpack(ompi_datatype_t *dtype, size_t count, void *buf, int device,
                        const void *packed, size_t len, char *why, size_t why_len)
{
    if (0 == len) return OMPI_SUCCESS;
    return devdt_run(dtype, count, buf, device, (void *)packed, len, true, why, why_len);
}
