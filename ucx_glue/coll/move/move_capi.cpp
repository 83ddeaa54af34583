/* The C API of the data movement (gpuwire/coll_move.h) over MoveCall. */
#include <cstdio>
#include <new>

#include "move_call.hpp"

using gpuwire::coll::MoveCall;

struct gw_ce_move_job {
    explicit gw_ce_move_job(const gw_ce_transport_t &t) : call(t) {}
    MoveCall call;
};

namespace {

int report(int rc, const std::string &what, char *why, size_t why_len)
{
    if (GW_CE_OK != rc && nullptr != why && why_len > 0)
        std::snprintf(why, why_len, "%s", what.c_str());
    return rc;
}

} // namespace

extern "C" int gw_ce_move_run(const gw_ce_transport_t *t, const gw_ce_move_t *m, char *why,
                              size_t why_len)
{
    std::string bad;
    if (const int rc = gpuwire::coll::move_check(*t, *m, true, bad); GW_CE_OK != rc) {
        return report(rc, bad, why, why_len);
    }
    try {
        MoveCall c(*t);
        const int rc = c.finish(c.post(*m)); /* after a failed post: waits for what was posted */
        return report(rc, c.why(), why, why_len);
    } catch (const std::bad_alloc &) {
        return report(GW_CE_ERR_NOMEM, "out of host memory", why, why_len);
    }
}

extern "C" int gw_ce_move_start(const gw_ce_transport_t *t, const gw_ce_move_t *m,
                                gw_ce_move_job_t **out, char *why, size_t why_len)
{
    std::string bad;
    if (const int rc = gpuwire::coll::move_check(*t, *m, false, bad); GW_CE_OK != rc) {
        return report(rc, bad, why, why_len);
    }
    gw_ce_move_job_t *j = nullptr;
    try {
        j = new gw_ce_move_job_t(*t);
        const int rc = j->call.post(*m);
        if (GW_CE_OK != rc) {
            const int frc = j->call.finish(rc); /* waits for what was posted */
            report(frc, j->call.why(), why, why_len);
            delete j;
            return frc;
        }
    } catch (const std::bad_alloc &) {
        /* What was posted is cancelled with the job. */
        delete j;
        return report(GW_CE_ERR_NOMEM, "out of host memory", why, why_len);
    }
    *out = j;
    return GW_CE_OK;
}

extern "C" int gw_ce_move_poll(gw_ce_move_job_t *j, bool query, bool *done, char *why,
                               size_t why_len)
{
    bool d = false;
    const int rc = j->call.poll(query, &d);
    if (GW_CE_OK != rc) return report(rc, j->call.why(), why, why_len);
    *done = d;
    return GW_CE_OK;
}

extern "C" void gw_ce_move_free(gw_ce_move_job_t *j) { delete j; }
