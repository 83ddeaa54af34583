/*
 * The ring job's steps (ring_job.hpp): a step of the reduce-scatter or of
 * Allreduce's allgather, Reduce's gather to the root, Scan's and Exscan's
 * chain. Each goes as far as it can now and returns; the job calls it again
 * on its next poll.
 */
#include "ring_job.hpp"

namespace gpuwire::coll {

int RingJob::post(bool send, const void *p, size_t count, int peer, Why &w)
{
    for (size_t done = 0; done < count; done += seg_elems_) {
        const char *q = static_cast<const char *>(p) + done * es_;
        const size_t bytes = seg_len(count, done) * es_;
        const int rc = send ? reqs_.send(q, bytes, peer, c_.tag)
                            : reqs_.recv(const_cast<char *>(q), bytes, peer, c_.tag);
        if (0 != rc) {
            return w.fail(rc, "posting a %s of %zu bytes %s rank %d failed (transport code %d)",
                          send ? "send" : "receive", bytes, send ? "to" : "from", peer, rc);
        }
    }
    return GW_CE_OK;
}

char *RingJob::out(int k, int chunk) const
{
    if (nullptr != acc_) return acc_ + off_[chunk] * es_;
    return k == n_ - 2 ? last_ : slot_[k & 1];
}

/* A step's end, as far as it goes now: once its messages have completed and
 * its kernels have finished, *step_done. The next step writes the receive
 * scratch again and sends what this step's kernels wrote: they must have
 * finished (their ticket reached), as the peer's copy engine is not ordered
 * after our stream. */
int RingJob::settle(bool query, bool *step_done, Why &w)
{
    *step_done = false;
    bool all = false;
    int rc = reqs_.test_all(&all);
    if (0 != rc) return w.fail(rc, "a message of the ring failed (transport code %d)", rc);
    if (!all) return GW_CE_OK;
    bool reached = false;
    rc = stream_.reached(query, &reached, w);
    if (GW_CE_OK != rc || !reached) return rc;
    reqs_.cancel_all(); /* empty slots only */
    posted_ = false;
    *step_done = true;
    return GW_CE_OK;
}

/* One step k of the reduce-scatter, or of Allreduce's allgather (rank q
 * holds chunk q + 1 reduced; each step passes one reduced chunk on). */
int RingJob::ring_step(bool query, bool *step_done, Why &w)
{
    const int right = mod(me_ + 1), left = mod(me_ - 1), k = k_;
    const bool rs = Phase::ReduceScatter == phase_;
    const int sc = rs ? mod(me_ - k + shift_) : mod(me_ + 1 - k);
    const int rc = rs ? mod(me_ - k - 1 + shift_) : mod(me_ - k);
    *step_done = false;
    if (!posted_) {
        /* The sends read what the step before wrote (its kernels are done). */
        const char *sp = rs ? (0 == k ? src_ + off_[sc] * es_ : out(k - 1, sc))
                            : acc_ + off_[sc] * es_;
        char *rp = rs ? rbuf_ : acc_ + off_[rc] * es_;
        posted_ = true;
        j_ = done_ = 0;
        int err = post(false, rp, cnt_[rc], left, w);
        nrecv_ = reqs_.size();
        if (GW_CE_OK == err) err = post(true, sp, cnt_[sc], right, w);
        if (GW_CE_OK != err) return err;
    }
    /* Received (the ranks before) op mine, segment by segment as they land. */
    while (rs && j_ < nrecv_) {
        bool arrived = false;
        int err = reqs_.test(j_, &arrived);
        if (0 != err) return w.fail(err, "a message of the ring failed (transport code %d)", err);
        if (!arrived) return GW_CE_OK;
        const size_t len = seg_len(cnt_[rc], done_);
        err = stream_.reduce(c_.op, c_.type, rbuf_ + done_ * es_,
                             src_ + (off_[rc] + done_) * es_, out(k, rc) + done_ * es_, len, w);
        if (GW_CE_OK != err) return err;
        done_ += len;
        ++j_;
    }
    return settle(query, step_done, w);
}

/* Reduce's last step: every rank's reduced chunk (rank q holds chunk q + 1)
 * to the root. */
int RingJob::gather(bool query, bool *step_done, Why &w)
{
    *step_done = false;
    if (!posted_) {
        posted_ = true;
        int err = GW_CE_OK;
        if (me_ == c_.root) {
            for (int q = 0; q < n_ && GW_CE_OK == err; ++q) {
                const int chunk = mod(q + 1);
                if (q != me_) err = post(false, acc_ + off_[chunk] * es_, cnt_[chunk], q, w);
            }
        } else {
            const int chunk = mod(me_ + 1);
            err = post(true, acc_ + off_[chunk] * es_, cnt_[chunk], c_.root, w);
        }
        if (GW_CE_OK != err) return err;
    }
    return settle(query, step_done, w);
}

/* The chain, as far as it goes now: each segment of the prefix that has
 * landed is combined (scan: prefix op mine into rbuf; exscan: prefix op
 * mine into fwd, the prefix itself the result) and, once its kernels are
 * done, sent on to the next rank. */
int RingJob::chain(bool query, bool *step_done, Why &w)
{
    const bool exclusive = GW_CE_RING_EXSCAN == c_.coll, last = me_ == n_ - 1;
    *step_done = false;
    while (0 != me_ && j_ < nrecv_) {
        const size_t len = seg_len(c_.count, done_), at = done_ * es_;
        if (!fwd_wait_) {
            bool arrived = false;
            int err = reqs_.test(j_, &arrived);
            if (0 != err) {
                return w.fail(err, "a message of the chain failed (transport code %d)", err);
            }
            if (!arrived) return GW_CE_OK;
            if (!exclusive || !last) {
                err = stream_.reduce(c_.op, c_.type, prefix_ + at, src_ + at, fwd_ + at, len, w);
            }
            /* Exscan in place: the prefix is the result; the kernel above
             * has read this segment of rbuf before the copy (same stream)
             * lands. */
            if (GW_CE_OK == err && exclusive && c_.in_place) {
                err = stream_.copy(static_cast<char *>(c_.rbuf) + at, prefix_ + at, len * es_, w);
            }
            if (GW_CE_OK != err) return err;
            fwd_wait_ = !last;
        }
        if (fwd_wait_) {
            bool reached = false;
            int err = stream_.reached(query, &reached, w);
            if (GW_CE_OK != err || !reached) return err;
            fwd_wait_ = false;
            err = post(true, fwd_ + at, len, me_ + 1, w);
            if (GW_CE_OK != err) return err;
        }
        done_ += len;
        ++j_;
    }
    return settle(query, step_done, w);
}

} // namespace gpuwire::coll
