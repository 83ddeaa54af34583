#include "pml_gpuwire_datatype.h"

#include "opal/datatype/opal_convertor.h"

int pml_gpuwire_pack(ompi_datatype_t *dtype, size_t count, const void *buf, void *dst, size_t len)
{
    opal_convertor_t conv;
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    int rc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dtype->super,
                                                      count, buf, 0, &conv);
    if (OPAL_SUCCESS == rc && len > 0) {
        struct iovec iov = {.iov_base = dst, .iov_len = len};
        uint32_t iov_count = 1;
        size_t max = len;
        rc = opal_convertor_pack(&conv, &iov, &iov_count, &max) < 0 ? OMPI_ERROR : OMPI_SUCCESS;
    }
    OBJ_DESTRUCT(&conv);
    return rc;
}

int pml_gpuwire_unpack(ompi_datatype_t *dtype, size_t count, void *buf, const void *src,
                       size_t len)
{
    opal_convertor_t conv;
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    int rc = opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor, &dtype->super,
                                                      count, buf, 0, &conv);
    if (OPAL_SUCCESS == rc && len > 0) {
        struct iovec iov = {.iov_base = (void *)src, .iov_len = len};
        uint32_t iov_count = 1;
        size_t max = len;
        rc = opal_convertor_unpack(&conv, &iov, &iov_count, &max) < 0 ? OMPI_ERROR
                                                                       : OMPI_SUCCESS;
    }
    OBJ_DESTRUCT(&conv);
    return rc;
}

/* The convertor moves on from where the last piece ended; it is positioned
 * only when UCX asks for another offset (rarely: a retransmission, or the
 * head the engine holds back), never from the start for every piece. */
static bool layout_seek(pml_gpuwire_layout_t *l, size_t offset)
{
    if (l->conv.bConverted == offset) return true;
    size_t pos = offset;
    return OPAL_SUCCESS == opal_convertor_set_position(&l->conv, &pos) && pos == offset;
}

static size_t layout_pack(void *user, size_t offset, void *dst, size_t max)
{
    pml_gpuwire_layout_t *l = (pml_gpuwire_layout_t *)user;
    if (!layout_seek(l, offset)) return 0;
    struct iovec iov = {.iov_base = dst, .iov_len = max};
    uint32_t iov_count = 1;
    size_t n = max;
    return opal_convertor_pack(&l->conv, &iov, &iov_count, &n) < 0 ? 0 : n;
}

static int layout_unpack(void *user, size_t offset, const void *src, size_t len)
{
    pml_gpuwire_layout_t *l = (pml_gpuwire_layout_t *)user;
    if (!layout_seek(l, offset)) return -1;
    struct iovec iov = {.iov_base = (void *)src, .iov_len = len};
    uint32_t iov_count = 1;
    size_t n = len;
    return opal_convertor_unpack(&l->conv, &iov, &iov_count, &n) < 0 || n != len ? -1 : 0;
}

int pml_gpuwire_layout_init(pml_gpuwire_layout_t *l, bool send, ompi_datatype_t *dtype,
                            size_t count, const void *buf)
{
    OBJ_CONSTRUCT(&l->conv, opal_convertor_t);
    int rc = send ? opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor,
                                                             &dtype->super, count, buf, 0, &l->conv)
                  : opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor,
                                                             &dtype->super, count, buf, 0, &l->conv);
    if (OPAL_SUCCESS != rc) {
        OBJ_DESTRUCT(&l->conv);
        return OMPI_ERROR;
    }
    l->gw.pack = layout_pack;
    l->gw.unpack = layout_unpack;
    l->gw.user = l;
    l->gw.length = pml_gpuwire_packed_size(dtype, count);
    return OMPI_SUCCESS;
}

void pml_gpuwire_layout_fini(pml_gpuwire_layout_t *l) { OBJ_DESTRUCT(&l->conv); }
