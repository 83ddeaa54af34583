// Chunked transfers (wire.hpp, ChunkedHeader): a header matched like any
// message, then the payload in chunks on a private tag, at most kXferSlots
// in flight. A sender of device memory copies each chunk into a pinned slot
// and sends it from there, so the next chunk's device copy overlaps this
// one's wire time; a receiver into device memory lands each chunk in a pinned
// slot and copies it up while the next arrives. A paced sender admits each
// chunk through the port pacer first. Host memory at either end is sent from
// and received into directly. The go-ahead of a shared-staging transfer and
// the push into the receiver's GPU buffer it may offer: chunked_push.cpp.
#include "engine/engine.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace gpuwire::engine {
namespace {

// Tokens of device copies: a RecvOp (IPC) or a slot, told apart by bit 0.
void *slot_token(XferSlot *s) { return reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(s) | 1); }

} // namespace

XferSlot *Engine::slot_of_token(void *token)
{
    auto v = reinterpret_cast<uintptr_t>(token);
    return (v & 1) ? reinterpret_cast<XferSlot *>(v & ~uintptr_t(1)) : nullptr;
}

gw_status_t Engine::start_chunked_send(SendOp *op, ucp_ep_h ep, uint32_t peer, uint64_t wire_tag,
                                       const void *buf, size_t len, int device, bool paced,
                                       bool shared, bool sync, bool pushable)
{
    auto *x = new (std::nothrow) Xfer;
    auto *h = static_cast<ChunkedHeader *>(gw_host_buffer_alloc(sizeof(ChunkedHeader)));
    if (!x || !h) {
        delete x;
        gw_host_buffer_free(h);
        return GW_ERR_NO_MEMORY;
    }
    const uint64_t id = next_xfer_id_++;
    x->engine = this;
    x->sending = true;
    x->req = op->req;
    x->sop = op;
    x->rop = nullptr;
    x->ep = ep;
    x->buf = static_cast<char *>(const_cast<void *>(buf));
    x->len = len;
    x->chunk = params_.chunk_bytes;
    if (device >= 0) x->chunk = std::min(x->chunk, dev_->pinned_chunk_bytes());
    if (shared) {
        x->chunk = std::min(x->chunk, outbox_->slot_bytes());
        // Pieces below a slot pipeline the two copies (this side's, the
        // receiver's) of one message; the receiver follows the header.
        if (params_.shared_piece_bytes)
            x->chunk = std::min(x->chunk, std::max<size_t>(params_.shared_piece_bytes, 4096));
    }
    if (len) x->chunk = std::min(x->chunk, len); // an escaped message: one chunk of its size
    x->tag = chunk_tag(params_.my_peer, id);
    x->device = device;
    x->discard = false;
    x->paced = paced;
    x->shared = shared;
    x->peer = peer;
    x->pushable = shared && device < 0 && pushable;
    x->waits_go = shared || sync;
    for (XferSlot &s : x->slots) s.x = x;
    const uint32_t flags =
        (sync ? kChunkedSync : 0) |
        (!shared       ? 0
         : device >= 0 ? kChunkedShared
                       : kChunkedShared | kChunkedFromHost | (x->pushable ? kChunkedPushable : 0));
    *h = ChunkedHeader{kChunkedMagic, params_.my_peer, id, len, uint32_t(x->chunk), flags};
    if (x->waits_go) {
        // The receiver's GoMessage comes on the chunk tag, once it matched.
        ucp_request_param_t gp = recv_param(&Engine::on_go, x);
        ucs_status_ptr_t g = ucp_tag_recv_nbx(worker_, &x->go_msg, sizeof(x->go_msg), x->tag,
                                              kFullMask, &gp);
        if (UCS_PTR_IS_ERR(g)) {
            log(GW_LOG_ERROR, "chunked transfer could not start: %s",
                ucs_status_string(UCS_PTR_STATUS(g)));
            gw_host_buffer_free(h);
            delete x;
            return from_ucs(UCS_PTR_STATUS(g));
        }
        // (UCX may run on_go inside the call; not before the header is out.)
        if (!x->go && x->status == GW_OK) x->go_req = g;
    }

    op->side = h;
    op->waiting = kWaitSend | kWaitXfer;
    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);
    // Synchronous or not, an ordinary message: the go-ahead says when the
    // receiver matched (kChunkedSync).
    ucs_status_ptr_t r = ucp_tag_send_nbx(ep, h, sizeof(*h), wire_tag, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "chunked-transfer header could not be sent: %s",
            ucs_status_string(UCS_PTR_STATUS(r)));
        gw_host_buffer_free(h);
        op->side = nullptr;
        if (x->go_req) {
            // Cancelled: on_go runs inside the cancel and lets go of it.
            ucp_request_cancel(worker_, x->go_req);
            abandoned_.push_back(x);
        } else {
            delete x;
        }
        return from_ucs(UCS_PTR_STATUS(r));
    }
    if (r == nullptr) send_done(op, UCS_OK);
    ++stats_.chunked_sends;
    xfers_.push_back(x);
    advance(*x);
    return GW_OK;
}

