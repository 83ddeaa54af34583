#include "engine/engine.hpp"

#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/ipc_blob.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace gpuwire::engine {
namespace {

constexpr uint8_t kWaitSend = 0x1;
constexpr uint8_t kWaitAck = 0x2;

gw_status_t from_ucs(ucs_status_t s)
{
    switch (s) {
    case UCS_OK:
        return GW_OK;
    case UCS_ERR_NO_MEMORY:
        return GW_ERR_NO_MEMORY;
    case UCS_ERR_CANCELED:
        return GW_ERR_CANCELED;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return GW_ERR_TRUNCATE;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
        return GW_ERR_UNREACHABLE;
    default:
        return GW_ERR_TRANSPORT;
    }
}

template <class T>
T *op_of(gw_request_t *req)
{
    return reinterpret_cast<T *>(req->priv);
}

} // namespace

Engine::Engine(const gw_engine_params_t &params)
    : params_(params), lock_(params.thread_multiple != 0), peers_(params.npeers),
      local_(params.npeers, -1)
{
    done_.reserve(64);
}

void Engine::log(int level, const char *fmt, ...)
{
    if (!params_.log || level > params_.verbose) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    params_.log(params_.log_ctx, level, line);
}

gw_status_t Engine::create(const gw_engine_params_t &params, std::unique_ptr<Engine> &out,
                           std::string &why)
{
    if (params.npeers == 0 || params.my_peer >= params.npeers || !params.resolve_peer) {
        why = "invalid engine parameters (no peers, or no address resolver)";
        return GW_ERR_INVALID;
    }
    std::unique_ptr<Engine> e(new (std::nothrow) Engine(params));
    if (!e) {
        why = "out of memory creating the engine";
        return GW_ERR_NO_MEMORY;
    }
    gw_status_t st = e->init(why);
    if (st != GW_OK) return st;
    out = std::move(e);
    return GW_OK;
}

gw_status_t Engine::init(std::string &why)
{
    ucp_config_t *config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) {
        why = std::string("UCX configuration could not be read: ") + ucs_status_string(s);
        return from_ucs(s);
    }
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                   UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_AM;
    p.estimated_num_eps = params_.npeers;
    p.mt_workers_shared = 0;
    s = ucp_init(&p, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) {
        why = std::string("UCX could not start (ucp_init: ") + ucs_status_string(s) +
              "); check UCX_TLS / UCX_NET_DEVICES";
        context_ = nullptr;
        return from_ucs(s);
    }

    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = params_.thread_multiple ? UCS_THREAD_MODE_SERIALIZED : UCS_THREAD_MODE_SINGLE;
    s = ucp_worker_create(context_, &wp, &worker_);
    if (s != UCS_OK) {
        why = std::string("UCX worker could not be created: ") + ucs_status_string(s);
        worker_ = nullptr;
        return from_ucs(s);
    }
    s = ucp_worker_get_address(worker_, &address_, &address_length_);
    if (s != UCS_OK) {
        why = std::string("UCX worker address unavailable: ") + ucs_status_string(s);
        address_ = nullptr;
        return from_ucs(s);
    }

    struct {
        unsigned id;
        ucp_am_recv_callback_t cb;
    } handlers[] = {{AM_MSG, &Engine::on_msg}, {AM_SYNC_ACK, &Engine::on_sync_ack}};
    for (auto &h : handlers) {
        ucp_am_handler_param_t hp{};
        hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                        UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
        hp.id = h.id;
        hp.cb = h.cb;
        hp.arg = this;
        hp.flags = UCP_AM_FLAG_WHOLE_MSG;
        s = ucp_worker_set_am_recv_handler(worker_, &hp);
        if (s != UCS_OK) {
            why = std::string("UCX active-message handler refused: ") + ucs_status_string(s);
            return from_ucs(s);
        }
    }
    ucp_context_attr_t ca{};
    ca.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(context_, &ca) == UCS_OK) {
        path_.ucx_has_cuda = (ca.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    }
    path_.ipc_enabled = params_.ipc_enabled != 0;
    path_.ipc_threshold = params_.ipc_threshold;
    path_.ipc_sync_max = params_.ipc_sync_max;
    if (params_.device_support) {
        DeviceConfig dc;
        dc.ipc_cache_entries = params_.ipc_cache_entries;
        dc.ipc_cache_bytes = params_.ipc_cache_bytes;
        dev_ = DevicePath::create(dc, device_why_);
    } else {
        device_why_ = "device support switched off";
    }
    log(GW_LOG_INFO, "device buffers: %s%s; UCX %s CUDA memory; same-node device path: %s",
        dev_ ? "yes" : "no, ", dev_ ? "" : device_why_.c_str(),
        path_.ucx_has_cuda ? "moves" : "cannot move",
        path_.ipc_enabled ? "CUDA IPC" : "staged through host memory");
    log(GW_LOG_INFO, "engine up: peer %u of %u, worker address %zu bytes, %s threads",
        params_.my_peer, params_.npeers, address_length_,
        params_.thread_multiple ? "multiple" : "single");
    return GW_OK;
}

