/*
 * A call handed to the module that was installed before coll gpuwire (the
 * fallback of every path), in its blocking, non-blocking and persistent
 * forms.
 */
#include "coll_gpuwire_dispatch.h"

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
