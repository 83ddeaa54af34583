/*
 * The plan of a hierarchical call (hier_job.hpp): how many nodes, where the
 * node's partial result of a Reduce lands, and Allgather's node-by-node
 * layout. Everything here depends only on what every rank passes alike
 * (the layout, the counts, the types' signatures), so every rank declines
 * alike.
 */
#include <climits>

#include "hier_job.hpp"

extern "C" bool gw_ce_hier_fits(gw_ce_hier_coll_t coll, int size, int count, int rcount,
                                const int *rcounts)
{
    if (size < 1) return false;
    switch (coll) {
    case GW_CE_HIER_ALLGATHER: return rcount > 0 && rcount <= INT_MAX / size;
    case GW_CE_HIER_ALLGATHERV:
        for (int q = 0; nullptr != rcounts && q < size; ++q) {
            if (rcounts[q] > 0) return true;
        }
        return false;
    case GW_CE_HIER_ALLREDUCE:
    case GW_CE_HIER_REDUCE:
    case GW_CE_HIER_BCAST: return count > 0;
    }
    return false;
}

namespace gpuwire::coll {

HierJob::HierJob(const gw_ce_hier_call_t &call, const gw_ce_hier_transport_t &t)
    : c_(call), t_(t)
{
}

int HierJob::prepare()
{
    const int rc = plan();
    /* The non-blocking form's place among the calls initiated on the turn. */
    if (GW_CE_OK == rc && nullptr != c_.turn) gw_ce_turn_take(c_.turn, &ticket_);
    return rc;
}

int HierJob::plan()
{
    if (nullptr == c_.where || c_.size < 1 || c_.rank < 0 || c_.rank >= c_.size ||
        nullptr == t_.start || nullptr == t_.temp || nullptr == t_.copy ||
        (nullptr != c_.turn && (nullptr == t_.test || nullptr == t_.wait || nullptr == t_.copied))) {
        why_ = "hierarchical call: no layout, a rank out of range or a transport function missing";
        return GW_CE_ERR_ARG;
    }
    for (int q = 0; q < c_.size; ++q) {
        if (node_of(q) < 0 || node_of(q) >= c_.size || node_rank_of(q) < 0) {
            why_ = "hierarchical call: rank " + std::to_string(q) + "'s place in the layout is out of range";
            return GW_CE_ERR_ARG;
        }
        if (node_of(q) + 1 > nodes_) nodes_ = node_of(q) + 1;
    }
    switch (c_.coll) {
    case GW_CE_HIER_REDUCE: return prepare_reduce();
    case GW_CE_HIER_ALLGATHER:
        /* Every rank's block rcount elements, in rank order. */
        if (c_.rcount < 0 || c_.rcount > INT_MAX / c_.size) {
            why_ = "hierarchical Allgather: the blocks do not fit an int count";
            return GW_CE_ERR_ARG;
        }
        counts_.assign(c_.size, c_.rcount);
        displs_.resize(c_.size);
        for (int q = 0; q < c_.size; ++q) displs_[q] = q * c_.rcount;
        return prepare_allgather();
    case GW_CE_HIER_ALLGATHERV:
        if (nullptr == c_.rcounts || nullptr == c_.rdispls) {
            why_ = "hierarchical Allgatherv: no counts or displacements";
            return GW_CE_ERR_ARG;
        }
        counts_.assign(c_.rcounts, c_.rcounts + c_.size);
        displs_.assign(c_.rdispls, c_.rdispls + c_.size);
        return prepare_allgather();
    case GW_CE_HIER_ALLREDUCE:
    case GW_CE_HIER_BCAST: return GW_CE_OK;
    }
    why_ = "hierarchical call: unknown collective " + std::to_string(static_cast<int>(c_.coll));
    return GW_CE_ERR_ARG;
}

/* The node's partial result lands at its leader: in the receive buffer if
 * the leader is the root, else in a device temporary. */
int HierJob::prepare_reduce()
{
    acc_ = c_.rbuf;
    if (!leader() || c_.rank == c_.root) return GW_CE_OK;
    return t_.temp(t_.ctx, c_.es * static_cast<size_t>(c_.count), &acc_);
}

/* The blocks node by node, and the temporary that holds them where the
 * receive buffer does not. The temporary takes only a receive type whose
 * elements lie back to back (the same answer on every rank: the type
 * signatures match); otherwise the call declines. */
int HierJob::prepare_allgather()
{
    const int size = c_.size;
    at_.resize(size);
    run_at_.assign(nodes_, 0);
    run_len_.assign(nodes_, 0);
    std::vector<int64_t> fill(nodes_, 0);
    ncounts_.resize(size);
    ndispls_.resize(size);
    for (int q = 0; q < size; ++q) run_len_[node_of(q)] += counts_[q];
    total_ = 0;
    for (int l = 0; l < nodes_; ++l) {
        run_at_[l] = total_;
        total_ += run_len_[l];
    }
    /* Inside a run, the node's ranks in their order there (node rank i is
     * the node's i-th rank in the communicator). */
    in_place_layout_ = true;
    for (int q = 0; q < size; ++q) {
        const int l = node_of(q);
        at_[q] = run_at_[l] + fill[l];
        fill[l] += counts_[q];
        in_place_layout_ = in_place_layout_ && at_[q] == displs_[q];
    }
    /* Every count the steps pass is an int; the temporary's blocks are dense. */
    if (total_ > INT_MAX || (!in_place_layout_ && !c_.r_dense)) return GW_CE_HIER_DECLINED;
    if (in_place_layout_) {
        t_buf_ = static_cast<char *>(c_.rbuf);
        return GW_CE_OK;
    }
    void *tmp = nullptr;
    const int rc = t_.temp(t_.ctx, static_cast<size_t>(total_) * c_.r_size + 1, &tmp);
    t_buf_ = static_cast<char *>(tmp);
    return rc;
}

} // namespace gpuwire::coll
