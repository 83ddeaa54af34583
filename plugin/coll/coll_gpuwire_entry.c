#include "coll_gpuwire_entry.h"

#include "coll_gpuwire_dispatch.h"

static inline int run(mca_coll_base_module_t *module, gw_coll_args_t *a, ompi_request_t **request)
{
    a->nonblocking = NULL != request;
    return gw_coll_dispatch((mca_coll_gpuwire_module_t *)module, a, request);
}

/* ------------------------------------------------------------------------
 * Reductions and bcast
 * ------------------------------------------------------------------------ */

static int allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                     struct ompi_op_t *op, struct ompi_communicator_t *comm,
                     mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, NULL);
}

static int iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, request);
}

static int reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                  struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                  mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .root = root, .comm = comm};
    return run(module, &a, NULL);
}

static int ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                   struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                   ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .root = root, .comm = comm};
    return run(module, &a, request);
}

static int scan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                struct ompi_op_t *op, struct ompi_communicator_t *comm,
                mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCAN, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, NULL);
}

static int iscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                 struct ompi_op_t *op, struct ompi_communicator_t *comm,
                 ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCAN, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, request);
}

static int exscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                  struct ompi_op_t *op, struct ompi_communicator_t *comm,
                  mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_EXSCAN, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, NULL);
}

static int iexscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                   struct ompi_op_t *op, struct ompi_communicator_t *comm,
                   ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_EXSCAN, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, request);
}

static int reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                          struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                        .rcounts = rcounts, .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, NULL);
}

static int ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                        .rcounts = rcounts, .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, request);
}

static int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sbuf, .rbuf = rbuf,
                        .rcount = rcount, .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, NULL);
}

static int ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sbuf, .rbuf = rbuf,
                        .rcount = rcount, .dtype = dtype, .op = op, .comm = comm};
    return run(module, &a, request);
}

static int bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                 struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_BCAST, .rbuf = buf, .count = count, .dtype = dtype,
                        .root = root, .comm = comm};
    return run(module, &a, NULL);
}

static int ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                  struct ompi_communicator_t *comm, ompi_request_t **request,
                  mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_BCAST, .rbuf = buf, .count = count, .dtype = dtype,
                        .root = root, .comm = comm};
    return run(module, &a, request);
}

/* ------------------------------------------------------------------------
 * Data movement
 * ------------------------------------------------------------------------ */

static int allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                     int rcount, struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                     mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLGATHER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm};
    return run(module, &a, NULL);
}

static int iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                      int rcount, struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLGATHER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm};
    return run(module, &a, request);
}

static int allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                      const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdtype,
                      struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLGATHERV, .sbuf = sbuf, .scount = scount,
                        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdispls,
                        .rdtype = rdtype, .comm = comm};
    return run(module, &a, NULL);
}

static int iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                       const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdtype,
                       struct ompi_communicator_t *comm, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLGATHERV, .sbuf = sbuf, .scount = scount,
                        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdispls,
                        .rdtype = rdtype, .comm = comm};
    return run(module, &a, request);
}

static int alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                    int rcount, struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                    mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALL, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm};
    return run(module, &a, NULL);
}

static int ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                     int rcount, struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                     ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALL, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm};
    return run(module, &a, request);
}

static int alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                     struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                     const int *rdispls, struct ompi_datatype_t *rdtype,
                     struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALLV, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
                        .rdispls = rdispls, .rdtype = rdtype, .comm = comm};
    return run(module, &a, NULL);
}

static int ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                      struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                      const int *rdispls, struct ompi_datatype_t *rdtype,
                      struct ompi_communicator_t *comm, ompi_request_t **request,
                      mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALLV, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
                        .rdispls = rdispls, .rdtype = rdtype, .comm = comm};
    return run(module, &a, request);
}

static int alltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                     struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                     const int *rdispls, struct ompi_datatype_t *const *rdtypes,
                     struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALLW, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtypes = sdtypes, .rbuf = rbuf, .rcounts = rcounts,
                        .rdispls = rdispls, .rdtypes = rdtypes, .comm = comm};
    return run(module, &a, NULL);
}

static int ialltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                      struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                      const int *rdispls, struct ompi_datatype_t *const *rdtypes,
                      struct ompi_communicator_t *comm, ompi_request_t **request,
                      mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALLW, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtypes = sdtypes, .rbuf = rbuf, .rcounts = rcounts,
                        .rdispls = rdispls, .rdtypes = rdtypes, .comm = comm};
    return run(module, &a, request);
}