void Engine::disconnect()
{
    lock_.lock();
    // Flush-close every endpoint, bounded in time: a peer that is gone must
    // not hang MPI_Finalize.
    std::vector<void *> closing;
    for (Peer &p : peers_) {
        if (!p.ep) continue;
        ucp_request_param_t rp{};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags = p.failed ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        void *r = ucp_ep_close_nbx(p.ep, &rp);
        if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
        p.ep = nullptr;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (void *r : closing) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS &&
               std::chrono::steady_clock::now() < deadline) {
            ucp_worker_progress(worker_);
        }
        if (ucp_request_check_status(r) == UCS_INPROGRESS) {
            // A cancelled close need not finish either: progress a little
            // more, then let UCX release the request whenever it completes.
            log(GW_LOG_WARN, "an endpoint did not close within 10 s; giving up on it");
            ucp_request_cancel(worker_, r);
            auto cancel_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
            while (ucp_request_check_status(r) == UCS_INPROGRESS &&
                   std::chrono::steady_clock::now() < cancel_deadline) {
                ucp_worker_progress(worker_);
            }
        }
        ucp_request_free(r);
    }
    lock_.unlock();
    run_completions();
}

Engine::~Engine()
{
    dev_.reset(); // waits for device copies in flight
    if (worker_) {
        disconnect();
        for (Peer &p : peers_) {
            for (auto &kv : p.early) release(kv.second);
            p.early.clear();
        }
        for (auto &kv : contexts_) {
            while (InboundMsg *m = kv.second->unexpected().pop_front()) release(m);
            while (RecvOp *op = kv.second->posted().pop_front()) complete(op->req, GW_ERR_CANCELED);
        }
        if (address_) ucp_worker_release_address(worker_, address_);
        ucp_worker_destroy(worker_);
    }
    if (context_) ucp_cleanup(context_);
    run_completions();
}

ucp_ep_h Engine::connect(uint32_t peer, gw_status_t &status)
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
    if (params_.err_mode_peer) {
        ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.err_handler.cb = &Engine::on_ep_error;
        ep.err_handler.arg = this;
    }
    ucs_status_t s = ucp_ep_create(worker_, &ep, &p.ep);
    if (s != UCS_OK) {
        log(GW_LOG_ERROR, "UCX cannot reach process %u: %s", peer, ucs_status_string(s));
        p.ep = nullptr;
        status = GW_ERR_UNREACHABLE;
        return nullptr;
    }
    ++stats_.endpoints;
    log(GW_LOG_DEBUG, "endpoint to process %u created", peer);
    status = GW_OK;
    return p.ep;
}

void Engine::on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    auto *e = static_cast<Engine *>(arg);
    for (uint32_t i = 0; i < e->peers_.size(); ++i) {
        if (e->peers_[i].ep == ep) {
            e->peers_[i].failed = true;
            e->log(GW_LOG_ERROR, "connection to process %u failed: %s", i,
                   ucs_status_string(status));
        }
    }
}

