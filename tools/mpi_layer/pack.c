/* MPI_Pack, MPI_Unpack and their external32 forms on device memory.
 *
 * Open MPI packs with the CPU. The typed side is staged over its whole true
 * extent (copied in for Pack, in and out for Unpack: the holes of the
 * datatype come back unchanged); the packed side only over the bytes the call
 * reads or writes, from *position on.
 *
 * The native and external32 forms differ only in the PMPI call they make, so
 * each public function classifies its buffers, passes host ones straight
 * through, and hands the rest to gw_pack or gw_unpack with its call described
 * in a gw_pack_call_t. */
#include "gw_mpi.h"

typedef struct {
    const char *name;    /* the public call, for messages */
    const char *datarep; /* the external32 forms; NULL for MPI_Pack/MPI_Unpack */
    int count;
    MPI_Datatype type;
    /* The native forms; NULL for external32 (MPI_COMM_NULL is a variable of
     * libmpi, which this library does not link). */
    MPI_Comm comm;
} gw_pack_call_t;

/* The PMPI call of c, on host buffers, with the position in MPI_Aint. */
static int gw_pmpi_pack(const gw_pack_call_t *c, const void *typed, void *packed, MPI_Aint size,
                        MPI_Aint *pos)
{
    if (c->datarep)
        return GW_PMPI(Pack_external, c->datarep, typed, c->count, c->type, packed, size, pos);
    int ipos = (int)*pos;
    int rc = GW_PMPI(Pack, typed, c->count, c->type, packed, (int)size, &ipos, c->comm);
    *pos = ipos;
    return rc;
}

static int gw_pmpi_unpack(const gw_pack_call_t *c, const void *packed, MPI_Aint size,
                          MPI_Aint *pos, void *typed)
{
    if (c->datarep)
        return GW_PMPI(Unpack_external, c->datarep, packed, size, pos, typed, c->count, c->type);
    int ipos = (int)*pos;
    int rc = GW_PMPI(Unpack, packed, (int)size, &ipos, typed, c->count, c->type, c->comm);
    *pos = ipos;
    return rc;
}

/* The packed buffer as the PMPI call sees it. On device memory only the bytes
 * from the caller's position to the end can be touched, so the temporary
 * holds those alone and the call is given it as a buffer of its own, position
 * 0, size what is left; on host memory the call gets the caller's buffer. */
typedef struct {
    char *user;     /* the caller's packed buffer */
    char *temp;     /* bytes [start, size) of user on the host; NULL when none */
    MPI_Aint start; /* the caller's position */
    char *buf;      /* what the call is given: temp or user */
    MPI_Aint size;  /* and its size */
    MPI_Aint pos;   /* and the position in it */
} gw_packed_t;

static int gw_packed_begin(gw_packed_t *p, const void *buf, int is_device, MPI_Aint size,
                           MPI_Aint position, int copy_in, const char *call)
{
    *p = (gw_packed_t){.user = (char *)buf, .start = position, .buf = (char *)buf,
                       .size = size, .pos = position};
    /* Nothing left to touch: the call gets the buffer and answers as it will. */
    if (!is_device || size <= position) return MPI_SUCCESS;
    size_t len = (size_t)(size - position);
    p->temp = gw_dev_host_alloc(len, buf);
    if (!p->temp) return gw_error(MPI_ERR_NO_MEM, call, "no host memory for the temporary");
    if (copy_in && gw_dev_copy(p->temp, p->user + position, len) != 0) {
        gw_dev_host_free(p->temp);
        return MPI_ERR_OTHER;
    }
    p->buf = p->temp;
    p->size = size - position;
    p->pos = 0;
    return MPI_SUCCESS;
}

/* After the call (rc): copies the bytes it wrote back when copy_out, frees the
 * temporary, sets *position in the caller's buffer. Returns rc or the copy's
 * error. */
static int gw_packed_end(gw_packed_t *p, int rc, int copy_out, MPI_Aint *position)
{
    if (!p->temp) {
        *position = p->pos;
        return rc;
    }
    *position = p->start + p->pos;
    if (rc == MPI_SUCCESS && copy_out && p->pos > 0 &&
        gw_dev_copy(p->user + p->start, p->temp, (size_t)p->pos) != 0)
        rc = MPI_ERR_OTHER;
    gw_dev_host_free(p->temp);
    p->temp = NULL;
    return rc;
}

