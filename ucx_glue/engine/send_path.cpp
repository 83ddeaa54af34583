// The send path: one decision per message (decide: memory kind x locality x
// size -> SendPath), then one starter per path. No starter re-checks what
// decide() settled; the only second decision is the CUDA IPC starter's
// fallback when the driver refuses the export (then the message is staged,
// by staged_path()).
//
// Every starter is called with the engine's lock held by the caller's guard
// and releases it (before running completions, which may call the engine).
#include "engine/engine.hpp"

#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/ipc_blob.hpp"

#include <algorithm>
#include <cstring>
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
        if (proto != Protocol::host && other_job(peer)) [[unlikely]]
            return SendPath::staged_whole; // a plain host message (engine.h, job_peers)
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
    case Protocol::ucx_device:
        // UCX would send device bytes unseen; those of a control message's
        // size are looked at on the host first (start_staged).
        return control_length(len) ? staged_path(peer, len, device, flags) : SendPath::ucx_device;
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

// isend's fast path is inline (host_path.hpp); every other send starts here.
gw_status_t Engine::isend_general(gw_request_t *req, uint32_t peer, uint32_t ctx,
                                  int32_t my_rank, int32_t tag, const void *buf, size_t len,
                                  unsigned flags)
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
    if (mi.flags & cuda::kUnordered) [[unlikely]]
        order_unordered(a.device);
    switch (path) {
    case SendPath::host: return start_host(guard, a);
    case SendPath::host_paced: return start_chunked(guard, a, -1, true, false);
    case SendPath::host_shared:
        ++stats_.shared_host_sends;
        // Pinned memory takes a DMA straight into the receiver's buffer (a
        // CPU copy into a slot runs at a fifth of its speed), and so does a
        // pageable buffer used again (pinned by the host registry); a large
        // pageable one a cudaMemcpy (which stages it itself) where asked.
        return start_chunked(guard, a, -1, false, true, false,
                             push_host_message(host_pinned(mi, buf, len, 0), len, path_.push));
    case SendPath::ipc: return start_ipc(guard, a, mi);
    case SendPath::ucx_device: return start_ucx_device(guard, a);
    case SendPath::staged_shared:
    case SendPath::staged_chunked:
    case SendPath::staged_whole: return start_staged(guard, a, path);
    }
    return GW_ERR_INVALID;
}

// Host memory: the user's bytes as one tagged message.
gw_status_t Engine::start_host(Guard &guard, const SendArgs &a)
{
    if (control_length(a.len) &&
        ((a.flags & GW_SEND_SYNC) || control_kind(a.buf, a.len) != Control::none)) [[unlikely]]
        return start_escaped(guard, a, -1);
    return send_host(guard, a.req, a.ep, a.peer, a.wire_tag, a.buf, a.len, a.flags);
}

// UCX kept the send (or refused it): out of line, the fast path's frame
// stays small.
gw_status_t Engine::host_kept(ucs_status_ptr_t r, gw_request_t *req, uint32_t peer, size_t len)
{
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "send of %zu bytes to process %u failed: %s", len, peer,
            ucs_status_string(UCS_PTR_STATUS(r)));
        return from_ucs(UCS_PTR_STATUS(r));
    }
    count_host_send(len, true);
    new (req->priv) SendOp{req, this, nullptr, 0, kWaitSend, 0, GW_OK, 0};
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
                                  int device, bool paced, bool shared, bool sync, bool pushable)
{
    ++stats_.sends;
    stats_.bytes_sent += a.len;
    const gw_status_t st = start_chunked_send(send_op(a.req), a.ep, a.peer, a.wire_tag, a.buf,
                                              a.len, device, paced, shared, sync, pushable);
    guard.unlock();
    run_completions();
    return st;
}