Context &Engine::context(uint32_t id)
{
    if (last_context_ && last_context_->id() == id) return *last_context_;
    auto it = contexts_.find(id);
    if (it == contexts_.end()) {
        it = contexts_.emplace(id, std::make_unique<Context>(id)).first;
    }
    last_context_ = it->second.get();
    return *last_context_;
}

void Engine::complete(gw_request_t *req, gw_status_t status)
{
    req->status = status;
    done_.push_back(req);
}

void Engine::run_completions()
{
    for (;;) {
        lock_.lock();
        if (done_head_ == done_.size()) {
            done_.clear();
            done_head_ = 0;
            lock_.unlock();
            return;
        }
        gw_request_t *req = done_[done_head_++];
        lock_.unlock();
        req->complete_cb(req);
    }
}

int Engine::progress()
{
    lock_.lock();
    int n = static_cast<int>(ucp_worker_progress(worker_));
    if (dev_ && dev_->busy()) {
        n += dev_->poll([this](void *token, const cuda::Status &s) {
            auto *op = static_cast<RecvOp *>(token);
            if (!s) log(GW_LOG_ERROR, "device copy failed: %s", s.message().c_str());
            pending_acks_.push_back(PendingAck{op->ack_peer, op->ack_id});
            complete(op->req, s ? GW_OK : GW_ERR_TRANSPORT);
        });
    }
    if (!pending_acks_.empty()) flush_acks();
    bool any_done = done_head_ != done_.size();
    lock_.unlock();
    if (any_done) run_completions();
    return n;
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

int Engine::device_of(const void *buf, size_t len)
{
    cuda::MemoryInfo mi;
    if (!dev_ || len == 0 || !dev_->classify(buf, len, mi) || !mi.on_gpu()) return -1;
    return mi.device >= 0 ? mi.device : 0;
}

gw_status_t Engine::isend(gw_request_t *req, uint32_t peer, uint32_t ctx, int32_t my_rank,
                          int32_t tag, const void *buf, size_t len, unsigned flags)
{
    if (peer >= peers_.size()) return GW_ERR_INVALID;
    lock_.lock();
    gw_status_t st;
    ucp_ep_h ep = endpoint(peer, st);
    if (!ep) {
        lock_.unlock();
        return st;
    }
    auto *op = new (req->priv) SendOp;
    op->req = req;
    op->engine = this;
    op->side = nullptr;
    op->status = GW_OK;
    op->waiting = kWaitSend;
    op->hdr = MsgHeader{ctx, my_rank, tag, params_.my_peer, 0, 0, 0};
    req->length = len;

    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    rp.cb.send = &Engine::on_send_done;
    rp.user_data = op;
    rp.memory_type = UCS_MEMORY_TYPE_HOST;
    if (params_.rndv_threshold) {
        rp.flags = len >= params_.rndv_threshold ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
    }

    // The one path decision of this message.
    cuda::MemoryInfo mi;
    Protocol proto = choose(peer, buf, len, mi);
    const void *payload = buf;
    size_t payload_len = len;
    if (proto == Protocol::ipc && params_.device_sync) {
        // The receiver reads this memory from another process: no stream
        // orders its copy after work this process queued on the default
        // stream (a cudaMemcpy whose DMA is still running, say).
        cuda::Status ws = cuda::wait_legacy_stream(mi.device >= 0 ? mi.device : 0);
        if (!ws) log(GW_LOG_WARN, "waiting for the default stream failed: %s", ws.message().c_str());
    }
    if (proto == Protocol::ipc) {
        auto *blob = new (std::nothrow) cuda::IpcBlob;
        cuda::Status es = blob ? dev_->export_range(mi, buf, len, blob)
                               : cuda::Status::error(cuda::Errc::busy, "out of memory");
        if (es) {
            op->side = blob;
            payload = blob;
            payload_len = sizeof(*blob);
            op->hdr.flags |= kFlagIpc;
            op->waiting |= kWaitAck; // the receiver says when its copy is done
            rp.flags = UCP_AM_SEND_FLAG_EAGER;
            ++stats_.ipc_sends;
        } else {
            delete blob;
            log(GW_LOG_INFO, "CUDA IPC export refused (%s): message staged",
                es.message().c_str());
            proto = Protocol::staged;
        }
    }
    if (proto == Protocol::staged) {
        void *bounce = std::malloc(len);
        cuda::Status cs =
            bounce ? dev_->copy_via_pinned(bounce, buf, len, mi.device >= 0 ? mi.device : 0, false)
                   : cuda::Status::error(cuda::Errc::busy, "out of memory");
        if (!cs) {
            std::free(bounce);
            log(GW_LOG_ERROR, "device-to-host staging of %zu bytes failed: %s", len,
                cs.message().c_str());
            lock_.unlock();
            return bounce ? GW_ERR_TRANSPORT : GW_ERR_NO_MEMORY;
        }
        op->side = bounce;
        payload = bounce;
        ++stats_.staged_sends;
    } else if (proto == Protocol::ucx_device) {
        rp.memory_type = UCS_MEMORY_TYPE_CUDA;
        ++stats_.ucx_device_sends;
    }

    op->hdr.seq = peers_[peer].send_seq++;
    if ((flags & GW_SEND_SYNC) || (op->hdr.flags & kFlagIpc)) {
        op->hdr.flags |= (flags & GW_SEND_SYNC) ? kFlagSync : 0;
        op->hdr.sync_id = next_sync_id_++;
        op->waiting |= kWaitAck;
        sync_waiting_.emplace(op->hdr.sync_id, op);
    }
    ucs_status_ptr_t r =
        ucp_am_send_nbx(ep, AM_MSG, &op->hdr, sizeof(op->hdr), payload, payload_len, &rp);
    ++stats_.sends;
    stats_.bytes_sent += len;
    if (UCS_PTR_IS_ERR(r)) {
        if (op->waiting & kWaitAck) sync_waiting_.erase(op->hdr.sync_id);
        log(GW_LOG_ERROR, "send of %zu bytes to process %u failed: %s", len, peer,
            ucs_status_string(UCS_PTR_STATUS(r)));
        if (op->hdr.flags & kFlagIpc) {
            delete static_cast<cuda::IpcBlob *>(op->side);
        } else {
            std::free(op->side);
        }
        lock_.unlock();
        return from_ucs(UCS_PTR_STATUS(r));
    }
    if (r == nullptr && op->waiting == kWaitSend && !op->side) {
        // Done at once (the common small send): complete without the queue.
        ++stats_.eager_sends;
        bool others = done_head_ != done_.size();
        lock_.unlock();
        req->status = GW_OK;
        req->complete_cb(req);
        if (others) run_completions();
        return GW_OK;
    }
    if (r == nullptr) send_done(op, UCS_OK);
    lock_.unlock();
    run_completions();
    return GW_OK;
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
    if (op->side) {
        if (op->hdr.flags & kFlagIpc) {
            delete static_cast<cuda::IpcBlob *>(op->side);
        } else {
            std::free(op->side);
        }
        op->side = nullptr;
    }
    if (status != UCS_OK) {
        op->status = from_ucs(status);
        if (op->waiting & kWaitAck) {
            sync_waiting_.erase(op->hdr.sync_id);
            op->waiting &= ~kWaitAck;
        }
    } else {
        ++stats_.eager_sends;
    }
    if (!op->waiting) complete(op->req, op->status);
}

ucs_status_t Engine::on_sync_ack(void *arg, const void *header, size_t header_length, void *,
                                 size_t, const ucp_am_recv_param_t *)
{
    auto *e = static_cast<Engine *>(arg);
    SyncAckHeader h;
    if (!decode_sync_ack(header, header_length, &h)) return UCS_OK;
    auto it = e->sync_waiting_.find(h.sync_id);
    if (it == e->sync_waiting_.end()) {
        e->log(GW_LOG_WARN, "synchronous-send acknowledgement for an unknown send dropped");
        return UCS_OK;
    }
    SendOp *op = it->second;
    e->sync_waiting_.erase(it);
    op->waiting &= ~kWaitAck;
    ++e->stats_.sync_acks;
    if (!op->waiting) e->complete(op->req, op->status);
    return UCS_OK;
}

namespace {
struct AckSend {
    SyncAckHeader hdr;
};
} // namespace

void Engine::on_ack_sent(void *request, ucs_status_t, void *user_data)
{
    ucp_request_free(request);
    delete static_cast<AckSend *>(user_data);
}

// Acknowledgements of synchronous sends are sent from progress(), outside
// UCX's callbacks, because they may need a new endpoint.
void Engine::flush_acks()
{
    // Nothing below queues acks, so the queue keeps its capacity.
    for (const PendingAck &a : pending_acks_) {
        gw_status_t st;
        ucp_ep_h ep = endpoint(a.peer, st);
        if (!ep) continue;
        auto *ack = new AckSend{SyncAckHeader{a.sync_id}};
        ucp_request_param_t rp{};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FIELD_FLAGS;
        rp.cb.send = &Engine::on_ack_sent;
        rp.user_data = ack;
        rp.flags = UCP_AM_SEND_FLAG_EAGER;
        ucs_status_ptr_t r =
            ucp_am_send_nbx(ep, AM_SYNC_ACK, &ack->hdr, sizeof(ack->hdr), nullptr, 0, &rp);
        if (!UCS_PTR_IS_PTR(r)) {
            if (UCS_PTR_IS_ERR(r))
                log(GW_LOG_ERROR, "acknowledgement to process %u failed: %s", a.peer,
                    ucs_status_string(UCS_PTR_STATUS(r)));
            delete ack;
        }
    }
    pending_acks_.clear();
}

// ---------------------------------------------------------------------------
// Receiving
// ---------------------------------------------------------------------------

ucs_status_t Engine::on_msg(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    auto *e = static_cast<Engine *>(arg);
    MsgHeader h;
    if (!decode_msg_header(header, header_length, &h)) {
        e->log(GW_LOG_ERROR, "message with a %zu-byte header dropped (expected %zu)",
               header_length, sizeof(MsgHeader));
        ++e->stats_.dropped_messages;
        return UCS_OK;
    }
    if (h.src_peer >= e->peers_.size()) {
        e->log(GW_LOG_ERROR, "message from unknown process %u dropped", h.src_peer);
        ++e->stats_.dropped_messages;
        return UCS_OK;
    }
    InboundMsg view;
    view.source = h.src_rank;
    view.tag = h.tag;
    view.ctx = h.ctx;
    view.peer = h.src_peer;
    view.seq = h.seq;
    view.sync_id = (h.flags & (kFlagSync | kFlagIpc)) ? h.sync_id : 0;
    view.flags = h.flags;
    view.length = length;
    view.wire_length = length;
    view.data = data;
    if (h.flags & kFlagIpc) {
        // The payload is a descriptor; what a probe reports is the size it names.
        cuda::IpcBlob blob;
        if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
            !cuda::decode_ipc_blob(data, length, &blob)) {
            e->log(GW_LOG_ERROR, "malformed CUDA IPC descriptor from process %u dropped",
                   h.src_peer);
            ++e->stats_.dropped_messages;
            return UCS_OK;
        }
        view.length = blob.length;
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        view.kind = InboundMsg::RNDV;
    } else if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
        view.kind = InboundMsg::UCX_DATA;
    } else {
        view.kind = InboundMsg::OWNED; // transient: copied if it must wait
    }

    Peer &p = e->peers_[h.src_peer];
    if (h.seq != p.recv_seq) {
        // A sequence number already handled, or one already waiting, is a
        // duplicate: dropped (holding it would keep UCX's data for good).
        if (static_cast<int32_t>(h.seq - p.recv_seq) < 0 || p.early.count(h.seq)) {
            e->log(GW_LOG_ERROR, "duplicate message %u from process %u dropped", h.seq,
                   h.src_peer);
            ++e->stats_.dropped_messages;
            return UCS_OK;
        }
        // An earlier message from this sender is still on its way (UCX may
        // complete a multi-fragment message after a later short one).
        InboundMsg *m = e->store(view);
        if (!m) return UCS_OK;
        p.early.emplace(h.seq, m);
        ++e->stats_.out_of_order;
        return view.kind == InboundMsg::OWNED ? UCS_OK : UCS_INPROGRESS;
    }
    ++p.recv_seq;
    bool kept = e->dispatch(view, nullptr);
    while (!p.early.empty()) {
        auto it = p.early.find(p.recv_seq);
        if (it == p.early.end()) break;
        InboundMsg *m = it->second;
        p.early.erase(it);
        ++p.recv_seq;
        e->dispatch(*m, m);
    }
    return kept ? UCS_INPROGRESS : UCS_OK;
}

