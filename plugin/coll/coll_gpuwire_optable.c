/*
 * Open MPI's ops and datatypes -> the ids of the reduction kernels' table
 * (gpuwire/cuda/reduce.h), which every algorithm on the GPU asks
 * (gw_coll_table_ids: the device ring, NVLink, the hierarchy), and
 * MPI_Reduce_local by one kernel. Separate from the device ring: neither
 * sends a message.
 */
#include <stdbool.h>
#include <wchar.h>

#include "gpuwire/gpu_device.h"
#include "coll_gpuwire_dispatch.h"
#include "gpuwire/cuda/reduce.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"

/* ------------------------------------------------------------------------
 * Open MPI's ops and datatypes -> the table's ids
 * ------------------------------------------------------------------------ */

static int table_op(const struct ompi_op_t *op)
{
    switch (op->op_type) {
    case OMPI_OP_SUM: return GW_OP_SUM;
    case OMPI_OP_PROD: return GW_OP_PROD;
    case OMPI_OP_MIN: return GW_OP_MIN;
    case OMPI_OP_MAX: return GW_OP_MAX;
    case OMPI_OP_LAND: return GW_OP_LAND;
    case OMPI_OP_LOR: return GW_OP_LOR;
    case OMPI_OP_LXOR: return GW_OP_LXOR;
    case OMPI_OP_BAND: return GW_OP_BAND;
    case OMPI_OP_BOR: return GW_OP_BOR;
    case OMPI_OP_BXOR: return GW_OP_BXOR;
    case OMPI_OP_MINLOC: return GW_OP_MINLOC;
    case OMPI_OP_MAXLOC: return GW_OP_MAXLOC;
    default: return -1;
    }
}

#define GW_SIGNED_ID(bytes) \
    ((bytes) == 1 ? GW_TYPE_INT8 : (bytes) == 2 ? GW_TYPE_INT16 : (bytes) == 4 ? GW_TYPE_INT32 : GW_TYPE_INT64)
#define GW_UNSIGNED_ID(bytes)                                                               \
    ((bytes) == 1 ? GW_TYPE_UINT8 : (bytes) == 2 ? GW_TYPE_UINT16 : (bytes) == 4 ? GW_TYPE_UINT32 \
                                                                                : GW_TYPE_UINT64)

/* Open MPI's own op type (ompi_op_ddt_map, the index of its host functions)
 * -> the table's type. MPI_CHAR, MPI_INT, ... reach here as the fixed-width
 * type of their size; long and unsigned long and wchar_t by their size. */
static int table_type_of_base(int base)
{
    switch (base) {
    case OMPI_OP_BASE_TYPE_INT8_T: return GW_TYPE_INT8;
    case OMPI_OP_BASE_TYPE_UINT8_T: return GW_TYPE_UINT8;
    case OMPI_OP_BASE_TYPE_INT16_T: return GW_TYPE_INT16;
    case OMPI_OP_BASE_TYPE_UINT16_T: return GW_TYPE_UINT16;
    case OMPI_OP_BASE_TYPE_INT32_T: return GW_TYPE_INT32;
    case OMPI_OP_BASE_TYPE_UINT32_T: return GW_TYPE_UINT32;
    case OMPI_OP_BASE_TYPE_INT64_T: return GW_TYPE_INT64;
    case OMPI_OP_BASE_TYPE_UINT64_T: return GW_TYPE_UINT64;
    case OMPI_OP_BASE_TYPE_LONG: return GW_SIGNED_ID(sizeof(long));
    case OMPI_OP_BASE_TYPE_UNSIGNED_LONG: return GW_UNSIGNED_ID(sizeof(unsigned long));
    case OMPI_OP_BASE_TYPE_WCHAR: return ((wchar_t)-1 < 0) ? GW_SIGNED_ID(sizeof(wchar_t))
                                                            : GW_UNSIGNED_ID(sizeof(wchar_t));
    case OMPI_OP_BASE_TYPE_FLOAT: return GW_TYPE_FLOAT;
    case OMPI_OP_BASE_TYPE_DOUBLE: return GW_TYPE_DOUBLE;
    case OMPI_OP_BASE_TYPE_BOOL: return sizeof(bool) == 1 ? GW_TYPE_BOOL : -1;
    case OMPI_OP_BASE_TYPE_BYTE: return GW_TYPE_BYTE;
    case OMPI_OP_BASE_TYPE_FLOAT_INT: return GW_TYPE_FLOAT_INT;
    case OMPI_OP_BASE_TYPE_DOUBLE_INT: return GW_TYPE_DOUBLE_INT;
    case OMPI_OP_BASE_TYPE_LONG_INT: return sizeof(long) == 8 ? GW_TYPE_LONG_INT : -1;
    case OMPI_OP_BASE_TYPE_2INT: return GW_TYPE_2INT;
    case OMPI_OP_BASE_TYPE_SHORT_INT: return GW_TYPE_SHORT_INT;
    default: return -1; /* long double, complex, Fortran types: host */
    }
}

/* The table's (op, type) for a call, or false: a user-defined op, a derived
 * datatype, a pair Open MPI itself has no function for (an invalid pair:
 * the host path raises MPI's error), or one the table lacks. */
bool gw_coll_table_ids(struct ompi_op_t *op, struct ompi_datatype_t *dt, int *gop, int *gtype)
{
    if (!ompi_op_is_intrinsic(op) || !ompi_op_is_commute(op)) return false;
    if (!ompi_datatype_is_predefined(dt)) return false;
    const int base = ompi_op_ddt_map[dt->id];
    if (base < 0 || NULL == op->o_func.intrinsic.fns[base]) return false;
    const int o = table_op(op), t = table_type_of_base(base);
    if (o < 0 || t < 0 || !gw_coll_reduce_supported(o, t)) return false;
    /* Elements are moved whole: no padding, trailing (MPI_DOUBLE_INT, ...)
     * or inside (MPI_SHORT_INT), whose bytes the call may not write, and
     * the table's layout. So every region of an accepted call is dense, on
     * every rank alike: density is the datatype's, not the buffer's. */
    ptrdiff_t lb, extent, true_lb, true_extent;
    size_t size = 0;
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
    ompi_datatype_type_size(dt, &size);
    if (lb != 0 || true_lb != 0 || true_extent != extent || (size_t)extent != size ||
        (size_t)extent != gw_reduce_type_size(t)) {
        return false;
    }
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
