/*
 * The NVLink kernels' non-blocking forms (Iallreduce, Ibcast, Iallgather;
 * one-shot sizes).
 *
 * A kernel must not run before every rank has initiated its call: it spins
 * at its barrier until the others' kernels arrive, and meanwhile the
 * application's cudaDeviceSynchronize does not return, so a rank that
 * initiates, synchronizes its device and only then sends what another rank
 * waits for before initiating would hang. Initiation therefore sends a
 * zero-byte arrival message to every other rank and posts a receive for
 * each of theirs (tag GW_TAG_NVL_ARRIVE, in initiation order on every rank),
 * and returns. From MPI's progress, the call launches once every arrival has
 * come and every earlier call of the team has launched (its temporaries
 * copied in first), then completes when the stream's ticket is reached and
 * its temporaries are copied back.
 *
 * A communicator's first call starts setting its team up
 * (coll_gpuwire_nvlink_team.c) instead of waiting for it. The calls initiated
 * until that ends keep their places in
 * the communicator's FIFO of staged calls (gw_coll_nb_job, ordered): where
 * the team turns out unusable, every rank runs them staged, in their turn;
 * where it is ready, they take their places in the team's order, in
 * initiation order.
 *
 * Separate from the blocking calls (coll_gpuwire_nvlink.c): a job that MPI's
 * progress moves on, with its own messages and order.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire_nvlink.h"
#include "ompi/mca/pml/pml.h"

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t args;
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_coll_temps_t tmp;
    uint64_t order; /* 1 + how many of the team's non-blocking calls were initiated before */
    uint64_t ticket;
    bool launched;
    int nreqs;
    ompi_request_t *reqs[2 * GW_NVL_MAX_TEAM]; /* the arrivals: receives, then sends */
} nvl_job_t;


static void nvl_job_release(void *p)
{
    nvl_job_t *j = p;
    for (int i = 0; i < j->nreqs; ++i) {
        if (MPI_REQUEST_NULL != j->reqs[i]) ompi_request_free(&j->reqs[i]);
    }
    gw_coll_temps_release(&j->tmp);
    free(j);
}

static int nvl_job_failed(nvl_job_t *j, const char *why)
{
    opal_output(0, "coll:gpuwire: i%s over NVLink: %s", gw_coll_name(j->args.id), why);
    return OMPI_ERROR;
}

