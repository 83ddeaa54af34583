/*
 * pml/gpuwire's process-wide objects, beneath every other file of the
 * component: the module (its functions are filled in by
 * mca_pml_gpuwire_module(), pml_gpuwire.c), the parameters, and the mapping
 * of engine statuses to MPI error classes.
 */
#include "pml_gpuwire.h"

mca_pml_gpuwire_module_t mca_pml_gpuwire = {
    .engine = NULL,
    .output = -1,
};

/* Set from the table (gw_params_register, pml_gpuwire_component.c) before
 * Open MPI reads it. */
mca_pml_gpuwire_params_t mca_pml_gpuwire_params;

int mca_pml_gpuwire_mpi_error(gw_status_t status)
{
    switch (status) {
    case GW_OK: return MPI_SUCCESS;
    case GW_ERR_TRUNCATE: return MPI_ERR_TRUNCATE;
    case GW_ERR_NO_MEMORY: return MPI_ERR_NO_MEM;
    case GW_ERR_INVALID: return MPI_ERR_ARG;
    case GW_ERR_UNSUPPORTED: return MPI_ERR_UNSUPPORTED_OPERATION;
    case GW_ERR_CANCELED: return MPI_SUCCESS;
    default: return MPI_ERR_OTHER;
    }
}
