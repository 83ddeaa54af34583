/*
 * The delegated form, for a team whose ranks all share one GPU (ranks under
 * CUDA MPS): no kernel ever waits for another rank (gpuwire/coll_nvlink.h,
 * "Delegated form").
 *
 * Initiation, blocking or not, describes this rank's buffers for CUDA IPC
 * and posts the descriptions on the board entry of the call's number; the
 * rank whose post comes last launches one kernel on every rank's buffers,
 * whose stream then writes the entry's completion word; every rank's poll
 * reads that word: one load. So the work runs while the ranks compute,
 * without progress (no message per call), and a rank that initiates,
 * synchronizes its device and only then sends what another rank waits for
 * has nothing of the call queued on its GPU: it cannot hang there.
 *
 * What a rank's own buffers need is its own business: host memory, another
 * GPU's memory and memory CUDA IPC cannot export go through device
 * temporaries that can, copied in before the post and back once done. A
 * rank that cannot take part at all still posts, a description no peer
 * accepts: the launching rank then fails the call for every rank. A rank
 * that never posts leaves the others waiting until timeout_s seconds after
 * their initiation.
 *
 * Like every CUDA-aware MPI, the buffers must be ready when the call is
 * made: the kernel runs in whichever rank's context launches it, ordered
 * with none of the other ranks' streams (with device_sync, initiation waits
 * for this rank's legacy default stream first).
 */
#include <cstring>
#include <new>

#include "nvl.hpp"

