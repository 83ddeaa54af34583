/*
 * One hierarchical call on this rank (gpuwire/coll_hier.h): its plan,
 * made once by prepare(), and its steps, started one at a time by step().
 * hier_plan.cpp makes the plan (where this rank and its node stand, the
 * node-by-node layout of Allgather's blocks, the temporaries); hier_steps.cpp
 * holds what each collective's steps start; hier_drive.cpp the non-blocking
 * form's driver (poll(), and drain() before the job goes).
 */
#ifndef GPUWIRE_COLL_HIER_JOB_HPP
#define GPUWIRE_COLL_HIER_JOB_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "gpuwire/coll_hier.h"

namespace gpuwire::coll {

class HierJob {
public:
    HierJob(const gw_ce_hier_call_t &call, const gw_ce_hier_transport_t &t);
    ~HierJob() { drain(); }
    HierJob(const HierJob &) = delete;
    HierJob &operator=(const HierJob &) = delete;

    /* GW_CE_OK, GW_CE_HIER_DECLINED (alike on every rank) or an error, with
     * why() set for the engine's own errors. */
    int prepare();
    /* Starts the next step (gw_ce_hier_step). */
    int step(void **req);
    int next() const { return next_; }
    /* hier_drive.cpp: gw_ce_hier_poll, and what gw_ce_hier_free waits for. */
    int poll(bool query, bool *done);
    void drain();
    const std::string &why() const { return why_; }

private:
    /* Where this rank stands. */
    bool leader() const { return 0 == c_.where[2 * c_.rank + 1]; }
    int node_of(int q) const { return c_.where[2 * q]; }
    int node_rank_of(int q) const { return c_.where[2 * q + 1]; }
    /* Whether this rank takes part in the leaders' step. */
    bool across() const { return leader() && nodes_ > 1; }

    /* hier_plan.cpp */
    int plan();
    int prepare_reduce();
    int prepare_allgather();

    /* hier_steps.cpp: one step of each collective; a step with nothing to
     * do on this rank returns GW_CE_OK and leaves *req NULL. */
    int allreduce_step(int step, void **req);
    int bcast_step(int step, void **req);
    int reduce_step(int step, void **req);
    int allgather_step(int step, void **req);
    int allgather_copies(void **req);
    /* A sub-collective of the call's (op, type filled in) at level. */
    gw_ce_hier_sub_t sub(gw_ce_hier_sub_kind_t kind, gw_ce_hier_level_t level) const;
    int start(const gw_ce_hier_sub_t &s, void **req) const { return t_.start(t_.ctx, &s, req); }
    /* hier_drive.cpp: whether the step in flight has completed. */
    int settle(bool query, bool *settled);

    gw_ce_hier_call_t c_;
    gw_ce_hier_transport_t t_;
    int next_ = 0;
    int nodes_ = 0; /* how many nodes (leaders) */
    std::string why_;

    /* The non-blocking form: its ticket of c_.turn, the step in flight (its
     * request; copies queued without waiting), and whether the last step
     * has completed. */
    gw_ce_turn_ticket_t ticket_{};
    void *req_ = nullptr;
    bool copying_ = false;
    bool finished_ = false;

    /* Reduce: where the node's partial result lands at its leader. */
    void *acc_ = nullptr;

    /* Allgather(v): rank q's block is counts_[q] elements at displs_[q] of
     * the receive buffer, and at at_[q] of the node-by-node layout t_buf_
     * (the receive buffer itself where in_place_layout_, else a
     * temporary); node l's run is run_len_[l] elements at run_at_[l]. */
    std::vector<int> counts_, displs_;
    std::vector<int64_t> at_, run_at_, run_len_;
    int64_t total_ = 0;
    bool in_place_layout_ = false;
    char *t_buf_ = nullptr;
    std::vector<int> ncounts_, ndispls_; /* what a step passes, one per level rank */
    std::vector<gw_ce_hier_copy_t> copies_;
};

} // namespace gpuwire::coll

#endif
