/* The MPI_File_ reads and writes on device memory (Open MPI's io components
 * read and write user buffers with the CPU).
 *
 * Blocking forms: the buffer is staged over its true extent (copied in for
 * both directions, so that the datatype's holes and what a short read leaves
 * come back unchanged), the PMPI call runs on the temporary, a read's
 * temporary is copied back.
 *
 * Non-blocking forms (iread, iwrite, _at, _all, _shared) on device memory
 * complete inside the call: the PMPI call on the temporary is waited for, a
 * read's data copied back, and the caller gets a generalized request already
 * complete, whose status carries the operation's byte count. Deliberate: MPI
 * gives generalized requests no progress hook, so a request completing later
 * would need a thread of ours to wait and copy; the price is no overlap of the
 * I/O with computation, on device buffers only (host buffers keep Open MPI's
 * requests).
 *
 * Split collectives (_begin/_end): MPI allows one active per file handle, so
 * the temporary is kept by file handle from _begin to _end. */
#include <pthread.h>
#include <stdlib.h>

#include "gw_mpi.h"

/* ---- non-blocking: complete inside, answer with a done generalized request ---- */

typedef struct {
    MPI_Count bytes;
} gw_done_t;

static int gw_done_query(void *extra, MPI_Status *status)
{
    const gw_done_t *done = extra;
    MPI_Datatype byte = gw_mpi_byte();
    if (!byte) return MPI_ERR_INTERN; /* reported by the look-up */
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    int rc = GW_PMPI(Status_set_elements_x, status, byte, done->bytes);
    if (rc == MPI_SUCCESS) rc = GW_PMPI(Status_set_cancelled, status, 0);
    return rc;
}

static int gw_done_free(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int gw_done_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS; /* complete already: nothing to cancel */
}

/* After a non-blocking PMPI call on st's temporary started *request (rc): waits,
 * copies a read back, replaces *request by a complete generalized request. */
static int gw_nb_finish(int rc, MPI_Request *request, gw_stage_t *st, int is_read)
{
    MPI_Status status;
    if (rc == MPI_SUCCESS) rc = GW_PMPI(Wait, request, &status);
    int rc2 = gw_stage_end(st, is_read && rc == MPI_SUCCESS);
    if (rc != MPI_SUCCESS) return rc;
    if (rc2 != MPI_SUCCESS) return rc2;
    gw_done_t *done = malloc(sizeof(*done));
    if (!done) return gw_error(MPI_ERR_NO_MEM, "MPI_File_i*", "no memory for the request");
    MPI_Datatype byte = gw_mpi_byte();
    rc = byte ? GW_PMPI(Get_elements_x, &status, byte, &done->bytes) : MPI_ERR_INTERN;
    if (rc == MPI_SUCCESS)
        rc = GW_PMPI(Grequest_start, gw_done_query, gw_done_free, gw_done_cancel, done, request);
    if (rc != MPI_SUCCESS) {
        free(done);
        return rc;
    }
    return GW_PMPI(Grequest_complete, *request);
}

/* ---- split collectives: the temporary kept by file handle ---- */

typedef struct gw_split {
    MPI_File fh;
    gw_stage_t st;
    struct gw_split *next;
} gw_split_t;

static gw_split_t *gw_splits;
static pthread_mutex_t gw_splits_lock = PTHREAD_MUTEX_INITIALIZER;

static int gw_split_keep(MPI_File fh, const gw_stage_t *st)
{
    gw_split_t *s = malloc(sizeof(*s));
    if (!s) return gw_error(MPI_ERR_NO_MEM, "MPI_File_*_begin", "no memory to keep the temporary");
    s->fh = fh;
    s->st = *st;
    pthread_mutex_lock(&gw_splits_lock);
    s->next = gw_splits;
    gw_splits = s;
    pthread_mutex_unlock(&gw_splits_lock);
    return MPI_SUCCESS;
}

