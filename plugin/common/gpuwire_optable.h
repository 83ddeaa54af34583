/*
 * Open MPI's predefined ops and datatypes -> the ids of the core's reduction
 * kernels (gpuwire/cuda/reduce.h), for coll and osc gpuwire alike. A type is
 * named as Open MPI's own host functions treat it (ompi_op_ddt_map): MPI_CHAR,
 * MPI_INT, ... as the fixed-width integer of their size, MPI_OFFSET as
 * uint64_t, MPI_BYTE as uint8_t, long and wchar_t by their size; so a kernel
 * gives the bytes MPI_Reduce_local would.
 */
#ifndef GPUWIRE_OPTABLE_H
#define GPUWIRE_OPTABLE_H

#include <stdbool.h>
#include <wchar.h>

#include "gpuwire/cuda/reduce.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"

/* An intrinsic op's id; -1 for the others (MPI_REPLACE, MPI_NO_OP,
 * user-defined ops, none). */
static inline int gw_table_op(const struct ompi_op_t *op)
{
    if (op == NULL || !ompi_op_is_intrinsic((struct ompi_op_t *)op)) return -1;
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

#define GW_SIGNED_ID(bytes)                                                                        \
    ((bytes) == 1 ? GW_TYPE_INT8 : (bytes) == 2 ? GW_TYPE_INT16 : (bytes) == 4 ? GW_TYPE_INT32   \
                                                                               : GW_TYPE_INT64)
#define GW_UNSIGNED_ID(bytes)                                                                      \
    ((bytes) == 1 ? GW_TYPE_UINT8 : (bytes) == 2 ? GW_TYPE_UINT16 : (bytes) == 4 ? GW_TYPE_UINT32 \
                                                                                 : GW_TYPE_UINT64)

/* Open MPI's op type (the index of its host functions) -> the table's type. */
static inline int gw_table_type_of_base(int base)
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

/* A predefined type's id, or -1: none, a derived type, one the table lacks, or
 * one with padding (MPI_DOUBLE_INT, MPI_SHORT_INT, ...), whose bytes a call
 * may not write. The kernels move elements whole, so every accepted type is
 * dense and laid out as the table's. */
static inline int gw_table_type(const struct ompi_datatype_t *dt)
{
    if (dt == NULL || !ompi_datatype_is_predefined(dt)) return -1;
    const int base = ompi_op_ddt_map[dt->id];
    const int t = base < 0 ? -1 : gw_table_type_of_base(base);
    if (t < 0) return -1;
    ptrdiff_t lb, extent, true_lb, true_extent;
    size_t size = 0;
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
    ompi_datatype_type_size(dt, &size);
    if (lb != 0 || true_lb != 0 || true_extent != extent || (size_t)extent != size ||
        (size_t)extent != gw_reduce_type_size(t)) {
        return -1;
    }
    return t;
}

#endif
