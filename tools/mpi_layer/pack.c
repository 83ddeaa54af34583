/* MPI_Pack, MPI_Unpack and their external32 forms on device memory.
 *
 * Open MPI packs with the CPU. The typed side is staged over its whole true
 * extent (copied in for Pack, in and out for Unpack: the holes of the
 * datatype come back unchanged); the packed side only over the bytes the call
 * reads or writes, from *position on. */
#include "gw_mpi.h"

GW_EXPORT int MPI_Pack(const void *inbuf, int incount, MPI_Datatype type, void *outbuf,
                       int outsize, int *position, MPI_Comm comm)
{
    int in_dev = gw_is_device(inbuf), out_dev = gw_is_device(outbuf);
    if (in_dev < 0 || out_dev < 0) return MPI_ERR_BUFFER;
    if (!in_dev && !out_dev)
        return GW_PMPI(Pack, inbuf, incount, type, outbuf, outsize, position, comm);

    gw_stage_t in;
    int rc = gw_stage_begin(&in, inbuf, in_dev, incount, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    int start = *position;
    char *out = outbuf, *temp = NULL;
    if (out_dev && outsize > start) {
        temp = gw_dev_host_alloc((size_t)(outsize - start));
        if (!temp) {
            (void)gw_stage_end(&in, 0);
            return gw_error(MPI_ERR_NO_MEM, "MPI_Pack", "no host memory for the temporary");
        }
        out = temp - start; /* same offsets as outbuf */
    }
    rc = GW_PMPI(Pack, in.host, incount, type, out, outsize, position, comm);
    if (rc == MPI_SUCCESS && temp && *position > start &&
        gw_dev_copy((char *)outbuf + start, temp, (size_t)(*position - start)) != 0)
        rc = MPI_ERR_OTHER;
    gw_dev_host_free(temp);
    (void)gw_stage_end(&in, 0);
    return rc;
}

GW_EXPORT int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf,
                         int outcount, MPI_Datatype type, MPI_Comm comm)
{
    int in_dev = gw_is_device(inbuf), out_dev = gw_is_device(outbuf);
    if (in_dev < 0 || out_dev < 0) return MPI_ERR_BUFFER;
    if (!in_dev && !out_dev)
        return GW_PMPI(Unpack, inbuf, insize, position, outbuf, outcount, type, comm);

    int start = *position;
    const char *in = inbuf;
    char *temp = NULL;
    if (in_dev && insize > start) {
        temp = gw_dev_host_alloc((size_t)(insize - start));
        if (!temp) return gw_error(MPI_ERR_NO_MEM, "MPI_Unpack", "no host memory for the temporary");
        if (gw_dev_copy(temp, (const char *)inbuf + start, (size_t)(insize - start)) != 0) {
            gw_dev_host_free(temp);
            return MPI_ERR_OTHER;
        }
        in = temp - start;
    }
    gw_stage_t out;
    int rc = gw_stage_begin(&out, outbuf, out_dev, outcount, type, 1);
    if (rc == MPI_SUCCESS) {
        rc = GW_PMPI(Unpack, in, insize, position, out.host, outcount, type, comm);
        int rc2 = gw_stage_end(&out, rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) rc = rc2;
    }
    gw_dev_host_free(temp);
    return rc;
}

GW_EXPORT int MPI_Pack_external(const char datarep[], const void *inbuf, int incount,
                                MPI_Datatype type, void *outbuf, MPI_Aint outsize,
                                MPI_Aint *position)
{
    int in_dev = gw_is_device(inbuf), out_dev = gw_is_device(outbuf);
    if (in_dev < 0 || out_dev < 0) return MPI_ERR_BUFFER;
    if (!in_dev && !out_dev)
        return GW_PMPI(Pack_external, datarep, inbuf, incount, type, outbuf, outsize, position);

    gw_stage_t in;
    int rc = gw_stage_begin(&in, inbuf, in_dev, incount, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    MPI_Aint start = *position;
    char *out = outbuf, *temp = NULL;
    if (out_dev && outsize > start) {
        temp = gw_dev_host_alloc((size_t)(outsize - start));
        if (!temp) {
            (void)gw_stage_end(&in, 0);
            return gw_error(MPI_ERR_NO_MEM, "MPI_Pack_external", "no host memory for the temporary");
        }
        out = temp - start;
    }
    rc = GW_PMPI(Pack_external, datarep, in.host, incount, type, out, outsize, position);
    if (rc == MPI_SUCCESS && temp && *position > start &&
        gw_dev_copy((char *)outbuf + start, temp, (size_t)(*position - start)) != 0)
        rc = MPI_ERR_OTHER;
    gw_dev_host_free(temp);
    (void)gw_stage_end(&in, 0);
    return rc;
}

GW_EXPORT int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize,
                                  MPI_Aint *position, void *outbuf, int outcount,
                                  MPI_Datatype type)
{
    int in_dev = gw_is_device(inbuf), out_dev = gw_is_device(outbuf);
    if (in_dev < 0 || out_dev < 0) return MPI_ERR_BUFFER;
    if (!in_dev && !out_dev)
        return GW_PMPI(Unpack_external, datarep, inbuf, insize, position, outbuf, outcount, type);

    MPI_Aint start = *position;
    const char *in = inbuf;
    char *temp = NULL;
    if (in_dev && insize > start) {
        temp = gw_dev_host_alloc((size_t)(insize - start));
        if (!temp)
            return gw_error(MPI_ERR_NO_MEM, "MPI_Unpack_external", "no host memory for the temporary");
        if (gw_dev_copy(temp, (const char *)inbuf + start, (size_t)(insize - start)) != 0) {
            gw_dev_host_free(temp);
            return MPI_ERR_OTHER;
        }
        in = temp - start;
    }
    gw_stage_t out;
    int rc = gw_stage_begin(&out, outbuf, out_dev, outcount, type, 1);
    if (rc == MPI_SUCCESS) {
        rc = GW_PMPI(Unpack_external, datarep, in, insize, position, out.host, outcount, type);
        int rc2 = gw_stage_end(&out, rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) rc = rc2;
    }
    gw_dev_host_free(temp);
    return rc;
}
