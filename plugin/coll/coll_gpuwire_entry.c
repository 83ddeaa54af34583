#include "coll_gpuwire_entry.h"

#include "coll_gpuwire_dispatch.h"

static inline int run(mca_coll_base_module_t *module, gw_coll_args_t *a, ompi_request_t **request)
{
    a->nonblocking = NULL != request;
    return gw_coll_dispatch((mca_coll_gpuwire_module_t *)module, a, request);
}

/* Persistent forms: MPI_<op>_init (MPIX_<op>_init in Open MPI 4.1). */
static inline int run_init(mca_coll_base_module_t *module, gw_coll_args_t *a,
                           struct ompi_info_t *info, ompi_request_t **request)
{
    a->nonblocking = true;
    return gw_coll_init((mca_coll_gpuwire_module_t *)module, a, info, request);
}

#define GW_UNWRAP(...) __VA_ARGS__

/* The three entry points of one collective -- blocking (name), non-blocking
 * (iname) and persistent (name_init) -- over the parameters that Open MPI's
 * coll interface gives all three before the communicator; each packs them
 * (the designated initialisers after params) for the dispatch. */
#define GW_ENTRIES(name, ID, params, ...)                                                       \
    static int name(GW_UNWRAP params, struct ompi_communicator_t *comm,                         \
                    mca_coll_base_module_t *module)                                             \
    {                                                                                           \
        gw_coll_args_t a = {.id = ID, .comm = comm, __VA_ARGS__};                               \
        return run(module, &a, NULL);                                                           \
    }                                                                                           \
    static int i##name(GW_UNWRAP params, struct ompi_communicator_t *comm,                      \
                       ompi_request_t **request, mca_coll_base_module_t *module)                \
    {                                                                                           \
        gw_coll_args_t a = {.id = ID, .comm = comm, __VA_ARGS__};                               \
        return run(module, &a, request);                                                        \
    }                                                                                           \
    static int name##_init(GW_UNWRAP params, struct ompi_communicator_t *comm,                  \
                           struct ompi_info_t *info, ompi_request_t **request,                  \
                           mca_coll_base_module_t *module)                                      \
    {                                                                                           \
        gw_coll_args_t a = {.id = ID, .comm = comm, __VA_ARGS__};                               \
        return run_init(module, &a, info, request);                                             \
    }

typedef struct ompi_datatype_t gw_dt_t;

/* Reductions and bcast. */
GW_ENTRIES(allreduce, GW_COLL_ALLREDUCE,
           (const void *sbuf, void *rbuf, int count, gw_dt_t *dtype, struct ompi_op_t *op),
           .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op)
GW_ENTRIES(reduce, GW_COLL_REDUCE,
           (const void *sbuf, void *rbuf, int count, gw_dt_t *dtype, struct ompi_op_t *op,
            int root),
           .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op, .root = root)
GW_ENTRIES(scan, GW_COLL_SCAN,
           (const void *sbuf, void *rbuf, int count, gw_dt_t *dtype, struct ompi_op_t *op),
           .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op)
GW_ENTRIES(exscan, GW_COLL_EXSCAN,
           (const void *sbuf, void *rbuf, int count, gw_dt_t *dtype, struct ompi_op_t *op),
           .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op)
GW_ENTRIES(reduce_scatter, GW_COLL_REDUCE_SCATTER,
           (const void *sbuf, void *rbuf, const int *rcounts, gw_dt_t *dtype,
            struct ompi_op_t *op),
           .sbuf = sbuf, .rbuf = rbuf, .rcounts = rcounts, .dtype = dtype, .op = op)
GW_ENTRIES(reduce_scatter_block, GW_COLL_REDUCE_SCATTER_BLOCK,
           (const void *sbuf, void *rbuf, int rcount, gw_dt_t *dtype, struct ompi_op_t *op),
           .sbuf = sbuf, .rbuf = rbuf, .rcount = rcount, .dtype = dtype, .op = op)
GW_ENTRIES(bcast, GW_COLL_BCAST, (void *buf, int count, gw_dt_t *dtype, int root),
           .rbuf = buf, .count = count, .dtype = dtype, .root = root)

/* Data movement. */
GW_ENTRIES(allgather, GW_COLL_ALLGATHER,
           (const void *sbuf, int scount, gw_dt_t *sdtype, void *rbuf, int rcount,
            gw_dt_t *rdtype),
           .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
           .rdtype = rdtype)
