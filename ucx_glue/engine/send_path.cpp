// The send path: one decision per message (decide: memory kind x locality x
// size -> SendPath), then one starter per path. No starter re-checks what
// decide() settled; the only second decision is the CUDA IPC starter's
// fallback when the driver refuses the export (then the message is staged,
// by staged_path()).
//
// Every starter is called with the engine's lock held by the caller's guard
// and releases it (before running completions, which may call the engine).
#include "engine/engine.hpp"

#include <new>

namespace gpuwire::engine {

// The one path decision of a message. Host memory of a process without a
// GPU, unpaced: one branch, nothing classified.
SendPath Engine::decide(uint32_t peer, const void *buf, size_t len, unsigned flags,
                        cuda::MemoryInfo &mi, int &device)
{
    device = -1;
    const bool paceable = pacer_ && len >= params_.pace_min_bytes;
    if (!(dev_ && len) && !paceable) [[likely]]
        return SendPath::host;
    Protocol proto = Protocol::host;
    if (dev_ && len) {
        proto = choose(peer, buf, len, mi); // the one (cached) classification
        device = mi.device >= 0 ? mi.device : 0; // no single GPU named: GPU 0
        if (proto == Protocol::ipc && peers_[peer].into_host && params_.shared_staging_host &&
            use_shared_staging(peer, len, device)) [[unlikely]] {
            // The receiver takes these into pageable host memory (its
            // KindHint): a DMA out of this GPU into a slot and a memcpy there
            // beat its copy out of the CUDA IPC mapping through pinned chunks.
            proto = Protocol::staged;
            ++stats_.shared_to_host_sends;
        } else if (proto == Protocol::ipc && peers_[peer].into_host &&
                   params_.shared_staging_host && len <= params_.bounce_to_host_max &&
                   len < params_.shared_staging_min) [[unlikely]] {
            // Small, to the same receiver: one DMA into a pinned bounce buffer
            // on a stream ordered after the application's work, sent as a host
            // message (eager), beats the export, the receiver's copy out of
            // the mapping and its acknowledgement.
            proto = Protocol::staged;
            ++stats_.bounce_to_host_sends;
        }
    }
    switch (proto) {
    case Protocol::ipc: return SendPath::ipc;
    case Protocol::ucx_device: return SendPath::ucx_device;
    case Protocol::staged: return staged_path(peer, len, device, flags);
    case Protocol::host: break;
    }
    if (dev_ && len && peers_[peer].into_device && params_.shared_staging_host &&
        use_shared_staging(peer, len, 0)) {
        // A host message to a receiver that takes them into GPU memory: one
        // memcpy into a slot here, one DMA out of it there. (Slots not set
        // up yet are pinned in GPU 0's context.)
        return SendPath::host_shared;
    }
    if (paceable && len >= kBlockBytes && !(flags & GW_SEND_SYNC) && !peer_local(peer))
        [[unlikely]]
        return SendPath::host_paced; // to another node: in chunks the pacer admits
    return SendPath::host;
}

// How device memory goes through host memory.
SendPath Engine::staged_path(uint32_t peer, size_t len, int device, unsigned flags)
{
    // Through slots of host memory the receiver maps: one DMA at each end.
    // Synchronous mode holds: no chunk moves before the receiver matched.
    if (use_shared_staging(peer, len, device)) return SendPath::staged_shared;
    // Through pinned chunks, device copies overlapping the wire. (A
    // synchronous send stays one message: its completion must mean the
    // receiver matched it, which chunks smaller than UCX's rendezvous
    // threshold would not guarantee.)
    if (params_.staged_chunked && !(flags & GW_SEND_SYNC) && len >= kBlockBytes)
        return SendPath::staged_chunked;
    return SendPath::staged_whole;
}

gw_status_t Engine::isend(gw_request_t *req, uint32_t peer, uint32_t ctx, int32_t my_rank,
                          int32_t tag, const void *buf, size_t len, unsigned flags)
{
    if (peer >= peers_.size()) return GW_ERR_INVALID;
    std::unique_lock<EngineLock> guard(lock_);
    gw_status_t st;
    ucp_ep_h ep = endpoint(peer, st);
    if (!ep) return st;
    req->length = len;
    SendArgs a{req, ep, peer, make_send_tag(ctx, my_rank, tag), buf, len, flags, -1};
    cuda::MemoryInfo mi;
    const SendPath path = decide(peer, buf, len, flags, mi, a.device);
    switch (path) {
    case SendPath::host: return start_host(guard, a);
    case SendPath::host_paced: return start_chunked(guard, a, -1, true, false);
    case SendPath::host_shared:
        ++stats_.shared_host_sends;
        return start_chunked(guard, a, -1, false, true);
    case SendPath::ipc: return start_ipc(guard, a, mi);
    case SendPath::ucx_device: return start_ucx_device(guard, a);
    case SendPath::staged_shared:
    case SendPath::staged_chunked:
    case SendPath::staged_whole: return start_staged(guard, a, path);
    }
    return GW_ERR_INVALID;
}

// Host memory: the user's bytes as one tagged message. The operation's state
// is written only if UCX keeps the send (nothing can call back before:
// progress needs the lock).
gw_status_t Engine::start_host(Guard &guard, const SendArgs &a)
{
    auto *op = reinterpret_cast<SendOp *>(a.req->priv);
    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);
    ucs_status_ptr_t r = (a.flags & GW_SEND_SYNC)
                             ? ucp_tag_send_sync_nbx(a.ep, a.buf, a.len, a.wire_tag, &rp)
                             : ucp_tag_send_nbx(a.ep, a.buf, a.len, a.wire_tag, &rp);
    if (r == nullptr) [[likely]] {
        count_host_send(a.len, false);
        return sent_at_once(guard, a.req);
    }
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "send of %zu bytes to process %u failed: %s", a.len, a.peer,
            ucs_status_string(UCS_PTR_STATUS(r)));
        return from_ucs(UCS_PTR_STATUS(r));
    }
    count_host_send(a.len, true);
    new (op) SendOp{a.req, this, nullptr, 0, kWaitSend, 0, GW_OK, 0};
    return GW_OK;
}

