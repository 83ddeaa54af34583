#include "engine/engine.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace gpuwire::engine {
namespace {

constexpr uint8_t kWaitSend = 0x1;
constexpr uint8_t kWaitAck = 0x2;
constexpr uint32_t kFlagSync = 0x1;

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
    : params_(params), lock_(params.thread_multiple != 0), peers_(params.npeers)
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
            log(GW_LOG_WARN, "an endpoint did not close within 10 s; forcing");
            ucp_request_cancel(worker_, r);
            while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker_);
        }
        ucp_request_free(r);
    }
    lock_.unlock();
    run_completions();
}

Engine::~Engine()
{
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

ucp_ep_h Engine::endpoint(uint32_t peer, gw_status_t &status)
{
    Peer &p = peers_[peer];
    if (p.ep) {
        status = p.failed ? GW_ERR_UNREACHABLE : GW_OK;
        return p.ep;
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
    if (!pending_acks_.empty()) flush_acks();
    bool any_done = done_head_ != done_.size();
    lock_.unlock();
    if (any_done) run_completions();
    return n;
}

// ---------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------

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
    op->status = GW_OK;
    op->waiting = kWaitSend;
    op->hdr = MsgHeader{ctx, my_rank, tag, params_.my_peer, peers_[peer].send_seq++, 0, 0};
    if (flags & GW_SEND_SYNC) {
        op->hdr.flags |= kFlagSync;
        op->hdr.sync_id = next_sync_id_++;
        op->waiting |= kWaitAck;
        sync_waiting_.emplace(op->hdr.sync_id, op);
    }
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
    ucs_status_ptr_t r = ucp_am_send_nbx(ep, AM_MSG, &op->hdr, sizeof(op->hdr), buf, len, &rp);
    ++stats_.sends;
    stats_.bytes_sent += len;
    if (UCS_PTR_IS_ERR(r)) {
        if (op->waiting & kWaitAck) sync_waiting_.erase(op->hdr.sync_id);
        log(GW_LOG_ERROR, "send of %zu bytes to process %u failed: %s", len, peer,
            ucs_status_string(UCS_PTR_STATUS(r)));
        lock_.unlock();
        return from_ucs(UCS_PTR_STATUS(r));
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
    if (header_length != sizeof(SyncAckHeader)) return UCS_OK;
    SyncAckHeader h;
    std::memcpy(&h, header, sizeof(h));
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
    std::vector<PendingAck> acks;
    acks.swap(pending_acks_);
    for (const PendingAck &a : acks) {
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
}

// ---------------------------------------------------------------------------
// Receiving
// ---------------------------------------------------------------------------

ucs_status_t Engine::on_msg(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    auto *e = static_cast<Engine *>(arg);
    if (header_length != sizeof(MsgHeader)) {
        e->log(GW_LOG_ERROR, "message with a %zu-byte header dropped (expected %zu)",
               header_length, sizeof(MsgHeader));
        ++e->stats_.dropped_messages;
        return UCS_OK;
    }
    MsgHeader h;
    std::memcpy(&h, header, sizeof(h));
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
    view.sync_id = (h.flags & kFlagSync) ? h.sync_id : 0;
    view.length = length;
    view.data = data;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        view.kind = InboundMsg::RNDV;
    } else if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
        view.kind = InboundMsg::UCX_DATA;
    } else {
        view.kind = InboundMsg::OWNED; // transient: copied if it must wait
    }

    Peer &p = e->peers_[h.src_peer];
    if (h.seq != p.recv_seq) {
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
    if (view.kind == InboundMsg::OWNED && view.length) {
        m->data = std::malloc(view.length);
        if (!m->data) {
            log(GW_LOG_ERROR, "out of memory queueing a %zu-byte message", view.length);
            ++stats_.dropped_messages;
            delete m;
            return nullptr;
        }
        std::memcpy(m->data, view.data, view.length);
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
        if (msg.length) std::memcpy(op->buf, msg.data, msg.length);
        complete(req, GW_OK);
        return;
    }
    ++stats_.rndv_recvs;
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    rp.cb.recv_am = &Engine::on_rndv_done;
    rp.user_data = op;
    rp.memory_type = UCS_MEMORY_TYPE_HOST;
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(worker_, msg.data, op->buf, msg.length, &rp);
    msg.data = nullptr; // UCX owns the descriptor now
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "rendezvous receive of %zu bytes failed: %s", msg.length,
            ucs_status_string(UCS_PTR_STATUS(r)));
        complete(req, from_ucs(UCS_PTR_STATUS(r)));
    } else if (r == nullptr) {
        complete(req, GW_OK);
    }
}

void Engine::on_rndv_done(void *request, ucs_status_t status, size_t, void *user_data)
{
    auto *op = static_cast<RecvOp *>(user_data);
    ucp_request_free(request);
    op->engine->complete(op->req, from_ucs(status));
}

gw_status_t Engine::irecv(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag,
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
    lock_.lock();
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
    auto *op = new (req->priv) RecvOp;
    op->want_source = m->source;
    op->want_tag = m->tag;
    op->buf = buf;
    op->cap = cap;
    op->ctx = m->ctx;
    op->req = req;
    op->engine = this;
    lock_.lock();
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