GW_ENTRIES(allgatherv, GW_COLL_ALLGATHERV,
           (const void *sbuf, int scount, gw_dt_t *sdtype, void *rbuf, const int *rcounts,
            const int *rdispls, gw_dt_t *rdtype),
           .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
           .rdispls = rdispls, .rdtype = rdtype)
GW_ENTRIES(alltoall, GW_COLL_ALLTOALL,
           (const void *sbuf, int scount, gw_dt_t *sdtype, void *rbuf, int rcount,
            gw_dt_t *rdtype),
           .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
           .rdtype = rdtype)
GW_ENTRIES(alltoallv, GW_COLL_ALLTOALLV,
           (const void *sbuf, const int *scounts, const int *sdispls, gw_dt_t *sdtype,
            void *rbuf, const int *rcounts, const int *rdispls, gw_dt_t *rdtype),
           .sbuf = sbuf, .scounts = scounts, .sdispls = sdispls, .sdtype = sdtype, .rbuf = rbuf,
           .rcounts = rcounts, .rdispls = rdispls, .rdtype = rdtype)
GW_ENTRIES(alltoallw, GW_COLL_ALLTOALLW,
           (const void *sbuf, const int *scounts, const int *sdispls, gw_dt_t *const *sdtypes,
            void *rbuf, const int *rcounts, const int *rdispls, gw_dt_t *const *rdtypes),
           .sbuf = sbuf, .scounts = scounts, .sdispls = sdispls, .sdtypes = sdtypes,
           .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdispls, .rdtypes = rdtypes)
GW_ENTRIES(gather, GW_COLL_GATHER,
           (const void *sbuf, int scount, gw_dt_t *sdtype, void *rbuf, int rcount,
            gw_dt_t *rdtype, int root),
           .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
           .rdtype = rdtype, .root = root)
GW_ENTRIES(gatherv, GW_COLL_GATHERV,
           (const void *sbuf, int scount, gw_dt_t *sdtype, void *rbuf, const int *rcounts,
            const int *rdispls, gw_dt_t *rdtype, int root),
           .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
           .rdispls = rdispls, .rdtype = rdtype, .root = root)
GW_ENTRIES(scatter, GW_COLL_SCATTER,
           (const void *sbuf, int scount, gw_dt_t *sdtype, void *rbuf, int rcount,
            gw_dt_t *rdtype, int root),
           .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
           .rdtype = rdtype, .root = root)
GW_ENTRIES(scatterv, GW_COLL_SCATTERV,
           (const void *sbuf, const int *scounts, const int *sdispls, gw_dt_t *sdtype,
            void *rbuf, int rcount, gw_dt_t *rdtype, int root),
           .sbuf = sbuf, .scounts = scounts, .sdispls = sdispls, .sdtype = sdtype, .rbuf = rbuf,
           .rcount = rcount, .rdtype = rdtype, .root = root)

/* Not a collective: MPI_Reduce_local calls MPI_COMM_SELF's module. */
static int reduce_local(const void *inbuf, void *inoutbuf, int count,
                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                        mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_LOCAL, .sbuf = inbuf, .rbuf = inoutbuf,
                        .count = count, .dtype = dtype, .op = op,
                        .comm = &ompi_mpi_comm_self.comm};
    return run(module, &a, NULL);
}

/* No buffer to stage; provided only so that it keeps its place among the
 * non-blocking collectives of the communicator. Not counted. */
static int ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                    mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_BARRIER, .nonblocking = true, .comm = comm};
    return gw_coll_nb_passthrough((mca_coll_gpuwire_module_t *)module, &a, request);
}

/* Every collective with its three forms. */
#define GW_COLLECTIVES(X)                                                                       \
    X(allgather) X(allgatherv) X(allreduce) X(alltoall) X(alltoallv) X(alltoallw) X(bcast)      \
    X(exscan) X(gather) X(gatherv) X(reduce) X(reduce_scatter) X(reduce_scatter_block) X(scan)  \
    X(scatter) X(scatterv)

void gw_coll_entry_install(mca_coll_base_module_t *m)
{
#define GW_INSTALL(name)                                                                        \
    m->coll_##name = name;                                                                      \
    m->coll_i##name = i##name;                                                                  \
    m->coll_##name##_init = name##_init;
    GW_COLLECTIVES(GW_INSTALL)
#undef GW_INSTALL
    m->coll_ibarrier = ibarrier;
    m->coll_reduce_local = reduce_local;
}