static int gather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                  int rcount, struct ompi_datatype_t *rdtype, int root,
                  struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_GATHER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
                        .comm = comm};
    return run(module, &a, NULL);
}

static int igather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                   int rcount, struct ompi_datatype_t *rdtype, int root,
                   struct ompi_communicator_t *comm, ompi_request_t **request,
                   mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_GATHER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
                        .comm = comm};
    return run(module, &a, request);
}

static int gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                   const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdtype, int root,
                   struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_GATHERV, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdispls, .rdtype = rdtype,
                        .root = root, .comm = comm};
    return run(module, &a, NULL);
}

static int igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                    const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdtype,
                    int root, struct ompi_communicator_t *comm, ompi_request_t **request,
                    mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_GATHERV, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdispls, .rdtype = rdtype,
                        .root = root, .comm = comm};
    return run(module, &a, request);
}

static int scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                   int rcount, struct ompi_datatype_t *rdtype, int root,
                   struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCATTER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
                        .comm = comm};
    return run(module, &a, NULL);
}

static int iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                    int rcount, struct ompi_datatype_t *rdtype, int root,
                    struct ompi_communicator_t *comm, ompi_request_t **request,
                    mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCATTER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
                        .comm = comm};
    return run(module, &a, request);
}

static int scatterv(const void *sbuf, const int *scounts, const int *sdispls,
                    struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                    struct ompi_datatype_t *rdtype, int root, struct ompi_communicator_t *comm,
                    mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCATTERV, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
                        .rdtype = rdtype, .root = root, .comm = comm};
    return run(module, &a, NULL);
}

static int iscatterv(const void *sbuf, const int *scounts, const int *sdispls,
                     struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                     struct ompi_datatype_t *rdtype, int root, struct ompi_communicator_t *comm,
                     ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCATTERV, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
                        .rdtype = rdtype, .root = root, .comm = comm};
    return run(module, &a, request);
}

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

/* ------------------------------------------------------------------------
 * Persistent forms (MPI_<op>_init; MPIX_<op>_init in Open MPI 4.1)
 * ------------------------------------------------------------------------ */

static inline int run_init(mca_coll_base_module_t *module, gw_coll_args_t *a,
                           struct ompi_info_t *info, ompi_request_t **request)
{
    a->nonblocking = true;
    return gw_coll_init((mca_coll_gpuwire_module_t *)module, a, info, request);
}

static int allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype,
                          struct ompi_communicator_t *comm, struct ompi_info_t *info,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLGATHER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm};
    return run_init(module, &a, info, request);
}

static int allgatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                           const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, struct ompi_info_t *info,
                           ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLGATHERV, .sbuf = sbuf, .scount = scount,
                        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdispls,
                        .rdtype = rdtype, .comm = comm};
    return run_init(module, &a, info, request);
}

static int allreduce_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                          struct ompi_op_t *op, struct ompi_communicator_t *comm,
                          struct ompi_info_t *info, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run_init(module, &a, info, request);
}

static int alltoall_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdtype,
                         struct ompi_communicator_t *comm, struct ompi_info_t *info,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALL, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm};
    return run_init(module, &a, info, request);
}

static int alltoallv_init(const void *sbuf, const int *scounts, const int *sdispls,
                          struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                          const int *rdispls, struct ompi_datatype_t *rdtype,
                          struct ompi_communicator_t *comm, struct ompi_info_t *info,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALLV, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
                        .rdispls = rdispls, .rdtype = rdtype, .comm = comm};
    return run_init(module, &a, info, request);
}

static int alltoallw_init(const void *sbuf, const int *scounts, const int *sdispls,
                          struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                          const int *rdispls, struct ompi_datatype_t *const *rdtypes,
                          struct ompi_communicator_t *comm, struct ompi_info_t *info,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLTOALLW, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtypes = sdtypes, .rbuf = rbuf, .rcounts = rcounts,
                        .rdispls = rdispls, .rdtypes = rdtypes, .comm = comm};
    return run_init(module, &a, info, request);
}

static int bcast_init(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                      struct ompi_communicator_t *comm, struct ompi_info_t *info,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_BCAST, .rbuf = buf, .count = count, .dtype = dtype,
                        .root = root, .comm = comm};
    return run_init(module, &a, info, request);
}

static int exscan_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                       struct ompi_op_t *op, struct ompi_communicator_t *comm,
                       struct ompi_info_t *info, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_EXSCAN, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run_init(module, &a, info, request);
}

