/*
 * The one-shot non-blocking calls (gpuwire/coll_nvlink.h, "Non-blocking
 * one-shot calls"): a job per call, moved on by its request's polls.
 *
 * A kernel must not run before every rank has initiated its call: it spins
 * at its barrier until the others' kernels arrive, and meanwhile the
 * application's cudaDeviceSynchronize does not return, so a rank that
 * initiates, synchronizes its device and only then sends what another rank
 * waits for before initiating would hang. Initiation therefore posts the
 * arrivals and returns; the job launches once every arrival has come and
 * every earlier call of the team has launched (its temporaries copied in
 * first), then completes when the stream's ticket is reached and its
 * temporaries are copied back.
 */
#include <cstdio>
#include <new>

#include "nvl.hpp"

namespace {

struct NbJob {
    gw_ce_nvl_t *nvl = nullptr;
    gw_ce_nvl_call_t call{};
    gw_ce_region_t r[GW_CE_REGION_COUNT]{};
    gw_ce_temps_t tmp{};
    uint64_t order = 0; /* 1 + how many of the team's non-blocking calls were initiated before */
    uint64_t ticket = 0;
    bool launched = false;
    int arrival_err = GW_CE_OK; /* an arrival that completed with an error */
    int nreqs = 0;
    void *reqs[2 * GW_CE_NVL_MAX_TEAM] = {}; /* the arrivals: receives, then sends; NULL once done */
};

int failed(const NbJob *j, const char *why)
{
    gw::nvl::logf(*j->nvl, 0, "i%s over NVLink: %s", gw::nvl::coll_name(j->call.coll), why);
    return GW_CE_ERR;
}

void nb_release(void *p)
{
    auto *j = static_cast<NbJob *>(p);
    const gw_ce_transport_t &t = j->nvl->tp.p2p;
    for (int i = 0; i < j->nreqs; ++i) {
        if (nullptr != j->reqs[i]) t.cancel(t.ctx, &j->reqs[i]);
    }
    gw_ce_temps_release(&j->tmp);
    delete j;
}

/* Whether every arrival has completed (their errors kept). */
bool arrived(NbJob *j)
{
    const gw_ce_transport_t &t = j->nvl->tp.p2p;
    bool all = true;
    for (int i = 0; i < j->nreqs; ++i) {
        if (nullptr == j->reqs[i]) continue;
        bool done = false;
        const int e = t.test(t.ctx, &j->reqs[i], &done);
        if (!done) {
            all = false;
        } else if (GW_CE_OK != e) {
            j->arrival_err = e;
        }
    }
    return all;
}

/* Copies in what needs a temporary and launches the call. */
int launch(NbJob *j)
{
    char why[256] = "";
    if (GW_CE_OK != j->arrival_err) {
        std::snprintf(why, sizeof(why), "an arrival message failed (MPI error %d)", j->arrival_err);
        return failed(j, why);
    }
    gw_ce_nvl_t *nvl = j->nvl;
    gw_ce_nvl_place_t p;
    gw_ce_nvl_place(&j->call, j->r, nvl->tp.p2p.rank, &p);
    if (0 != gw_ce_temps_in(j->r, gw_coll_team_gpu(nvl->team), &j->tmp, why, sizeof(why))) {
        return failed(j, why);
    }
    gw_ce_nvl_relocate(&p, j->r, &j->tmp);
    const gw_coll_team_call_t tc = gw_ce_nvl_team_call(nvl, &j->call, &p);
    if (0 != gw_coll_team_start(nvl->team, &tc, &j->ticket, why, sizeof(why))) {
        return failed(j, why);
    }
    return GW_CE_OK;
}

int nb_poll(void *p, bool query, bool *done)
{
    auto *j = static_cast<NbJob *>(p);
    gw_ce_nvl_t *nvl = j->nvl;
    char why[256] = "";
    *done = false;
    if (GW_CE_NVL_SETTING_UP == nvl->state) {
        gw_ce_nvl_setup_progress(nvl);
        if (GW_CE_NVL_SETTING_UP == nvl->state) return GW_CE_OK;
    }
    /* Every rank found the team unusable: the call runs staged instead. */
    if (GW_CE_NVL_READY != nvl->state) return GW_CE_DECLINED;
    if (!j->launched) {
        if (__atomic_load_n(&nvl->nb_launched, __ATOMIC_ACQUIRE) + 1 != j->order) return GW_CE_OK;
        if (!arrived(j)) return GW_CE_OK;
        j->launched = true;
        const int rc = launch(j);
        /* Launched (queued on the team's stream) or failed, it no longer
         * holds the later calls back; counted only now, so that a blocking
         * call waiting on another thread queues its kernel after this one. */
        __atomic_fetch_add(&nvl->nb_launched, 1, __ATOMIC_RELEASE);
        if (GW_CE_OK != rc) return rc;
        gw::nvl::count(nvl->params.nb_calls);
    }
    bool finished = false;
    if (0 != gw_coll_team_done(nvl->team, j->ticket, query, &finished, why, sizeof(why))) {
        return failed(j, why);
    }
    if (!finished) return GW_CE_OK;
    if (0 != gw_ce_temps_out(j->r, gw_coll_team_gpu(nvl->team), &j->tmp, why, sizeof(why))) {
        return failed(j, why);
    }
    *done = true;
    return GW_CE_OK;
}

/* A call initiated while the team is being set up may still run staged: it
 * keeps its place among the communicator's staged calls until then. */
bool nb_ordered(void *p)
{
    return GW_CE_NVL_SETTING_UP == static_cast<const NbJob *>(p)->nvl->state;
}

const gw_ce_job_ops_t nb_ops = {nb_poll, nb_release, nb_ordered};

} // namespace

