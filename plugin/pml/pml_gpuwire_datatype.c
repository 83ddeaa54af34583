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
