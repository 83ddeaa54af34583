/*
 * osc/gpuwire's MPI ops and element types as the core's reduction kernels
 * name them (gpuwire/cuda/reduce.h), for the one-sided engine's GPU door
 * (gpuwire/osc_direct.h, ucx_glue/osc/device), which knows no MPI handle.
 */
#include "osc_gpuwire.h"

#include "gpuwire/cuda/reduce.h"
#include "opal/util/output.h"

int gw_osc_kernel_op(MPI_Op op)
{
    const struct { MPI_Op op; int id; } ops[] = {
        {MPI_SUM, GW_OP_SUM},   {MPI_PROD, GW_OP_PROD}, {MPI_MIN, GW_OP_MIN},
        {MPI_MAX, GW_OP_MAX},   {MPI_LAND, GW_OP_LAND}, {MPI_LOR, GW_OP_LOR},
        {MPI_LXOR, GW_OP_LXOR}, {MPI_BAND, GW_OP_BAND}, {MPI_BOR, GW_OP_BOR},
        {MPI_BXOR, GW_OP_BXOR}, {MPI_MINLOC, GW_OP_MINLOC}, {MPI_MAXLOC, GW_OP_MAXLOC},
    };
    if (op == MPI_REPLACE) return GW_OSC_OP_REPLACE;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (ops[i].op == op) return ops[i].id;
    }
    return -1;
}

/* Integers by size and sign, the floating types, bool, byte, and the pairs
 * without a gap. */
int gw_osc_kernel_type(MPI_Datatype t)
{
    static const int sints[] = {GW_TYPE_INT8, GW_TYPE_INT16, -1, GW_TYPE_INT32, -1, -1, -1,
                                GW_TYPE_INT64};
    static const int uints[] = {GW_TYPE_UINT8, GW_TYPE_UINT16, -1, GW_TYPE_UINT32, -1, -1, -1,
                                GW_TYPE_UINT64};
    /* MPI_CHAR is Open MPI's int8_t in reductions (its host functions and
     * MPI_Reduce_local): the same kernel gives the same bytes. */
    MPI_Datatype s[] = {MPI_CHAR, MPI_SIGNED_CHAR, MPI_SHORT, MPI_INT, MPI_LONG, MPI_LONG_LONG_INT,
                        MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, MPI_AINT,
                        MPI_OFFSET, MPI_COUNT};
    MPI_Datatype u[] = {MPI_UNSIGNED_CHAR, MPI_UNSIGNED_SHORT, MPI_UNSIGNED, MPI_UNSIGNED_LONG,
                        MPI_UNSIGNED_LONG_LONG, MPI_UINT8_T, MPI_UINT16_T, MPI_UINT32_T,
                        MPI_UINT64_T};
    int size = 0;
    int rc = PMPI_Type_size(t, &size);
    if (rc != MPI_SUCCESS) {
        opal_output(0, "osc:gpuwire: PMPI_Type_size failed (%d); reduced on the host", rc);
        return -1; /* as for a type without a kernel */
    }
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        if (s[i] == t && size >= 1 && size <= 8) return sints[size - 1];
    }
    for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
        if (u[i] == t && size >= 1 && size <= 8) return uints[size - 1];
    }
    if (t == MPI_FLOAT) return GW_TYPE_FLOAT;
    if (t == MPI_DOUBLE) return GW_TYPE_DOUBLE;
    if (t == MPI_C_BOOL && size == 1) return GW_TYPE_BOOL;
    if (t == MPI_BYTE) return GW_TYPE_BYTE;
    if (t == MPI_2INT) return GW_TYPE_2INT;
    if (t == MPI_FLOAT_INT) return GW_TYPE_FLOAT_INT;
    return -1;
}
