/*
 * The scheduler's request and the scheduler itself (gpuwire/coll_sched.h).
 * A request lives in the caller's memory; the scheduler owns what it holds
 * (staging, job) until it finishes, and the caller owns the memory.
 */
#ifndef GPUWIRE_COLL_SCHED_SCHED_HPP
#define GPUWIRE_COLL_SCHED_SCHED_HPP

#include <mutex>

#include "gpuwire/coll_sched.h"

namespace gpuwire::coll {

enum class ReqState { CopyIn, Ready, Failed, Inner, CopyOut, Job };

class Scheduler;

} // namespace gpuwire::coll

struct alignas(16) gw_ce_req {
    gpuwire::coll::Scheduler *sched;
    gw_ce_order_t *order;
    void *owner;
    gw_ce_req_t *next;       /* in the pending list, oldest first */
    gw_ce_req_t *next_start; /* in the order */
    const void *sbuf;        /* what the host collective gets: host copies, */
    void *rbuf;              /* or the caller's buffers */
    void *inner;             /* the host collective's request */
    gw_ce_staging_t st;
    const gw_ce_job_ops_t *job_ops; /* Job: the algorithm's steps */
    void *job;                      /* and its state, until released */
    gw_ce_region_t r[GW_CE_REGION_COUNT]; /* Job: the call's, for staging it instead */
    bool in_fifo;                   /* Job: in the order */
    /* Job: what replaces the job once its poll returns (gw_ce_req_replace_job) */
    const gw_ce_job_ops_t *next_ops;
    void *next_job;
    gpuwire::coll::ReqState state;
    int error; /* the caller's status */
    unsigned polls;
    bool done;  /* finished: freeing releases it */
    bool freed; /* freed first (erroneous for collectives, tolerated) */
};

namespace gpuwire::coll {

inline void count(unsigned long long *c, long long n)
{
    if (nullptr != c) __atomic_fetch_add(c, static_cast<unsigned long long>(n), __ATOMIC_RELAXED);
}

class Scheduler {
public:
    explicit Scheduler(const gw_ce_sched_ops_t &ops) : ops_(ops) {}
    Scheduler(const Scheduler &) = delete;
    Scheduler &operator=(const Scheduler &) = delete;

    const gw_ce_sched_ops_t &ops() const { return ops_; }

    /* The lock of the pending requests: not taken again by the thread whose
     * progress holds it (a job's poll may initiate and free requests). */
    void lock()
    {
        if (held_ != this) mutex_.lock();
    }
    void unlock()
    {
        if (held_ != this) mutex_.unlock();
    }

    /* Adds req to the pending requests, and to its order when ordered. */
    void pend(gw_ce_req_t *req, bool ordered);
    int progress();
    bool busy() const { return nullptr != __atomic_load_n(&first_, __ATOMIC_RELAXED); }
    bool held() const { return held_ == this; }
    void spare_put(gw_ce_req_t *req);
    gw_ce_req_t *spare_take();

    /* Stages req's call (COPY_IN or READY). */
    int stage(gw_ce_req_t *req, const gw_ce_region_t r[GW_CE_REGION_COUNT], char *why,
              size_t why_len);
    /* Starts req's host collective (it is READY and first in its order). */
    int start(gw_ce_req_t *req);

    static void order_push(gw_ce_order_t *o, gw_ce_req_t *req);
    static void order_pop(gw_ce_order_t *o);
    static void job_release(gw_ce_req_t *req);

private:
    /* Advances one request as far as it goes now; true when it finished. */
    bool advance(gw_ce_req_t *req);
    bool advance_job(gw_ce_req_t *req, bool query, bool *again);
    void fail(gw_ce_req_t *req, gw_ce_fail_t kind, int rc, const char *why);
    void finish(gw_ce_req_t *req);

    gw_ce_sched_ops_t ops_;
    std::mutex mutex_;
    static thread_local Scheduler *held_;
    gw_ce_req_t *first_ = nullptr;    /* pending: oldest first */
    gw_ce_req_t **lastp_ = &first_;   /* the next field of the newest, or &first_ */
    gw_ce_req_t *spares_ = nullptr;   /* kept for reuse */
};

} // namespace gpuwire::coll

#endif
