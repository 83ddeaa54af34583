/*
 * A call's description for the NVLink family (gpuwire/coll_nvlink.h):
 * whether the family runs it, where its bytes are on this rank, the
 * kernels' terms; and what the family's files share (log lines, the clock
 * of the timeouts). Used by every form, so it depends on none of them.
 */
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "nvl.hpp"

namespace gw::nvl {

void logf(const gw_ce_nvl_t &nvl, int level, const char *fmt, ...)
{
    if (nullptr == nvl.tp.log) return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    nvl.tp.log(nvl.tp.ctx, level, line);
}

double now_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *coll_name(gw_ce_nvl_coll_t c)
{
    switch (c) {
    case GW_CE_NVL_ALLREDUCE: return "allreduce";
    case GW_CE_NVL_BCAST: return "bcast";
    default: return "allgather";
    }
}

} // namespace gw::nvl

extern "C" bool gw_ce_nvl_accepts(const gw_ce_nvl_call_t *c, int size)
{
    if (size < 2 || size > GW_CE_NVL_MAX_TEAM || !c->count_ok) return false;
    /* Larger calls than the one-shot size: whether the team runs them
     * (delegated, direct) is known once it is set up; the call declines
     * them where it does not, alike on every rank. */
    switch (c->coll) {
    case GW_CE_NVL_ALLREDUCE: return c->ids_ok && gw_coll_team_reduce_supported(c->op, c->type);
    case GW_CE_NVL_BCAST:
    case GW_CE_NVL_ALLGATHER: return c->layout_ok;
    }
    return false;
}

extern "C" void gw_ce_nvl_place(const gw_ce_nvl_call_t *c, const gw_ce_region_t r[GW_CE_REGION_COUNT],
                                int rank, gw_ce_nvl_place_t *p)
{
    const gw_ce_region_t *sr = &r[GW_CE_REGION_SEND], *rr = &r[GW_CE_REGION_RECV];
    p->out = (char *)rr->user + rr->lo;
    p->bytes = c->bytes;
    switch (c->coll) {
    case GW_CE_NVL_ALLREDUCE:
        p->in = c->in_place ? p->out : (const char *)sr->user + sr->lo;
        break;
    case GW_CE_NVL_BCAST:
        p->in = p->out;
        break;
    default:
        p->in = c->in_place ? (const char *)p->out + (size_t)rank * p->bytes
                            : (const char *)sr->user + sr->lo;
        break;
    }
}

/* The kernels and the peers' mappings need the team GPU's memory. */
extern "C" void gw_ce_nvl_relocate(gw_ce_nvl_place_t *p, const gw_ce_region_t r[GW_CE_REGION_COUNT],
                                   const gw_ce_temps_t *t)
{
    for (int i = 0; i < GW_CE_REGION_COUNT; ++i) {
        if (nullptr == t->tmp[i]) continue;
        const char *user = (const char *)r[i].user + r[i].lo;
        const size_t len = gw_ce_region_bytes(&r[i]);
        if ((const char *)p->in >= user && (const char *)p->in < user + len) {
            p->in = t->tmp[i] + ((const char *)p->in - user);
        }
        if ((const char *)p->out >= user && (const char *)p->out < user + len) {
            p->out = t->tmp[i] + ((const char *)p->out - user);
        }
    }
}

/* The slots hold oneshot_bytes (rounded up): a call within it fits them
 * (the launch checks again); a larger one is direct. */
extern "C" gw_coll_team_call_t gw_ce_nvl_team_call(const gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
                                                   const gw_ce_nvl_place_t *p)
{
    gw_coll_team_call_t tc{};
    tc.in = p->in;
    tc.out = p->out;
    tc.bytes = p->bytes;
    tc.root = c->root;
    switch (c->coll) {
    case GW_CE_NVL_ALLREDUCE:
        tc.coll = GW_COLL_TEAM_ALLREDUCE;
        tc.op = c->op;
        tc.type = c->type;
        break;
    case GW_CE_NVL_BCAST: tc.coll = GW_COLL_TEAM_BCAST; break;
    default: tc.coll = GW_COLL_TEAM_ALLGATHER; break;
    }
    tc.direct = p->bytes > nvl->params.oneshot_bytes;
    return tc;
}
