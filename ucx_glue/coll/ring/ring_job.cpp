/*
 * The ring job's set-up, its phases and its end (ring_job.hpp). The steps
 * themselves are in ring_steps.cpp.
 */
#include "ring_job.hpp"

#include <algorithm>

namespace gpuwire::coll {

RingJob::RingJob(const gw_ce_ring_call_t &call, const gw_ce_transport_t &t, size_t seg_elems)
    : c_(call), me_(t.rank), n_(t.size), es_(call.es), seg_elems_(seg_elems), reqs_(t),
      stream_(call.gpu)
{
    if (nullptr != call.counts) {
        counts_.assign(call.counts, call.counts + n_);
        c_.counts = counts_.data();
    }
    src_ = static_cast<const char *>(c_.in_place ? c_.rbuf : c_.sbuf);
}

RingJob::~RingJob()
{
    /* Messages that may still land in the scratch: it is never reused
     * (Requests cancels them). Kernels are waited for before the scratch
     * they write goes back. */
    if (!idle()) {
        scratch_.abandon();
    } else {
        stream_.drain();
    }
}

bool RingJob::idle()
{
    bool all = true;
    for (size_t i = 0; i < reqs_.size(); ++i) {
        bool d = true;
        (void)reqs_.test(i, &d); /* a failed request is released too */
        if (!d) all = false;
    }
    if (all) reqs_.cancel_all(); /* only empty slots are left */
    return all;
}

int RingJob::start(Why &w)
{
    if (GW_CE_RING_SCAN == c_.coll || GW_CE_RING_EXSCAN == c_.coll) return start_chain(w);
    return start_ring(w);
}

/* The input to the result, alone: one rank, or reduce-scatter in place. */
int RingJob::copy_out(void *dst, const void *src, size_t count, Why &w)
{
    phase_ = Phase::CopyOut;
    if (0 == count || dst == src) return GW_CE_OK;
    return stream_.copy(dst, src, count * es_, w);
}

int RingJob::start_ring(Why &w)
{
    const bool whole = GW_CE_RING_ALLREDUCE == c_.coll || GW_CE_RING_REDUCE == c_.coll;
    off_.assign(n_, 0);
    cnt_.assign(n_, 0);
    size_t at = 0;
    for (int i = 0; i < n_; ++i) {
        /* Allreduce, Reduce: even chunks, the first count % n one element
         * longer; Reduce_scatter: the caller's blocks. */
        if (whole) {
            cnt_[i] = c_.count / n_ + (static_cast<size_t>(i) < c_.count % n_ ? 1 : 0);
        } else {
            cnt_[i] = nullptr != c_.counts ? static_cast<size_t>(c_.counts[i]) : c_.count;
        }
        off_[i] = at;
        at += cnt_[i];
    }
    if (1 == n_) return copy_out(c_.rbuf, src_, whole ? c_.count : cnt_[0], w);

    const size_t chunk_bytes = *std::max_element(cnt_.begin(), cnt_.end()) * es_;
    const bool root = GW_CE_RING_REDUCE != c_.coll || me_ == c_.root;
    /* Receive scratch; at a non-root of Reduce the accumulator; two slots
     * for Reduce_scatter. */
    const size_t need = whole ? chunk_bytes + (root ? 0 : c_.count * es_) : 3 * chunk_bytes;
    int rc = scratch_.get(need, c_.gpu, w);
    if (GW_CE_OK != rc) return rc;
    char *base = scratch_.ptr();
    rbuf_ = base;
    if (whole) {
        acc_ = root ? static_cast<char *>(c_.rbuf) : base + chunk_bytes;
    } else {
        shift_ = -1;
        slot_[0] = base + chunk_bytes;
        slot_[1] = base + 2 * chunk_bytes;
        /* In place, the result overlaps the input: finish in a slot. */
        in_place_rs_ = c_.in_place;
        last_ = c_.in_place ? slot_[(n_ - 2) & 1] : static_cast<char *>(c_.rbuf);
    }
    /* The first step's messages go out now; poll() moves on from there
     * (it may finish the step, or more, at once: a step with nothing to
     * receive and no kernel is done as soon as its sends have gone). */
    phase_ = Phase::ReduceScatter;
    bool done = false;
    return poll(false, &done, w);
}

/* Scan and exscan: a chain from rank 0 up. Rank r > 0 receives the prefix
 * of ranks 0..r-1 segment by segment; scan writes prefix op mine into rbuf
 * and passes that on, exscan keeps the prefix as its result and passes
 * prefix op mine on. Rank 0 starts its copy and sends its input on. */
int RingJob::start_chain(Why &w)
{
    const bool exclusive = GW_CE_RING_EXSCAN == c_.coll, last = me_ == n_ - 1;
    const size_t bytes = c_.count * es_;
    phase_ = Phase::Chain;
    if (0 == me_) {
        if (!exclusive && !c_.in_place && 0 != bytes) {
            int rc = stream_.copy(c_.rbuf, src_, bytes, w);
            if (GW_CE_OK != rc) return rc;
        }
        return last ? GW_CE_OK : post(true, src_, c_.count, 1, w);
    }
    const bool need_fwd = exclusive && !last;
    const size_t need =
        exclusive ? (c_.in_place ? bytes : 0) + (need_fwd ? bytes : 0) : bytes;
    int rc = scratch_.get(need, c_.gpu, w);
    if (GW_CE_OK != rc) return rc;
    char *s = scratch_.ptr();
    prefix_ = (exclusive && !c_.in_place) ? static_cast<char *>(c_.rbuf) : s;
    fwd_ = exclusive ? s + (c_.in_place ? bytes : 0) : static_cast<char *>(c_.rbuf);
    rc = post(false, prefix_, c_.count, me_ - 1, w);
    nrecv_ = reqs_.size();
    return rc;
}

/* After a phase's last step. */
int RingJob::next_phase(Why &w)
{
    k_ = 0;
    if (Phase::ReduceScatter == phase_ && GW_CE_RING_ALLREDUCE == c_.coll) {
        phase_ = Phase::Allgather;
    } else if (Phase::ReduceScatter == phase_ && GW_CE_RING_REDUCE == c_.coll) {
        phase_ = Phase::Gather;
    } else if (in_place_rs_ && Phase::ReduceScatter == phase_) {
        return copy_out(c_.rbuf, last_, cnt_[me_], w);
    } else {
        phase_ = Phase::Done;
    }
    return GW_CE_OK;
}

int RingJob::poll(bool query, bool *done, Why &w)
{
    *done = false;
    while (Phase::Done != phase_) {
        bool step_done = false;
        int rc = GW_CE_OK;
        switch (phase_) {
        case Phase::ReduceScatter:
        case Phase::Allgather: rc = ring_step(query, &step_done, w); break;
        case Phase::Gather: rc = gather(query, &step_done, w); break;
        case Phase::Chain: rc = chain(query, &step_done, w); break;
        case Phase::CopyOut: rc = stream_.reached(query, &step_done, w); break;
        case Phase::Done: break;
        }
        if (GW_CE_OK != rc || !step_done) return rc;
        if (Phase::ReduceScatter == phase_ || Phase::Allgather == phase_) {
            if (++k_ < n_ - 1) continue;
            rc = next_phase(w);
            if (GW_CE_OK != rc) return rc;
        } else {
            phase_ = Phase::Done;
        }
    }
    *done = true;
    return GW_CE_OK;
}

} // namespace gpuwire::coll
