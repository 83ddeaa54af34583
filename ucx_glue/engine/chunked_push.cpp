// The go-ahead of a shared-staging transfer (wire.hpp, GoMessage) and the
// push it may offer: a receiver into GPU memory of a pushable transfer
// (kChunkedPushable) describes its buffer in the go-ahead (GoPush, kGoPush)
// when CUDA IPC exports it, and the sender then copies each chunk straight
// into that buffer, sending only a chunk message that names no slot
// (kPushedSlot). Those copies and messages start in chunked.cpp
// (start_chunk, chunk_on_wire), as do the slots used without the description.
#include "engine/engine.hpp"

#include <utility>

namespace gpuwire::engine {
// Receiver of a shared-staging or synchronous transfer, once a receive
// matched it: tells the sender it may fill slots or send chunks.
void Engine::send_go(Xfer &x, uint64_t xfer_id)
{
    gw_status_t st;
    ucp_ep_h ep = endpoint(x.peer, st);
    ucs_status_ptr_t r = nullptr;
    if (ep) {
        x.go_msg.go.xfer_id = xfer_id;
        x.go_msg.go.flags = (x.device >= 0 ? kGoIntoDevice : 0) | (x.push_offered ? kGoPush : 0) |
                            (x.into_pinned ? kGoIntoPinned : 0);
        x.go_msg.go.reserved = 0;
        ucp_request_param_t rp = send_param(&Engine::on_go_sent, &x);
        r = ucp_tag_send_nbx(ep, &x.go_msg, x.push_offered ? sizeof(GoPush) : sizeof(GoMessage),
                             x.tag, &rp);
        if (UCS_PTR_IS_ERR(r)) st = from_ucs(UCS_PTR_STATUS(r));
    }
    if (!ep || UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "the go-ahead of a %zu-byte transfer could not be sent to process %u: %s",
            x.len, x.peer, gw_status_string(st));
        fail_unstarted(x, st);
        return;
    }
    x.go_req = r; // nullptr: done already
}

// Receiver of a pushable transfer into GPU memory: describes the buffer in
// the go-ahead when CUDA IPC exports it; else the chunks come through the
// slots as usual.
void Engine::offer_push(Xfer &x)
{
    cuda::MemoryInfo mi;
    if (!dev_->classify(x.buf, x.len, mi) || !mi.legacy_ipc_exportable()) return;
    cuda::Status s = dev_->export_range(mi, x.buf, x.len, &x.go_msg.blob);
    if (!s) {
        log(GW_LOG_DEBUG, "a %zu-byte receive goes through the slots: %s", x.len,
            s.message().c_str());
        return;
    }
    x.push_offered = true;
}

// Sender of a pushable transfer whose go-ahead described the receive buffer:
// maps it (through the process's mapping cache), or falls back to the slots.
void Engine::start_push(Xfer &x)
{
    const cuda::IpcBlob &blob = x.go_msg.blob;
    const int device = dev_ ? dev_->device_of_uuid(blob.device_uuid) : -1;
    if (device < 0) {
        x.push_state = -1; // its GPU is not visible here
        return;
    }
    cuda::Result<cuda::IpcMapping> m = dev_->map(x.peer, blob, device);
    if (!m || m->length() < x.len) {
        log(GW_LOG_DEBUG, "process %u's receive buffer cannot be mapped (%s): through the slots",
            x.peer, m ? "shorter than the message" : m.status().message().c_str());
        x.push_state = -1;
        return;
    }
    x.push_map = std::move(*m);
    x.push_device = device;
    x.push_state = 2;
    ++stats_.shared_push_sends;
}

void Engine::on_go(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                   void *user_data)
{
    auto *x = static_cast<Xfer *>(user_data);
    const size_t length = info->length;
    ucp_request_free(request);
    x->go_req = nullptr;
    const bool push = length == sizeof(GoPush) && (x->go_msg.go.flags & kGoPush);
    if (status == UCS_OK && (length == sizeof(GoMessage) || push)) {
        x->go = true;
        // Mapped from advance(), outside UCX's callback; a description this
        // side did not ask for, or a malformed one, is not used.
        if (push) x->push_state = x->pushable && cuda::validate_ipc_blob(x->go_msg.blob) ? 1 : -1;
        if (!x->shared) return; // a synchronous transfer's: nothing more to learn
        // A host message whose receiver takes it into host memory: the next
        // ones go the usual way again.
        if (x->device < 0 && !(x->go_msg.go.flags & kGoIntoDevice))
            x->engine->peers_[x->peer].into_device = false;
        // A device message whose receiver takes it into GPU memory: CUDA IPC
        // again for the next ones.
        if (x->device >= 0 && (x->go_msg.go.flags & (kGoIntoDevice | kGoIntoPinned)))
            x->engine->peers_[x->peer].into_host = false;
        return;
    }
    gw_status_t st = status == UCS_OK ? GW_ERR_TRANSPORT : from_ucs(status);
    if (st != GW_ERR_CANCELED)
        x->engine->log(GW_LOG_ERROR, "chunked transfer of %zu bytes: no go-ahead (%s)",
                       x->len, gw_status_string(st));
    x->engine->fail_unstarted(*x, st);
}

void Engine::on_go_sent(void *request, ucs_status_t status, void *user_data)
{
    auto *x = static_cast<Xfer *>(user_data);
    ucp_request_free(request);
    x->go_req = nullptr;
    if (status != UCS_OK && x->status == GW_OK) x->status = from_ucs(status);
}

// A transfer none of whose chunks has started ends with st.
void Engine::fail_unstarted(Xfer &x, gw_status_t st)
{
    if (x.status == GW_OK) x.status = st;
    x.next = x.done = x.len;
}

} // namespace gpuwire::engine
