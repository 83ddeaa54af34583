/*
 * Which form a call takes on a team, and the blocking calls' one-shot and
 * direct forms (gpuwire/coll_nvlink.h). What decides is the same on every
 * rank (the collective, op and type, layouts, byte count, the team's
 * state), so every rank takes the same form or declines alike.
 */
#include <cstring>
#include <memory>
#include <new>

#include "nvl.hpp"

using gw::nvl::logf;

namespace {

/* The direct form's agreement: every rank's buffers described, gathered,
 * mapped, and every rank agreeing that it could. GW_CE_OK with *ok. */
int direct_map(gw_ce_nvl_t *nvl, const gw_coll_team_call_t &tc, const gw_ce_nvl_call_t *c,
               bool *ok, char *why, size_t why_len)
{
    const int n = nvl->tp.p2p.size, me = nvl->tp.p2p.rank;
    const bool need_in = GW_COLL_TEAM_ALLREDUCE == tc.coll;
    /* Each rank sends both descriptions; unused ones stay zero. */
    constexpr size_t D = GW_COLL_BUF_DESC_BYTES;
    char mine[2 * D] = {};
    *ok = true;
    if (need_in) *ok = 0 == gw_coll_buffer_describe(tc.in, tc.bytes, mine, why, why_len);
    const size_t out_bytes = GW_COLL_TEAM_ALLGATHER == tc.coll ? (size_t)n * tc.bytes : tc.bytes;
    *ok = *ok && 0 == gw_coll_buffer_describe(tc.out, out_bytes, mine + D, why, why_len);
    std::unique_ptr<char[]> all(new (std::nothrow) char[(size_t)n * sizeof(mine)]);
    std::unique_ptr<char[]> ins(new (std::nothrow) char[(size_t)n * D]);
    std::unique_ptr<char[]> outs(new (std::nothrow) char[(size_t)n * D]);
    if (!all || !ins || !outs) return GW_CE_ERR_NOMEM;
    int rc = nvl->tp.allgather(nvl->tp.ctx, mine, all.get(), sizeof(mine));
    if (GW_CE_OK != rc) return rc;
    for (int q = 0; q < n; ++q) {
        std::memcpy(ins.get() + q * D, all.get() + q * sizeof(mine), D);
        std::memcpy(outs.get() + q * D, all.get() + q * sizeof(mine) + D, D);
    }
    /* Bcast: only the root writes into the others' buffers. */
    const bool maps = GW_COLL_TEAM_BCAST != tc.coll || me == c->root;
    if (*ok && maps) {
        *ok = 0 == gw_coll_team_map(nvl->team, need_in ? ins.get() : nullptr, outs.get(), why,
                                    why_len);
    }
    int all_ok = 0;
    rc = nvl->tp.all_min(nvl->tp.ctx, *ok ? 1 : 0, &all_ok);
    *ok = GW_CE_OK == rc && all_ok;
    return rc;
}

/* The call on this rank's place; GW_CE_DECLINED where every rank agreed
 * that a direct call cannot map every buffer. */
int team_call(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c, const gw_ce_nvl_place_t &p)
{
    char why[256] = "";
    const gw_coll_team_call_t tc = gw_ce_nvl_team_call(nvl, c, &p);
    if (tc.direct) {
        bool ok = false;
        const int rc = direct_map(nvl, tc, c, &ok, why, sizeof(why));
        if (GW_CE_OK != rc) {
            gw_coll_team_unmap(nvl->team);
            return rc;
        }
        if (!ok) {
            gw_coll_team_unmap(nvl->team);
            logf(*nvl, 10, "NVLink: %s of %zu bytes declined: %s", gw::nvl::coll_name(c->coll),
                 p.bytes, why[0] ? why : "another rank's buffer cannot be mapped");
            return GW_CE_DECLINED;
        }
    }
    if (0 != gw_coll_team_run(nvl->team, &tc, why, sizeof(why))) {
        logf(*nvl, 0, "%s of %zu bytes over NVLink failed: %s", gw::nvl::coll_name(c->coll),
             p.bytes, why);
        return GW_CE_ERR;
    }
    gw::nvl::count(nvl->params.calls);
    return GW_CE_OK;
}

} // namespace

