// Layout messages' staging (a noncontiguous receive through a contiguous
// buffer) and its end: beneath the send and receive paths that finish them
// and layout.cpp that starts them.
#include "engine/engine.hpp"

namespace gpuwire::engine {

// A data message of length bytes (at most op->cap) arrived into a layout:
// the head UCX held back goes to it now.
bool Engine::finish_layout_recv(RecvOp *op, size_t length)
{
    const auto *l = static_cast<const gw_layout_t *>(op->landing);
    const size_t head = std::min(length, kBlockBytes);
    return head == 0 || l->unpack(l->user, 0, op->block, head) == 0;
}

// A control message arrived into a layout: its payload lands whole in a
// staging buffer (op->buf), unpacked by complete(). False when out of memory.
bool Engine::stage_layout(RecvOp *op, size_t length)
{
    void *stage = gw_host_buffer_alloc(std::max<size_t>(1, std::min(length, op->cap)));
    if (!stage) return false;
    op->buf = stage;
    op->layout = 2;
    op->req->flags |= kReqLayoutStaged;
    return true;
}

gw_status_t Engine::unstage_layout(gw_request_t *req, gw_status_t status)
{
    auto *op = reinterpret_cast<RecvOp *>(req->priv);
    const auto *l = static_cast<const gw_layout_t *>(op->landing);
    if (status == GW_OK && req->length &&
        l->unpack(l->user, 0, op->buf, std::min(req->length, op->cap)) != 0)
        status = GW_ERR_TRANSPORT;
    gw_host_buffer_free(op->buf);
    op->buf = nullptr;
    req->flags &= ~kReqLayoutStaged;
    return status;
}

} // namespace gpuwire::engine
