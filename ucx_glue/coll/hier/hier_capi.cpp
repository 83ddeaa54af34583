/* The C API of the hierarchical collectives (gpuwire/coll_hier.h) over HierJob. */
#include <cstdio>
#include <new>

#include "hier_job.hpp"

using gpuwire::coll::HierJob;

struct gw_ce_hier_job {
    gw_ce_hier_job(const gw_ce_hier_call_t &c, const gw_ce_hier_transport_t &t) : job(c, t) {}
    HierJob job;
};

extern "C" int gw_ce_hier_start(const gw_ce_hier_call_t *call, const gw_ce_hier_transport_t *t,
                                gw_ce_hier_job_t **out, char *why, size_t why_len)
{
    *out = nullptr;
    gw_ce_hier_job_t *j = nullptr;
    try {
        j = new gw_ce_hier_job_t(*call, *t);
        const int rc = j->job.prepare();
        if (GW_CE_ERR_ARG == rc && nullptr != why && why_len > 0) {
            std::snprintf(why, why_len, "%s", j->job.why().c_str());
        }
        *out = j;
        return rc;
    } catch (const std::bad_alloc &) {
        delete j; /* a temporary it asked for stays the caller's */
        if (nullptr != why && why_len > 0) std::snprintf(why, why_len, "out of host memory");
        return GW_CE_ERR_NOMEM;
    }
}

extern "C" int gw_ce_hier_step(gw_ce_hier_job_t *job, void **req)
{
    return job->job.step(req);
}

extern "C" int gw_ce_hier_poll(gw_ce_hier_job_t *job, bool query, bool *done)
{
    return job->job.poll(query, done);
}

extern "C" int gw_ce_hier_next(const gw_ce_hier_job_t *job)
{
    return job->job.next();
}

extern "C" void gw_ce_hier_free(gw_ce_hier_job_t *job)
{
    delete job;
}
