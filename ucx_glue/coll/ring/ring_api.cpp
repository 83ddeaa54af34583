/*
 * The ring's C API (gpuwire/coll_ring.h): checks a call's description,
 * and the blocking form as the job polled to its end.
 */
#include <new>

#include "gpuwire/coll_ring.h"
#include "ring_job.hpp"

struct gw_ce_ring_job {
    gw_ce_ring_job(const gw_ce_ring_call_t &c, const gw_ce_transport_t &t, size_t seg_elems)
        : job(c, t, seg_elems)
    {
    }
    gpuwire::coll::RingJob job;
};

namespace {

using gpuwire::coll::Why;

/* What the ring cannot run, as one line; the elements per message. */
int check(const gw_ce_ring_call_t *c, const gw_ce_transport_t *t, size_t *seg_elems, Why &w)
{
    if (nullptr == c || nullptr == t || t->size < 1 || t->rank < 0 || t->rank >= t->size) {
        return w.fail(GW_CE_ERR_ARG, "ring: no call, or a transport without ranks");
    }
    if (c->coll < GW_CE_RING_ALLREDUCE || c->coll > GW_CE_RING_EXSCAN) {
        return w.fail(GW_CE_ERR_ARG, "ring: unknown collective %d", static_cast<int>(c->coll));
    }
    if (0 == c->es || c->es > (size_t{1} << 20)) {
        return w.fail(GW_CE_ERR_ARG, "ring: element size %zu", c->es);
    }
    if (!gw_coll_reduce_supported(c->op, c->type)) {
        return w.fail(GW_CE_ERR_ARG, "ring: no kernel for op %d on type %d", c->op, c->type);
    }
    if (c->gpu < 0) return w.fail(GW_CE_ERR_ARG, "ring: no GPU (%d)", c->gpu);
    if (GW_CE_RING_REDUCE == c->coll && (c->root < 0 || c->root >= t->size)) {
        return w.fail(GW_CE_ERR_ARG, "ring: root %d of %d ranks", c->root, t->size);
    }
    if (GW_CE_RING_REDUCE_SCATTER == c->coll && nullptr != c->counts) {
        for (int i = 0; i < t->size; ++i) {
            if (c->counts[i] < 0) {
                return w.fail(GW_CE_ERR_ARG, "ring: block %d has %d elements", i, c->counts[i]);
            }
        }
    }
    /* Messages carry int byte counts: at most 1 GiB each. */
    const size_t seg = c->segment_bytes / c->es, max_seg = (size_t{1} << 30) / c->es;
    *seg_elems = seg < 1 ? 1 : seg > max_seg ? max_seg : seg;
    return GW_CE_OK;
}

} // namespace

extern "C" int gw_ce_ring_start(const gw_ce_ring_call_t *call, const gw_ce_transport_t *t,
                                gw_ce_ring_job_t **job, char *why, size_t why_len)
{
    Why w{why, why_len};
    *job = nullptr;
    size_t seg_elems = 0;
    int rc = check(call, t, &seg_elems, w);
    if (GW_CE_OK != rc) return rc;
    auto *j = new (std::nothrow) gw_ce_ring_job(*call, *t, seg_elems);
    if (nullptr == j) return w.fail(GW_CE_ERR_NOMEM, "ring: out of host memory");
    rc = j->job.start(w);
    if (GW_CE_OK != rc) {
        gw_ce_ring_free(j);
        return rc;
    }
    *job = j;
    return GW_CE_OK;
}

extern "C" int gw_ce_ring_poll(gw_ce_ring_job_t *job, bool query, bool *done, char *why,
                               size_t why_len)
{
    Why w{why, why_len};
    return job->job.poll(query, done, w);
}

extern "C" bool gw_ce_ring_free(gw_ce_ring_job_t *job)
{
    if (nullptr == job) return true;
    const bool idle = job->job.idle();
    delete job;
    return idle;
}

extern "C" int gw_ce_ring_run(const gw_ce_ring_call_t *call, const gw_ce_transport_t *t,
                              char *why, size_t why_len)
{
    gw_ce_ring_job_t *job = nullptr;
    int rc = gw_ce_ring_start(call, t, &job, why, why_len);
    /* A failed stream never reaches its ticket: ask the GPU now and then. */
    for (unsigned polls = 1; GW_CE_OK == rc; ++polls) {
        bool done = false;
        rc = gw_ce_ring_poll(job, 0 == (polls & 1023), &done, why, why_len);
        if (GW_CE_OK != rc || done) break;
        t->progress(t->ctx);
    }
    gw_ce_ring_free(job);
    return rc;
}