/* Copies in what needs a temporary and launches the call. */
static int nvl_job_launch(nvl_job_t *j)
{
    char why[256] = "";
    for (int i = 0; i < j->nreqs; ++i) {
        const int err = j->reqs[i]->req_status.MPI_ERROR;
        if (MPI_SUCCESS != err) {
            snprintf(why, sizeof(why), "an arrival message failed (MPI error %d)", err);
            return nvl_job_failed(j, why);
        }
    }
    gw_coll_nvl_place_t p;
    gw_coll_nvl_place_of(&j->args, j->r, &p);
    if (0 != gw_coll_temps_in(j->r, gw_coll_team_gpu(j->m->nvl_team), &j->tmp, why,
                              sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    gw_coll_nvl_relocate(&p, j->r, &j->tmp);
    const gw_coll_team_call_t c = gw_coll_nvl_team_call_of(&j->args, &p);
    if (0 != gw_coll_team_start(j->m->nvl_team, &c, &j->ticket, why, sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    return OMPI_SUCCESS;
}

static int nvl_job_poll(void *p, bool query, bool *done)
{
    nvl_job_t *j = p;
    mca_coll_gpuwire_module_t *m = j->m;
    char why[256] = "";
    *done = false;
    if (GW_NVL_SETTING_UP == m->nvl_state) {
        gw_coll_nvl_setup_progress(m, j->args.comm);
        if (GW_NVL_SETTING_UP == m->nvl_state) return OMPI_SUCCESS;
    }
    /* Every rank found the team unusable: the call runs staged instead. */
    if (GW_NVL_READY != m->nvl_state) return GW_COLL_DECLINED;
    if (!j->launched) {
        if (__atomic_load_n(&m->nvl_nb_launched, __ATOMIC_ACQUIRE) + 1 != j->order) {
            return OMPI_SUCCESS;
        }
        for (int i = 0; i < j->nreqs; ++i) {
            if (!REQUEST_COMPLETE(j->reqs[i])) return OMPI_SUCCESS;
        }
        j->launched = true;
        const int rc = nvl_job_launch(j);
        /* Launched (queued on the team's stream) or failed, it no longer
         * holds the later calls back; counted only now, so that a blocking
         * call waiting on another thread queues its kernel after this one. */
        __atomic_fetch_add(&m->nvl_nb_launched, 1, __ATOMIC_RELEASE);
        if (OMPI_SUCCESS != rc) return rc;
        __atomic_fetch_add(&mca_coll_gpuwire.nvlink_nb_calls, 1, __ATOMIC_RELAXED);
    }
    bool finished = false;
    if (0 != gw_coll_team_done(m->nvl_team, j->ticket, query, &finished, why, sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    if (!finished) return OMPI_SUCCESS;
    if (0 != gw_coll_temps_out(j->r, gw_coll_team_gpu(m->nvl_team), &j->tmp, why,
                               sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    *done = true;
    return OMPI_SUCCESS;
}

/* A call initiated while the team is being set up may still run staged: it
 * keeps its place among the communicator's staged calls until then. */
static bool nvl_job_ordered(void *p)
{
    const nvl_job_t *j = p;
    return GW_NVL_SETTING_UP == j->m->nvl_state;
}

static const gw_coll_job_ops_t nvl_job_ops = {nvl_job_poll, nvl_job_release, nvl_job_ordered};

int gw_coll_nvl_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    struct ompi_communicator_t *comm = a->comm;
    nvl_job_t *j = calloc(1, sizeof(*j));
    if (NULL == j) return OMPI_ERR_OUT_OF_RESOURCE;
    j->m = m;
    j->args = *a;
    memcpy(j->r, r, sizeof(j->r));
    /* The arrivals, posted at initiation on their own tag, so every rank
     * posts and sends them in initiation order. */
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    int rc = OMPI_SUCCESS;
    for (int q = 0; q < n && OMPI_SUCCESS == rc; ++q) {
        if (q == me) continue;
        j->reqs[j->nreqs] = MPI_REQUEST_NULL;
        rc = MCA_PML_CALL(irecv(NULL, 0, MPI_BYTE, q, GW_TAG_NVL_ARRIVE, comm, &j->reqs[j->nreqs]));
        if (OMPI_SUCCESS == rc) ++j->nreqs;
    }
    for (int q = 0; q < n && OMPI_SUCCESS == rc; ++q) {
        if (q == me) continue;
        j->reqs[j->nreqs] = MPI_REQUEST_NULL;
        rc = MCA_PML_CALL(isend(NULL, 0, MPI_BYTE, q, GW_TAG_NVL_ARRIVE,
                                MCA_PML_BASE_SEND_STANDARD, comm, &j->reqs[j->nreqs]));
        if (OMPI_SUCCESS == rc) ++j->nreqs;
    }
    if (OMPI_SUCCESS != rc) {
        nvl_job_release(j);
        opal_output(0, "coll:gpuwire: i%s over NVLink: posting the arrival messages failed (%d)",
                    gw_coll_name(a->id), rc);
        return rc;
    }
    /* Its place in the team's order: if the set-up under way ends with no
     * team, no call launches, and the blocking ones never look again. */
    const bool ready = GW_NVL_READY == m->nvl_state;
    const uint64_t order = j->order = __atomic_add_fetch(&m->nvl_nb_issued, 1, __ATOMIC_ACQ_REL);
    rc = gw_coll_nb_job(m, a, r, &nvl_job_ops, j, !ready, request); /* j is the request's now */
    if (OMPI_SUCCESS != rc) {
        /* The newest of the team's calls (collectives on one communicator
         * are initiated one at a time): its place goes back. */
        __atomic_store_n(&m->nvl_nb_issued, order - 1, __ATOMIC_RELEASE);
        return rc;
    }
    return OMPI_SUCCESS;
}

bool gw_coll_nvlink_settled(struct ompi_communicator_t *comm)
{
    /* The module that runs comm's non-blocking Bcast (one NVLink takes):
     * one of this component's, or none of this concern. */
    const opal_object_t *mod = (const opal_object_t *)comm->c_coll->coll_ibcast_module;
    if (NULL == mod || mod->obj_class != OBJ_CLASS(mca_coll_gpuwire_module_t)) return true;
    mca_coll_gpuwire_module_t *m = (mca_coll_gpuwire_module_t *)mod;
    const int state = __atomic_load_n(&m->nvl_state, __ATOMIC_ACQUIRE);
    if (GW_NVL_SETTING_UP == state) return false;
    m->nvl_seen = state;
    return true;
}
