/*
 * Inter-communicators. Open MPI's coll/inter runs the blocking collectives
 * as collectives on each group's intra-communicator (where coll gpuwire
 * takes device buffers) and point-to-point between the groups (pml
 * gpuwire). libnbc runs the non-blocking ones, and reduces with the CPU,
 * which cannot read device memory. So on an inter-communicator this module
 * provides the non-blocking reductions only:
 *
 *   host buffers          the module below (libnbc), in initiation order
 *                         behind this module's staged calls
 *   device, Iallreduce    staged: the same requests as the staged
 *   and Ireduce           non-blocking calls of intra-communicators (copies
 *                         to host memory, libnbc's collective on them,
 *                         copies back)
 *   device, Ireduce_scatter(_block)
 *                         MPI_ERR_BUFFER and one line naming the blocking
 *                         form, which works
 */
#include <string.h>

#include "coll_gpuwire_dispatch.h"
#include "coll_gpuwire_entry.h"

/* The regions of this rank's significant buffers. Ireduce: the receiving
 * root (MPI_ROOT) has a receive buffer only, the other ranks of its group
 * (MPI_PROC_NULL) no buffer, the sending group a send buffer only. */
static void inter_regions(const gw_coll_args_t *a, gw_coll_region_t r[GW_REGION_COUNT])
{
    gw_coll_args_t shape = *a;
    if (GW_COLL_REDUCE == a->id) {
        if (MPI_PROC_NULL == a->root) {
            memset(r, 0, sizeof(gw_coll_region_t) * GW_REGION_COUNT);
            return;
        }
        if (MPI_ROOT == a->root) {
            /* The intra shape of a root reducing in place: the receive
             * buffer only (copied in too, which is harmless). */
            shape.root = ompi_comm_rank(a->comm);
            shape.sbuf = MPI_IN_PLACE;
        } else {
            shape.root = -1; /* not this rank */
        }
    }
    gw_coll_regions(&shape, r);
}

static int inter_run(mca_coll_base_module_t *module, gw_coll_args_t *a, ompi_request_t **request)
{
    mca_coll_gpuwire_module_t *m = (mca_coll_gpuwire_module_t *)module;
    a->nonblocking = true;
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_mem_kind_t kind = GW_MEM_HOST;
    if (mca_coll_gpuwire.device_ready) {
        inter_regions(a, r);
        const int rc = gw_coll_classify_regions(r, &kind);
        if (OMPI_SUCCESS != rc) return rc;
    }
    if (GW_MEM_HOST == kind) return gw_coll_nb_passthrough(m, a, request);
    if (GW_COLL_REDUCE_SCATTER == a->id || GW_COLL_REDUCE_SCATTER_BLOCK == a->id) {
        opal_output(0, "coll:gpuwire: MPI_I%s on an inter-communicator with GPU buffers is not "
                       "supported: use MPI_%s (coll/inter over coll gpuwire), or host buffers",
                    gw_coll_name(a->id), gw_coll_name(a->id));
        return MPI_ERR_BUFFER;
    }
    COLL_GPUWIRE_VERBOSE(20, "i%s on an inter-communicator, device memory: staged",
                         gw_coll_name(a->id));
    return gw_coll_staged.run(m, a, r, request);
}

static int iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .comm = comm};
    return inter_run(module, &a, request);
}

static int ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                   struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                   ompi_request_t **request, mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                        .dtype = dtype, .op = op, .root = root, .comm = comm};
    return inter_run(module, &a, request);
}

static int ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                        .rcounts = rcounts, .dtype = dtype, .op = op, .comm = comm};
    return inter_run(module, &a, request);
}

static int ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    gw_coll_args_t a = {.id = GW_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sbuf, .rbuf = rbuf,
                        .rcount = rcount, .dtype = dtype, .op = op, .comm = comm};
    return inter_run(module, &a, request);
}

void gw_coll_inter_install(mca_coll_base_module_t *m)
{
    m->coll_iallreduce = iallreduce;
    m->coll_ireduce = ireduce;
    m->coll_ireduce_scatter = ireduce_scatter;
    m->coll_ireduce_scatter_block = ireduce_scatter_block;
}
