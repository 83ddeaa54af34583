/*
 * A collective's op and datatype as the reduction kernels' table names them
 * (gw_coll_table_ids, over gpuwire_optable.h, which osc gpuwire shares),
 * which every algorithm on the GPU asks (the device ring, NVLink, the
 * hierarchy), and MPI_Reduce_local by one kernel. Separate from the device
 * ring: neither sends a message.
 */
#include <stdbool.h>

#include "gpuwire/gpu_device.h"
#include "coll_gpuwire_dispatch.h"
#include "gpuwire_optable.h"

/* The table's (op, type) for a call, or false: a user-defined or
 * non-commutative op, a derived or padded datatype (gw_table_type), a pair
 * Open MPI itself has no function for (an invalid pair: the host path raises
 * MPI's error), or one the table lacks. So every region of an accepted call
 * is dense, on every rank alike: density is the datatype's, not the
 * buffer's. */
bool gw_coll_table_ids(struct ompi_op_t *op, struct ompi_datatype_t *dt, int *gop, int *gtype)
{
    if (!ompi_op_is_intrinsic(op) || !ompi_op_is_commute(op)) return false;
    if (!ompi_datatype_is_predefined(dt)) return false;
    const int base = ompi_op_ddt_map[dt->id];
    if (base < 0 || NULL == op->o_func.intrinsic.fns[base]) return false;
    const int o = gw_table_op(op), t = gw_table_type(dt);
    if (o < 0 || t < 0 || !gw_coll_reduce_supported(o, t)) return false;
    *gop = o;
    *gtype = t;
    return true;
}

/* ------------------------------------------------------------------------
 * MPI_Reduce_local: one kernel where both buffers are on one GPU
 * ------------------------------------------------------------------------ */

static bool local_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                          gw_coll_note_t *note)
{
    (void)note;
    const gw_coll_region_t *in = &r[GW_REGION_SEND], *inout = &r[GW_REGION_RECV];
    int op, type;
    return GW_COLL_REDUCE_LOCAL == a->id &&
           GW_REDUCE_ALGO_STAGED != mca_coll_gpuwire.reduce_algorithm && in->on_gpu &&
           inout->on_gpu && in->gpu == inout->gpu && gw_coll_table_ids(a->op, a->dtype, &op, &type);
}

/* inoutbuf = inbuf op inoutbuf: the table's ops are commutative. */
static int local_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                     gw_coll_region_t r[GW_REGION_COUNT], gw_coll_note_t *note,
                     ompi_request_t **request)
{
    (void)note;
    (void)m;
    (void)request; /* blocking only */
    const int gpu = r[GW_REGION_RECV].gpu;
    int op = 0, type = 0;
    uint64_t ticket = 0;
    char why[256];
    (void)gw_coll_table_ids(a->op, a->dtype, &op, &type); /* true: accepts */
    if (0 != gw_coll_wait_user_regions(r, why, sizeof(why)) ||
        0 != gw_coll_reduce_start(op, type, a->sbuf, a->rbuf, a->rbuf, (size_t)a->count, gpu,
                                  &ticket, why, sizeof(why)) ||
        0 != gw_coll_copy_wait(gpu, ticket, why, sizeof(why))) {
        opal_output(0, "coll:gpuwire: reduce_local of %d elements on the GPU: %s", a->count, why);
        return OMPI_ERROR;
    }
    __atomic_fetch_add(&gw_core_counters()->coll_device_calls, 1, __ATOMIC_RELAXED);
    return OMPI_SUCCESS;
}

const gw_coll_algorithm_t gw_coll_local = {"local", local_accepts, local_run};