InboundMsg *Engine::store(const InboundMsg &view)
{
    auto *m = new (std::nothrow) InboundMsg(view);
    if (!m) {
        log(GW_LOG_ERROR, "out of memory queueing a %zu-byte message", view.length);
        ++stats_.dropped_messages;
        return nullptr;
    }
    if (view.kind == InboundMsg::OWNED) {
        // The transient bytes are UCX's: keep a copy (or nothing, when empty).
        m->data = nullptr;
        if (view.wire_length == 0) return m;
        m->data = std::malloc(view.wire_length);
        if (!m->data) {
            log(GW_LOG_ERROR, "out of memory queueing a %zu-byte message", view.wire_length);
            ++stats_.dropped_messages;
            delete m;
            return nullptr;
        }
        std::memcpy(m->data, view.data, view.wire_length);
    }
    return m;
}

void Engine::release(InboundMsg *msg)
{
    if (msg->kind == InboundMsg::OWNED) {
        std::free(msg->data);
    } else if (msg->data) {
        ucp_am_data_release(worker_, msg->data);
    }
    delete msg;
}

bool Engine::dispatch(InboundMsg &view, InboundMsg *stored)
{
    Context &c = context(view.ctx);
    RecvOp *op = c.match_posted(view.source, view.tag);
    if (op) {
        deliver(op, view, stored == nullptr);
        if (stored) release(stored);
        return false;
    }
    ++stats_.unexpected;
    InboundMsg *m = stored ? stored : store(view);
    if (!m) return false;
    c.unexpected().push_back(m);
    return m->kind != InboundMsg::OWNED;
}