SendOp *Engine::send_op(gw_request_t *req)
{
    return new (req->priv) SendOp{req, this, nullptr, 0, kWaitSend, 0, GW_OK, 0};
}

// A chunked transfer (chunked.cpp): paced host messages, host messages into
// a receiver's GPU memory and staged device messages through shared slots or
// pinned chunks.
gw_status_t Engine::start_chunked(Guard &guard, const SendArgs &a,
                                  int device, bool paced, bool shared)
{
    ++stats_.sends;
    stats_.bytes_sent += a.len;
    const gw_status_t st = start_chunked_send(send_op(a.req), a.ep, a.peer, a.wire_tag, a.buf,
                                              a.len, device, paced, shared);
    guard.unlock();
    run_completions();
    return st;
}

// Same node, device memory: a CUDA IPC descriptor the receiver copies from;
// its acknowledgement completes the send. Staged when the driver refuses
// the export.
gw_status_t Engine::start_ipc(Guard &guard, const SendArgs &a,
                              const cuda::MemoryInfo &mi)
{
    order_after_user(a.device); // another process reads this memory
    auto *d = new (std::nothrow) DeviceDescriptor{};
    cuda::Status es = d ? dev_->export_range(mi, a.buf, a.len, &d->blob)
                        : cuda::Status::error(cuda::Errc::busy, "out of memory");
    if (!es) {
        delete d;
        log(GW_LOG_INFO, "CUDA IPC export refused (%s): message staged", es.message().c_str());
        return start_staged(guard, a, staged_path(a.peer, a.len, a.device, a.flags));
    }
    SendOp *op = send_op(a.req);
    d->src_peer = params_.my_peer;
    d->reserved = 0;
    d->ack_id = op->sync_id = next_sync_id_++;
    op->side = d;
    op->desc = 1;
    op->waiting |= kWaitAck; // the receiver says when its copy is done
    sync_waiting_.emplace(op->sync_id, op);
    ++stats_.ipc_sends;
    // A synchronous send of a descriptor needs nothing more: the receiver's
    // acknowledgement comes after it matched.
    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);
    return send_whole(guard, a, op, d, sizeof(*d), a.wire_tag | kDescBit, rp, false);
}