extern "C" int gw_ce_nvl_run(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
                             gw_ce_region_t r[GW_CE_REGION_COUNT])
{
    /* The dispatch ended a set-up under way before this blocking call. */
    if (GW_CE_NVL_UNKNOWN == nvl->state) {
        const int rc = gw_ce_nvl_setup(nvl, c->gpu < 0 ? 0 : c->gpu);
        nvl->seen = nvl->state;
        if (GW_CE_OK != rc) return rc;
    }
    if (GW_CE_NVL_READY != nvl->state) return GW_CE_DECLINED;
    /* The team's kernels run in initiation order on every rank: the
     * non-blocking calls initiated before this one launch first. Every rank
     * has initiated them (MPI's order), so their arrivals come. */
    while (__atomic_load_n(&nvl->nb_launched, __ATOMIC_ACQUIRE) <
           __atomic_load_n(&nvl->nb_issued, __ATOMIC_ACQUIRE)) {
        nvl->tp.p2p.progress(nvl->tp.p2p.ctx);
    }
    const gw_ce_nvl_params_t &pa = nvl->params;
    const bool large = c->bytes > pa.oneshot_bytes;
    /* direct asks for the direct form even here (its tests run on one GPU). */
    if (large && nvl->dl && 2 == pa.delegate && !pa.direct) return gw::nvl::dl_run(nvl, c, r);
    /* The selection table choosing nvlink above the one-shot size asks for
     * the direct form too. */
    if (large && !(pa.direct || c->sel_nvlink)) return GW_CE_DECLINED;

    const int tgpu = gw_coll_team_gpu(nvl->team);
    char why[256] = "";
    gw_ce_nvl_place_t p;
    gw_ce_nvl_place(c, r, nvl->tp.p2p.rank, &p);
    gw_ce_temps_t tmp{};
    if (0 != gw_ce_temps_in(r, tgpu, &tmp, why, sizeof(why))) {
        /* Only this rank knows: the others are on their way into the kernel,
         * which gives up after timeout_s seconds. */
        logf(*nvl, 0, "%s over NVLink: %s", gw::nvl::coll_name(c->coll), why);
        return GW_CE_ERR;
    }
    gw_ce_nvl_relocate(&p, r, &tmp);
    int err = team_call(nvl, c, p);
    if (GW_CE_OK == err && 0 != gw_ce_temps_out(r, tgpu, &tmp, why, sizeof(why))) {
        logf(*nvl, 0, "%s over NVLink: %s", gw::nvl::coll_name(c->coll), why);
        err = GW_CE_ERR;
    }
    gw_ce_temps_release(&tmp);
    return err;
}

extern "C" int gw_ce_nvl_start(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
                               const gw_ce_region_t r[GW_CE_REGION_COUNT], void *arg)
{
    /* The first call starts setting the team up and goes on from the
     * progress; so do the calls initiated until the outcome is adopted
     * (gw_ce_nvl_settle, at the blocking calls), whether this rank has seen
     * it or not: where the team is unusable, every rank runs them staged,
     * in their turn. Going by the outcome as soon as this rank sees it
     * would give one call to the next algorithm on one rank and to staging
     * on a rank that initiated it earlier in the set-up. */
    if (GW_CE_NVL_UNKNOWN == nvl->seen) {
        const int rc = gw_ce_nvl_setup_start(nvl, c->gpu < 0 ? 0 : c->gpu);
        /* UNUSABLE at once only where that is every rank's answer (a
         * communicator across nodes) or on an error, returned. */
        nvl->seen = nvl->state;
        if (GW_CE_OK != rc) return rc;
    }
    /* Where the program makes no blocking collective on the communicator,
     * the calls would stage forever on a team that turned out unusable.
     * The set-up has long ended by now, on every rank, but this rank's
     * progress may not have seen it yet: it waits for that here. */
    if (GW_CE_NVL_SETTING_UP == nvl->seen &&
        __atomic_load_n(&nvl->nb_issued, __ATOMIC_ACQUIRE) + nvl->nb_early >=
            GW_CE_NVL_ADOPT_AFTER) {
        gw_ce_nvl_settle(nvl);
    }
    if (GW_CE_NVL_UNUSABLE == nvl->seen) return GW_CE_DECLINED;
    if (GW_CE_NVL_READY == nvl->seen && nvl->dl) return gw::nvl::dl_start(nvl, c, r, arg);
    if (c->bytes > nvl->params.oneshot_bytes) {
        /* Only the delegated form runs them: while the set-up is under way,
         * or on a team of several GPUs, over point-to-point. */
        if (GW_CE_NVL_SETTING_UP == nvl->seen) ++nvl->nb_early;
        return GW_CE_DECLINED;
    }
    return gw::nvl::nb_start(nvl, c, r, arg);
}
