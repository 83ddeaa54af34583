// The receive path: posting receives into UCX, landing zones, finishing
// receives (host data, device descriptors), and matched receives.
#include "engine/engine.hpp"

#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/ipc_blob.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace gpuwire::engine {

namespace {

template <class T>
T *op_of(gw_request_t *req)
{
    return reinterpret_cast<T *>(req->priv);
}

} // namespace

// ---------------------------------------------------------------------------
// Receiving
// ---------------------------------------------------------------------------

// Whether UCX may write a device receive from (ctx, source) into the GPU
// buffer itself: it moves CUDA memory and the sender is one process on
// another node. From there a control message is only a chunked transfer's
// header (never a CUDA IPC descriptor), announcing at least kBlockBytes
// (isend_general) or, escaped user bytes (start_escaped), 32 or 152 bytes:
// either way the transfer then overwrites the 32 bytes it took, so nothing
// of the user's buffer needs saving. Wildcard and same-node receives land in host
// memory, where a descriptor may arrive instead of the data.
bool Engine::lands_on_device(uint32_t ctx, int32_t source)
{
    if (!path_.ucx_has_cuda || source == GW_ANY_SOURCE || !params_.peer_of_rank) return false;
    uint32_t peer;
    return params_.peer_of_rank(params_.resolve_ctx, ctx, source, &peer) == 0 &&
           peer < peers_.size() && !peer_local(peer);
}

// Inline into irecv (as post): the receive's fast path is one frame.
[[gnu::always_inline]] inline bool Engine::prepare_landing(RecvOp *op)
{
    if (op->direct && op->cap >= kBlockBytes) {
        op->landing = op->buf;
        return true;
    }
    op->direct = 0;
    if (op->device < 0 && op->cap >= kBlockBytes) {
        // Straight into the user's buffer; keep what a descriptor would
        // overwrite, to put it back.
        std::memcpy(op->block, op->buf, sizeof(DeviceDescriptor));
        op->saved = 1;
        op->landing = op->buf;
        return true;
    }
    if (op->cap <= kBlockBytes) {
        op->landing = op->block;
        return true;
    }
    // A device buffer: UCX writes host memory here (a descriptor must not
    // land in the user's buffer), pinned when the cache lends a buffer, so
    // the copy up is one DMA.
    op->bounce = lend_bounce(op->cap, op->device);
    if (op->bounce) {
        op->pinned = 1;
    } else {
        op->bounce = gw_host_buffer_alloc(op->cap);
    }
    op->landing = op->bounce;
    return op->bounce != nullptr;
}

void Engine::free_bounce(RecvOp *op)
{
    if (op->pinned) {
        dev_->return_bounce(op->bounce);
    } else {
        gw_host_buffer_free(op->bounce);
    }
    op->bounce = nullptr;
    op->pinned = 0;
}

static size_t landing_bytes(const RecvOp *op)
{
    return op->landing == op->buf ? op->cap : (op->bounce ? op->cap : kBlockBytes);
}

[[gnu::always_inline]] inline void Engine::post(RecvOp *op, uint32_t ctx, int32_t source,
                                                int32_t tag)
{
    uint64_t t, mask;
    make_recv_tag(ctx, source, tag, tag == GW_ANY_TAG, t, mask);
    // Not on the stack: no canary in irecv's frame.
    ucp_request_param_t *rp = op->direct ? &device_recv_rp_ : &host_recv_rp_;
    rp->user_data = op;
    op->ctx = ctx;
    op->source = source;
    in_ucx_.push_back(op);
    ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, op->landing, landing_bytes(op), t, mask, rp);
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "receive could not be posted: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        in_ucx_.remove(op);
        release_landing(op);
        complete(op->req, from_ucs(UCS_PTR_STATUS(r)));
    } else if (!op->done) {
        op->ucx_req = r;
        if (params_.err_mode_peer) [[unlikely]]
            watch_sender(op);
    }
}

void Engine::on_recv_done(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                          void *user_data)
{
    auto *op = static_cast<RecvOp *>(user_data);
    Engine *e = op->engine;
    if (op->done) { // completed as cancelled at teardown already
        ucp_request_free(request);
        return;
    }
    op->done = 1;
    if (op->link.linked()) e->in_ucx_.remove(op);
    op->ucx_req = nullptr;
    const uint64_t sender_tag = info->sender_tag; // info lives in the request
    const size_t length = info->length;
    ucp_request_free(request);
    if (status == UCS_ERR_CANCELED) {
        e->release_landing(op);
        if (op->peer_gone) { // its sender failed (fail_peer): nothing arrived
            op->req->source = op->source;
            op->req->length = 0;
        }
        e->complete(op->req, op->peer_gone ? GW_ERR_UNREACHABLE : GW_ERR_CANCELED);
        return;
    }
    e->finish_recv(op, status, sender_tag, length);
}

