/*
 * The state machine of a scheduler's request (gpuwire/coll_sched.h):
 * staged in -> host collective -> staged out, or an algorithm's job, each in
 * its turn in the communicator's order.
 */
#include "sched.hpp"

namespace gpuwire::coll {

void Scheduler::order_push(gw_ce_order_t *o, gw_ce_req_t *req)
{
    req->next_start = nullptr;
    if (nullptr == o->last) {
        __atomic_store_n(&o->first, req, __ATOMIC_RELAXED);
    } else {
        o->last->next_start = req;
    }
    o->last = req;
}

void Scheduler::order_pop(gw_ce_order_t *o)
{
    gw_ce_req_t *head = o->first;
    __atomic_store_n(&o->first, head->next_start, __ATOMIC_RELAXED);
    if (nullptr == head->next_start) o->last = nullptr;
    head->next_start = nullptr;
}

void Scheduler::job_release(gw_ce_req_t *req)
{
    if (nullptr != req->job) req->job_ops->release(req->job);
    req->job = nullptr;
}

int Scheduler::stage(gw_ce_req_t *req, const gw_ce_region_t r[GW_CE_REGION_COUNT], char *why,
                     size_t why_len)
{
    const int rc = gw_ce_stage_in_start(r, ops_.device_sync, &req->st, why, why_len);
    if (GW_CE_OK != rc) return rc;
    /* Host buffers only (a call staged in its place whose regions are all
     * host memory) copy nothing and are not counted. */
    if (const size_t bytes = gw_ce_stage_bytes(&req->st); bytes > 0) {
        count(ops_.staged_calls, 1);
        count(ops_.staged_bytes, static_cast<long long>(bytes));
    }
    req->sbuf = gw_ce_stage_host_view(&req->st, GW_CE_REGION_SEND, req->sbuf);
    req->rbuf = gw_ce_stage_host_view(&req->st, GW_CE_REGION_RECV, req->rbuf);
    req->state = gw_ce_stage_queued(&req->st) ? ReqState::CopyIn : ReqState::Ready;
    return GW_CE_OK;
}

int Scheduler::start(gw_ce_req_t *req)
{
    return ops_.start(ops_.ctx, req, req->sbuf, req->rbuf, &req->inner);
}

void Scheduler::fail(gw_ce_req_t *req, gw_ce_fail_t kind, int rc, const char *why)
{
    req->error = ops_.error(ops_.ctx, req, kind, rc, why);
}

/* The job's step of advance; *again: the request's state changed, go on. */
bool Scheduler::advance_job(gw_ce_req_t *req, bool query, bool *again)
{
    bool done = false;
    const int rc = req->job_ops->poll(req->job, query, &done);
    *again = true;
    if (nullptr != req->next_ops) {
        /* The poll handed the call to another job: it takes this one's
         * place, in the order too. */
        job_release(req);
        req->job_ops = req->next_ops;
        req->job = req->next_job;
        req->next_ops = nullptr;
        req->next_job = nullptr;
        if (GW_CE_OK == rc) return false;
    }
    if (GW_CE_DECLINED == rc && req->in_fifo) {
        /* Staged in its place in the order (READY or COPY_IN pop it there;
         * in_fifo is the Job state's). */
        job_release(req);
        req->in_fifo = false;
        char why[320];
        if (GW_CE_OK != stage(req, req->r, why, sizeof(why))) {
            fail(req, GW_CE_FAIL_COPY, GW_CE_ERR, why);
            req->state = ReqState::Failed;
        }
        return false;
    }
    if (GW_CE_OK != rc) {
        fail(req, GW_CE_FAIL_JOB, rc, nullptr);
        if (!req->in_fifo) return true;
        /* Finishes with the error once it leaves the order in its turn. */
        job_release(req);
        req->in_fifo = false;
        req->state = ReqState::Failed;
        return false;
    }
    *again = false;
    if (req->in_fifo && req->order->first == req &&
        (nullptr == req->job_ops->ordered || !req->job_ops->ordered(req->job))) {
        order_pop(req->order);
        req->in_fifo = false;
    }
    /* A request leaves the pending list only out of the order. */
    return done && !req->in_fifo;
}

/* Called with the lock held, in initiation order, so that a request whose
 * predecessors in its order start in this pass starts in it as well. */
bool Scheduler::advance(gw_ce_req_t *req)
{
    /* A failed stream never reaches its ticket: ask CUDA now and then. */
    const bool query = 0 == (++req->polls & 1023);
    char why[320];
    bool done = false;
    for (;;) {
        switch (req->state) {
        case ReqState::CopyIn:
            if (GW_CE_OK != gw_ce_stage_poll(&req->st, query, &done, "copy to host", why,
                                             sizeof(why))) {
                fail(req, GW_CE_FAIL_COPY, GW_CE_ERR, why);
                req->state = ReqState::Failed;
            } else if (done) {
                req->state = ReqState::Ready;
            } else {
                return false;
            }
            continue;
        case ReqState::Ready:
        case ReqState::Failed:
            if (req->order->first != req) return false;
            order_pop(req->order);
            if (ReqState::Failed == req->state) {
                /* Never started: the copies still queued are waited for,
                 * then it finishes with the error. */
                req->state = ReqState::CopyOut;
                continue;
            }
            if (const int rc = start(req); 0 != rc) {
                fail(req, GW_CE_FAIL_START, rc, nullptr);
                return true;
            }
            req->state = ReqState::Inner;
            continue;
        case ReqState::Inner: {
            const int status = ops_.test(ops_.ctx, &req->inner, &done);
            if (!done) return false;
            req->error = status;
            if (0 != status) return true;
            /* After a failure, what was queued is still waited for. */
            if (GW_CE_OK != gw_ce_stage_out_start(&req->st, why, sizeof(why))) {
                fail(req, GW_CE_FAIL_COPY, GW_CE_ERR, why);
            }
            req->state = ReqState::CopyOut;
            continue;
        }
        case ReqState::CopyOut:
            if (GW_CE_OK != gw_ce_stage_poll(&req->st, query, &done, "copy to device", why,
                                             sizeof(why))) {
                fail(req, GW_CE_FAIL_COPY, GW_CE_ERR, why);
            }
            return done;
        case ReqState::Job: {
            bool again = false;
            const bool finished = advance_job(req, query, &again);
            if (finished || !again) return finished;
            continue;
        }
        }
        return false;
    }
}

} // namespace gpuwire::coll
