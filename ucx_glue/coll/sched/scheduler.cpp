/*
 * The scheduler's pending requests, its progress, the spare requests, and
 * the C API of gpuwire/coll_sched.h.
 */
#include <new>

#include "sched.hpp"

namespace gpuwire::coll {

thread_local Scheduler *Scheduler::held_ = nullptr;

void Scheduler::pend(gw_ce_req_t *req, bool ordered)
{
    lock();
    if (ordered) order_push(req->order, req);
    req->next = nullptr;
    *lastp_ = req;
    lastp_ = &req->next;
    count(ops_.pending, 1);
    unlock();
}

/* A finished request: its staging and job go back before the caller can
 * see completion; then it completes, or is released when freed first. */
void Scheduler::finish(gw_ce_req_t *req)
{
    gw_ce_stage_release(&req->st);
    job_release(req);
    lock();
    bool freed = req->freed;
    unlock();
    if (!freed) {
        ops_.complete(ops_.ctx, req, req->error);
        /* Freed by another thread between the completion and here: released
         * here. */
        lock();
        req->done = true;
        freed = req->freed;
        unlock();
    }
    if (freed) ops_.release(ops_.ctx, req);
}

int Scheduler::progress()
{
    if (!busy()) return 0;
    /* Not entered again: a host collective started from here may progress
     * the caller, and so this function; nor while another thread runs it. */
    if (held_ == this || !mutex_.try_lock()) return 0;
    held_ = this;
    gw_ce_req_t *finished = nullptr, **finished_last = &finished;
    for (gw_ce_req_t **p = &first_; nullptr != *p;) {
        gw_ce_req_t *req = *p;
        if (advance(req)) {
            *p = req->next;
            if (nullptr == *p) lastp_ = p;
            req->next = nullptr;
            *finished_last = req;
            finished_last = &req->next;
            count(ops_.pending, -1);
        } else {
            p = &req->next;
        }
    }
    held_ = nullptr;
    mutex_.unlock();

    int n = 0;
    while (nullptr != finished) {
        gw_ce_req_t *req = finished;
        finished = req->next;
        ++n;
        finish(req);
    }
    return n;
}

void Scheduler::spare_put(gw_ce_req_t *req)
{
    lock();
    req->next = spares_;
    spares_ = req;
    unlock();
}

gw_ce_req_t *Scheduler::spare_take()
{
    lock();
    gw_ce_req_t *spare = spares_;
    if (nullptr != spare) spares_ = spare->next;
    unlock();
    return spare;
}

} // namespace gpuwire::coll

using gpuwire::coll::ReqState;
using gpuwire::coll::Scheduler;

struct gw_ce_sched : Scheduler {
    using Scheduler::Scheduler;
};

extern "C" gw_ce_sched_t *gw_ce_sched_new(const gw_ce_sched_ops_t *ops)
{
    return new (std::nothrow) gw_ce_sched_t(*ops);
}

extern "C" void gw_ce_sched_free(gw_ce_sched_t *s) { delete s; }

extern "C" int gw_ce_sched_progress(gw_ce_sched_t *s) { return s->progress(); }

extern "C" bool gw_ce_sched_busy(const gw_ce_sched_t *s) { return s->busy(); }

extern "C" bool gw_ce_sched_in_progress(const gw_ce_sched_t *s) { return s->held(); }

extern "C" void gw_ce_sched_spare_put(gw_ce_sched_t *s, gw_ce_req_t *req) { s->spare_put(req); }

extern "C" gw_ce_req_t *gw_ce_sched_spare_take(gw_ce_sched_t *s) { return s->spare_take(); }

extern "C" bool gw_ce_order_empty(const gw_ce_order_t *order)
{
    return nullptr == __atomic_load_n(&order->first, __ATOMIC_ACQUIRE);
}

extern "C" size_t gw_ce_req_size(void) { return sizeof(gw_ce_req_t); }

extern "C" gw_ce_req_t *gw_ce_req_init(void *mem, gw_ce_sched_t *s, gw_ce_order_t *order,
                                       void *owner, const void *sbuf, void *rbuf)
{
    auto *req = new (mem) gw_ce_req_t{};
    req->sched = s;
    req->order = order;
    req->owner = owner;
    req->sbuf = sbuf;
    req->rbuf = rbuf;
    req->state = ReqState::Ready;
    return req;
}

extern "C" void *gw_ce_req_owner(const gw_ce_req_t *req) { return req->owner; }

extern "C" gw_ce_staging_t *gw_ce_req_staging(gw_ce_req_t *req) { return &req->st; }

extern "C" int gw_ce_req_stage(gw_ce_req_t *req, const gw_ce_region_t r[GW_CE_REGION_COUNT],
                               char *why, size_t why_len)
{
    return req->sched->stage(req, r, why, why_len);
}

extern "C" int gw_ce_req_enqueue(gw_ce_req_t *req)
{
    Scheduler *s = req->sched;
    if (ReqState::Ready == req->state && gw_ce_order_empty(req->order)) {
        if (const int rc = s->start(req); 0 != rc) return rc;
        req->state = ReqState::Inner;
    } else {
        gpuwire::coll::count(s->ops().deferred_starts, 1);
    }
    s->pend(req, ReqState::Inner != req->state);
    return GW_CE_OK;
}

extern "C" void gw_ce_req_job(gw_ce_req_t *req, const gw_ce_job_ops_t *ops, void *job,
                              const gw_ce_region_t r[GW_CE_REGION_COUNT], bool ordered)
{
    req->job_ops = ops;
    req->job = job;
    for (int i = 0; i < GW_CE_REGION_COUNT; ++i) req->r[i] = r[i];
    req->in_fifo = ordered;
    req->state = ReqState::Job;
    if (ordered) gpuwire::coll::count(req->sched->ops().deferred_starts, 1);
    req->sched->pend(req, ordered);
}

extern "C" void gw_ce_req_replace_job(gw_ce_req_t *req, const gw_ce_job_ops_t *ops, void *job)
{
    req->next_ops = ops;
    req->next_job = job;
}

extern "C" bool gw_ce_req_free(gw_ce_req_t *req)
{
    Scheduler *s = req->sched;
    s->lock();
    const bool release = req->done;
    if (!release) req->freed = true;
    s->unlock();
    return release;
}

extern "C" bool gw_ce_req_finish(gw_ce_req_t *req)
{
    Scheduler *s = req->sched;
    s->lock();
    req->done = true;
    const bool freed = req->freed;
    s->unlock();
    return freed;
}

extern "C" void gw_ce_req_set_active(gw_ce_req_t *req, bool active)
{
    req->done = !active;
}

extern "C" void gw_ce_req_fini(gw_ce_req_t *req)
{
    gw_ce_stage_release(&req->st);
    Scheduler::job_release(req);
}