void Engine::start_chunked_recv(RecvOp *op, const ChunkedHeader &h)
{
    gw_request_t *req = op->req;
    req->length = h.length;
    auto *x = new (std::nothrow) Xfer;
    if (!x) {
        log(GW_LOG_ERROR, "out of memory receiving a chunked transfer of %llu bytes",
            (unsigned long long)h.length);
        complete(req, GW_ERR_NO_MEMORY);
        return;
    }
    x->engine = this;
    x->sending = false;
    x->req = req;
    x->sop = nullptr;
    x->rop = op;
    x->ep = nullptr;
    x->buf = static_cast<char *>(op->buf);
    x->len = h.length;
    x->chunk = h.chunk_bytes;
    x->tag = chunk_tag(h.src_peer, h.xfer_id);
    x->device = op->device;
    x->paced = false;
    x->shared = (h.flags & kChunkedShared) != 0;
    x->peer = h.src_peer;
    x->discard = h.length > op->cap;
    if (x->discard) {
        log(GW_LOG_INFO, "message of %llu bytes truncated: receive buffer holds %zu",
            (unsigned long long)h.length, op->cap);
        x->status = GW_ERR_TRUNCATE;
    } else if (!x->shared && x->device >= 0 && (!dev_ || x->chunk > dev_->pinned_chunk_bytes())) {
        log(GW_LOG_ERROR, "chunks of %zu bytes exceed the pinned staging chunks here; "
                          "set the same pml_gpuwire_chunk_bytes on every process",
            x->chunk);
        x->discard = true;
        x->status = GW_ERR_TRANSPORT;
    }
    if (x->discard && !x->shared) {
        x->scratch = gw_host_buffer_alloc(x->chunk);
        if (!x->scratch) {
            delete x;
            complete(req, GW_ERR_NO_MEMORY);
            return;
        }
    }
    for (XferSlot &s : x->slots) s.x = x;
    if (x->peer < peers_.size() && peers_[x->peer].failed) [[unlikely]]
        stop_xfer(*x, GW_ERR_UNREACHABLE); // no chunk of it will come (fail_peer)
    ++stats_.chunked_recvs;
    if (!x->discard) stats_.bytes_received += h.length;
    if (x->device >= 0) ++stats_.device_recvs;
    if (x->shared) {
        // A host sender that chose the slots for a receive into host memory
        // hears so in the go-ahead; a later host message that lands in GPU
        // memory may then hint again.
        if ((h.flags & kChunkedFromHost) && x->device < 0) peers_[x->peer].hinted_device = false;
        // Likewise a device sender that chose them for a receive into GPU
        // memory (IPC would have done better).
        if (!(h.flags & kChunkedFromHost) && x->device >= 0) peers_[x->peer].hinted_host = false;
        // And one into pageable host memory it uses again, now pinned here:
        // CUDA IPC reaches it with one DMA from the next message on.
        if (!(h.flags & kChunkedFromHost) && x->device < 0 && !x->discard &&
            (op->host_pinned || pin_reused(x->buf, x->len, 0))) {
            x->into_pinned = true;
            peers_[x->peer].hinted_host = false;
        }
        if ((h.flags & kChunkedPushable) && x->device >= 0 && !x->discard) offer_push(*x);
        send_go(*x, h.xfer_id);
    } else if (h.flags & kChunkedSync) {
        send_go(*x, h.xfer_id); // a synchronous sender waits for it
    }
    xfers_.push_back(x);
    advance(*x);
}

