/*
 * Every difference between the Open MPI releases gpuwire builds against lives
 * here. The engine does not see Open MPI at all; the components use these
 * names only. Read from Debian's 4.1.4 and 5.0.7 devel headers:
 *
 *   what                       4.1                              5.0
 *   PML component struct       mca_pml_base_component_2_0_0_t   mca_pml_base_component_2_1_0_t
 *                              (same four members in both)
 *   PML version macro          MCA_PML_BASE_VERSION_2_0_0       MCA_PML_BASE_VERSION_2_1_0
 *   coll version macro         MCA_COLL_BASE_VERSION_2_0_0      MCA_COLL_BASE_VERSION_2_4_0
 *   PML module struct          has pml_ft_event                 no pml_ft_event; has
 *                                                               pml_revoke_comm (base fills a
 *                                                               NULL) and pml_get_transports
 *                              (the module is set up with designated initializers: no #if)
 *   communicator context id    c_contextid, uint32_t, equal     c_contextid is the 128-bit
 *                              in every member                  extended id; c_index
 *                                                               (ompi_comm_get_local_cid) is
 *                                                               equal in every member because
 *                                                               gpuwire does not set
 *                                                               MCA_PML_BASE_FLAG_SUPPORTS_EXT_CID
 *                                                               (sessions-only calls such as
 *                                                               MPI_Comm_create_from_group
 *                                                               then fail with
 *                                                               MPI_ERR_UNSUPPORTED_OPERATION)
 *   PMIx modex header          opal/mca/pmix/pmix.h             opal/mca/pmix/pmix-internal.h
 *                                                               (includes the external <pmix.h>)
 *   modex scope                OPAL_PMIX_GLOBAL                 PMIX_GLOBAL
 *   job-wide fence             opal_pmix.fence()                PMIx_Fence()
 *   fence carrying published   opal_pmix.commit() +             PMIx_Commit() + PMIx_Fence_nb
 *   data (gw_compat_fence_     fence_nb(NULL, 1, ...)           with PMIX_COLLECT_DATA
 *   collect), lookup without   OPAL_MODEX_RECV_VALUE_OPTIONAL   OPAL_MODEX_RECV_STRING_OPTIONAL
 *   waiting                    (a malloc'ed opal_byte_object_t) (the bytes themselves)
 *   own name, process count    OMPI_PROC_MY_NAME,               the same names (orte_* in 4.1,
 *                              ompi_process_info.num_procs      opal_process_info in 5.0)
 *   progress registration,     opal_progress_register,          unchanged
 *   requests, datatypes,       OMPI_REQUEST_INIT, opal_free_list,
 *   convertor, bsend           opal_convertor_*, mca_pml_base_bsend_*
 */
#ifndef GPUWIRE_COMPAT_H
#define GPUWIRE_COMPAT_H

#include <stdlib.h>

#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/pml/pml.h"

#if OMPI_MAJOR_VERSION == 4
#include "opal/mca/pmix/pmix.h"
#define GW_PML_BASE_VERSION MCA_PML_BASE_VERSION_2_0_0
#define GW_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_0_0
typedef mca_pml_base_component_2_0_0_t gw_pml_component_t;
#define GW_MODEX_SCOPE_GLOBAL OPAL_PMIX_GLOBAL
static inline void gw_compat_fence_done(int status, void *flag) { *(volatile int *)flag = 1; }
/* A job-wide fence that keeps calling progress() while it waits, so a peer
 * still flushing towards this process is served. */
static inline int gw_compat_fence(int (*progress)(void))
{
    volatile int done = 0;
    if (OPAL_SUCCESS != opal_pmix.fence_nb(NULL, 0, gw_compat_fence_done, (void *)&done)) {
        return opal_pmix.fence(NULL, 0);
    }
    while (!done) progress();
    return OMPI_SUCCESS;
}
/* Publishes size bytes under key for the other processes of the job; they
 * see them after the next gw_compat_fence_collect(). */
static inline int gw_compat_publish(const char *key, const void *data, size_t size)
{
    int rc;
    OPAL_MODEX_SEND_STRING(rc, OPAL_PMIX_GLOBAL, (char *)key, (void *)data, size);
    return rc;
}
/* gw_compat_fence() that also carries what every process published to
 * every process. */