namespace {

using gw::nvl::now_s;

struct DlCall {
    gw_ce_nvl_t *nvl = nullptr;
    gw_ce_nvl_call_t call{};
    /* The call's regions as the temporaries see them: one that cannot be
     * exported is marked as not on the team's GPU. */
    gw_ce_region_t r[GW_CE_REGION_COUNT]{};
    gw_ce_temps_t tmp{};
    uint64_t seq = 0;
    double since = 0; /* initiation */
    bool posted = false;  /* a kernel may use its buffers until settled */
    bool settled = false; /* done, or failed for every rank: no kernel uses them any more */
};

int failed(const DlCall *d, const char *why)
{
    gw::nvl::logf(*d->nvl, 0, "%s%s over NVLink (delegated): %s", d->call.nonblocking ? "i" : "",
                  gw::nvl::coll_name(d->call.coll), why);
    return GW_CE_ERR;
}

/* Describes the call's input and output on this rank; false where CUDA IPC
 * cannot export one of them. */
bool describe(const DlCall *d, const gw_ce_nvl_place_t *p, char *in_desc, char *out_desc,
              char *why, size_t why_len)
{
    const int n = d->nvl->tp.p2p.size;
    const size_t out_bytes = GW_CE_NVL_ALLGATHER == d->call.coll ? (size_t)n * p->bytes : p->bytes;
    if (0 != gw_coll_buffer_describe(p->out, out_bytes, out_desc, why, why_len)) return false;
    if (GW_CE_NVL_BCAST == d->call.coll) {
        std::memcpy(in_desc, out_desc, GW_COLL_BUF_DESC_BYTES);
        return true;
    }
    return 0 == gw_coll_buffer_describe(p->in, p->bytes, in_desc, why, why_len);
}

/* Whether every significant region of the call is on gpu. */
bool all_on(const gw_ce_region_t r[GW_CE_REGION_COUNT], int gpu)
{
    for (int i = 0; i < GW_CE_REGION_COUNT; ++i) {
        if (r[i].hi > r[i].lo && !(r[i].on_gpu && r[i].gpu == gpu)) return false;
    }
    return true;
}

/* Initiation: the descriptions posted (the kernel launched where this rank
 * is the last). GW_CE_OK, or an error once this rank has posted a
 * description that makes the call fail on every rank. */
int dl_begin(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
             const gw_ce_region_t r[GW_CE_REGION_COUNT], DlCall *d)
{
    gw_coll_team_t *t = nvl->team;
    const int tgpu = gw_coll_team_gpu(t), me = nvl->tp.p2p.rank;
    char why[256] = "";
    d->nvl = nvl;
    d->call = *c;
    for (int i = 0; i < GW_CE_REGION_COUNT; ++i) d->r[i] = r[i];
    d->seq = ++nvl->dl_seq;
    d->since = now_s();

    gw_ce_nvl_place_t p;
    gw_ce_nvl_place(c, r, me, &p);
    char in_desc[GW_COLL_BUF_DESC_BYTES], out_desc[GW_COLL_BUF_DESC_BYTES];
    bool ok = 0 == gw_ce_wait_user_regions(r, nvl->params.device_sync, why, sizeof(why));
    /* Buffers on the team's GPU usually export as they are. Elsewhere they
     * go through temporaries; where one on the GPU does not export, every
     * region of the call does (second attempt). */
    const bool on_team_gpu = all_on(r, tgpu);
    bool described = false;
    if (ok && on_team_gpu) described = describe(d, &p, in_desc, out_desc, why, sizeof(why));
    for (int attempt = on_team_gpu ? 1 : 0; ok && !described && attempt < 2; ++attempt) {
        if (1 == attempt) {
            gw_ce_temps_release(&d->tmp);
            for (int i = 0; i < GW_CE_REGION_COUNT; ++i) d->r[i].on_gpu = false;
            gw_ce_nvl_place(c, r, me, &p);
        }
        ok = 0 == gw_ce_temps_in(d->r, tgpu, &d->tmp, why, sizeof(why));
        if (!ok) break;
        gw_ce_nvl_relocate(&p, d->r, &d->tmp);
        described = describe(d, &p, in_desc, out_desc, why, sizeof(why));
    }
    ok = ok && described;
    const gw_coll_team_call_t tc = gw_ce_nvl_team_call(nvl, c, &p);
    bool launched = false;
    char pwhy[256] = "";
    int rc;
    /* The entry is busy only where this rank is 256 calls ahead of another. */
    while (1 == (rc = gw_coll_team_post(t, d->seq, &tc, ok ? in_desc : nullptr,
                                        ok ? out_desc : nullptr, &launched, pwhy, sizeof(pwhy)))) {
        if (now_s() - d->since > (double)nvl->params.timeout_s) {
            return failed(d, "the call 256 before it did not finish in "
                             "coll_gpuwire_nvlink_timeout seconds (a rank stopped calling)");
        }
        nvl->tp.p2p.progress(nvl->tp.p2p.ctx);
    }
    if (!ok) return failed(d, why);
    if (0 != rc) return failed(d, pwhy);
    d->posted = true;
    return GW_CE_OK;
}

/* *done once the call has run on every rank and this rank's temporaries are
 * copied back. */
int dl_poll(DlCall *d, bool query, bool *done)
{
    gw_coll_team_t *t = d->nvl->team;
    char why[256] = "";
    bool finished = false;
    *done = false;
    if (0 != gw_coll_team_posted_done(t, d->seq, query, &finished, why, sizeof(why))) {
        d->settled = true;
        return failed(d, why);
    }
    d->settled = finished;
    if (!finished) {
        if (query && now_s() - d->since > (double)d->nvl->params.timeout_s) {
            return failed(d, "not every rank initiated the call within "
                             "coll_gpuwire_nvlink_timeout seconds");
        }
        return GW_CE_OK;
    }
    if (0 != gw_ce_temps_out(d->r, gw_coll_team_gpu(t), &d->tmp, why, sizeof(why))) {
        return failed(d, why);
    }
    *done = true;
    return GW_CE_OK;
}

/* Gives the temporaries back once no kernel can use them any more. A
 * request that could not be made, or a call given up on after the timeout,
 * leaves a call the last rank may still launch on them: they are then kept
 * (lost) rather than lent again; waiting here would hold the progress. */
void dl_release_temps(DlCall *d)
{
    if (d->posted && !d->settled) {
        bool finished = false;
        char why[256];
        d->settled = 0 != gw_coll_team_posted_done(d->nvl->team, d->seq, false, &finished, why,
                                                   sizeof(why)) ||
                     finished;
    }
    if (d->posted && !d->settled && nullptr != d->tmp.buf.owner) {
        gw::nvl::logf(*d->nvl, 0, "NVLink (delegated): a call still outstanding keeps its "
                                  "device temporaries (%zu bytes) for good", d->tmp.buf.len);
        return;
    }
    gw_ce_temps_release(&d->tmp);
}

int dl_job_poll(void *p, bool query, bool *done) { return dl_poll(static_cast<DlCall *>(p), query, done); }

void dl_job_release(void *p)
{
    auto *d = static_cast<DlCall *>(p);
    dl_release_temps(d);
    delete d;
}

const gw_ce_job_ops_t dl_job_ops = {dl_job_poll, dl_job_release, nullptr};

} // namespace

namespace gw::nvl {

int dl_run(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c, const gw_ce_region_t r[GW_CE_REGION_COUNT])
{
    DlCall d;
    int rc = dl_begin(nvl, c, r, &d);
    bool done = false;
    /* A blocking call: the completion word is watched closely, the
     * progress now and then. */
    for (unsigned spins = 1; GW_CE_OK == rc && !done; ++spins) {
        rc = dl_poll(&d, 0 == (spins & 1023), &done);
        if (GW_CE_OK == rc && !done && 0 == (spins & 63)) nvl->tp.p2p.progress(nvl->tp.p2p.ctx);
    }
    dl_release_temps(&d);
    if (GW_CE_OK == rc) count(nvl->params.calls);
    return rc;
}

int dl_start(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
             const gw_ce_region_t r[GW_CE_REGION_COUNT], void *arg)
{
    auto *d = new (std::nothrow) DlCall;
    if (nullptr == d) return GW_CE_ERR_NOMEM;
    int rc = dl_begin(nvl, c, r, d);
    if (GW_CE_OK != rc) {
        dl_job_release(d);
        return rc;
    }
    rc = nvl->tp.nb_job(nvl->tp.ctx, arg, &dl_job_ops, d, false); /* d is the request's now */
    if (GW_CE_OK == rc) count(nvl->params.nb_calls);
    return rc;
}

} // namespace gw::nvl