// Starts chunks while slots (and the pacer) allow; true when the transfer is over.
bool Engine::advance(Xfer &x)
{
    if (x.waits_go && x.sending && x.go_req && peers_[x.peer].failed) [[unlikely]] {
        // The receiver is gone (pml_gpuwire_err_handling): no go-ahead will come.
        fail_unstarted(x, GW_ERR_UNREACHABLE);
        ucp_request_cancel(worker_, x.go_req); // on_go lets go of the request
    }
    for (XferSlot &s : x.slots) {
        if (x.next >= x.len) break;
        if (s.state != XferSlot::FREE) continue;
        const size_t n = std::min(x.chunk, x.len - x.next);
        if (x.paced && pacer_ && !pacer_->admit(n).admitted) {
            ++stats_.pacer_deferrals;
            break;
        }
        // Receiver-driven admission: a chunk is posted (and so moves) only
        // while the bytes posted over all transfers fit the window; one
        // chunk always may, or a chunk larger than the window never would.
        if (!x.sending && !x.shared && params_.recv_window_bytes && recv_posted_bytes_ &&
            recv_posted_bytes_ + n > params_.recv_window_bytes) {
            ++stats_.window_deferrals;
            break;
        }
        const bool staged = x.device >= 0 && !x.discard && !x.shared;
        // Slots and chunks only once the receiver has matched, so every slot
        // lent is one a receiver is working through.
        if (x.sending && x.waits_go && !x.go) break;
        if (x.shared && x.sending) {
            if (x.push_state == 1) start_push(x);
            if (x.push_state != 2) {
                const int k = outbox_->acquire();
                if (k < 0) break; // counted by the outbox (busy)
                s.out_slot = k;
                s.shared = outbox_->slot(k);
            }
        } else if (staged) {
            // A pinned slot, or host memory when every pinned chunk is on
            // loan: waiting for one could deadlock (a sender's slots held by
            // transfers its receiver has not reached, and the reverse).
            auto c = dev_->acquire_pinned(x.device);
            if (c) {
                s.pinned = std::move(*c);
            } else {
                s.heap = gw_host_buffer_alloc(n);
                if (!s.heap) break; // out of memory: try again later
                ++stats_.staging_heap_chunks;
            }
        }
        s.off = x.next;
        s.n = n;
        x.next += n;
        start_chunk(x, s);
    }
    if (x.done < x.len || x.go_req) return false;
    for (const XferSlot &s : x.slots)
        if (s.state != XferSlot::FREE) return false;
    return true;
}