static inline int gw_compat_fence_collect(int (*progress)(void))
{
    volatile int done = 0;
    if (OPAL_SUCCESS != opal_pmix.commit()) return OMPI_ERROR;
    if (OPAL_SUCCESS != opal_pmix.fence_nb(NULL, 1, gw_compat_fence_done, (void *)&done)) {
        return opal_pmix.fence(NULL, 1);
    }
    while (!done) progress();
    return OMPI_SUCCESS;
}
/* What process vpid of this job published under key, after the collecting
 * fence; *data is malloc'ed. Not the OPTIONAL form: with the PMIx of Open MPI
 * 4.1.6 that one misses data of processes on the same node (seen as "-"
 * rows); after a collecting fence a key nobody published is reported as
 * missing without waiting. */
static inline int gw_compat_lookup(const char *key, uint32_t vpid, void **data, size_t *size)
{
    opal_process_name_t name = *OMPI_PROC_MY_NAME;
    opal_byte_object_t *bo = NULL;
    int rc;
    name.vpid = vpid;
    OPAL_MODEX_RECV_VALUE(rc, key, &name, &bo, OPAL_BYTE_OBJECT);
    if (OPAL_SUCCESS != rc || NULL == bo) return OMPI_ERR_NOT_FOUND;
    *data = bo->bytes;
    *size = bo->size;
    free(bo);
    return OMPI_SUCCESS;
}
static inline uint32_t gw_comm_cid(const ompi_communicator_t *comm) { return comm->c_contextid; }
/* Data that Open MPI 5.0 does not have. A reference to missing data makes
 * dlopen fail before the component's register function can name the release
 * mismatch; weak references let 5.0 load the component that far. */
#pragma weak orte_process_info
#pragma weak opal_pmix
#pragma weak opal_value_t_class
#elif OMPI_MAJOR_VERSION == 5
#include "opal/mca/pmix/pmix-internal.h"
#define GW_PML_BASE_VERSION MCA_PML_BASE_VERSION_2_1_0
#define GW_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_4_0
typedef mca_pml_base_component_2_1_0_t gw_pml_component_t;
static inline void gw_compat_fence_done(pmix_status_t status, void *flag) { *(volatile int *)flag = 1; }
/* A job-wide fence that keeps calling progress() while it waits, so a peer
 * still flushing towards this process is served. */
static inline int gw_compat_fence(int (*progress)(void))
{
    volatile int done = 0;
    if (PMIX_SUCCESS != PMIx_Fence_nb(NULL, 0, NULL, 0, gw_compat_fence_done, (void *)&done)) {
        return PMIx_Fence(NULL, 0, NULL, 0) == PMIX_SUCCESS ? OMPI_SUCCESS : OMPI_ERROR;
    }
    while (!done) progress();
    return OMPI_SUCCESS;
}
static inline int gw_compat_publish(const char *key, const void *data, size_t size)
{
    int rc;
    OPAL_MODEX_SEND_STRING(rc, PMIX_GLOBAL, key, data, size);
    return PMIX_SUCCESS == rc ? OMPI_SUCCESS : OMPI_ERROR;
}
static inline int gw_compat_fence_collect(int (*progress)(void))
{
    volatile int done = 0;
    pmix_info_t info;
    bool collect = true;
    if (PMIX_SUCCESS != PMIx_Commit()) return OMPI_ERROR;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if (PMIX_SUCCESS != PMIx_Fence_nb(NULL, 0, &info, 1, gw_compat_fence_done, (void *)&done)) {
        return PMIx_Fence(NULL, 0, &info, 1) == PMIX_SUCCESS ? OMPI_SUCCESS : OMPI_ERROR;
    }
    while (!done) progress();
    return OMPI_SUCCESS;
}
static inline int gw_compat_lookup(const char *key, uint32_t vpid, void **data, size_t *size)
{
    opal_process_name_t name = *OMPI_PROC_MY_NAME;
    uint8_t *bytes = NULL;
    int rc;
    name.vpid = vpid;
    /* Not the OPTIONAL form: it misses data of processes on the same node;
     * after the collecting fence a key nobody published is reported missing
     * without waiting. */
    OPAL_MODEX_RECV_STRING(rc, key, &name, &bytes, size);
    if (PMIX_SUCCESS != rc || NULL == bytes) return OMPI_ERR_NOT_FOUND;
    *data = bytes;
    return OMPI_SUCCESS;
}
#define GW_MODEX_SCOPE_GLOBAL PMIX_GLOBAL
static inline uint32_t gw_comm_cid(const ompi_communicator_t *comm)
{
    return ompi_comm_get_local_cid(comm);
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
