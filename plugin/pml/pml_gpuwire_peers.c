/*
 * Peer numbers of processes of other jobs (MPI_Comm_spawn,
 * MPI_Comm_connect/accept). Open MPI 4.1 adds them with add_procs once their
 * addresses are in the modex, as this job's are; Open MPI 5 does not, and
 * they get theirs at their first message. Each gets the next number after
 * this job's vpids, up to GW_PML_OTHER_JOBS_MAX.
 */
#include "pml_gpuwire.h"

#include "pml_gpuwire_request.h"

static opal_mutex_t other_lock = OPAL_MUTEX_STATIC_INIT;

/* The process behind a peer number. */
bool pml_gw_name_of_peer(uint32_t peer, opal_process_name_t *name)
{
    if (peer < mca_pml_gpuwire.world) {
        *name = *OMPI_PROC_MY_NAME;
        name->vpid = peer;
        return true;
    }
    const uint32_t i = peer - mca_pml_gpuwire.world;
    if (i >= __atomic_load_n(&mca_pml_gpuwire.nother, __ATOMIC_ACQUIRE)) return false;
    *name = mca_pml_gpuwire.other[i];
    return true;
}

/* The number proc already has. */
static bool other_job_peer(const ompi_proc_t *proc, uint32_t *peer)
{
#ifdef OMPI_PROC_ENDPOINT_TAG_PML
    /* The number add_procs left in the process's PML slot, plus one. */
    const uintptr_t slot = (uintptr_t)__atomic_load_n(
        &proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_PML], __ATOMIC_ACQUIRE);
    if (0 != slot) {
        *peer = (uint32_t)(slot - 1);
        return true;
    }
#endif
    const opal_process_name_t *want = &proc->super.proc_name;
    const uint32_t n = __atomic_load_n(&mca_pml_gpuwire.nother, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; ++i) {
        const opal_process_name_t *o = &mca_pml_gpuwire.other[i];
        if (o->jobid == want->jobid && o->vpid == want->vpid) {
            *peer = mca_pml_gpuwire.world + i;
            return true;
        }
    }
    return false;
}

int pml_gw_other_job_add(const ompi_proc_t *proc, uint32_t *peer)
{
    if (other_job_peer(proc, peer)) return OMPI_SUCCESS;
    int rc = OMPI_SUCCESS;
    opal_mutex_lock(&other_lock);
    if (!other_job_peer(proc, peer)) {
        const uint32_t n = mca_pml_gpuwire.nother;
        if (n < GW_PML_OTHER_JOBS_MAX) {
            mca_pml_gpuwire.other[n] = proc->super.proc_name;
            *peer = mca_pml_gpuwire.world + n;
            __atomic_store_n(&mca_pml_gpuwire.nother, n + 1, __ATOMIC_RELEASE);
#ifdef OMPI_PROC_ENDPOINT_TAG_PML
            __atomic_store_n(&((ompi_proc_t *)proc)->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_PML],
                             (void *)(uintptr_t)(*peer + 1), __ATOMIC_RELEASE);
#endif
            PML_GPUWIRE_VERBOSE(10, "process %u of another job: peer %u",
                                (unsigned)proc->super.proc_name.vpid, (unsigned)*peer);
        } else {
            rc = OMPI_ERR_OUT_OF_RESOURCE; /* its messages fail with one line */
        }
    }
    opal_mutex_unlock(&other_lock);
    return rc;
}