void Engine::start_chunk(Xfer &x, XferSlot &s)
{
    if (x.sending && x.push_state == 2) {
        // Into the receiver's buffer; the chunk message follows the copy.
        s.state = XferSlot::COPYING;
        char *dst = static_cast<char *>(x.push_map.ptr()) + s.off;
        cuda::Status cs = dev_->start_copy(dst, x.buf + s.off, s.n, x.push_device, {},
                                           slot_token(&s));
        if (!cs) {
            log(GW_LOG_ERROR, "copy of a %zu-byte chunk into process %u's GPU memory failed: %s",
                s.n, x.peer, cs.message().c_str());
            slot_copied(s, false);
        }
        return;
    }
    if (x.sending && x.shared && x.device < 0) {
        std::memcpy(s.shared, x.buf + s.off, s.n); // host memory into the slot
    } else if (x.sending && x.device >= 0) {
        // Device to pinned first; chunk_on_wire() once the copy is done.
        s.state = XferSlot::COPYING;
        cuda::Status cs = dev_->start_copy(s.host(), x.buf + s.off, s.n, x.device, {},
                                           slot_token(&s));
        if (!cs) {
            log(GW_LOG_ERROR, "device-to-host copy of a %zu-byte chunk failed: %s", s.n,
                cs.message().c_str());
            chunk_done(s, GW_ERR_TRANSPORT);
        }
        return;
    }
    chunk_on_wire(x, s);
}

void Engine::chunk_on_wire(Xfer &x, XferSlot &s)
{
    s.state = XferSlot::WIRE;
    if (x.sending && x.push_state == 2) {
        // The chunk is in the receiver's buffer (bytes 0: its copy failed,
        // which fails the receive too).
        s.desc = SharedChunkDesc{kSharedChunkMagic, 0, 0, kPushedSlot, s.off,
                                 s.push_failed ? 0 : s.n};
        ucp_request_param_t rp = send_param(&Engine::on_chunk_sent, &s);
        ucs_status_ptr_t r = ucp_tag_send_nbx(x.ep, &s.desc, sizeof(s.desc), x.tag, &rp);
        if (r == nullptr || UCS_PTR_IS_ERR(r))
            chunk_done(s, r == nullptr ? (s.push_failed ? GW_ERR_TRANSPORT : GW_OK)
                                       : from_ucs(UCS_PTR_STATUS(r)));
        return;
    }
    if (x.sending && x.shared) {
        // The chunk is in the slot: the slot goes to the receiver, the
        // message only says where it is.
        const cuda::SharedSegmentId &id = outbox_->id();
        s.desc = SharedChunkDesc{kSharedChunkMagic, id.pid, id.fd, uint32_t(s.out_slot),
                                 s.off, s.n};
        outbox_->lend(s.out_slot);
        s.out_slot = -1;
        ucp_request_param_t rp = send_param(&Engine::on_chunk_sent, &s);
        ucs_status_ptr_t r = ucp_tag_send_nbx(x.ep, &s.desc, sizeof(s.desc), x.tag, &rp);
        if (r == nullptr || UCS_PTR_IS_ERR(r))
            chunk_done(s, r == nullptr ? GW_OK : from_ucs(UCS_PTR_STATUS(r)));
        return;
    }
    if (x.sending) {
        const void *src = x.device >= 0 ? s.host() : x.buf + s.off;
        ucp_request_param_t rp = send_param(&Engine::on_chunk_sent, &s);
        ucs_status_ptr_t r = ucp_tag_send_nbx(x.ep, src, s.n, x.tag, &rp);
        if (r == nullptr || UCS_PTR_IS_ERR(r))
            chunk_done(s, r == nullptr ? GW_OK : from_ucs(UCS_PTR_STATUS(r)));
        return;
    }
    void *dst = x.shared ? static_cast<void *>(&s.desc)
                : x.discard ? x.scratch : x.device >= 0 ? s.host() : x.buf + s.off;
    const size_t cap = x.shared ? sizeof(s.desc) : s.n;
    if (!x.shared) {
        recv_posted_bytes_ += s.n;
        s.counted = true;
    }
    ucp_request_param_t rp = recv_param(&Engine::on_chunk_received, &s);
    s.ucx_req = nullptr;
    ucs_status_ptr_t r =
        ucp_tag_recv_nbx(worker_, dst, cap, x.tag, kFullMask, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        chunk_done(s, from_ucs(UCS_PTR_STATUS(r)));
    } else if (s.state == XferSlot::WIRE) {
        s.ucx_req = r; // not completed inside the call
    }
}

