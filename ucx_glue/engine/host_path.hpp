// The host fast path's inline parts: a receive's state (start_recv), and
// the send's fast path, inline so that the C face (capi.cpp, gw_isend) is
// one call: decide()'s host answer taken before anything else. Host memory
// (of a process without a GPU, or known as plain host memory by the
// classifier's host table: no driver call), unpaced, of a length no control
// message has (so start_host's look at the bytes has nothing to do): no path
// decision, no memory information, no arguments block; the lock, the
// endpoint, the tag, UCX. Included at the end of engine.hpp.
#pragma once

#include <new>

namespace gpuwire::engine {

// Counts a host message handed to UCX: rendezvous by the configured
// threshold, else by whether UCX kept it (it needed the receiver).
inline void Engine::count_host_send(size_t len, bool kept)
{
    ++stats_.sends;
    stats_.bytes_sent += len;
    const bool rndv = params_.rndv_threshold ? len >= params_.rndv_threshold : kept;
    ++(rndv ? stats_.rndv_sends : stats_.eager_sends);
}

// A send UCX finished inside the call: the lock goes, then the callback
// runs, then whatever else completed meanwhile.
inline gw_status_t Engine::sent_at_once(Guard &guard, gw_request_t *req)
{
    const bool others = done_head_ != done_.size();
    guard.unlock();
    req->status = GW_OK;
    req->complete_cb(req);
    if (others) run_completions();
    return GW_OK;
}

// dev_ and pacer_ are set once, at creation: read without the lock.
[[gnu::always_inline]] inline gw_status_t Engine::isend(gw_request_t *req, uint32_t peer,
                                                        uint32_t ctx, int32_t my_rank,
                                                        int32_t tag, const void *buf,
                                                        size_t len, unsigned flags) noexcept
{
    // With a GPU, a buffer the classifier's host table knows as plain host
    // memory is what decide() would send as host too; anything else (its
    // first message, device or pinned memory) is classified there. So are
    // host messages from shared_staging_min on, which decide() may put
    // through the shared slots (a receiver that takes them into GPU memory):
    // tested here, not per peer, so that no peer is read without the lock
    // and a process without a GPU pays nothing more.
    if ((dev_ && (len >= params_.shared_staging_min || !dev_->known_host(buf, len))) ||
        pacer_ || control_length(len) || peer >= peers_.size()) [[unlikely]]
        return isend_general(req, peer, ctx, my_rank, tag, buf, len, flags);
    Guard guard(lock_);
    const Peer &p = peers_[peer];
    if (!p.ep || p.failed) [[unlikely]] { // the first send to it, or a failed process: connect()
        guard.unlock();
        return isend_general(req, peer, ctx, my_rank, tag, buf, len, flags);
    }
    req->length = len;
    return send_host(guard, req, p.ep, peer, make_send_tag(ctx, my_rank, tag), buf, len, flags);
}

// The operation's state is written only if UCX keeps the send (nothing can
// call back before: progress needs the lock).
[[gnu::always_inline]] inline gw_status_t Engine::send_host(Guard &guard, gw_request_t *req,
                                                            ucp_ep_h ep, uint32_t peer,
                                                            uint64_t wire_tag,
                                                            const void *buf, size_t len,
                                                            unsigned flags)
{
    ucp_request_param_t *rp = &host_send_rp_; // not on the stack: no canary, four stores fewer
    rp->user_data = req->priv;                   // the SendOp, written only if UCX keeps the send
    ucs_status_ptr_t r = (flags & GW_SEND_SYNC) ? ucp_tag_send_sync_nbx(ep, buf, len, wire_tag, rp)
                                                : ucp_tag_send_nbx(ep, buf, len, wire_tag, rp);
    if (r == nullptr) [[likely]] {
        count_host_send(len, false);
        return sent_at_once(guard, req);
    }
    return host_kept(r, req, peer, len);
}

// A receive's state, in the request: inline into irecv and imrecv.
inline RecvOp *Engine::start_recv(gw_request_t *req, void *buf, size_t cap)
{
    auto *op = new (req->priv) RecvOp;
    op->buf = buf;
    op->cap = cap;
    op->req = req;
    op->engine = this;
    op->ucx_req = nullptr;
    op->landing = buf;
    op->bounce = nullptr;
    op->ack_id = 0;
    op->ack_peer = 0;
    op->device = -1;
    op->done = 0;
    op->saved = 0;
    op->pinned = 0;
    op->direct = 0;
    op->host_pinned = 0;
    op->layout = 0;
    op->peer_gone = 0;
    op->ctx = 0;
    op->source = GW_ANY_SOURCE;
    return op;
}

} // namespace gpuwire::engine