namespace gw::nvl {

int nb_start(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
             const gw_ce_region_t r[GW_CE_REGION_COUNT], void *arg)
{
    auto *j = new (std::nothrow) NbJob;
    if (nullptr == j) return GW_CE_ERR_NOMEM;
    j->nvl = nvl;
    j->call = *c;
    for (int i = 0; i < GW_CE_REGION_COUNT; ++i) j->r[i] = r[i];
    /* The arrivals, posted at initiation on their own tag, so every rank
     * posts and sends them in initiation order. */
    const gw_ce_transport_t &t = nvl->tp.p2p;
    const int n = t.size, me = t.rank, tag = nvl->tp.arrive_tag;
    int rc = GW_CE_OK;
    for (int q = 0; q < n && GW_CE_OK == rc; ++q) {
        if (q == me) continue;
        rc = t.irecv(t.ctx, nullptr, 0, q, tag, &j->reqs[j->nreqs]);
        if (GW_CE_OK == rc) ++j->nreqs;
    }
    for (int q = 0; q < n && GW_CE_OK == rc; ++q) {
        if (q == me) continue;
        rc = t.isend(t.ctx, nullptr, 0, q, tag, &j->reqs[j->nreqs]);
        if (GW_CE_OK == rc) ++j->nreqs;
    }
    if (GW_CE_OK != rc) {
        nb_release(j);
        logf(*nvl, 0, "i%s over NVLink: posting the arrival messages failed (%d)",
             coll_name(c->coll), rc);
        return rc;
    }
    /* Its place in the team's order: if the set-up under way ends with no
     * team, no call launches, and the blocking ones never look again. */
    const bool ready = GW_CE_NVL_READY == nvl->state;
    const uint64_t order = j->order = __atomic_add_fetch(&nvl->nb_issued, 1, __ATOMIC_ACQ_REL);
    rc = nvl->tp.nb_job(nvl->tp.ctx, arg, &nb_ops, j, !ready); /* j is the request's now */
    if (GW_CE_OK != rc) {
        /* The newest of the team's calls (collectives on one communicator
         * are initiated one at a time): its place goes back. */
        __atomic_store_n(&nvl->nb_issued, order - 1, __ATOMIC_RELEASE);
    }
    return rc;
}

} // namespace gw::nvl