// Moves a matched message into the receive. For a rendezvous message UCX
// takes over the descriptor (ucp_am_recv_data_nbx); the caller must not
// release it afterwards, so deliver() clears msg.data in that case.
void Engine::deliver(RecvOp *op, InboundMsg &msg, bool in_callback)
{
    gw_request_t *req = op->req;
    req->source = msg.source;
    req->tag = msg.tag;
    req->length = msg.length;
    ++stats_.recvs;
    if (msg.flags & kFlagIpc) {
        deliver_ipc(op, msg);
        return;
    }
    if (msg.sync_id) pending_acks_.push_back(PendingAck{msg.peer, msg.sync_id});

    if (msg.length > op->cap) {
        log(GW_LOG_INFO, "message of %zu bytes truncated: receive buffer holds %zu", msg.length,
            op->cap);
        if (msg.kind == InboundMsg::RNDV && !in_callback) {
            ucp_am_data_release(worker_, msg.data); // the sender completes
            msg.data = nullptr;
        }
        complete(req, GW_ERR_TRUNCATE);
        return;
    }
    stats_.bytes_received += msg.length;
    if (msg.kind != InboundMsg::RNDV) {
        deliver_eager(op, msg);
        return;
    }
    ++stats_.rndv_recvs;
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    rp.cb.recv_am = &Engine::on_rndv_done;
    rp.user_data = op;
    rp.memory_type = UCS_MEMORY_TYPE_HOST;
    void *dst = op->buf;
    if (op->device >= 0) {
        ++stats_.device_recvs;
        if (path_.ucx_has_cuda) {
            rp.memory_type = UCS_MEMORY_TYPE_CUDA;
        } else {
            // UCX cannot write device memory: land in host memory, then copy.
            op->bounce = std::malloc(msg.length);
            if (!op->bounce) {
                ucp_am_data_release(worker_, msg.data);
                msg.data = nullptr;
                complete(req, GW_ERR_NO_MEMORY);
                return;
            }
            dst = op->bounce;
        }
    }
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(worker_, msg.data, dst, msg.length, &rp);
    msg.data = nullptr; // UCX owns the descriptor now
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "rendezvous receive of %zu bytes failed: %s", msg.length,
            ucs_status_string(UCS_PTR_STATUS(r)));
        on_rndv_done(nullptr, UCS_PTR_STATUS(r), 0, op);
    } else if (r == nullptr) {
        on_rndv_done(nullptr, UCS_OK, msg.length, op);
    }
}

