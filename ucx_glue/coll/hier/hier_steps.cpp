/*
 * The steps of each hierarchical collective (gpuwire/coll_hier.h says what
 * they compose). Steps 0 to 2 each start at most one sub-collective (or,
 * for Reduce, one message) on this rank; Allgather's step 3 is local, the
 * copies out of its temporary. A rank with nothing to do in a step returns
 * GW_CE_OK without starting anything: the steps of every rank line up, so
 * that each level's sub-collective is started by all of its ranks in the
 * same step.
 */
#include "hier_job.hpp"

namespace gpuwire::coll {

gw_ce_hier_sub_t HierJob::sub(gw_ce_hier_sub_kind_t kind, gw_ce_hier_level_t level) const
{
    gw_ce_hier_sub_t s{};
    s.kind = kind;
    s.level = level;
    s.op = c_.op;
    s.type = c_.type;
    s.stype = GW_CE_HIER_TYPE;
    s.rtype = GW_CE_HIER_TYPE;
    return s;
}

int HierJob::allreduce_step(int step, void **req)
{
    switch (step) {
    case 0: { /* Into the leader's receive buffer. */
        gw_ce_hier_sub_t s = sub(GW_CE_HIER_SUB_REDUCE, GW_CE_HIER_NODE);
        s.in_place = c_.in_place && leader();
        s.sbuf = c_.in_place ? c_.rbuf : c_.sbuf; /* a non-leader's input is in rbuf */
        s.rbuf = c_.rbuf;
        s.count = c_.count;
        s.root = 0;
        return start(s, req);
    }
    case 1: { /* Among the leaders, in place. */
        if (!across()) return GW_CE_OK;
        gw_ce_hier_sub_t s = sub(GW_CE_HIER_SUB_ALLREDUCE, GW_CE_HIER_LEADERS);
        s.in_place = true;
        s.rbuf = c_.rbuf;
        s.count = c_.count;
        return start(s, req);
    }
    case 2: { /* Back to every rank of the node. */
        gw_ce_hier_sub_t s = sub(GW_CE_HIER_SUB_BCAST, GW_CE_HIER_NODE);
        s.rbuf = c_.rbuf;
        s.count = c_.count;
        s.root = 0;
        return start(s, req);
    }
    }
    return GW_CE_HIER_END;
}

int HierJob::bcast_step(int step, void **req)
{
    const int root_node = node_of(c_.root), root_local = node_rank_of(c_.root);
    const bool in_root_node = node_of(c_.rank) == root_node;
    gw_ce_hier_sub_t s = sub(GW_CE_HIER_SUB_BCAST, GW_CE_HIER_NODE);
    s.rbuf = c_.rbuf;
    s.count = c_.count;
    switch (step) {
    case 0: /* Inside the root's node. */
        if (!in_root_node) return GW_CE_OK;
        s.root = root_local;
        return start(s, req);
    case 1: /* Among the leaders, from the root's node's. */
        if (!across()) return GW_CE_OK;
        s.level = GW_CE_HIER_LEADERS;
        s.root = root_node;
        return start(s, req);
    case 2: /* Inside every other node. */
        if (in_root_node) return GW_CE_OK;
        s.root = 0;
        return start(s, req);
    }
    return GW_CE_HIER_END;
}

int HierJob::reduce_step(int step, void **req)
{
    const bool root = c_.rank == c_.root;
    const int root_node = node_of(c_.root), root_local = node_rank_of(c_.root);
    switch (step) {
    case 0: { /* Inside the node, to its leader. */
        gw_ce_hier_sub_t s = sub(GW_CE_HIER_SUB_REDUCE, GW_CE_HIER_NODE);
        /* A root that is not its node's leader gives its rbuf as input. */
        const bool input_in_rbuf = root && c_.in_place && !leader();
        s.in_place = c_.in_place && !input_in_rbuf;
        s.sbuf = input_in_rbuf ? c_.rbuf : c_.sbuf;
        s.rbuf = acc_;
        s.count = c_.count;
        s.root = 0;
        return start(s, req);
    }
    case 1: { /* Among the leaders, to the root's node's. */
        if (!across()) return GW_CE_OK;
        gw_ce_hier_sub_t s = sub(GW_CE_HIER_SUB_REDUCE, GW_CE_HIER_LEADERS);
        s.in_place = node_of(c_.rank) == root_node;
        s.sbuf = acc_;
        s.rbuf = acc_;
        s.count = c_.count;
        s.root = root_node;
        return start(s, req);
    }
    case 2: { /* To the root, when it is not its node's leader. */
        if (node_of(c_.rank) != root_node || 0 == root_local) return GW_CE_OK;
        if (!leader() && !root) return GW_CE_OK;
        gw_ce_hier_sub_t s = sub(leader() ? GW_CE_HIER_SUB_SEND : GW_CE_HIER_SUB_RECV,
                                 GW_CE_HIER_NODE);
        s.count = c_.count;
        if (leader()) {
            s.sbuf = acc_;
            s.root = root_local;
        } else {
            s.rbuf = c_.rbuf;
            s.root = 0;
        }
        return start(s, req);
    }
    }
    return GW_CE_HIER_END;
}

int HierJob::allgather_step(int step, void **req)
{
    const int me = c_.rank, mine = node_of(me);
    const auto extent = static_cast<int64_t>(c_.r_extent);
    switch (step) {
    case 0: { /* Inside the node, into the node's run (in place where the
               * run is the receive buffer: this rank's block is there). */
        const bool all = GW_CE_HIER_ALLGATHER == c_.coll; /* the NVLink kernels take Allgather */
        gw_ce_hier_sub_t s =
            sub(all ? GW_CE_HIER_SUB_ALLGATHER : GW_CE_HIER_SUB_ALLGATHERV, GW_CE_HIER_NODE);
        s.rbuf = t_buf_ + run_at_[mine] * extent;
        s.rtype = GW_CE_HIER_RTYPE;
        s.in_place = c_.in_place;
        s.sbuf = c_.sbuf;
        s.scount = c_.scount;
        s.stype = GW_CE_HIER_STYPE;
        if (c_.in_place && !in_place_layout_) { /* this rank's block from its place */
            s.in_place = false;
            s.sbuf = static_cast<const char *>(c_.rbuf) + displs_[me] * extent;
            s.scount = counts_[me];
            s.stype = GW_CE_HIER_RTYPE;
        }
        if (all) {
            s.count = c_.rcount;
            return start(s, req);
        }
        int i = 0;
        for (int q = 0; q < c_.size; ++q) {
            if (node_of(q) != mine) continue;
            ncounts_[i] = counts_[q];
            ndispls_[i] = static_cast<int>(at_[q] - run_at_[mine]);
            ++i;
        }
        s.counts = ncounts_.data();
        s.displs = ndispls_.data();
        return start(s, req);
    }
    case 1: { /* Among the leaders, each node's run in place. */
        if (!across()) return GW_CE_OK;
        for (int l = 0; l < nodes_; ++l) {
            ncounts_[l] = static_cast<int>(run_len_[l]);
            ndispls_[l] = static_cast<int>(run_at_[l]);
        }
        gw_ce_hier_sub_t s = sub(GW_CE_HIER_SUB_ALLGATHERV, GW_CE_HIER_LEADERS);
        s.in_place = true;
        s.stype = GW_CE_HIER_NOTYPE;
        s.rbuf = t_buf_;
        s.rtype = GW_CE_HIER_RTYPE;
        s.counts = ncounts_.data();
        s.displs = ndispls_.data();
        return start(s, req);
    }
    case 2: { /* Every block to every rank of the node. */
        gw_ce_hier_sub_t s = sub(GW_CE_HIER_SUB_BCAST, GW_CE_HIER_NODE);
        s.rbuf = t_buf_;
        s.count = static_cast<int>(total_);
        s.rtype = GW_CE_HIER_RTYPE;
        s.root = 0;
        return start(s, req);
    }
    case 3: return allgather_copies(req);
    }
    return GW_CE_HIER_END;
}

/* From the temporary, each block to its rank's place. */
int HierJob::allgather_copies(void **req)
{
    if (in_place_layout_) return GW_CE_OK;
    copies_.clear();
    for (int q = 0; q < c_.size; ++q) {
        if (0 == counts_[q]) continue;
        copies_.push_back({static_cast<char *>(c_.rbuf) + displs_[q] * static_cast<int64_t>(c_.r_extent),
                           t_buf_ + at_[q] * static_cast<int64_t>(c_.r_size),
                           static_cast<size_t>(counts_[q]) * c_.r_size});
    }
    if (copies_.empty()) return GW_CE_OK;
    const int rc = t_.copy(t_.ctx, copies_.data(), copies_.size(), nullptr == req);
    copying_ = GW_CE_OK == rc && nullptr != req; /* not waited for */
    return rc;
}

int HierJob::step(void **req)
{
    if (nullptr != req) *req = nullptr;
    const int s = next_++;
    switch (c_.coll) {
    case GW_CE_HIER_ALLREDUCE: return allreduce_step(s, req);
    case GW_CE_HIER_BCAST: return bcast_step(s, req);
    case GW_CE_HIER_REDUCE: return reduce_step(s, req);
    case GW_CE_HIER_ALLGATHER:
    case GW_CE_HIER_ALLGATHERV: return allgather_step(s, req);
    }
    return GW_CE_HIER_END;
}

} // namespace gpuwire::coll