// UCX delivered a message into op->landing. Inline into on_recv_done, its
// only caller; whatever needs a larger frame (errors, GPU buffers) is out
// of line.
[[gnu::always_inline]] inline void Engine::finish_recv(RecvOp *op, ucs_status_t status,
                                                       uint64_t sender_tag, size_t length)
{
    gw_request_t *req = op->req;
    req->source = rank_of(sender_tag);
    req->tag = tag_of(sender_tag);
    ++stats_.recvs;
    // Teardown, or maybe one of the engine's messages: out of line, so the
    // frame of this path stays that of a plain receive.
    if ((closing_ && op->device >= 0) || (control_length(length) && status == UCS_OK))
        [[unlikely]] {
        if (finish_unusual(op, status, sender_tag, length)) return;
    }
    req->length = length;
    if (status != UCS_OK || length > op->cap) [[unlikely]]
        return finish_failed(op, status, length);
    stats_.bytes_received += length;
    gw_status_t st = GW_OK;
    if (op->direct || op->device >= 0) [[unlikely]] {
        st = finish_on_device(op, sender_tag, length);
    } else if (op->layout) {
        if (!finish_layout_recv(op, length)) st = GW_ERR_TRANSPORT;
    } else if (op->landing != op->buf && length) {
        std::memcpy(op->buf, op->landing, length);
    }
    release_landing(op);
    complete(req, st);
}

// An error, or a message longer than the buffer.
void Engine::finish_failed(RecvOp *op, ucs_status_t status, size_t length)
{
    release_landing(op);
    if (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED) {
        log(GW_LOG_INFO, "message of %zu bytes truncated: receive buffer holds %zu", length,
            op->cap);
        complete(op->req, GW_ERR_TRUNCATE);
    } else {
        complete(op->req, from_ucs(status));
    }
}

// Data into GPU memory: written there by UCX (direct), or landed in host
// memory and copied up.
gw_status_t Engine::finish_on_device(RecvOp *op, uint64_t sender_tag, size_t length)
{
    ++stats_.device_recvs;
    if (op->direct) {
        ++stats_.ucx_device_recvs;
        return GW_OK;
    }
    uint32_t from;
    if ((length >= params_.shared_staging_min || hinted_host_any_) && params_.peer_of_rank &&
        params_.peer_of_rank(params_.resolve_ctx, ctx_of(sender_tag), rank_of(sender_tag),
                             &from) == 0 && from < peers_.size()) [[unlikely]] {
        // A peer we told that we take its device messages into host memory
        // may stage the small ones; this one landed in GPU memory: a hint
        // into GPU memory (owed again) sends it back to CUDA IPC.
        Peer &p = peers_[from];
        const bool back = p.hinted_host;
        if (back) p.hinted_host = p.hinted_device = false;
        if (back || length >= params_.shared_staging_min) hint_kind(from, kHintIntoDevice);
    }
    // From a pinned landing one DMA; from the heap through pinned chunks.
    cuda::Status s = op->pinned
                         ? dev_->copy_sync(op->buf, op->landing, length, op->device)
                         : dev_->copy_via_pinned(op->buf, op->landing, length, op->device, true);
    if (!s) {
        log(GW_LOG_ERROR, "host-to-device copy failed: %s", s.message().c_str());
        return GW_ERR_TRANSPORT;
    }
    return GW_OK;
}

// finish_recv's rare cases: the teardown (the worker's last progress: no
// device work starts now), and a message of a control message's size, one of
// the engine's (wire.hpp, control_kind) or user bytes. True when op is done
// with; false for user bytes (status may have turned into an error).
bool Engine::finish_unusual(RecvOp *op, ucs_status_t &status, uint64_t sender_tag, size_t length)
{
    gw_request_t *req = op->req;
    auto cancel_at_teardown = [&] {
        if (op->saved) std::memcpy(op->buf, op->block, sizeof(DeviceDescriptor));
        release_landing(op);
        req->length = 0;
        complete(req, GW_ERR_CANCELED);
        return true;
    };
    if (closing_ && op->device >= 0) return cancel_at_teardown();
    if (!control_length(length) || status != UCS_OK) return false;
    alignas(16) unsigned char head[kBlockBytes];
    const void *bytes = op->layout ? op->block : op->landing;
    if (op->direct) {
        // UCX wrote it into the GPU buffer: read it back to look at it.
        if (!dev_->copy_sync(head, op->buf, length, op->device)) {
            status = UCS_ERR_IO_ERROR;
            return false;
        }
        bytes = head;
    }
    if (control_kind(bytes, length) == Control::none) return false;
    if (closing_) return cancel_at_teardown();
    InboundMsg m;
    const bool ok = read_device_message(status, bytes, length, sender_tag, m);
    if (op->saved) std::memcpy(op->buf, op->block, sizeof(DeviceDescriptor));
    release_landing(op);
    if (!ok) {
        req->length = 0;
        complete(req, GW_ERR_TRANSPORT);
    } else if (op->layout && !stage_layout(op, m.length)) [[unlikely]] {
        log(GW_LOG_ERROR, "out of memory staging a %zu-byte device message for a "
                          "non-contiguous receive", m.length);
        if (m.kind == InboundMsg::DESC)
            pending_acks_.push_back(PendingAck{m.desc.src_peer, m.desc.ack_id});
        req->length = 0;
        complete(req, GW_ERR_NO_MEMORY);
    } else if (m.kind == InboundMsg::CHUNKED) {
        start_chunked_recv(op, m.chunked);
    } else {
        deliver_ipc(op, m.desc);
    }
    return true;
}