void Engine::on_chunk_sent(void *request, ucs_status_t status, void *user_data)
{
    auto *s = static_cast<XferSlot *>(user_data);
    ucp_request_free(request);
    gw_status_t st = from_ucs(status);
    if (st == GW_OK && s->push_failed) st = GW_ERR_TRANSPORT;
    s->x->engine->chunk_done(*s, st);
}

void Engine::on_chunk_received(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                               void *user_data)
{
    auto *s = static_cast<XferSlot *>(user_data);
    const size_t length = info->length; // info lives in the request
    ucp_request_free(request);
    s->ucx_req = nullptr;
    Xfer &x = *s->x;
    Engine *e = x.engine;
    gw_status_t st = from_ucs(status);
    if (x.shared) {
        e->shared_chunk_received(x, *s, length, st);
        return;
    }
    if (st == GW_OK && length != s->n) st = GW_ERR_TRANSPORT; // not what the header said
    if (st == GW_OK && x.device >= 0 && !x.discard) {
        if (e->chunk_to_device(x, *s, s->host())) return; // chunk_done() when copied
        st = GW_ERR_TRANSPORT;
    }
    e->chunk_done(*s, st);
}

// Starts the copy of a received chunk from src into the GPU buffer;
// chunk_done() follows when it is done. False (logged) when it cannot start.
bool Engine::chunk_to_device(Xfer &x, XferSlot &s, const void *src)
{
    s.state = XferSlot::COPYING;
    cuda::Status cs = dev_->start_copy(x.buf + s.off, src, s.n, x.device, {}, slot_token(&s));
    if (!cs)
        log(GW_LOG_ERROR, "host-to-device copy of a %zu-byte chunk failed: %s", s.n,
            cs.message().c_str());
    return bool(cs);
}

// A chunk message of a shared-staging transfer arrived: copy the chunk out
// of the sender's slot (a DMA into GPU memory, else memcpy), then give the
// slot back.
void Engine::shared_chunk_received(Xfer &x, XferSlot &s, size_t length, gw_status_t st)
{
    const void *src = nullptr;
    if (st == GW_OK) {
        if (!decode_shared_chunk(&s.desc, length, &s.desc) || s.desc.offset != s.off ||
            s.desc.bytes != s.n || (s.desc.slot == kPushedSlot && !x.push_offered)) {
            log(GW_LOG_ERROR, "malformed shared-staging chunk from process %u", x.peer);
            st = GW_ERR_TRANSPORT;
        } else if (s.desc.slot == kPushedSlot) {
            // The sender copied it into place already.
            return chunk_done(s, GW_OK);
        } else {
            // Pinned in the context of the first GPU that receives this way
            // (portable: usable by every GPU), so no other GPU gets a context.
            if (!inbox_)
                inbox_ = std::make_unique<cuda::SharedInbox>(
                    dev_ ? &cuda::Driver::instance() : nullptr, x.device >= 0 ? x.device : 0);
            cuda::Result<const void *> p =
                inbox_->slot({s.desc.pid, s.desc.fd}, s.desc.slot, s.n);
            if (p) {
                src = *p;
                s.shared = const_cast<void *>(src); // released by chunk_done()
            } else {
                log(GW_LOG_ERROR,
                    "staging memory shared by process %u cannot be read here (%s); "
                    "set pml_gpuwire_shared_staging 0 on every process",
                    x.peer, p.status().message().c_str());
                st = GW_ERR_TRANSPORT;
            }
        }
    }
    if (st == GW_OK && !x.discard) {
        if (x.device >= 0) {
            if (chunk_to_device(x, s, src)) return; // chunk_done() when copied
            st = GW_ERR_TRANSPORT;
        } else {
            std::memcpy(x.buf + s.off, src, s.n);
        }
    }
    chunk_done(s, st);
}

