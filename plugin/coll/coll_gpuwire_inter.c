/*
 * Inter-communicators. Open MPI's coll/inter runs the blocking collectives
 * as collectives on each group's intra-communicator (where coll gpuwire
 * takes device buffers) and point-to-point between the groups (pml
 * gpuwire). libnbc runs the non-blocking ones, and reduces with the CPU,
 * which cannot read device memory. So on an inter-communicator this module
 * provides the non-blocking reductions and their persistent forms (each
 * start runs the non-blocking form, gw_coll_init) only:
 *
 *   host buffers          the module below (libnbc), in initiation order
 *                         behind this module's staged calls
 *   device                staged: the same requests as the staged
 *                         non-blocking calls of intra-communicators (copies
 *                         to host memory, libnbc's collective on them,
 *                         copies back). The regions are Open MPI's reading
 *                         of the inter-communicator forms (gw_coll_regions):
 *                         a Reduce_scatter's input holds the sum of the
 *                         local group's counts.
 */
#include "coll_gpuwire_dispatch.h"

int gw_coll_inter_dispatch(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *call,
                           ompi_request_t **request)
{
    gw_coll_args_t args = *call, *a = &args;
    a->nonblocking = true;
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_mem_kind_t kind = GW_MEM_HOST;
    if (mca_coll_gpuwire.device_ready) {
        gw_coll_regions(a, r); /* inter-communicator shapes included */
        const int rc = gw_coll_classify_regions(r, &kind);
        if (OMPI_SUCCESS != rc) return rc;
    }
    if (GW_MEM_HOST == kind) return gw_coll_nb_passthrough(m, a, request);
    COLL_GPUWIRE_VERBOSE(20, "i%s on an inter-communicator, device memory: staged",
                         gw_coll_name(a->id));
    return gw_coll_staged.run(m, a, r, NULL, request);
}
