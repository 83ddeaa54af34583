// Endpoints: their creation (Engine::connect, each with on_ep_error as its
// error callback) and what follows when a peer fails.
//
// A peer process fails (pml_gpuwire_err_handling 1: UCX endpoints in peer
// failure mode report it through on_ep_error). UCX itself fails only what it
// tracks per endpoint: sends, and receives whose rendezvous it is serving.
// Everything else that waits for that process is the engine's to end, with
// GW_ERR_UNREACHABLE, never as if the data had come:
// - receives posted into UCX that match nothing yet and whose source is that
//   process (MPI_ANY_SOURCE receives stay: another process may still send);
//   receives posted later for it end at once (RecvOp::peer_gone);
// - probes for that process (not MPI_ANY_SOURCE) that find nothing of it
//   report it (probe_source_gone) instead of "nothing yet" forever;
// - sends of device descriptors waiting for its acknowledgement;
// - chunked transfers to or from it (chunk receives it would fill);
// - device copies out of its memory (CUDA IPC) still running: their
//   completion reports the failure (progress_side_work, deliver_ipc).
#include "engine/engine.hpp"

#include <vector>

namespace gpuwire::engine {

void Engine::on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    auto *e = static_cast<Engine *>(arg);
    for (uint32_t i = 0; i < e->peers_.size(); ++i) {
        if (e->peers_[i].ep != ep || e->peers_[i].failed) continue;
        e->peers_[i].failed = true;
        e->log(GW_LOG_ERROR, "connection to process %u failed: %s", i, ucs_status_string(status));
        e->fail_peer(i);
    }
}

bool Engine::rank_failed(uint32_t ctx, int32_t rank)
{
    uint32_t p;
    return rank >= 0 && params_.peer_of_rank &&
           params_.peer_of_rank(params_.resolve_ctx, ctx, rank, &p) == 0 && p < peers_.size() &&
           peers_[p].failed;
}

void Engine::fail_peer(uint32_t peer)
{
    any_failed_ = true;
    size_t ended = 0;
    // Cancelling completes a receive inside the call (on_recv_done), which
    // unlinks it: collect first.
    std::vector<RecvOp *> waiting;
    in_ucx_.for_each([&](RecvOp *op) {
        if (op->ucx_req && !op->done && op->source != GW_ANY_SOURCE &&
            rank_failed(op->ctx, op->source))
            waiting.push_back(op);
    });
    for (RecvOp *op : waiting) {
        op->peer_gone = 1;
        ucp_request_cancel(worker_, op->ucx_req);
        // Not cancelled: UCX matched it already (a rendezvous in progress),
        // and fails it itself with the endpoint.
        if (op->done) {
            ++ended;
        } else {
            op->peer_gone = 0;
        }
    }
    for (auto it = sync_waiting_.begin(); it != sync_waiting_.end();) {
        SendOp *op = it->second;
        if (op->peer != peer) {
            ++it;
            continue;
        }
        it = sync_waiting_.erase(it);
        op->waiting &= ~kWaitAck;
        if (op->status == GW_OK) op->status = GW_ERR_UNREACHABLE;
        ++ended;
        if (!op->waiting) complete(op->req, op->status);
    }
    for (Xfer *x : xfers_) {
        if (x->peer != peer) continue;
        stop_xfer(*x, GW_ERR_UNREACHABLE);
        ++ended;
    }
    if (ended)
        log(GW_LOG_ERROR, "%zu operation(s) waiting for process %u end with an error", ended,
            peer);
}

void Engine::stop_xfer(Xfer &x, gw_status_t st)
{
    if (x.status == GW_OK) x.status = st;
    x.done += x.len - x.next; // chunks never started: nothing to wait for
    x.next = x.len;
    for (XferSlot &s : x.slots) {
        // Completes as cancelled inside the call (chunk_done).
        if (!x.sending && s.state == XferSlot::WIRE && s.ucx_req)
            ucp_request_cancel(worker_, s.ucx_req);
    }
    if (x.sending && x.go_req) ucp_request_cancel(worker_, x.go_req); // on_go lets it go
}

void Engine::watch_rank(uint32_t ctx, int32_t rank)
{
    uint32_t p;
    if (rank == GW_ANY_SOURCE || !params_.peer_of_rank ||
        params_.peer_of_rank(params_.resolve_ctx, ctx, rank, &p) != 0 || p >= peers_.size())
        return;
    if (!peers_[p].ep && p != params_.my_peer) {
        gw_status_t st;
        endpoint(p, st, true); // (no endpoint: nothing to watch, as before)
    }
}

void Engine::watch_sender(RecvOp *op)
{
    watch_rank(op->ctx, op->source);
    if (any_failed_) refuse_if_gone(op);
}

// A probe found nothing of one process: as for a receive, watch it, and tell
// whether it failed. The probe looked at what had arrived first (pulled
// messages, UCX's unexpected queue), so what it sent before dying is still
// found and received; after that nothing of it will ever come.
bool Engine::probe_source_gone(uint32_t ctx, int32_t source)
{
    if (!params_.err_mode_peer || source == GW_ANY_SOURCE) return false;
    watch_rank(ctx, source);
    return any_failed_ && rank_failed(ctx, source);
}

// A receive posted after the one process that could satisfy it failed: a
// message of that process that waited in UCX matched inside the call;
// otherwise nothing ever will.
void Engine::refuse_if_gone(RecvOp *op)
{
    if (op->done || !op->ucx_req || !rank_failed(op->ctx, op->source)) return;
    op->peer_gone = 1;
    ucp_request_cancel(worker_, op->ucx_req);
    if (!op->done) op->peer_gone = 0; // matched (a rendezvous): UCX finishes it
}

ucp_ep_h Engine::connect(uint32_t peer, gw_status_t &status, bool quiet)
{
    Peer &p = peers_[peer];
    if (p.ep) {
        status = p.failed ? GW_ERR_UNREACHABLE : GW_OK;
        return p.failed ? nullptr : p.ep;
    }
    const void *addr = nullptr;
    size_t len = 0;
    if (params_.resolve_peer(params_.resolve_ctx, peer, &addr, &len) != 0 || !addr) {
        log(GW_LOG_ERROR, "no UCX address for process %u: it did not publish one", peer);
        status = GW_ERR_UNREACHABLE;
        return nullptr;
    }
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = static_cast<const ucp_address_t *>(addr);
    ep.err_mode = params_.err_mode_peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    // In either mode: without a callback UCX makes a transport's error fatal
    // (a receiver's CMA read of a sender that died aborts the process);
    // with one, the operation fails and the engine ends the rest.
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_handler.cb = &Engine::on_ep_error;
    ep.err_handler.arg = this;
    ucs_status_t s = ucp_ep_create(worker_, &ep, &p.ep);
    if (s != UCS_OK) {
        if (!quiet) log(GW_LOG_ERROR, "UCX cannot reach process %u: %s", peer, ucs_status_string(s));
        p.ep = nullptr;
        status = GW_ERR_UNREACHABLE;
        return nullptr;
    }
    ++stats_.endpoints;
    log(GW_LOG_DEBUG, "endpoint to process %u created", peer);
    status = GW_OK;
    return p.ep;
}

} // namespace gpuwire::engine