// The payload stays in the sender's GPU memory: map it (once per allocation)
// and copy it into the receive buffer; the acknowledgement tells the sender
// when its buffer is free again.
void Engine::deliver_ipc(RecvOp *op, const DeviceDescriptor &d)
{
    const cuda::IpcBlob &blob = d.blob;
    const uint32_t peer = d.src_peer;
    op->ack_peer = peer;
    op->ack_id = d.ack_id;
    op->req->length = blob.length;
    // Done now (copied, or failed): the sender hears it through the ack.
    auto finish = [&](gw_status_t st) {
        pending_acks_.push_back(PendingAck{peer, d.ack_id});
        complete(op->req, st);
    };
    if (blob.length > op->cap) return finish(GW_ERR_TRUNCATE);
    if (peer < peers_.size() && peers_[peer].failed) [[unlikely]]
        return finish(GW_ERR_UNREACHABLE); // its memory may be gone with it
    if (!dev_) {
        log(GW_LOG_ERROR, "a device message arrived but this process has no GPU: %s",
            device_why_.c_str());
        return finish(GW_ERR_UNSUPPORTED);
    }
    int device = op->device >= 0 ? op->device : dev_->device_of_uuid(blob.device_uuid);
    if (device < 0) device = 0;
    cuda::IpcMapping mapping;
    const void *src;
    if (peer == params_.my_peer) {
        src = reinterpret_cast<const void *>(blob.base + blob.offset); // our own memory
    } else {
        auto m = dev_->map(peer, blob, device);
        if (!m) {
            log(GW_LOG_ERROR, "CUDA IPC mapping of process %u's buffer failed: %s", peer,
                m.status().message().c_str());
            return finish(GW_ERR_TRANSPORT);
        }
        mapping = std::move(*m);
        src = mapping.ptr();
    }
    ++stats_.device_recvs;
    stats_.bytes_received += blob.length;
    // A pageable buffer used again is pinned for it (the host registry).
    if (op->device < 0 && !op->host_pinned && pin_reused(op->buf, blob.length, device))
        op->host_pinned = 1;
    // Pageable host memory takes the copy through pinned chunks; GPU memory
    // and pinned host memory take one DMA.
    const bool pageable = op->device < 0 && !op->host_pinned;
    // The shared slots (from shared_staging_min) and a pinned bounce buffer
    // at the sender (below) do this faster.
    if (pageable) [[unlikely]]
        hint_kind(peer, kHintIntoHost);
    if (op->device >= 0 && blob.length <= path_.ipc_kernel_max) [[likely]] {
        // Into GPU memory: the copy kernel, one submission for all such
        // copies of this call and their completion (flushed by the caller).
        dev_->queue_copy(op->buf, src, blob.length, device, std::move(mapping), op);
        return;
    }
    if (pageable || blob.length <= path_.ipc_sync_max) {
        // Into pageable host memory, or small: copy and wait now; a
        // synchronize is the cheapest wait for one copy.
        cuda::Status s = pageable
                             ? dev_->copy_via_pinned(op->buf, src, blob.length, device, false)
                             : dev_->copy_sync(op->buf, src, blob.length, device);
        if (!s) log(GW_LOG_ERROR, "device copy failed: %s", s.message().c_str());
        return finish(s ? GW_OK : GW_ERR_TRANSPORT);
    }
    cuda::Status s = dev_->start_copy(op->buf, src, blob.length, device, std::move(mapping), op);
    if (!s) {
        log(GW_LOG_ERROR, "device copy of %llu bytes failed to start: %s",
            (unsigned long long)blob.length, s.message().c_str());
        finish(GW_ERR_TRANSPORT);
    }
}