void Engine::deliver_eager(RecvOp *op, InboundMsg &msg)
{
    if (op->device < 0) {
        if (msg.length) std::memcpy(op->buf, msg.data, msg.length);
        complete(op->req, GW_OK);
        return;
    }
    ++stats_.device_recvs;
    cuda::Status s = dev_->copy_via_pinned(op->buf, msg.data, msg.length, op->device, true);
    if (!s) log(GW_LOG_ERROR, "host-to-device copy failed: %s", s.message().c_str());
    complete(op->req, s ? GW_OK : GW_ERR_TRANSPORT);
}

// The payload stays in the sender's GPU memory: map it (once per allocation)
// and copy it into the receive buffer; the acknowledgement tells the sender
// when its buffer is free again.
void Engine::deliver_ipc(RecvOp *op, InboundMsg &msg)
{
    op->ack_peer = msg.peer;
    op->ack_id = msg.sync_id;
    // Done now (copied, or failed): the sender hears it through the ack.
    auto finish = [&](gw_status_t st) {
        pending_acks_.push_back(PendingAck{msg.peer, msg.sync_id});
        complete(op->req, st);
    };
    // on_msg() validated the descriptor when it arrived (decode_ipc_blob).
    cuda::IpcBlob blob;
    std::memcpy(&blob, msg.data, sizeof(blob));
    if (blob.length > op->cap) return finish(GW_ERR_TRUNCATE);
    if (!dev_) {
        log(GW_LOG_ERROR, "a device message arrived but this process has no GPU: %s",
            device_why_.c_str());
        return finish(GW_ERR_UNSUPPORTED);
    }
    int device = op->device >= 0 ? op->device : dev_->device_of_uuid(blob.device_uuid);
    if (device < 0) device = 0;
    cuda::IpcMapping mapping;
    const void *src;
    if (msg.peer == params_.my_peer) {
        src = reinterpret_cast<const void *>(blob.base + blob.offset); // our own memory
    } else {
        auto m = dev_->map(msg.peer, blob, device);
        if (!m) {
            log(GW_LOG_ERROR, "CUDA IPC mapping of process %u's buffer failed: %s", msg.peer,
                m.status().message().c_str());
            return finish(GW_ERR_TRANSPORT);
        }
        mapping = std::move(*m);
        src = mapping.ptr();
    }
    ++stats_.device_recvs;
    stats_.bytes_received += blob.length;
    if (op->device < 0 || blob.length <= path_.ipc_sync_max) {
        // Into pageable host memory (through pinned chunks), or small: copy
        // and wait now; a synchronize is the cheapest wait for one copy.
        cuda::Status s = op->device < 0
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

void Engine::on_rndv_done(void *request, ucs_status_t status, size_t length, void *user_data)
{
    auto *op = static_cast<RecvOp *>(user_data);
    Engine *e = op->engine;
    if (request) ucp_request_free(request);
    gw_status_t st = from_ucs(status);
    if (op->bounce) {
        if (st == GW_OK) {
            cuda::Status s = e->dev_->copy_via_pinned(op->buf, op->bounce, op->req->length,
                                                      op->device, true);
            if (!s) {
                e->log(GW_LOG_ERROR, "host-to-device copy failed: %s", s.message().c_str());
                st = GW_ERR_TRANSPORT;
            }
        }
        std::free(op->bounce);
        op->bounce = nullptr;
    }
    e->complete(op->req, st);
}

RecvOp *Engine::start_recv(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag,
                           void *buf, size_t cap)
{
    auto *op = new (req->priv) RecvOp;
    op->want_source = source;
    op->want_tag = tag;
    op->buf = buf;
    op->cap = cap;
    op->ctx = ctx;
    op->req = req;
    op->engine = this;
    op->device = -1;
    op->bounce = nullptr;
    op->ack_peer = 0;
    op->ack_id = 0;
    return op;
}

gw_status_t Engine::irecv(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag,
                          void *buf, size_t cap)
{
    RecvOp *op = start_recv(req, ctx, source, tag, buf, cap);
    lock_.lock();
    op->device = device_of(buf, cap);
    Context &c = context(ctx);
    InboundMsg *m = c.match_unexpected(source, tag);
    if (m) {
        deliver(op, *m, false);
        release(m);
    } else {
        c.posted().push_back(op);
    }
    lock_.unlock();
    run_completions();
    return GW_OK;
}

int Engine::iprobe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info)
{
    lock_.lock();
    InboundMsg *m = context(ctx).peek_unexpected(source, tag);
    if (m) *info = gw_probe_info_t{m->source, m->tag, m->length};
    lock_.unlock();
    return m != nullptr;
}

int Engine::improbe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info,
                    gw_message_t **msg)
{
    lock_.lock();
    InboundMsg *m = context(ctx).match_unexpected(source, tag);
    if (m) {
        *info = gw_probe_info_t{m->source, m->tag, m->length};
        *msg = reinterpret_cast<gw_message_t *>(m);
    }
    lock_.unlock();
    return m != nullptr;
}