static int gw_pack(const gw_pack_call_t *c, const void *inbuf, int in_dev, void *outbuf,
                   int out_dev, MPI_Aint outsize, MPI_Aint *position)
{
    gw_stage_t in;
    gw_packed_t out;
    int rc = gw_stage_begin(&in, inbuf, in_dev, c->count, c->type, 1);
    if (rc != MPI_SUCCESS) return rc;
    rc = gw_packed_begin(&out, outbuf, out_dev, outsize, *position, 0, c->name);
    if (rc == MPI_SUCCESS)
        rc = gw_packed_end(&out, gw_pmpi_pack(c, in.host, out.buf, out.size, &out.pos), 1,
                           position);
    (void)gw_stage_end(&in, 0);
    return rc;
}

static int gw_unpack(const gw_pack_call_t *c, const void *inbuf, int in_dev, MPI_Aint insize,
                     MPI_Aint *position, void *outbuf, int out_dev)
{
    gw_packed_t in;
    gw_stage_t out;
    int rc = gw_packed_begin(&in, inbuf, in_dev, insize, *position, 1, c->name);
    if (rc != MPI_SUCCESS) return rc;
    rc = gw_stage_begin(&out, outbuf, out_dev, c->count, c->type, 1);
    if (rc == MPI_SUCCESS) {
        rc = gw_pmpi_unpack(c, in.buf, in.size, &in.pos, out.host);
        int rc2 = gw_stage_end(&out, rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) rc = rc2;
    }
    return gw_packed_end(&in, rc, 0, position);
}

/* Host buffers on both sides go straight to Open MPI (its own checks of the
 * arguments, position included, and its error handler). */
#define GW_BOTH_HOST_OR_FAIL(a, b, host_call)              \
    int a##_dev = gw_is_device(a), b##_dev = gw_is_device(b); \
    if (a##_dev < 0 || b##_dev < 0) return MPI_ERR_BUFFER;   \
    if (!a##_dev && !b##_dev) return host_call

GW_EXPORT int MPI_Pack(const void *inbuf, int incount, MPI_Datatype type, void *outbuf,
                       int outsize, int *position, MPI_Comm comm)
{
    GW_BOTH_HOST_OR_FAIL(inbuf, outbuf,
                         GW_PMPI(Pack, inbuf, incount, type, outbuf, outsize, position, comm));
    const gw_pack_call_t c = {"MPI_Pack", NULL, incount, type, comm};
    MPI_Aint pos = *position;
    int rc = gw_pack(&c, inbuf, inbuf_dev, outbuf, outbuf_dev, outsize, &pos);
    *position = (int)pos;
    return rc;
}

GW_EXPORT int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf,
                         int outcount, MPI_Datatype type, MPI_Comm comm)
{
    GW_BOTH_HOST_OR_FAIL(inbuf, outbuf,
                         GW_PMPI(Unpack, inbuf, insize, position, outbuf, outcount, type, comm));
    const gw_pack_call_t c = {"MPI_Unpack", NULL, outcount, type, comm};
    MPI_Aint pos = *position;
    int rc = gw_unpack(&c, inbuf, inbuf_dev, insize, &pos, outbuf, outbuf_dev);
    *position = (int)pos;
    return rc;
}

GW_EXPORT int MPI_Pack_external(const char datarep[], const void *inbuf, int incount,
                                MPI_Datatype type, void *outbuf, MPI_Aint outsize,
                                MPI_Aint *position)
{
    GW_BOTH_HOST_OR_FAIL(inbuf, outbuf, GW_PMPI(Pack_external, datarep, inbuf, incount, type,
                                                outbuf, outsize, position));
    const gw_pack_call_t c = {"MPI_Pack_external", datarep, incount, type, NULL};
    return gw_pack(&c, inbuf, inbuf_dev, outbuf, outbuf_dev, outsize, position);
}

GW_EXPORT int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize,
                                  MPI_Aint *position, void *outbuf, int outcount,
                                  MPI_Datatype type)
{
    GW_BOTH_HOST_OR_FAIL(inbuf, outbuf, GW_PMPI(Unpack_external, datarep, inbuf, insize,
                                                position, outbuf, outcount, type));
    const gw_pack_call_t c = {"MPI_Unpack_external", datarep, outcount, type, NULL};
    return gw_unpack(&c, inbuf, inbuf_dev, insize, position, outbuf, outbuf_dev);
}
