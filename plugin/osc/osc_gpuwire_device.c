/*
 * osc/gpuwire's MPI ops and element types as the core's reduction kernels
 * name them (gpuwire/cuda/reduce.h), for the one-sided engine's GPU door
 * (gpuwire/osc_direct.h, ucx_glue/osc/device), which knows no MPI handle:
 * the mapping coll gpuwire uses (gpuwire_optable.h), so a kernel gives the
 * bytes Open MPI's host functions would.
 */
#include "osc_gpuwire.h"

#include "gpuwire_optable.h"

int gw_osc_kernel_op(MPI_Op op)
{
    return op == MPI_REPLACE ? GW_OSC_OP_REPLACE : gw_table_op(op);
}

int gw_osc_kernel_type(MPI_Datatype t) { return gw_table_type(t); }