/* The kept temporary of fh, removed from the list; 0 when there is none. */
static int gw_split_take(MPI_File fh, gw_stage_t *out)
{
    int found = 0;
    pthread_mutex_lock(&gw_splits_lock);
    for (gw_split_t **p = &gw_splits; *p; p = &(*p)->next) {
        if ((*p)->fh == fh) {
            gw_split_t *s = *p;
            *p = s->next;
            *out = s->st;
            free(s);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&gw_splits_lock);
    return found;
}

/* ---- the wrappers ---- */

/* After a blocking PMPI call on st's temporary (rc): a read's data copied back,
 * the temporary freed. */
static int gw_blocking_finish(int rc, gw_stage_t *st, int is_read)
{
    int rc2 = gw_stage_end(st, is_read && rc == MPI_SUCCESS);
    return rc != MPI_SUCCESS ? rc : rc2;
}

/* After a _begin PMPI call on st's temporary (rc): the temporary kept for
 * _end, or freed when the call failed. */
static int gw_begin_finish(int rc, MPI_File fh, gw_stage_t *st)
{
    if (rc == MPI_SUCCESS) rc = gw_split_keep(fh, st);
    if (rc != MPI_SUCCESS) (void)gw_stage_end(st, 0);
    return rc;
}

#define GW_UNPAREN(...) __VA_ARGS__

/* MPI_File_<op> with the parameter list params, which names buf, count and
 * type: a host buffer goes straight to PMPI_File_<op>(args); a device one is
 * staged, and the same args, buf now the temporary, given to it; finish (an
 * expression over rc and st) ends the call. Every wrapper below is this one
 * sequence; they differ in their parameters and in what ends them. */
#define GW_STAGED(op, params, args, finish)                                  \
    GW_EXPORT int MPI_File_##op params                                       \
    {                                                                        \
        int dev = gw_is_device(buf);                                         \
        if (dev < 0) return MPI_ERR_BUFFER;                                  \
        if (!dev) return GW_PMPI(File_##op, GW_UNPAREN args);                \
        gw_stage_t st;                                                       \
        int rc = gw_stage_begin(&st, buf, 1, count, type, 1);                \
        if (rc != MPI_SUCCESS) return rc;                                    \
        buf = st.host;                                                       \
        rc = GW_PMPI(File_##op, GW_UNPAREN args);                            \
        return finish;                                                       \
    }

/* MPI_File_<op>(fh, buf, count, type, status) */
#define GW_BLOCKING(op, cv, is_read)                                                     \
    GW_STAGED(op, (MPI_File fh, cv void *buf, int count, MPI_Datatype type, MPI_Status *status), \
              (fh, buf, count, type, status), gw_blocking_finish(rc, &st, is_read))

/* MPI_File_<op>(fh, offset, buf, count, type, status) */
#define GW_BLOCKING_AT(op, cv, is_read)                                                    \
    GW_STAGED(op,                                                                          \
              (MPI_File fh, MPI_Offset offset, cv void *buf, int count, MPI_Datatype type, \
               MPI_Status *status),                                                        \
              (fh, offset, buf, count, type, status), gw_blocking_finish(rc, &st, is_read))

/* MPI_File_<op>(fh, buf, count, type, request) */
#define GW_NONBLOCKING(op, cv, is_read)                                                    \
    GW_STAGED(op,                                                                          \
              (MPI_File fh, cv void *buf, int count, MPI_Datatype type, MPI_Request *request), \
              (fh, buf, count, type, request), gw_nb_finish(rc, request, &st, is_read))

/* MPI_File_<op>(fh, offset, buf, count, type, request) */
#define GW_NONBLOCKING_AT(op, cv, is_read)                                                 \
    GW_STAGED(op,                                                                          \
              (MPI_File fh, MPI_Offset offset, cv void *buf, int count, MPI_Datatype type, \
               MPI_Request *request),                                                      \
              (fh, offset, buf, count, type, request), gw_nb_finish(rc, request, &st, is_read))

/* MPI_File_<op>_begin(fh, buf, count, type) */
#define GW_BEGIN(op, cv)                                                             \
    GW_STAGED(op##_begin, (MPI_File fh, cv void *buf, int count, MPI_Datatype type), \
              (fh, buf, count, type), gw_begin_finish(rc, fh, &st))

/* MPI_File_<op>_begin(fh, offset, buf, count, type) */
#define GW_BEGIN_AT(op, cv)                                                                    \
    GW_STAGED(op##_begin,                                                                      \
              (MPI_File fh, MPI_Offset offset, cv void *buf, int count, MPI_Datatype type), \
              (fh, offset, buf, count, type), gw_begin_finish(rc, fh, &st))

/* MPI_File_<op>_end(fh, buf, status): the temporary of _begin, when there was one */
#define GW_END(op, cv, is_read)                                                          \
    GW_EXPORT int MPI_File_##op##_end(MPI_File fh, cv void *buf, MPI_Status *status)      \
    {                                                                                    \
        gw_stage_t st;                                                                   \
        int dev = gw_is_device(buf);                                                     \
        if (dev <= 0 || !gw_split_take(fh, &st))                                         \
            return GW_PMPI(File_##op##_end, fh, buf, status);                            \
        return gw_blocking_finish(GW_PMPI(File_##op##_end, fh, st.host, status), &st,    \
                                  (is_read));                                            \
    }

#define GW_RD
#define GW_WR const

GW_BLOCKING(read, GW_RD, 1)
GW_BLOCKING(read_all, GW_RD, 1)
GW_BLOCKING(read_shared, GW_RD, 1)
GW_BLOCKING(read_ordered, GW_RD, 1)
GW_BLOCKING(write, GW_WR, 0)
GW_BLOCKING(write_all, GW_WR, 0)
GW_BLOCKING(write_shared, GW_WR, 0)
GW_BLOCKING(write_ordered, GW_WR, 0)
GW_BLOCKING_AT(read_at, GW_RD, 1)
GW_BLOCKING_AT(read_at_all, GW_RD, 1)
GW_BLOCKING_AT(write_at, GW_WR, 0)
GW_BLOCKING_AT(write_at_all, GW_WR, 0)

GW_NONBLOCKING(iread, GW_RD, 1)
GW_NONBLOCKING(iread_all, GW_RD, 1)
GW_NONBLOCKING(iread_shared, GW_RD, 1)
GW_NONBLOCKING(iwrite, GW_WR, 0)
GW_NONBLOCKING(iwrite_all, GW_WR, 0)
GW_NONBLOCKING(iwrite_shared, GW_WR, 0)
GW_NONBLOCKING_AT(iread_at, GW_RD, 1)
GW_NONBLOCKING_AT(iread_at_all, GW_RD, 1)
GW_NONBLOCKING_AT(iwrite_at, GW_WR, 0)
GW_NONBLOCKING_AT(iwrite_at_all, GW_WR, 0)

GW_BEGIN(read_all, GW_RD)
GW_BEGIN(read_ordered, GW_RD)
GW_BEGIN(write_all, GW_WR)
GW_BEGIN(write_ordered, GW_WR)
GW_BEGIN_AT(read_at_all, GW_RD)
GW_BEGIN_AT(write_at_all, GW_WR)
GW_END(read_all, GW_RD, 1)
GW_END(read_ordered, GW_RD, 1)
GW_END(read_at_all, GW_RD, 1)
GW_END(write_all, GW_WR, 0)
GW_END(write_ordered, GW_WR, 0)
GW_END(write_at_all, GW_WR, 0)
