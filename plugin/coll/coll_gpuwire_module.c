/*
 * The module: selection on a communicator, the saved previous functions, and
 * the one function that calls them.
 */
#include "coll_gpuwire.h"

#include "coll_gpuwire_dispatch.h"
#include "coll_gpuwire_entry.h"

/* Saves what the communicator would run for <name> without this module, and
 * keeps that module alive while this one uses it. Open MPI enables modules in
 * increasing priority and installs each one's functions after its enable, so
 * comm->c_coll holds exactly the lower-priority choice here. With nothing
 * below, this module does not provide <name> either. */
#define GW_SAVE_PREVIOUS(m, comm, name)                                           \
    do {                                                                          \
        (m)->previous_##name = (comm)->c_coll->coll_##name;                      \
        (m)->previous_##name##_module = (comm)->c_coll->coll_##name##_module;    \
        if (NULL != (m)->previous_##name && NULL != (m)->previous_##name##_module) { \
            OBJ_RETAIN((m)->previous_##name##_module);                           \
        } else {                                                                  \
            (m)->previous_##name = NULL;                                          \
            (m)->previous_##name##_module = NULL;                                 \
            (m)->super.coll_##name = NULL;                                        \
        }                                                                         \
    } while (0)

#define GW_RELEASE_PREVIOUS(m, name)                                              \
    do {                                                                          \
        if (NULL != (m)->previous_##name##_module) {                              \
            OBJ_RELEASE((m)->previous_##name##_module);                           \
            (m)->previous_##name##_module = NULL;                                 \
        }                                                                         \
    } while (0)

static int module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_gpuwire_module_t *m = (mca_coll_gpuwire_module_t *)module;
    GW_SAVE_PREVIOUS(m, comm, allgather);
    GW_SAVE_PREVIOUS(m, comm, allgatherv);
    GW_SAVE_PREVIOUS(m, comm, allreduce);
    GW_SAVE_PREVIOUS(m, comm, alltoall);
    GW_SAVE_PREVIOUS(m, comm, alltoallv);
    GW_SAVE_PREVIOUS(m, comm, alltoallw);
    GW_SAVE_PREVIOUS(m, comm, bcast);
    GW_SAVE_PREVIOUS(m, comm, exscan);
    GW_SAVE_PREVIOUS(m, comm, gather);
    GW_SAVE_PREVIOUS(m, comm, gatherv);
    GW_SAVE_PREVIOUS(m, comm, reduce);
    GW_SAVE_PREVIOUS(m, comm, reduce_scatter);
    GW_SAVE_PREVIOUS(m, comm, reduce_scatter_block);
    GW_SAVE_PREVIOUS(m, comm, scan);
    GW_SAVE_PREVIOUS(m, comm, scatter);
    GW_SAVE_PREVIOUS(m, comm, scatterv);
    GW_SAVE_PREVIOUS(m, comm, iallgather);
    GW_SAVE_PREVIOUS(m, comm, iallgatherv);
    GW_SAVE_PREVIOUS(m, comm, iallreduce);
    GW_SAVE_PREVIOUS(m, comm, ialltoall);
    GW_SAVE_PREVIOUS(m, comm, ialltoallv);
    GW_SAVE_PREVIOUS(m, comm, ialltoallw);
    GW_SAVE_PREVIOUS(m, comm, ibcast);
    GW_SAVE_PREVIOUS(m, comm, iexscan);
    GW_SAVE_PREVIOUS(m, comm, igather);
    GW_SAVE_PREVIOUS(m, comm, igatherv);
    GW_SAVE_PREVIOUS(m, comm, ireduce);
    GW_SAVE_PREVIOUS(m, comm, ireduce_scatter);
    GW_SAVE_PREVIOUS(m, comm, ireduce_scatter_block);
    GW_SAVE_PREVIOUS(m, comm, iscan);
    GW_SAVE_PREVIOUS(m, comm, iscatter);
    GW_SAVE_PREVIOUS(m, comm, iscatterv);
    GW_SAVE_PREVIOUS(m, comm, ibarrier);
    GW_SAVE_PREVIOUS(m, comm, reduce_local);
    GW_SAVE_PREVIOUS(m, comm, allgather_init);
    GW_SAVE_PREVIOUS(m, comm, allgatherv_init);
    GW_SAVE_PREVIOUS(m, comm, allreduce_init);
    GW_SAVE_PREVIOUS(m, comm, alltoall_init);
    GW_SAVE_PREVIOUS(m, comm, alltoallv_init);
    GW_SAVE_PREVIOUS(m, comm, alltoallw_init);
    GW_SAVE_PREVIOUS(m, comm, bcast_init);
    GW_SAVE_PREVIOUS(m, comm, exscan_init);
    GW_SAVE_PREVIOUS(m, comm, gather_init);
    GW_SAVE_PREVIOUS(m, comm, gatherv_init);
    GW_SAVE_PREVIOUS(m, comm, reduce_init);
    GW_SAVE_PREVIOUS(m, comm, reduce_scatter_init);
    GW_SAVE_PREVIOUS(m, comm, reduce_scatter_block_init);
    GW_SAVE_PREVIOUS(m, comm, scan_init);
    GW_SAVE_PREVIOUS(m, comm, scatter_init);
    GW_SAVE_PREVIOUS(m, comm, scatterv_init);
    gw_coll_nvlink_init(m, comm);
    COLL_GPUWIRE_VERBOSE(10, "enabled on %s (cid %u, %d ranks): allreduce over %p",
                         comm->c_name, (unsigned)gw_comm_cid(comm), ompi_comm_size(comm),
                         (void *)m->previous_allreduce_module);
    return OMPI_SUCCESS;
}

static void module_construct(mca_coll_gpuwire_module_t *m)
{
    /* Everything after the base struct: functions and modules NULL. */
    memset((char *)m + sizeof(m->super), 0, sizeof(*m) - sizeof(m->super));
}

static void module_destruct(mca_coll_gpuwire_module_t *m)
{
    gw_ce_nvl_release(&m->nvl);
    gw_coll_hier_release(m);
    GW_RELEASE_PREVIOUS(m, allgather);
    GW_RELEASE_PREVIOUS(m, allgatherv);
    GW_RELEASE_PREVIOUS(m, allreduce);
    GW_RELEASE_PREVIOUS(m, alltoall);
    GW_RELEASE_PREVIOUS(m, alltoallv);
    GW_RELEASE_PREVIOUS(m, alltoallw);
    GW_RELEASE_PREVIOUS(m, bcast);
    GW_RELEASE_PREVIOUS(m, exscan);
    GW_RELEASE_PREVIOUS(m, gather);
    GW_RELEASE_PREVIOUS(m, gatherv);
    GW_RELEASE_PREVIOUS(m, reduce);
    GW_RELEASE_PREVIOUS(m, reduce_scatter);
    GW_RELEASE_PREVIOUS(m, reduce_scatter_block);
    GW_RELEASE_PREVIOUS(m, scan);
    GW_RELEASE_PREVIOUS(m, scatter);
    GW_RELEASE_PREVIOUS(m, scatterv);
    GW_RELEASE_PREVIOUS(m, iallgather);
    GW_RELEASE_PREVIOUS(m, iallgatherv);
    GW_RELEASE_PREVIOUS(m, iallreduce);
    GW_RELEASE_PREVIOUS(m, ialltoall);
    GW_RELEASE_PREVIOUS(m, ialltoallv);
    GW_RELEASE_PREVIOUS(m, ialltoallw);
    GW_RELEASE_PREVIOUS(m, ibcast);
    GW_RELEASE_PREVIOUS(m, iexscan);
    GW_RELEASE_PREVIOUS(m, igather);
    GW_RELEASE_PREVIOUS(m, igatherv);
    GW_RELEASE_PREVIOUS(m, ireduce);
    GW_RELEASE_PREVIOUS(m, ireduce_scatter);
    GW_RELEASE_PREVIOUS(m, ireduce_scatter_block);
    GW_RELEASE_PREVIOUS(m, iscan);
    GW_RELEASE_PREVIOUS(m, iscatter);
    GW_RELEASE_PREVIOUS(m, iscatterv);
    GW_RELEASE_PREVIOUS(m, ibarrier);
    GW_RELEASE_PREVIOUS(m, reduce_local);
    GW_RELEASE_PREVIOUS(m, allgather_init);
    GW_RELEASE_PREVIOUS(m, allgatherv_init);
    GW_RELEASE_PREVIOUS(m, allreduce_init);
    GW_RELEASE_PREVIOUS(m, alltoall_init);
    GW_RELEASE_PREVIOUS(m, alltoallv_init);
    GW_RELEASE_PREVIOUS(m, alltoallw_init);
    GW_RELEASE_PREVIOUS(m, bcast_init);
    GW_RELEASE_PREVIOUS(m, exscan_init);
    GW_RELEASE_PREVIOUS(m, gather_init);
    GW_RELEASE_PREVIOUS(m, gatherv_init);
    GW_RELEASE_PREVIOUS(m, reduce_init);
    GW_RELEASE_PREVIOUS(m, reduce_scatter_init);
    GW_RELEASE_PREVIOUS(m, reduce_scatter_block_init);
    GW_RELEASE_PREVIOUS(m, scan_init);
    GW_RELEASE_PREVIOUS(m, scatter_init);
    GW_RELEASE_PREVIOUS(m, scatterv_init);
}

OBJ_CLASS_INSTANCE(mca_coll_gpuwire_module_t, mca_coll_base_module_t, module_construct,
                   module_destruct);

mca_coll_base_module_t *mca_coll_gpuwire_comm_query(struct ompi_communicator_t *comm,
                                                    int *priority)
{
    if (mca_coll_gpuwire.priority < 0) return NULL;

    mca_coll_gpuwire_module_t *m = OBJ_NEW(mca_coll_gpuwire_module_t);
    if (NULL == m) return NULL;
    m->super.coll_module_enable = module_enable;
    /* On inter-communicators coll/inter composes the blocking forms of
     * intra-communicator calls; only libnbc's reductions need this module
     * (coll_gpuwire_inter.c). */
    if (OMPI_COMM_IS_INTER(comm)) {
        gw_coll_inter_install(&m->super);
    } else {
        gw_coll_entry_install(&m->super);
    }
    *priority = mca_coll_gpuwire.priority;
    return &m->super;
}

int gw_coll_call_previous(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                          const void *sbuf, void *rbuf, ompi_request_t **request)
{
    struct ompi_communicator_t *c = a->comm;
    if (NULL == request) {
        switch (a->id) {
        case GW_COLL_ALLGATHER:
            return m->previous_allgather(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype, c,
                                         m->previous_allgather_module);
        case GW_COLL_ALLGATHERV:
            return m->previous_allgatherv(sbuf, a->scount, a->sdtype, rbuf, a->rcounts, a->rdispls,
                                          a->rdtype, c, m->previous_allgatherv_module);
        case GW_COLL_ALLREDUCE:
            return m->previous_allreduce(sbuf, rbuf, a->count, a->dtype, a->op, c,
                                         m->previous_allreduce_module);
        case GW_COLL_ALLTOALL:
            return m->previous_alltoall(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype, c,
                                        m->previous_alltoall_module);
        case GW_COLL_ALLTOALLV:
            return m->previous_alltoallv(sbuf, a->scounts, a->sdispls, a->sdtype, rbuf, a->rcounts,
                                         a->rdispls, a->rdtype, c, m->previous_alltoallv_module);
        case GW_COLL_ALLTOALLW:
            return m->previous_alltoallw(sbuf, a->scounts, a->sdispls, a->sdtypes, rbuf,
                                         a->rcounts, a->rdispls, a->rdtypes, c,
                                         m->previous_alltoallw_module);
        case GW_COLL_BCAST:
            return m->previous_bcast(rbuf, a->count, a->dtype, a->root, c,
                                     m->previous_bcast_module);
        case GW_COLL_EXSCAN:
            return m->previous_exscan(sbuf, rbuf, a->count, a->dtype, a->op, c,
                                      m->previous_exscan_module);
        case GW_COLL_GATHER:
            return m->previous_gather(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype,
                                      a->root, c, m->previous_gather_module);
        case GW_COLL_GATHERV:
            return m->previous_gatherv(sbuf, a->scount, a->sdtype, rbuf, a->rcounts, a->rdispls,
                                       a->rdtype, a->root, c, m->previous_gatherv_module);
        case GW_COLL_REDUCE:
            return m->previous_reduce(sbuf, rbuf, a->count, a->dtype, a->op, a->root, c,
                                      m->previous_reduce_module);
        case GW_COLL_REDUCE_SCATTER:
            return m->previous_reduce_scatter(sbuf, rbuf, a->rcounts, a->dtype, a->op, c,
                                              m->previous_reduce_scatter_module);
        case GW_COLL_REDUCE_SCATTER_BLOCK:
            return m->previous_reduce_scatter_block(sbuf, rbuf, a->rcount, a->dtype, a->op, c,
                                                    m->previous_reduce_scatter_block_module);
        case GW_COLL_SCAN:
            return m->previous_scan(sbuf, rbuf, a->count, a->dtype, a->op, c,
                                    m->previous_scan_module);
        case GW_COLL_SCATTER:
            return m->previous_scatter(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype,
                                       a->root, c, m->previous_scatter_module);
        case GW_COLL_SCATTERV:
            return m->previous_scatterv(sbuf, a->scounts, a->sdispls, a->sdtype, rbuf, a->rcount,
                                        a->rdtype, a->root, c, m->previous_scatterv_module);
        case GW_COLL_REDUCE_LOCAL:
            return m->previous_reduce_local(sbuf, rbuf, a->count, a->dtype, a->op,
                                            m->previous_reduce_local_module);
        case GW_COLL_BARRIER: /* not provided */
        case GW_COLL_COUNT:
            break;
        }
        return OMPI_ERR_NOT_SUPPORTED;
    }
    switch (a->id) {
    case GW_COLL_ALLGATHER:
        return m->previous_iallgather(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype, c,
                                      request, m->previous_iallgather_module);
    case GW_COLL_ALLGATHERV:
        return m->previous_iallgatherv(sbuf, a->scount, a->sdtype, rbuf, a->rcounts, a->rdispls,
                                       a->rdtype, c, request, m->previous_iallgatherv_module);
    case GW_COLL_ALLREDUCE:
        return m->previous_iallreduce(sbuf, rbuf, a->count, a->dtype, a->op, c, request,
                                      m->previous_iallreduce_module);
    case GW_COLL_ALLTOALL:
        return m->previous_ialltoall(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype, c,
                                     request, m->previous_ialltoall_module);
    case GW_COLL_ALLTOALLV:
        return m->previous_ialltoallv(sbuf, a->scounts, a->sdispls, a->sdtype, rbuf, a->rcounts,
                                      a->rdispls, a->rdtype, c, request,
                                      m->previous_ialltoallv_module);
    case GW_COLL_ALLTOALLW:
        return m->previous_ialltoallw(sbuf, a->scounts, a->sdispls, a->sdtypes, rbuf, a->rcounts,
                                      a->rdispls, a->rdtypes, c, request,
                                      m->previous_ialltoallw_module);
    case GW_COLL_BCAST:
        return m->previous_ibcast(rbuf, a->count, a->dtype, a->root, c, request,
                                  m->previous_ibcast_module);
    case GW_COLL_EXSCAN:
        return m->previous_iexscan(sbuf, rbuf, a->count, a->dtype, a->op, c, request,
                                   m->previous_iexscan_module);
    case GW_COLL_GATHER:
        return m->previous_igather(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype, a->root,
                                   c, request, m->previous_igather_module);
    case GW_COLL_GATHERV:
        return m->previous_igatherv(sbuf, a->scount, a->sdtype, rbuf, a->rcounts, a->rdispls,
                                    a->rdtype, a->root, c, request, m->previous_igatherv_module);
    case GW_COLL_REDUCE:
        return m->previous_ireduce(sbuf, rbuf, a->count, a->dtype, a->op, a->root, c, request,
                                   m->previous_ireduce_module);
    case GW_COLL_REDUCE_SCATTER:
        return m->previous_ireduce_scatter(sbuf, rbuf, a->rcounts, a->dtype, a->op, c, request,
                                           m->previous_ireduce_scatter_module);
    case GW_COLL_REDUCE_SCATTER_BLOCK:
        return m->previous_ireduce_scatter_block(sbuf, rbuf, a->rcount, a->dtype, a->op, c,
                                                 request, m->previous_ireduce_scatter_block_module);
    case GW_COLL_SCAN:
        return m->previous_iscan(sbuf, rbuf, a->count, a->dtype, a->op, c, request,
                                 m->previous_iscan_module);
    case GW_COLL_SCATTER:
        return m->previous_iscatter(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype,
                                    a->root, c, request, m->previous_iscatter_module);
    case GW_COLL_SCATTERV:
        return m->previous_iscatterv(sbuf, a->scounts, a->sdispls, a->sdtype, rbuf, a->rcount,
                                     a->rdtype, a->root, c, request, m->previous_iscatterv_module);
    case GW_COLL_BARRIER:
        return m->previous_ibarrier(c, request, m->previous_ibarrier_module);
    case GW_COLL_REDUCE_LOCAL: /* blocking only */
    case GW_COLL_COUNT:
        break;
    }
    return OMPI_ERR_NOT_SUPPORTED;
}

int gw_coll_call_previous_init(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                               struct ompi_info_t *info, ompi_request_t **request)
{
    struct ompi_communicator_t *c = a->comm;
    const void *sbuf = a->sbuf;
    void *rbuf = a->rbuf;
    switch (a->id) {
    case GW_COLL_ALLGATHER:
        return m->previous_allgather_init(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype,
                                          c, info, request, m->previous_allgather_init_module);
    case GW_COLL_ALLGATHERV:
        return m->previous_allgatherv_init(sbuf, a->scount, a->sdtype, rbuf, a->rcounts,
                                           a->rdispls, a->rdtype, c, info, request,
                                           m->previous_allgatherv_init_module);
    case GW_COLL_ALLREDUCE:
        return m->previous_allreduce_init(sbuf, rbuf, a->count, a->dtype, a->op, c, info,
                                          request, m->previous_allreduce_init_module);
    case GW_COLL_ALLTOALL:
        return m->previous_alltoall_init(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype,
                                         c, info, request, m->previous_alltoall_init_module);
    case GW_COLL_ALLTOALLV:
        return m->previous_alltoallv_init(sbuf, a->scounts, a->sdispls, a->sdtype, rbuf,
                                          a->rcounts, a->rdispls, a->rdtype, c, info, request,
                                          m->previous_alltoallv_init_module);
    case GW_COLL_ALLTOALLW:
        return m->previous_alltoallw_init(sbuf, a->scounts, a->sdispls, a->sdtypes, rbuf,
                                          a->rcounts, a->rdispls, a->rdtypes, c, info, request,
                                          m->previous_alltoallw_init_module);
    case GW_COLL_BCAST:
        return m->previous_bcast_init(rbuf, a->count, a->dtype, a->root, c, info, request,
                                      m->previous_bcast_init_module);
    case GW_COLL_EXSCAN:
        return m->previous_exscan_init(sbuf, rbuf, a->count, a->dtype, a->op, c, info, request,
                                       m->previous_exscan_init_module);
    case GW_COLL_GATHER:
        return m->previous_gather_init(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype,
                                       a->root, c, info, request,
                                       m->previous_gather_init_module);
    case GW_COLL_GATHERV:
        return m->previous_gatherv_init(sbuf, a->scount, a->sdtype, rbuf, a->rcounts, a->rdispls,
                                        a->rdtype, a->root, c, info, request,
                                        m->previous_gatherv_init_module);
    case GW_COLL_REDUCE:
        return m->previous_reduce_init(sbuf, rbuf, a->count, a->dtype, a->op, a->root, c, info,
                                       request, m->previous_reduce_init_module);
    case GW_COLL_REDUCE_SCATTER:
        return m->previous_reduce_scatter_init(sbuf, rbuf, a->rcounts, a->dtype, a->op, c, info,
                                               request, m->previous_reduce_scatter_init_module);
    case GW_COLL_REDUCE_SCATTER_BLOCK:
        return m->previous_reduce_scatter_block_init(
            sbuf, rbuf, a->rcount, a->dtype, a->op, c, info, request,
            m->previous_reduce_scatter_block_init_module);
    case GW_COLL_SCAN:
        return m->previous_scan_init(sbuf, rbuf, a->count, a->dtype, a->op, c, info, request,
                                     m->previous_scan_init_module);
    case GW_COLL_SCATTER:
        return m->previous_scatter_init(sbuf, a->scount, a->sdtype, rbuf, a->rcount, a->rdtype,
                                        a->root, c, info, request,
                                        m->previous_scatter_init_module);
    case GW_COLL_SCATTERV:
        return m->previous_scatterv_init(sbuf, a->scounts, a->sdispls, a->sdtype, rbuf,
                                         a->rcount, a->rdtype, a->root, c, info, request,
                                         m->previous_scatterv_init_module);
    case GW_COLL_BARRIER: /* not provided */
    case GW_COLL_REDUCE_LOCAL:
    case GW_COLL_COUNT:
        break;
    }
    return OMPI_ERR_NOT_SUPPORTED;
}