// Rare (a 4-byte magic at a fixed place of a 32- or 152-byte message, or a
// synchronous send of either size), and the price of receives that need no
// tag bit to tell the engine's messages from the user's. A probe receives a
// message of those sizes from UCX to read it, which would complete a UCX
// synchronous send before the user's receive: a synchronous one goes
// escaped instead, and completes after the receiver's go-ahead
// (kChunkedSync).
gw_status_t Engine::start_escaped(Guard &guard, const SendArgs &a, int device)
{
    return start_chunked(guard, a, device, false, false, (a.flags & GW_SEND_SYNC) != 0);
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
    op->peer = a.peer;       // ... unless it fails (fail_peer)
    sync_waiting_.emplace(op->sync_id, op);
    ++stats_.ipc_sends;
    // A synchronous send of a descriptor needs nothing more: the receiver's
    // acknowledgement comes after it matched.
    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);
    return send_whole(guard, a, op, d, sizeof(*d), a.wire_tag, rp, false);
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
    if (control_length(a.len) &&
        ((a.flags & GW_SEND_SYNC) || control_kind(bounce, a.len) != Control::none)) [[unlikely]] {
        free_side(op);
        return start_escaped(guard, a, a.device); // chunks staged from the GPU buffer itself
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

// ---------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------

bool Engine::peer_local(uint32_t peer)
{
    if (peer == params_.my_peer) return true;
    int8_t &l = local_[peer];
    if (l < 0) l = params_.peer_is_local && params_.peer_is_local(params_.resolve_ctx, peer) ? 1 : 0;
    return l == 1;
}

bool Engine::use_shared_staging(uint32_t peer, size_t len, int device)
{
    return params_.shared_staging && len >= params_.shared_staging_min &&
           peer != params_.my_peer && peer_local(peer) && outbox(device);
}

// Pinned in the context of the GPU of the first message that needs it
// (portable: usable by every GPU).
cuda::SharedOutbox *Engine::outbox(int device)
{
    if (outbox_ || outbox_failed_) return outbox_.get();
    const size_t chunk = std::min(params_.chunk_bytes, dev_->pinned_chunk_bytes());
    const size_t slots =
        std::clamp<size_t>(params_.shared_staging_bytes / chunk, 1, cuda::kSharedSlotsMax);
    auto o = cuda::SharedOutbox::create(&cuda::Driver::instance(), chunk, slots, device);
    if (!o) {
        outbox_failed_ = true;
        log(GW_LOG_WARN,
            "shared staging memory could not be set up (%s): device messages without CUDA IPC "
            "go through UCX; pml_gpuwire_shared_staging 0 stops trying",
            o.status().message().c_str());
        return nullptr;
    }
    outbox_ = std::move(*o);
    log(GW_LOG_INFO, "shared staging: %zu slots of %zu bytes (%s)", outbox_->slots(),
        outbox_->slot_bytes(), cuda::shared_segment_path(outbox_->id()).c_str());
    return outbox_.get();
}

// Before a copy that no stream orders after the application's work on the
// default stream of GPU device (a CUDA IPC read by another process, UCX's
// own streams), with pml_gpuwire_device_sync: waits for that stream (a
// cudaMemcpy whose DMA is still running, say).
void Engine::order_after_user(int device)
{
    cuda::Status ws = dev_->order_after_user(device);
    if (!ws) log(GW_LOG_WARN, "waiting for the default stream failed: %s", ws.message().c_str());
}

// A buffer a cudaMemcpy may still be writing (cuda::kUnordered: seen for the
// first time, or memory SYNC_MEMOPS cannot mark): waits for the legacy
// stream whatever pml_gpuwire_device_sync says.
void Engine::order_unordered(int device)
{
    if (params_.device_sync) return; // every path waits (or runs on that stream) already
    cuda::Status ws = cuda::wait_legacy_stream(device >= 0 ? device : 0);
    if (!ws) log(GW_LOG_WARN, "waiting for the default stream failed: %s", ws.message().c_str());
}

Protocol Engine::choose(uint32_t peer, const void *buf, size_t len, cuda::MemoryInfo &mi)
{
    if (!dev_ || len == 0) return Protocol::host;
    cuda::Status s = dev_->classify(buf, len, mi);
    if (!s) {
        log(GW_LOG_WARN, "memory kind of %p unknown (%s): sent as host memory", buf,
            s.message().c_str());
        return Protocol::host;
    }
    if (!mi.on_gpu()) return Protocol::host;
    SendTraits t{true, mi.legacy_ipc_exportable(), peer_local(peer)};
    return choose_protocol(t, len, path_);
}

// The GPU of buf (GPU 0 where no single one is named), or -1 for host
// memory; *pinned (when asked) says whether host memory is pinned.
int Engine::device_of(const void *buf, size_t len, bool *pinned)
{
    cuda::MemoryInfo mi;
    if (!dev_ || len == 0 || !dev_->classify(buf, len, mi)) return -1;
    if (pinned) *pinned = mi.kind == cuda::MemoryKind::pinned_host;
    if (!mi.on_gpu()) return -1;
    const int device = mi.device >= 0 ? mi.device : 0;
    if (mi.flags & cuda::kUnordered) [[unlikely]]
        order_unordered(device); // a receive buffer a cudaMemcpy may still be writing
    return device;
}

// Pinned host memory, or pageable host memory pinned for reuse.
bool Engine::host_pinned(const cuda::MemoryInfo &mi, const void *buf, size_t len, int device)
{
    if (mi.kind == cuda::MemoryKind::pinned_host) return true;
    return mi.kind == cuda::MemoryKind::host && pin_reused(buf, len, device);
}

// The receive buffer's GPU (op->device), or whether host memory is pinned.
void Engine::classify_recv(RecvOp *op)
{
    bool pinned = false;
    op->device = device_of(op->buf, op->cap, &pinned);
    op->host_pinned = pinned;
}

void *Engine::lend_bounce(size_t len, int device)
{
    const cuda::PinnedCache &cache = dev_->bounce_cache();
    if (cache.max_bytes() == 0) return nullptr; // switched off
    cuda::Result<void *> b = dev_->lend_bounce(len, device);
    if (b) return *b;
    ++stats_.pinned_bounce_fallbacks;
    if (b.status().code() == cuda::Errc::busy) {
        if (!bounce_busy_logged_) {
            bounce_busy_logged_ = true;
            log(GW_LOG_INFO,
                "no pinned bounce buffer of %zu bytes for a device message (%zu bytes pinned, "
                "%zu lent, bound %zu: pml_gpuwire_pinned_bounce_bytes): staged through "
                "pageable memory; logged once",
                len, cache.held_bytes(), cache.lent_bytes(), cache.limit());
        }
    } else if (!bounce_failed_logged_) {
        bounce_failed_logged_ = true;
        log(GW_LOG_WARN,
            "pinning a %zu-byte bounce buffer for a device message failed (%s): pinned bounce "
            "buffers stay within the %zu bytes pinned so far; logged once",
            len, b.status().message().c_str(), cache.limit());
    }
    return nullptr;
}

ucs_status_t Engine::on_sync_ack(void *arg, const void *header, size_t header_length, void *,
                                 size_t, const ucp_am_recv_param_t *)
{
    auto *e = static_cast<Engine *>(arg);
    SyncAckHeader h;
    if (!decode_sync_ack(header, header_length, &h)) return UCS_OK;
    auto it = e->sync_waiting_.find(h.sync_id);
    if (it == e->sync_waiting_.end()) {
        e->log(GW_LOG_WARN, "device-copy acknowledgement for an unknown send dropped");
        return UCS_OK;
    }
    SendOp *op = it->second;
    e->sync_waiting_.erase(it);
    op->waiting &= ~kWaitAck;
    ++e->stats_.sync_acks;
    if (!op->waiting) e->complete(op->req, op->status);
    return UCS_OK;
}

// A peer on this node says where it takes our large messages.
ucs_status_t Engine::on_kind_hint(void *arg, const void *header, size_t header_length, void *,
                                  size_t, const ucp_am_recv_param_t *)
{
    auto *e = static_cast<Engine *>(arg);
    KindHint h;
    if (!decode_kind_hint(header, header_length, &h) || h.src_peer >= e->peers_.size() ||
        h.src_peer == e->params_.my_peer || !e->peer_local(h.src_peer)) {
        e->log(GW_LOG_WARN, "malformed receive-kind hint dropped");
        return UCS_OK;
    }
    Peer &p = e->peers_[h.src_peer];
    if (h.into == kHintIntoDevice) {
        // Its receives land in GPU memory: CUDA IPC again for device messages.
        p.into_device = true;
        p.into_host = false;
    } else {
        p.into_host = true;
    }
    return UCS_OK;
}

// A large message from a process of this node took the slow way here (a host
// message into GPU memory through host memory, kHintIntoDevice; a CUDA IPC
// message into pageable host memory, kHintIntoHost): tell the sender, once
// until a shared transfer shows it switched back, that such messages may use
// its shared slots.
void Engine::hint_kind(uint32_t peer, uint32_t into)
{
    if (!params_.shared_staging || !params_.shared_staging_host || peer >= peers_.size() ||
        peer == params_.my_peer || other_job(peer) || !peer_local(peer))
        return;
    bool &hinted = into == kHintIntoDevice ? peers_[peer].hinted_device : peers_[peer].hinted_host;
    if (hinted) return;
    hinted = true;
    if (into == kHintIntoHost) hinted_host_any_ = true;
    pending_hints_.push_back(PendingHint{peer, into});
}

namespace {
struct AmSend {
    alignas(8) unsigned char bytes[16];
};
} // namespace

void Engine::on_ack_sent(void *request, ucs_status_t, void *user_data)
{
    ucp_request_free(request);
    delete static_cast<AmSend *>(user_data);
}

// One eager active message of at most 16 header bytes.
void Engine::send_am(uint32_t peer, unsigned id, const void *header, size_t length)
{
    gw_status_t st;
    ucp_ep_h ep = endpoint(peer, st);
    if (!ep) return;
    auto *m = new AmSend;
    std::memcpy(m->bytes, header, length);
    ucp_request_param_t rp{};
    rp.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    rp.cb.send = &Engine::on_ack_sent;
    rp.user_data = m;
    rp.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t r = ucp_am_send_nbx(ep, id, m->bytes, length, nullptr, 0, &rp);
    if (!UCS_PTR_IS_PTR(r)) {
        if (UCS_PTR_IS_ERR(r))
            log(GW_LOG_ERROR, "active message %u to process %u failed: %s", id, peer,
                ucs_status_string(UCS_PTR_STATUS(r)));
        delete m;
    }
}

// Acknowledgements of device copies (and receive-into-GPU hints) are sent
// from progress(), outside UCX's callbacks, because they may need a new
// endpoint.
void Engine::flush_acks()
{
    // Nothing below queues acks, so the queue keeps its capacity.
    for (const PendingAck &a : pending_acks_) {
        const SyncAckHeader h{a.sync_id};
        send_am(a.peer, AM_SYNC_ACK, &h, sizeof(h));
    }
    pending_acks_.clear();
    for (const PendingHint &p : pending_hints_) {
        const KindHint h{kKindHintMagic, params_.my_peer, p.into, 0};
        send_am(p.peer, AM_KIND_HINT, &h, sizeof(h));
    }
    pending_hints_.clear();
}

} // namespace gpuwire::engine
