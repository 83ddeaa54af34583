/*
 * Integer sums of 8 and 16 bits that wrap (coll_gpuwire_op_wrap).
 *
 * Open MPI 4.1's op/avx component, loaded by default on CPUs with AVX, sums
 * 8- and 16-bit integers with saturating instructions on vectors long enough
 * for its loops (open-mpi/ompi#8045, closed as won't fix); its scalar tails
 * and op/base wrap. Every host reduction inherits this: Open MPI's own
 * modules on host buffers, and coll gpuwire's staged calls, which reduce
 * in host memory with Open MPI's ops, while the GPU kernels wrap. One call
 * then gave different sums by size and path, and OSU's validation (-c,
 * MPI_CHAR by default) failed on osu_reduce and osu_reduce_scatter.
 *
 * At the first communicator's query, the MPI_SUM functions that an op
 * component installed for those four types (op/base's own are left alone)
 * are replaced by plain loops that wrap, the 2- and 3-buffer forms alike;
 * the component's close puts the originals back.
 */
#include <stdint.h>

#include "coll_gpuwire.h"
#include "ompi/mca/op/op.h"
#include "ompi/op/op.h"

#define GW_SUM_WRAP(name, T, U)                                                                    \
    static void name(const void *in, void *inout, int *count, struct ompi_datatype_t **dt,         \
                     struct ompi_op_base_module_1_0_0_t *module)                                   \
    {                                                                                              \
        (void)dt;                                                                                  \
        (void)module;                                                                              \
        const T *a = (const T *)in;                                                                \
        T *b = (T *)inout;                                                                         \
        for (int i = 0; i < *count; ++i) b[i] = (T)(U)((U)b[i] + (U)a[i]);                         \
    }                                                                                              \
    static void name##_3(const void *in1, const void *in2, void *out, int *count,                  \
                         struct ompi_datatype_t **dt, struct ompi_op_base_module_1_0_0_t *module)  \
    {                                                                                              \
        (void)dt;                                                                                  \
        (void)module;                                                                              \
        const T *a = (const T *)in1;                                                               \
        const T *b = (const T *)in2;                                                               \
        T *c = (T *)out;                                                                           \
        for (int i = 0; i < *count; ++i) c[i] = (T)(U)((U)a[i] + (U)b[i]);                         \
    }

GW_SUM_WRAP(sum_int8, int8_t, uint8_t)
GW_SUM_WRAP(sum_uint8, uint8_t, uint8_t)
GW_SUM_WRAP(sum_int16, int16_t, uint16_t)
GW_SUM_WRAP(sum_uint16, uint16_t, uint16_t)

static const struct {
    int type;
    ompi_op_base_handler_fn_t fn;
    ompi_op_base_3buff_handler_fn_t fn3;
} wraps[] = {
    {OMPI_OP_BASE_TYPE_INT8_T, sum_int8, sum_int8_3},
    {OMPI_OP_BASE_TYPE_UINT8_T, sum_uint8, sum_uint8_3},
    {OMPI_OP_BASE_TYPE_INT16_T, sum_int16, sum_int16_3},
    {OMPI_OP_BASE_TYPE_UINT16_T, sum_uint16, sum_uint16_3},
};
#define GW_WRAPS (sizeof(wraps) / sizeof(wraps[0]))

/* What the replaced entries held, to put back. */
static struct {
    bool done;
    ompi_op_base_handler_fn_t fn[GW_WRAPS];
    ompi_op_base_3buff_handler_fn_t fn3[GW_WRAPS];
} saved;

int gw_coll_op_wrap_install(void)
{
    if (saved.done || !mca_coll_gpuwire.op_wrap) return 0;
    struct ompi_op_t *sum = &ompi_mpi_op_sum.op;
    int replaced = 0;
    for (size_t i = 0; i < GW_WRAPS; ++i) {
        const int t = wraps[i].type;
        saved.fn[i] = sum->o_func.intrinsic.fns[t];
        saved.fn3[i] = sum->o_3buff_intrinsic.fns[t];
        /* A module: an op component's function, not op/base's. */
        if (NULL != sum->o_func.intrinsic.modules[t] && NULL != saved.fn[i]) {
            sum->o_func.intrinsic.fns[t] = wraps[i].fn;
            ++replaced;
        }
        if (NULL != sum->o_3buff_intrinsic.modules[t] && NULL != saved.fn3[i]) {
            sum->o_3buff_intrinsic.fns[t] = wraps[i].fn3;
            ++replaced;
        }
    }
    saved.done = true;
    COLL_GPUWIRE_VERBOSE(10, "MPI_SUM on 8- and 16-bit integers: %d op component function(s) "
                             "replaced by sums that wrap (coll_gpuwire_op_wrap)",
                         replaced);
    return replaced;
}

void gw_coll_op_wrap_remove(void)
{
    if (!saved.done) return;
    struct ompi_op_t *sum = &ompi_mpi_op_sum.op;
    for (size_t i = 0; i < GW_WRAPS; ++i) {
        const int t = wraps[i].type;
        if (sum->o_func.intrinsic.fns[t] == wraps[i].fn) sum->o_func.intrinsic.fns[t] = saved.fn[i];
        if (sum->o_3buff_intrinsic.fns[t] == wraps[i].fn3) {
            sum->o_3buff_intrinsic.fns[t] = saved.fn3[i];
        }
    }
    saved.done = false;
}