static int gather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                       int rcount, struct ompi_datatype_t *rdtype, int root,
                       struct ompi_communicator_t *comm, struct ompi_info_t *info,
                       ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_GATHER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
                        .comm = comm};
    return run_init(module, &a, info, request);
}

static int gatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                        const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdtype,
                        int root, struct ompi_communicator_t *comm, struct ompi_info_t *info,
                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_GATHERV, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdispls, .rdtype = rdtype,
                        .root = root, .comm = comm};
    return run_init(module, &a, info, request);
}

static int reduce_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                       struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                       struct ompi_info_t *info, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .root = root, .comm = comm};
    return run_init(module, &a, info, request);
}

static int reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                               struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                        .rcounts = rcounts, .dtype = dtype, .op = op, .comm = comm};
    return run_init(module, &a, info, request);
}

static int reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                     ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sbuf, .rbuf = rbuf,
                        .rcount = rcount, .dtype = dtype, .op = op, .comm = comm};
    return run_init(module, &a, info, request);
}

static int scan_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                     struct ompi_op_t *op, struct ompi_communicator_t *comm,
                     struct ompi_info_t *info, ompi_request_t **request,
                     mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCAN, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return run_init(module, &a, info, request);
}

static int scatter_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdtype, int root,
                        struct ompi_communicator_t *comm, struct ompi_info_t *info,
                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCATTER, .sbuf = sbuf, .scount = scount, .sdtype = sdtype,
                        .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
                        .comm = comm};
    return run_init(module, &a, info, request);
}

static int scatterv_init(const void *sbuf, const int *scounts, const int *sdispls,
                         struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                         struct ompi_datatype_t *rdtype, int root, struct ompi_communicator_t *comm,
                         struct ompi_info_t *info, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_SCATTERV, .sbuf = sbuf, .scounts = scounts,
                        .sdispls = sdispls, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
                        .rdtype = rdtype, .root = root, .comm = comm};
    return run_init(module, &a, info, request);
}

void gw_coll_entry_install(mca_coll_base_module_t *m)
{
    m->coll_allgather = allgather;
    m->coll_allgatherv = allgatherv;
    m->coll_allreduce = allreduce;
    m->coll_alltoall = alltoall;
    m->coll_alltoallv = alltoallv;
    m->coll_alltoallw = alltoallw;
    m->coll_bcast = bcast;
    m->coll_exscan = exscan;
    m->coll_gather = gather;
    m->coll_gatherv = gatherv;
    m->coll_reduce = reduce;
    m->coll_reduce_scatter = reduce_scatter;
    m->coll_reduce_scatter_block = reduce_scatter_block;
    m->coll_scan = scan;
    m->coll_scatter = scatter;
    m->coll_scatterv = scatterv;

    m->coll_iallgather = iallgather;
    m->coll_iallgatherv = iallgatherv;
    m->coll_iallreduce = iallreduce;
    m->coll_ialltoall = ialltoall;
    m->coll_ialltoallv = ialltoallv;
    m->coll_ialltoallw = ialltoallw;
    m->coll_ibcast = ibcast;
    m->coll_iexscan = iexscan;
    m->coll_igather = igather;
    m->coll_igatherv = igatherv;
    m->coll_ireduce = ireduce;
    m->coll_ireduce_scatter = ireduce_scatter;
    m->coll_ireduce_scatter_block = ireduce_scatter_block;
    m->coll_iscan = iscan;
    m->coll_iscatter = iscatter;
    m->coll_iscatterv = iscatterv;
    m->coll_ibarrier = ibarrier;
    m->coll_reduce_local = reduce_local;

    m->coll_allgather_init = allgather_init;
    m->coll_allgatherv_init = allgatherv_init;
    m->coll_allreduce_init = allreduce_init;
    m->coll_alltoall_init = alltoall_init;
    m->coll_alltoallv_init = alltoallv_init;
    m->coll_alltoallw_init = alltoallw_init;
    m->coll_bcast_init = bcast_init;
    m->coll_exscan_init = exscan_init;
    m->coll_gather_init = gather_init;
    m->coll_gatherv_init = gatherv_init;
    m->coll_reduce_init = reduce_init;
    m->coll_reduce_scatter_init = reduce_scatter_init;
    m->coll_reduce_scatter_block_init = reduce_scatter_block_init;
    m->coll_scan_init = scan_init;
    m->coll_scatter_init = scatter_init;
    m->coll_scatterv_init = scatterv_init;
}