void Engine::chunk_done(XferSlot &s, gw_status_t st)
{
    Xfer &x = *s.x;
    if (s.shared) {
        if (!x.sending) {
            inbox_->release({s.desc.pid, s.desc.fd}, s.desc.slot);
        } else if (s.out_slot >= 0) {
            outbox_->abandon(s.out_slot); // never lent: its copy failed
        }
        s.shared = nullptr;
        s.out_slot = -1;
    }
    if (st != GW_OK && x.status == GW_OK) {
        x.status = st;
        log(GW_LOG_ERROR, "chunk at offset %zu of a %zu-byte transfer failed: %s", s.off, x.len,
            gw_status_string(st));
    }
    s.pinned.reset();
    gw_host_buffer_free(s.heap);
    s.heap = nullptr;
    s.push_failed = false;
    s.state = XferSlot::FREE;
    if (s.counted) {
        recv_posted_bytes_ -= s.n;
        s.counted = false;
    }
    x.done += s.n;
    s.n = 0;
}

// A device copy of a slot finished (from progress()).
void Engine::slot_copied(XferSlot &s, bool ok)
{
    Xfer &x = *s.x;
    if (x.sending && x.push_state == 2) {
        // Pushed: the receiver hears of the chunk either way.
        s.push_failed = !ok;
        chunk_on_wire(x, s);
        return;
    }
    if (!ok) {
        chunk_done(s, GW_ERR_TRANSPORT);
    } else if (x.sending) {
        chunk_on_wire(x, s);
    } else {
        chunk_done(s, GW_OK);
    }
}

void Engine::advance_xfers()
{
    // Transfers that share the receive window take turns being first.
    if (xfers_.size() > 1) std::rotate(xfers_.begin(), xfers_.begin() + 1, xfers_.end());
    for (size_t i = 0; i < xfers_.size();) {
        Xfer *x = xfers_[i];
        if (!advance(*x)) {
            ++i;
            continue;
        }
        xfers_[i] = xfers_.back();
        xfers_.pop_back();
        finish_xfer(x);
    }
}

void Engine::finish_xfer(Xfer *x)
{
    if (x->sending) {
        SendOp *op = x->sop;
        if (x->status != GW_OK && op->status == GW_OK) op->status = x->status;
        op->waiting &= ~kWaitXfer;
        if (!op->waiting) complete(op->req, op->status);
    } else {
        complete(x->req, x->status);
    }
    gw_host_buffer_free(x->scratch);
    delete x;
}

// Teardown: chunk receives still posted are cancelled, pinned slots go back
// before the pool does, and every transfer completes as cancelled. The
// records stay until the worker is gone (a chunk send may still call back);
// the destructor frees them last.
void Engine::abandon_xfers()
{
    for (Xfer *x : xfers_) {
        for (XferSlot &s : x->slots) {
            if (!x->sending && s.state == XferSlot::WIRE && s.ucx_req)
                ucp_request_cancel(worker_, s.ucx_req);
        }
        if (x->sending && x->go_req) ucp_request_cancel(worker_, x->go_req);
    }
    for (Xfer *x : xfers_) {
        for (XferSlot &s : x->slots) {
            s.pinned.reset();
            gw_host_buffer_free(s.heap); // (UCX may still touch it: freed at teardown only)
            s.heap = nullptr;
        }
        if (x->sending) {
            x->sop->status = GW_ERR_CANCELED;
            x->sop->waiting &= ~kWaitXfer;
            if (!x->sop->waiting) complete(x->req, GW_ERR_CANCELED);
        } else {
            complete(x->req, GW_ERR_CANCELED);
        }
    }
    abandoned_.insert(abandoned_.end(), xfers_.begin(), xfers_.end());
    xfers_.clear();
}

void Engine::free_abandoned()
{
    for (Xfer *x : abandoned_) {
        gw_host_buffer_free(x->scratch);
        delete x;
    }
    abandoned_.clear();
}

} // namespace gpuwire::engine