// Another node, device memory: the pointer to a UCX that moves CUDA memory.
gw_status_t Engine::start_ucx_device(Guard &guard, const SendArgs &a)
{
    order_after_user(a.device); // UCX reads it on its own streams
    SendOp *op = send_op(a.req);
    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);
    rp.memory_type = UCS_MEMORY_TYPE_CUDA;
    ++stats_.ucx_device_sends;
    return send_whole(guard, a, op, a.buf, a.len, a.wire_tag, rp, a.flags & GW_SEND_SYNC);
}

// Device memory through host memory: in chunks (shared slots, pinned
// chunks) or whole: one DMA into a pinned bounce buffer, else through pinned
// chunks into the heap, sent as host data.
gw_status_t Engine::start_staged(Guard &guard, const SendArgs &a,
                                 SendPath path)
{
    if (path == SendPath::staged_shared || path == SendPath::staged_chunked) {
        ++stats_.staged_sends;
        const bool shared = path == SendPath::staged_shared;
        return start_chunked(guard, a, a.device, !shared && pacer_ && !peer_local(a.peer),
                             shared);
    }
    SendOp *op = send_op(a.req);
    void *bounce = lend_bounce(a.len, a.device);
    cuda::Status cs;
    if (bounce) {
        op->pinned = 1;
        cs = dev_->copy_sync(bounce, a.buf, a.len, a.device);
    } else {
        bounce = gw_host_buffer_alloc(a.len);
        cs = bounce ? dev_->copy_via_pinned(bounce, a.buf, a.len, a.device, false)
                    : cuda::Status::error(cuda::Errc::busy, "out of memory");
    }
    op->side = bounce;
    if (!cs) {
        free_side(op);
        log(GW_LOG_ERROR, "device-to-host staging of %zu bytes failed: %s", a.len,
            cs.message().c_str());
        return bounce ? GW_ERR_TRANSPORT : GW_ERR_NO_MEMORY;
    }
    ++stats_.staged_sends;
    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);
    return send_whole(guard, a, op, bounce, a.len, a.wire_tag, rp, a.flags & GW_SEND_SYNC);
}

// One tagged message of a device send (a descriptor, a staged copy, or the
// device pointer itself); op completes when UCX (and, for a descriptor, the
// receiver's acknowledgement) is done.
gw_status_t Engine::send_whole(Guard &guard, const SendArgs &a,
                               SendOp *op, const void *payload, size_t payload_len,
                               uint64_t wire_tag, ucp_request_param_t &rp, bool sync)
{
    ucs_status_ptr_t r = sync ? ucp_tag_send_sync_nbx(a.ep, payload, payload_len, wire_tag, &rp)
                              : ucp_tag_send_nbx(a.ep, payload, payload_len, wire_tag, &rp);
    if (r == nullptr && op->waiting == kWaitSend && !op->side) {
        count_host_send(a.len, false);
        return sent_at_once(guard, a.req);
    }
    if (UCS_PTR_IS_ERR(r)) {
        if (op->waiting & kWaitAck) sync_waiting_.erase(op->sync_id);
        log(GW_LOG_ERROR, "send of %zu bytes to process %u failed: %s", a.len, a.peer,
            ucs_status_string(UCS_PTR_STATUS(r)));
        free_side(op);
        return from_ucs(UCS_PTR_STATUS(r));
    }
    if (!op->side) {
        count_host_send(a.len, r != nullptr);
    } else {
        ++stats_.sends;
        stats_.bytes_sent += a.len;
    }
    if (r == nullptr) send_done(op, UCS_OK);
    guard.unlock();
    run_completions();
    return GW_OK;
}

} // namespace gpuwire::engine