gw_status_t Engine::irecv(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag,
                          void *buf, size_t cap) noexcept
{
    RecvOp *op = start_recv(req, buf, cap);
    std::unique_lock<EngineLock> guard(lock_);
    // A buffer the host table knows (no driver call) stays as start_recv
    // left it: host memory, not pinned.
    if (dev_ && !dev_->known_host(buf, cap)) [[unlikely]] {
        classify_recv(op);
        op->direct = op->device >= 0 && lands_on_device(ctx, source);
        if (op->direct) order_after_user(op->device); // UCX writes it on its own streams
    }
    InboundMsg *m = pulled_ ? context(ctx).match_unexpected(source, tag) : nullptr;
    if (m) [[unlikely]] {
        --pulled_;
        receive_pulled(op, m);
    } else if (!prepare_landing(op)) {
        complete(req, GW_ERR_NO_MEMORY);
    } else {
        post(op, ctx, source, tag);
    }
    flush_copies();
    // Completions queued (not those of blocking receives, which run inline)?
    const bool any_done = done_head_ != done_.size();
    guard.unlock();
    if (any_done) [[unlikely]]
        run_completions();
    return GW_OK;
}

void Engine::receive_pulled(RecvOp *op, InboundMsg *m)
{
    if (m->kind == InboundMsg::BYTES) [[unlikely]] {
        receive_bytes(op, m);
        return;
    }
    if (m->kind != InboundMsg::UCX) {
        // Already read out of UCX when it was pulled.
        op->req->source = m->source;
        op->req->tag = m->tag;
        ++stats_.recvs;
        if (m->kind == InboundMsg::CHUNKED) {
            start_chunked_recv(op, m->chunked);
        } else {
            deliver_ipc(op, m->desc);
        }
        release(m);
        return;
    }
    if (!prepare_landing(op)) {
        op->req->source = m->source;
        op->req->tag = m->tag;
        op->req->length = m->length;
        // The message must still be taken out of UCX: into nowhere.
        release(m);
        complete(op->req, GW_ERR_NO_MEMORY);
        return;
    }
    ucp_tag_message_h h = m->handle;
    m->handle = nullptr;
    delete m;
    ucp_request_param_t rp = recv_param(&Engine::on_recv_done, op);
    if (op->direct) rp.memory_type = UCS_MEMORY_TYPE_CUDA;
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker_, op->landing, landing_bytes(op), h, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "receive of a probed message failed: %s",
            ucs_status_string(UCS_PTR_STATUS(r)));
        release_landing(op);
        complete(op->req, from_ucs(UCS_PTR_STATUS(r)));
    } else if (r != nullptr && !op->done) {
        op->ucx_req = r; // not cancellable: it is matched
    }
}

// User bytes a probe read out of UCX (they had a control message's size):
// into the receive's buffer.
void Engine::receive_bytes(RecvOp *op, InboundMsg *m)
{
    gw_request_t *req = op->req;
    req->source = m->source;
    req->tag = m->tag;
    req->length = m->length;
    ++stats_.recvs;
    gw_status_t st = GW_OK;
    if (m->length > op->cap) {
        log(GW_LOG_INFO, "message of %zu bytes truncated: receive buffer holds %zu", m->length,
            op->cap);
        st = GW_ERR_TRUNCATE;
    } else if (op->device >= 0) {
        cuda::Status s = dev_->copy_sync(op->buf, m->bytes, m->length, op->device);
        if (!s) {
            log(GW_LOG_ERROR, "host-to-device copy failed: %s", s.message().c_str());
            st = GW_ERR_TRANSPORT;
        }
    } else {
        std::memcpy(op->buf, m->bytes, m->length);
    }
    if (st == GW_OK) stats_.bytes_received += m->length;
    release(m);
    complete(req, st);
}

gw_status_t Engine::imrecv(gw_request_t *req, gw_message_t *msg, void *buf, size_t cap)
{
    auto *m = reinterpret_cast<InboundMsg *>(msg);
    RecvOp *op = start_recv(req, buf, cap);
    std::unique_lock<EngineLock> guard(lock_);
    if (dev_ && !dev_->known_host(buf, cap)) classify_recv(op); // as irecv
    receive_pulled(op, m);
    flush_copies();
    guard.unlock();
    run_completions();
    return GW_OK;
}

int Engine::cancel_recv(gw_request_t *req)
{
    auto *op = op_of<RecvOp>(req);
    std::unique_lock<EngineLock> guard(lock_);
    int cancelled = 0;
    if (op->link.linked() && op->ucx_req) {
        // An unmatched receive completes with UCS_ERR_CANCELED at once.
        ucp_request_cancel(worker_, op->ucx_req);
        cancelled = op->done;
    }
    guard.unlock();
    run_completions();
    return cancelled;
}

} // namespace gpuwire::engine
