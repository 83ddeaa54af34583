/* MPI_Sendrecv_replace, MPI_Reduce_local and the buffered sends on device
 * memory: Open MPI runs them with the CPU in its MPI layer, so they are run on
 * a host copy.
 *
 * Buffered sends copy the data into the attached buffer before they return
 * (pml gpuwire and ob1 alike, MPI_Ibsend included), so the temporary ends with
 * the call. MPI_Bsend_init would copy at every MPI_Start, when the temporary is
 * gone: it is refused on device memory. */
#include "gw_mpi.h"

GW_EXPORT int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag,
                                   int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    int dev = gw_is_device(buf);
    if (dev < 0) return MPI_ERR_BUFFER;
    if (!dev)
        return GW_PMPI(Sendrecv_replace)(buf, count, type, dest, sendtag, source, recvtag, comm,
                                         status);
    gw_stage_t st;
    int rc = gw_stage_begin(&st, buf, 1, count, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    rc = GW_PMPI(Sendrecv_replace)(st.host, count, type, dest, sendtag, source, recvtag, comm,
                                   status);
    int rc2 = gw_stage_end(&st, rc == MPI_SUCCESS);
    return rc == MPI_SUCCESS ? rc2 : rc;
}

GW_EXPORT int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype type,
                               MPI_Op op)
{
    int in_dev = gw_is_device(inbuf), io_dev = gw_is_device(inoutbuf);
    if (in_dev < 0 || io_dev < 0) return MPI_ERR_BUFFER;
    if (!in_dev && !io_dev) return GW_PMPI(Reduce_local)(inbuf, inoutbuf, count, type, op);
    gw_stage_t in, io;
    int rc = gw_stage_begin(&in, inbuf, in_dev, count, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    rc = gw_stage_begin(&io, inoutbuf, io_dev, count, type, 1);
    if (rc == MPI_SUCCESS) {
        rc = GW_PMPI(Reduce_local)(in.host, io.host, count, type, op);
        int rc2 = gw_stage_end(&io, rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) rc = rc2;
    }
    (void)gw_stage_end(&in, 0);
    return rc;
}

GW_EXPORT int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                        MPI_Comm comm)
{
    int dev = gw_is_device(buf);
    if (dev < 0) return MPI_ERR_BUFFER;
    if (!dev) return GW_PMPI(Bsend)(buf, count, type, dest, tag, comm);
    gw_stage_t st;
    int rc = gw_stage_begin(&st, buf, 1, count, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    rc = GW_PMPI(Bsend)(st.host, count, type, dest, tag, comm);
    (void)gw_stage_end(&st, 0);
    return rc;
}

GW_EXPORT int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                         MPI_Comm comm, MPI_Request *request)
{
    int dev = gw_is_device(buf);
    if (dev < 0) return MPI_ERR_BUFFER;
    if (!dev) return GW_PMPI(Ibsend)(buf, count, type, dest, tag, comm, request);
    gw_stage_t st;
    int rc = gw_stage_begin(&st, buf, 1, count, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    rc = GW_PMPI(Ibsend)(st.host, count, type, dest, tag, comm, request);
    (void)gw_stage_end(&st, 0);
    return rc;
}

GW_EXPORT int MPI_Bsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                             MPI_Comm comm, MPI_Request *request)
{
    int dev = gw_is_device(buf);
    if (dev < 0) return MPI_ERR_BUFFER;
    if (!dev) return GW_PMPI(Bsend_init)(buf, count, type, dest, tag, comm, request);
    return gw_error(MPI_ERR_BUFFER, "MPI_Bsend_init",
                    "not supported (each MPI_Start copies with the CPU): use MPI_Bsend, or "
                    "MPI_Send_init, which pml gpuwire carries");
}
