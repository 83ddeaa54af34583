/*
 * The non-blocking collectives TRUN runs: MPI_I<op>, or with t_persistent
 * the persistent form (MPI_<op>_init, MPIX_<op>_init in Open MPI 4.1)
 * followed by MPI_Start. TRUN waits and frees the request.
 */
#include "coll_harness.h"

bool t_persistent;

#if defined(MPI_VERSION) && MPI_VERSION >= 4
#define T_PINIT(name) MPI_##name##_init
#else
#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define T_PINIT(name) MPIX_##name##_init
#endif
#endif

#ifdef T_PINIT
bool t_persistent_available(void) { return true; }

static int started(int rc, MPI_Request *req)
{
    return MPI_SUCCESS == rc ? MPI_Start(req) : rc;
}

/* One of the two forms, by t_persistent; args: the call's arguments before
 * the request (the persistent form takes MPI_INFO_NULL between them). */
#define T_FORM(name, ...)                                                                   \
    (t_persistent ? started(T_PINIT(name)(__VA_ARGS__, MPI_INFO_NULL, req), req)          \
                  : MPI_I##name(__VA_ARGS__, req))
#else
bool t_persistent_available(void) { return false; }
#define T_FORM(name, ...) MPI_I##name(__VA_ARGS__, req)
#endif

/* MPI_I<op> and MPI_<op>_init name the op differently only in case. */
#define MPI_IAllreduce MPI_Iallreduce
#define MPI_IReduce MPI_Ireduce
#define MPI_IScan MPI_Iscan
#define MPI_IExscan MPI_Iexscan
#define MPI_IReduce_scatter MPI_Ireduce_scatter
#define MPI_IReduce_scatter_block MPI_Ireduce_scatter_block
#define MPI_IBcast MPI_Ibcast
#define MPI_IAllgather MPI_Iallgather
#define MPI_IAllgatherv MPI_Iallgatherv
#define MPI_IAlltoall MPI_Ialltoall
#define MPI_IAlltoallv MPI_Ialltoallv
#define MPI_IAlltoallw MPI_Ialltoallw
#define MPI_IGather MPI_Igather
#define MPI_IGatherv MPI_Igatherv
#define MPI_IScatter MPI_Iscatter
#define MPI_IScatterv MPI_Iscatterv
#define MPI_IBarrier MPI_Ibarrier

int T_Iallreduce(const void *s, void *r, int c, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                 MPI_Request *req)
{
    return T_FORM(Allreduce, s, r, c, dt, op, comm);
}

int T_Ireduce(const void *s, void *r, int c, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
              MPI_Request *req)
{
    return T_FORM(Reduce, s, r, c, dt, op, root, comm);
}

int T_Iscan(const void *s, void *r, int c, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
            MPI_Request *req)
{
    return T_FORM(Scan, s, r, c, dt, op, comm);
}

int T_Iexscan(const void *s, void *r, int c, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
              MPI_Request *req)
{
    return T_FORM(Exscan, s, r, c, dt, op, comm);
}

int T_Ireduce_scatter(const void *s, void *r, const int *rc, MPI_Datatype dt, MPI_Op op,
                      MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Reduce_scatter, s, r, rc, dt, op, comm);
}

int T_Ireduce_scatter_block(const void *s, void *r, int rc, MPI_Datatype dt, MPI_Op op,
                            MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Reduce_scatter_block, s, r, rc, dt, op, comm);
}

int T_Ibcast(void *b, int c, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Bcast, b, c, dt, root, comm);
}

int T_Iallgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                 MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Allgather, s, sc, st, r, rc, rt, comm);
}

int T_Iallgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd,
                  MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Allgatherv, s, sc, st, r, rc, rd, rt, comm);
}

int T_Ialltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Alltoall, s, sc, st, r, rc, rt, comm);
}

int T_Ialltoallv(const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r,
                 const int *rc, const int *rd, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Alltoallv, s, sc, sd, st, r, rc, rd, rt, comm);
}

int T_Ialltoallw(const void *s, const int *sc, const int *sd, const MPI_Datatype *st, void *r,
                 const int *rc, const int *rd, const MPI_Datatype *rt, MPI_Comm comm,
                 MPI_Request *req)
{
    return T_FORM(Alltoallw, s, sc, sd, st, r, rc, rd, rt, comm);
}

int T_Igather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root,
              MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Gather, s, sc, st, r, rc, rt, root, comm);
}

int T_Igatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd,
               MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Gatherv, s, sc, st, r, rc, rd, rt, root, comm);
}

int T_Iscatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root,
               MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Scatter, s, sc, st, r, rc, rt, root, comm);
}

int T_Iscatterv(const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, int rc,
                MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req)
{
    return T_FORM(Scatterv, s, sc, sd, st, r, rc, rt, root, comm);
}

int T_Ibarrier(MPI_Comm comm, MPI_Request *req) { return T_FORM(Barrier, comm); }
