/*
 * The non-blocking form's driver of a hierarchical call (gw_ce_hier_poll):
 * each step starts once the one before has completed, from the caller's
 * progress, and never blocks.
 *
 * Order: every rank must start the levels' collectives in one order,
 * whatever order the steps of several calls in flight complete in. A job
 * starts its first step only once the calls initiated before it on the
 * turn have passed, and passes as soon as it has started its last
 * collective or message (step GW_CE_HIER_COMM_STEPS - 1): its copies are
 * this rank's own. A job freed before that passes on its way out.
 */
#include "hier_job.hpp"

namespace gpuwire::coll {

/* Whether the step in flight has completed: its request (whose status is
 * returned), then the copies it queued. */
int HierJob::settle(bool query, bool *settled)
{
    *settled = false;
    if (nullptr != req_) {
        bool done = false;
        const int rc = t_.test(t_.ctx, &req_, &done);
        if (!done) return GW_CE_OK;
        req_ = nullptr;
        if (GW_CE_OK != rc) return rc;
    }
    if (copying_) {
        bool landed = false;
        const int rc = t_.copied(t_.ctx, query, false, &landed);
        if (GW_CE_OK != rc) {
            copying_ = false;
            return rc;
        }
        if (!landed) return GW_CE_OK;
        copying_ = false;
    }
    *settled = true;
    return GW_CE_OK;
}

int HierJob::poll(bool query, bool *done)
{
    *done = finished_;
    if (nullptr == c_.turn) return GW_CE_ERR_ARG; /* the blocking form's job */
    if (finished_) return GW_CE_OK;
    if (0 == next_ && !gw_ce_turn_mine(c_.turn, &ticket_)) return GW_CE_OK;
    for (;;) {
        bool settled = false;
        const int err = settle(query, &settled);
        if (GW_CE_OK != err || !settled) return err;
        if (next_ < GW_CE_HIER_COMM_STEPS && nullptr != t_.ready && !t_.ready(t_.ctx)) {
            return GW_CE_OK;
        }
        const int rc = step(&req_);
        if (next_ >= GW_CE_HIER_COMM_STEPS) gw_ce_turn_pass(c_.turn, &ticket_);
        if (GW_CE_HIER_END == rc) {
            finished_ = *done = true;
            return GW_CE_OK;
        }
        if (GW_CE_OK != rc) {
            req_ = nullptr; /* a step that failed to start has no request */
            return rc;
        }
    }
}

void HierJob::drain()
{
    if (nullptr == c_.turn) return; /* nothing of the blocking form is left in flight */
    if (nullptr != req_) t_.wait(t_.ctx, &req_);
    req_ = nullptr;
    if (copying_) {
        bool landed = false;
        (void)t_.copied(t_.ctx, false, true, &landed); /* the transport says why it failed */
    }
    copying_ = false;
    gw_ce_turn_pass(c_.turn, &ticket_);
}

} // namespace gpuwire::coll
