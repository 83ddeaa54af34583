/* MPI_Sendrecv_replace, MPI_Reduce_local and the buffered sends on device
 * memory: Open MPI runs them with the CPU in its MPI layer, so they are run on
 * a host copy (MPI_Reduce_local only where coll gpuwire is not loaded).
 *
 * Buffered sends copy the data into the attached buffer before they return
 * (pml gpuwire and ob1 alike, MPI_Ibsend included), so the temporary ends with
 * the call. MPI_Bsend_init copies at every MPI_Start: bsend_init.c.
 *
 * The attached buffer itself is written by Open MPI with the CPU: a device
 * buffer given to MPI_Buffer_attach is replaced by host memory of the same
 * size for as long as it is attached, and MPI_Buffer_detach gives the
 * caller's address back. MPI leaves the attached buffer's contents to MPI,
 * so nothing is copied. */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gw_mpi.h"

static int gw_find_coll_gpuwire(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "mca_coll_gpuwire")) *(int *)found = 1;
    return *(int *)found;
}

/* Whether coll gpuwire is loaded: Open MPI 4.1 runs MPI_Reduce_local through
 * MPI_COMM_SELF's coll module, and coll gpuwire's reduces device buffers
 * itself (one GPU kernel where op and type allow, staged otherwise), better
 * than staging here. Components are loaded in MPI_Init: asked each time until
 * found, kept once found. */
static int gw_coll_gpuwire_loaded(void)
{
    static int loaded;
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) return 1;
    int found = 0;
    dl_iterate_phdr(gw_find_coll_gpuwire, &found);
    if (found) __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
    return found;
}

GW_EXPORT int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag,
                                   int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    int dev = gw_is_device(buf);
    if (dev < 0) return MPI_ERR_BUFFER;
    if (!dev)
        return GW_PMPI(Sendrecv_replace, buf, count, type, dest, sendtag, source, recvtag, comm,
                                         status);
    gw_stage_t st;
    int rc = gw_stage_begin(&st, buf, 1, count, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    rc = GW_PMPI(Sendrecv_replace, st.host, count, type, dest, sendtag, source, recvtag, comm,
                                   status);
    int rc2 = gw_stage_end(&st, rc == MPI_SUCCESS);
    return rc == MPI_SUCCESS ? rc2 : rc;
}

GW_EXPORT int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype type,
                               MPI_Op op)
{
    int in_dev = gw_is_device(inbuf), io_dev = gw_is_device(inoutbuf);
    if (in_dev < 0 || io_dev < 0) return MPI_ERR_BUFFER;
    if ((!in_dev && !io_dev) || gw_coll_gpuwire_loaded())
        return GW_PMPI(Reduce_local, inbuf, inoutbuf, count, type, op);
    gw_stage_t in, io;
    int rc = gw_stage_begin(&in, inbuf, in_dev, count, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    rc = gw_stage_begin(&io, inoutbuf, io_dev, count, type, 1);
    if (rc == MPI_SUCCESS) {
        rc = GW_PMPI(Reduce_local, in.host, io.host, count, type, op);
        int rc2 = gw_stage_end(&io, rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) rc = rc2;
    }
    (void)gw_stage_end(&in, 0);
    return rc;
}

/* MPI_Bsend, or MPI_Ibsend when nonblocking: both copy into the attached
 * buffer before they return, so a device buffer's temporary ends here. */
static int gw_bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                    MPI_Comm comm, int nonblocking, MPI_Request *request)
{
    int dev = gw_is_device(buf);
    if (dev < 0) return MPI_ERR_BUFFER;
    gw_stage_t st; /* a host buffer is given as it is (st.host == buf) */
    int rc = gw_stage_begin(&st, buf, dev, count, type, 1);
    if (rc != MPI_SUCCESS) return rc;
    rc = nonblocking ? GW_PMPI(Ibsend, st.host, count, type, dest, tag, comm, request)
                     : GW_PMPI(Bsend, st.host, count, type, dest, tag, comm);
    (void)gw_stage_end(&st, 0);
    return rc;
}

GW_EXPORT int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                        MPI_Comm comm)
{
    return gw_bsend(buf, count, type, dest, tag, comm, 0, NULL);
}

GW_EXPORT int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                         MPI_Comm comm, MPI_Request *request)
{
    return gw_bsend(buf, count, type, dest, tag, comm, 1, request);
}

/* The device buffer attached (MPI allows one per process) and its host stand-in. */
static struct {
    pthread_mutex_t lock;
    void *user, *host;
} gw_attached = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL};

GW_EXPORT int MPI_Buffer_attach(void *buf, int size)
{
    int dev = gw_is_device(buf);
    if (dev < 0) return MPI_ERR_BUFFER;
    if (!dev || size < 0) return GW_PMPI(Buffer_attach, buf, size);
    void *host = malloc(size ? (size_t)size : 1);
    if (!host)
        return gw_error(MPI_ERR_NO_MEM, "MPI_Buffer_attach",
                        "no host memory to stand in for the device buffer: attach host memory");
    pthread_mutex_lock(&gw_attached.lock);
    int rc = GW_PMPI(Buffer_attach, host, size);
    if (rc == MPI_SUCCESS) {
        gw_attached.user = buf;
        gw_attached.host = host;
    }
    pthread_mutex_unlock(&gw_attached.lock);
    if (rc != MPI_SUCCESS) free(host);
    return rc;
}

GW_EXPORT int MPI_Buffer_detach(void *buffer_addr, int *size)
{
    pthread_mutex_lock(&gw_attached.lock);
    int rc = GW_PMPI(Buffer_detach, buffer_addr, size);
    if (rc == MPI_SUCCESS && gw_attached.host && *(void **)buffer_addr == gw_attached.host) {
        free(gw_attached.host);
        *(void **)buffer_addr = gw_attached.user;
        gw_attached.host = gw_attached.user = NULL;
    }
    pthread_mutex_unlock(&gw_attached.lock);
    return rc;
}
