// A send's completion (UCX's callback; what the send kept beside the user's
// buffer released) and the pinning of reused host buffers: shared by the
// send and receive paths and the chunked transfers, beneath them all.
#include "engine/engine.hpp"

namespace gpuwire::engine {

// Pageable host memory a message uses again, pinned by the host registry
// (on its second use, from pml_gpuwire_host_register_min bytes; smaller
// messages never reach its lock).
bool Engine::pin_reused(const void *buf, size_t len, int device)
{
    return dev_ && len >= params_.host_register_min && dev_->pin_host(buf, len, device);
}

void Engine::on_send_done(void *request, ucs_status_t status, void *user_data)
{
    auto *op = static_cast<SendOp *>(user_data);
    ucp_request_free(request);
    op->engine->send_done(op, status);
}

void Engine::send_done(SendOp *op, ucs_status_t status)
{
    op->waiting &= ~kWaitSend;
    free_side(op);
    if (status != UCS_OK) {
        op->status = from_ucs(status);
        if (op->waiting & kWaitAck) {
            sync_waiting_.erase(op->sync_id);
            op->waiting &= ~kWaitAck;
        }
    }
    if (!op->waiting) complete(op->req, op->status);
}

// What a send kept until UCX was done with it: a descriptor, a chunked
// transfer's header or a staged copy (pinned, back to the cache; or heap).
void Engine::free_side(SendOp *op)
{
    if (!op->side) return;
    if (op->desc) {
        delete static_cast<DeviceDescriptor *>(op->side);
    } else if (op->pinned) {
        dev_->return_bounce(op->side);
    } else {
        gw_host_buffer_free(op->side);
    }
    op->side = nullptr;
    op->pinned = 0;
}

} // namespace gpuwire::engine
