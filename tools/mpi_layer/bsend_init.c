/* MPI_Bsend_init on device memory. A persistent buffered send copies its
 * buffer into the attached buffer at each MPI_Start, with the CPU. The layer
 * gives Open MPI a host stand-in of the buffer (the bytes the datatype
 * touches, same offsets) and refreshes it from the device at each
 * MPI_Start/MPI_Startall, just before Open MPI copies it; MPI_Request_free
 * releases it. Once MPI_Start has returned, the data is in the attached
 * buffer, so the stand-in is free to be refreshed again at the next start.
 *
 * MPI_Start and MPI_Startall pay one atomic load while no such request
 * exists; other persistent requests (MPI_Send_init on device memory, which
 * pml gpuwire carries) pass straight through. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "gw_mpi.h"

typedef struct gw_pbsend {
    struct gw_pbsend *next;
    MPI_Request req;
    gw_stage_t st;
} gw_pbsend_t;

static struct {
    pthread_mutex_t lock;
    gw_pbsend_t *first;
    int live; /* entries in the list: read without the lock by MPI_Start */
} gw_pb = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

GW_EXPORT int MPI_Bsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                             MPI_Comm comm, MPI_Request *request)
{
    int dev = gw_is_device(buf);
    if (dev < 0) return MPI_ERR_BUFFER;
    if (!dev) return GW_PMPI(Bsend_init, buf, count, type, dest, tag, comm, request);
    gw_pbsend_t *e = calloc(1, sizeof(*e));
    if (!e)
        return gw_error(MPI_ERR_NO_MEM, "MPI_Bsend_init",
                        "no host memory for the request's stand-in: use MPI_Bsend");
    int rc = gw_stage_begin(&e->st, buf, 1, count, type, 0);
    if (rc == MPI_SUCCESS)
        rc = GW_PMPI(Bsend_init, e->st.host, count, type, dest, tag, comm, request);
    if (rc != MPI_SUCCESS) {
        (void)gw_stage_end(&e->st, 0);
        free(e);
        return rc;
    }
    e->req = *request;
    pthread_mutex_lock(&gw_pb.lock);
    e->next = gw_pb.first;
    gw_pb.first = e;
    __atomic_store_n(&gw_pb.live, gw_pb.live + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&gw_pb.lock);
    return MPI_SUCCESS;
}

/* Copies the device bytes of req's buffer into its stand-in, if req is one
 * of ours; MPI_SUCCESS otherwise. */
static int gw_pb_refresh(MPI_Request req)
{
    int rc = MPI_SUCCESS;
    pthread_mutex_lock(&gw_pb.lock);
    for (gw_pbsend_t *e = gw_pb.first; e; e = e->next) {
        if (e->req != req) continue;
        if (e->st.temp &&
            gw_dev_copy(e->st.temp, (const char *)e->st.user + e->st.lo, e->st.bytes) != 0)
            rc = gw_error(MPI_ERR_OTHER, "MPI_Start", "the copy of the send buffer failed");
        break;
    }
    pthread_mutex_unlock(&gw_pb.lock);
    return rc;
}

GW_EXPORT int MPI_Start(MPI_Request *request)
{
    if (__atomic_load_n(&gw_pb.live, __ATOMIC_ACQUIRE) && request) {
        int rc = gw_pb_refresh(*request);
        if (rc != MPI_SUCCESS) return rc;
    }
    return GW_PMPI(Start, request);
}

GW_EXPORT int MPI_Startall(int count, MPI_Request requests[])
{
    if (__atomic_load_n(&gw_pb.live, __ATOMIC_ACQUIRE) && requests) {
        for (int i = 0; i < count; ++i) {
            int rc = gw_pb_refresh(requests[i]);
            if (rc != MPI_SUCCESS) return rc;
        }
    }
    return GW_PMPI(Startall, count, requests);
}

/* Unlinks req's entry, if it is one of ours. */
static gw_pbsend_t *gw_pb_take(MPI_Request req)
{
    gw_pbsend_t *found = NULL;
    pthread_mutex_lock(&gw_pb.lock);
    for (gw_pbsend_t **p = &gw_pb.first; *p; p = &(*p)->next) {
        if ((*p)->req != req) continue;
        found = *p;
        *p = found->next;
        __atomic_store_n(&gw_pb.live, gw_pb.live - 1, __ATOMIC_RELEASE);
        break;
    }
    pthread_mutex_unlock(&gw_pb.lock);
    return found;
}

GW_EXPORT int MPI_Request_free(MPI_Request *request)
{
    if (!__atomic_load_n(&gw_pb.live, __ATOMIC_ACQUIRE) || !request)
        return GW_PMPI(Request_free, request);
    MPI_Request req = *request;
    int rc = GW_PMPI(Request_free, request);
    /* An active buffered send has its data in the attached buffer already:
     * the stand-in may go even if the request lives on until it completes. */
    if (rc == MPI_SUCCESS) {
        gw_pbsend_t *e = gw_pb_take(req);
        if (e) {
            (void)gw_stage_end(&e->st, 0);
            free(e);
        }
    }
    return rc;
}

void gw_pb_release_all(void)
{
    pthread_mutex_lock(&gw_pb.lock);
    gw_pbsend_t *e = gw_pb.first;
    gw_pb.first = NULL;
    __atomic_store_n(&gw_pb.live, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&gw_pb.lock);
    while (e) {
        gw_pbsend_t *next = e->next;
        (void)gw_stage_end(&e->st, 0);
        free(e);
        e = next;
    }
}