gw_status_t Engine::imrecv(gw_request_t *req, gw_message_t *msg, void *buf, size_t cap)
{
    auto *m = reinterpret_cast<InboundMsg *>(msg);
    RecvOp *op = start_recv(req, m->ctx, m->source, m->tag, buf, cap);
    lock_.lock();
    op->device = device_of(buf, cap);
    deliver(op, *m, false);
    release(m);
    lock_.unlock();
    run_completions();
    return GW_OK;
}

int Engine::cancel_recv(gw_request_t *req)
{
    auto *op = op_of<RecvOp>(req);
    lock_.lock();
    int cancelled = 0;
    if (op->link.linked()) {
        context(op->ctx).posted().remove(op);
        complete(req, GW_ERR_CANCELED);
        cancelled = 1;
    }
    lock_.unlock();
    run_completions();
    return cancelled;
}

void Engine::stats(gw_engine_stats_t *out) const
{
    lock_.lock();
    *out = stats_;
    lock_.unlock();
    if (dev_) {
        auto c = dev_->classifier_counters();
        out->classifier_host_hits = c.host_hits;
        out->classifier_device_hits = c.device_hits;
        out->classifier_misses = c.misses;
        auto m = dev_->mapping_counters();
        out->ipc_map_hits = m.hits;
        out->ipc_map_misses = m.misses;
        out->ipc_map_evictions = m.evictions;
    }
}

void Engine::context_release(uint32_t ctx)
{
    lock_.lock();
    auto it = contexts_.find(ctx);
    if (it != contexts_.end()) {
        Context &c = *it->second;
        if (c.posted().empty()) {
            size_t dropped = 0;
            while (InboundMsg *m = c.unexpected().pop_front()) {
                release(m);
                ++dropped;
            }
            if (dropped) {
                log(GW_LOG_WARN, "%zu unreceived message(s) of communicator %u dropped", dropped,
                    ctx);
                stats_.dropped_messages += dropped;
            }
            if (last_context_ == &c) last_context_ = nullptr;
            contexts_.erase(it);
        }
    }
    lock_.unlock();
}

} // namespace gpuwire::engine
