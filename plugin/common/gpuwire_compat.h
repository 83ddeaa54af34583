/*
 * Every difference between the Open MPI releases gpuwire builds against lives
 * here. The engine does not see Open MPI at all; the components use these
 * names only.
 *
 *   what                         4.1                       5.0
 *   PML component version macro  MCA_PML_BASE_VERSION_2_0_0 MCA_PML_BASE_VERSION_2_1_0
 *   PMIx modex header            opal/mca/pmix/pmix.h       opal/mca/pmix/pmix-internal.h
 *   job-wide fence               opal_pmix.fence()          PMIx_Fence()
 *   process count                ompi_process_info.num_procs (both)
 */
#ifndef GPUWIRE_COMPAT_H
#define GPUWIRE_COMPAT_H

#include "ompi_config.h"
#include "ompi/mca/pml/pml.h"

#if OMPI_MAJOR_VERSION == 4
#include "opal/mca/pmix/pmix.h"
#define GW_PML_BASE_VERSION MCA_PML_BASE_VERSION_2_0_0
typedef mca_pml_base_component_2_0_0_t gw_pml_component_t;
static inline int gw_compat_fence(void) { return opal_pmix.fence(NULL, 0); }
#elif OMPI_MAJOR_VERSION == 5
#include "opal/mca/pmix/pmix-internal.h"
#define GW_PML_BASE_VERSION MCA_PML_BASE_VERSION_2_1_0
typedef mca_pml_base_component_2_1_0_t gw_pml_component_t;
static inline int gw_compat_fence(void)
{
    return PMIx_Fence(NULL, 0, NULL, 0) == PMIX_SUCCESS ? OMPI_SUCCESS : OMPI_ERROR;
}
#else
#error "gpuwire supports Open MPI 4.1 and 5.0"
#endif

/* The Open MPI release the component was compiled for. The refusal test
 * builds a copy that claims another release (GW_TEST_CLAIM_OMPI_*). */
#ifdef GW_TEST_CLAIM_OMPI_MAJOR
#define GW_BUILT_OMPI_MAJOR GW_TEST_CLAIM_OMPI_MAJOR
#define GW_BUILT_OMPI_MINOR GW_TEST_CLAIM_OMPI_MINOR
#define GW_BUILT_OMPI_RELEASE 0
#else
#define GW_BUILT_OMPI_MAJOR OMPI_MAJOR_VERSION
#define GW_BUILT_OMPI_MINOR OMPI_MINOR_VERSION
#define GW_BUILT_OMPI_RELEASE OMPI_RELEASE_VERSION
#endif

#endif
