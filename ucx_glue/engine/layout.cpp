// Messages of a non-contiguous host layout (gw_layout_t): UCX's generic
// datatype calls the owner's pack and unpack piece by piece, so the whole
// message is never staged in fresh memory.
//
// A receive must not let a control message (a CUDA IPC descriptor, a chunked
// transfer's header; at most kBlockBytes) reach the user's layout: the first
// kBlockBytes of every message are held back in the RecvOp's block and go to
// the layout only once the message proved to be data. A control message makes
// the receive land whole in a staging buffer, unpacked at completion.
#include <algorithm>
#include <cstring>
#include <new>

#include "engine/engine.hpp"

namespace gpuwire::engine {

namespace {

void *send_start(void *, const void *buffer, size_t) { return const_cast<void *>(buffer); }
void *recv_start(void *, void *buffer, size_t) { return buffer; }
size_t send_size(void *state) { return static_cast<const gw_layout_t *>(state)->length; }
size_t recv_size(void *state) { return static_cast<const RecvOp *>(state)->cap; }
void finish(void *) {}

size_t send_pack(void *state, size_t offset, void *dest, size_t max)
{
    const auto *l = static_cast<const gw_layout_t *>(state);
    return l->pack(l->user, offset, dest, max);
}

ucs_status_t recv_unpack(void *state, size_t offset, const void *src, size_t length)
{
    auto *op = static_cast<RecvOp *>(state);
    const auto *l = static_cast<const gw_layout_t *>(op->landing);
    const auto *s = static_cast<const unsigned char *>(src);
    if (offset < kBlockBytes) {
        const size_t n = std::min(length, kBlockBytes - offset);
        std::memcpy(op->block + offset, s, n);
        offset += n;
        s += n;
        length -= n;
    }
    if (length && l->unpack(l->user, offset, s, length) != 0) return UCS_ERR_IO_ERROR;
    return UCS_OK;
}

size_t unused_pack(void *, size_t, void *, size_t) { return 0; }
ucs_status_t unused_unpack(void *, size_t, const void *, size_t) { return UCS_ERR_UNSUPPORTED; }

const ucp_generic_dt_ops_t kSendOps = {send_start, recv_start, send_size, send_pack,
                                       unused_unpack, finish};
const ucp_generic_dt_ops_t kRecvOps = {send_start, recv_start, recv_size, unused_pack,
                                       recv_unpack, finish};

} // namespace

gw_status_t Engine::isend_layout(gw_request_t *req, uint32_t peer, uint32_t ctx, int32_t my_rank,
                                 int32_t tag, const gw_layout_t *layout, unsigned flags)
{
    if (peer >= peers_.size()) return GW_ERR_INVALID;
    const size_t len = layout->length;
    std::unique_lock<EngineLock> guard(lock_);
    // Paced messages go in chunks, and a receiver that takes host messages
    // into GPU memory through the shared slots: both need one range.
    // (And a message of a control message's size is looked at whole: staged.)
    if ((pacer_ && len >= params_.pace_min_bytes) || (dev_ && peers_[peer].into_device) ||
        control_length(len))
        return GW_ERR_UNSUPPORTED;
    gw_status_t st;
    ucp_ep_h ep = endpoint(peer, st);
    if (!ep) return st;
    req->length = len;
    auto *op = new (req->priv) SendOp{req, this, nullptr, 0, kWaitSend, 0, GW_OK, 0};
    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);
    rp.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    rp.datatype = layout_send_dt_;
    const uint64_t wire_tag = make_send_tag(ctx, my_rank, tag);
    ucs_status_ptr_t r = (flags & GW_SEND_SYNC)
                             ? ucp_tag_send_sync_nbx(ep, layout, 1, wire_tag, &rp)
                             : ucp_tag_send_nbx(ep, layout, 1, wire_tag, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "send of %zu bytes to process %u failed: %s", len, peer,
            ucs_status_string(UCS_PTR_STATUS(r)));
        return from_ucs(UCS_PTR_STATUS(r));
    }
    count_host_send(len, r != nullptr);
    if (r == nullptr) return sent_at_once(guard, req);
    return GW_OK;
}

gw_status_t Engine::irecv_layout(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag,
                                 const gw_layout_t *layout)
{
    {
        std::lock_guard<EngineLock> guard(lock_);
        // A probe took messages out of UCX: receive_pulled() needs one range.
        if (pulled_) return GW_ERR_UNSUPPORTED;
        RecvOp *op = start_recv(req, nullptr, layout->length);
        op->landing = const_cast<gw_layout_t *>(layout);
        op->layout = 1;
        uint64_t t, mask;
        make_recv_tag(ctx, source, tag, tag == GW_ANY_TAG, t, mask);
        ucp_request_param_t rp = recv_param(&Engine::on_recv_done, op);
        rp.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        rp.datatype = layout_recv_dt_;
        op->ctx = ctx;
        op->source = source;
        in_ucx_.push_back(op);
        ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, op, 1, t, mask, &rp);
        if (UCS_PTR_IS_ERR(r)) {
            log(GW_LOG_ERROR, "receive could not be posted: %s",
                ucs_status_string(UCS_PTR_STATUS(r)));
            in_ucx_.remove(op);
            complete(req, from_ucs(UCS_PTR_STATUS(r)));
        } else if (!op->done) {
            op->ucx_req = r;
            if (params_.err_mode_peer) [[unlikely]]
                watch_sender(op);
        }
    }
    run_completions();
    return GW_OK;
}

gw_status_t Engine::create_layout_dts(std::string &why)
{
    ucs_status_t s = ucp_dt_create_generic(&kSendOps, nullptr, &layout_send_dt_);
    if (s == UCS_OK) {
        s = ucp_dt_create_generic(&kRecvOps, nullptr, &layout_recv_dt_);
        if (s != UCS_OK) ucp_dt_destroy(layout_send_dt_);
    }
    if (s != UCS_OK) {
        why = std::string("UCX generic datatype could not be created: ") + ucs_status_string(s);
        return from_ucs(s);
    }
    layout_dts_ = true;
    return GW_OK;
}

} // namespace gpuwire::engine
