/*
 * One call of the device reduction ring (gpuwire/coll_ring.h) on one rank,
 * as a job: start() sets it up and posts its first messages, poll() moves it
 * on as far as the messages and the GPU allow and never waits.
 *
 * The job is a sequence of phases, each of steps:
 *   Allreduce       ReduceScatter (n-1 steps), Allgather (n-1 steps)
 *   Reduce          ReduceScatter, Gather (every rank's reduced chunk to
 *                   the root: rank q holds chunk q + 1)
 *   Reduce_scatter  ReduceScatter, then CopyOut when in place
 *   Scan, Exscan    Chain (a segment sent on once its kernels are done)
 *   one rank        CopyOut (the input to the result)
 * Each poll posts a step's messages, combines the segments that have
 * arrived and moves to the next step once the step's messages and kernels
 * are done: the next step sends what this one's kernels wrote, and writes
 * its receive scratch again.
 *
 * Files: ring_job.cpp (set-up, phases, freeing), ring_steps.cpp (the steps).
 */
#ifndef GPUWIRE_COLL_RING_JOB_HPP
#define GPUWIRE_COLL_RING_JOB_HPP

#include <cstddef>
#include <vector>

#include "common/requests.hpp"
#include "device.hpp"
#include "gpuwire/coll_ring.h"

namespace gpuwire::coll {

class RingJob {
public:
    /* call has been checked (ring_api.cpp); t outlives the job. */
    RingJob(const gw_ce_ring_call_t &call, const gw_ce_transport_t &t, size_t seg_elems);
    ~RingJob();
    RingJob(const RingJob &) = delete;
    RingJob &operator=(const RingJob &) = delete;

    int start(Why &w);
    int poll(bool query, bool *done, Why &w);
    /* Whether nothing is in flight (releases what has completed). */
    bool idle();

private:
    enum class Phase { ReduceScatter, Allgather, Gather, Chain, CopyOut, Done };

    /* Set-up (ring_job.cpp). */
    int start_ring(Why &w);
    int start_chain(Why &w);
    int copy_out(void *dst, const void *src, size_t count, Why &w);
    int next_phase(Why &w);

    /* Steps (ring_steps.cpp); *step_done once the step's messages and
     * kernels are. */
    int ring_step(bool query, bool *step_done, Why &w);
    int gather(bool query, bool *step_done, Why &w);
    int chain(bool query, bool *step_done, Why &w);
    int settle(bool query, bool *step_done, Why &w);
    /* One message per segment of count elements at p. */
    int post(bool send, const void *p, size_t count, int peer, Why &w);
    /* Where step k of the reduce-scatter writes chunk. */
    char *out(int k, int chunk) const;
    int mod(int x) const { return ((x % n_) + n_) % n_; }
    size_t seg_len(size_t total, size_t done) const
    {
        return total - done < seg_elems_ ? total - done : seg_elems_;
    }

    gw_ce_ring_call_t c_;
    std::vector<int> counts_; /* c_.counts points here */
    const int me_, n_;
    const size_t es_, seg_elems_;
    Requests reqs_;
    DeviceStream stream_;
    DeviceScratch scratch_;
    const char *src_; /* the input: sbuf, or rbuf in place */

    Phase phase_ = Phase::Done;
    int k_ = 0;            /* the step in the phase */
    bool posted_ = false;  /* the step's messages are posted */
    size_t nrecv_ = 0;     /* the step's receives: reqs_[0, nrecv_) */
    size_t j_ = 0;         /* the next receive to combine */
    size_t done_ = 0;      /* elements combined in this step */

    /* The ring: chunk i is cnt_[i] elements at element off_[i]. At step k
     * this rank sends chunk (me - k + shift) and receives chunk
     * (me - k - 1 + shift) from its left neighbour into rbuf_, combining it
     * with its own input (src + off) into:
     *   acc_ + off[chunk]                 when acc_ is set (allreduce, reduce)
     *   slot_[k & 1], or last_ at the end otherwise (reduce_scatter)
     * What a step wrote is what the next step sends. At the end this rank
     * holds chunk (me + shift) mod n, completely reduced. */
    std::vector<size_t> off_, cnt_;
    int shift_ = 0;
    char *acc_ = nullptr;
    char *slot_[2] = {nullptr, nullptr};
    char *last_ = nullptr;
    char *rbuf_ = nullptr;
    bool in_place_rs_ = false; /* reduce-scatter in place: the result is copied from last_ */

    /* The chain: where the prefix arrives, where what goes on is written,
     * and whether segment j_ waits for its kernels before it is sent on. */
    char *prefix_ = nullptr, *fwd_ = nullptr;
    bool fwd_wait_ = false;
};

} // namespace gpuwire::coll

#endif
