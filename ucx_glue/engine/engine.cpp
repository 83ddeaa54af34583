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

static_assert(GW_MAX_CONTEXT == kMaxCtx - 1 && GW_MAX_RANK == kMaxRank && GW_MAX_TAG == kMaxTag);

namespace {

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
    if (params_.rndv_threshold) {
        std::string v = std::to_string(params_.rndv_threshold);
        s = ucp_config_modify(config, "RNDV_THRESH", v.c_str());
        if (s != UCS_OK) {
            ucp_config_release(config);
            why = std::string("UCX refused RNDV_THRESH=") + v + ": " + ucs_status_string(s);
            return from_ucs(s);
        }
    }
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                   UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_AM;
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
    } handlers[] = {{AM_SYNC_ACK, &Engine::on_sync_ack}, {AM_KIND_HINT, &Engine::on_kind_hint}};
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
        dc.bounce_max_bytes = params_.pinned_bounce_bytes;
        dc.staging_max_bytes = params_.staging_bytes;
        dev_ = DevicePath::create(dc, device_why_);
    } else {
        device_why_ = "device support switched off";
    }
    if (params_.chunk_bytes == 0 || params_.chunk_bytes > kMaxChunkBytes) {
        why = "chunk size out of range (1 byte to 1 GiB)";
        return GW_ERR_INVALID;
    }
    if (gw_status_t ps = start_pacing(why); ps != GW_OK) return ps;
    log(GW_LOG_INFO, "device buffers: %s%s; UCX %s CUDA memory; same-node device path: %s",
        dev_ ? "yes" : "no, ", dev_ ? "" : device_why_.c_str(),
        path_.ucx_has_cuda ? "moves" : "cannot move",
        // No device path (no CUDA driver, or device support off): no CUDA IPC either.
        !dev_ ? "none" : path_.ipc_enabled ? "CUDA IPC" : "staged through host memory");
    log(GW_LOG_INFO, "engine up: peer %u of %u, worker address %zu bytes, %s threads",
        params_.my_peer, params_.npeers, address_length_,
        params_.thread_multiple ? "multiple" : "single");
    return GW_OK;
}

// Pacing toward other nodes: at pace_gbps, or (pace_auto) at the rate of the
// first active RoCE port; that port's CNP counter feeds the controller.
gw_status_t Engine::start_pacing(std::string &why)
{
    double gbps = params_.pace_gbps;
    const fabric::SysfsRoot root(params_.sysfs_root ? params_.sysfs_root : "/");
    auto sink = [this](fabric::LogLevel level, std::string_view line) {
        int l = level == fabric::LogLevel::Error     ? GW_LOG_ERROR
                : level == fabric::LogLevel::Warning ? GW_LOG_WARN
                : level == fabric::LogLevel::Info    ? GW_LOG_INFO
                                                     : GW_LOG_DEBUG;
        // The fabric library's lines carry their own "fabric: " prefix.
        const bool prefixed = line.substr(0, 8) == "fabric: ";
        log(l, "%s%.*s", prefixed ? "" : "fabric: ", int(line.size()), line.data());
    };
    if (gbps > 0 || params_.pace_auto) {
        fabric::FabricInventory inv = fabric::discover_rdma_devices(root, sink);
        if (const fabric::RdmaPort *port = inv.first_active_roce_port()) {
            if (gbps <= 0) gbps = port->rate_gbps;
            auto reader = std::make_unique<fabric::CongestionCounterReader>(
                root, port->device, port->port_number, sink,
                fabric::only_counters({fabric::CongestionCounter::RpCnpHandled}));
            if (reader->available(fabric::CongestionCounter::RpCnpHandled)) {
                reader->poll(); // the base of the first delta
                cnp_reader_ = std::move(reader);
            }
            log(GW_LOG_INFO, "pacing toward other nodes at %.1f Gb/s (%s port %u)%s", gbps,
                port->device.c_str(), port->port_number,
                cnp_reader_ ? ", DCQCN fed by its rp_cnp_handled counter" : "");
        }
    }
    if (gbps <= 0) return GW_OK;
    clock_ = std::make_unique<pacing::SteadyClock>();
    pacing::PacerConfig pc;
    pc.rendezvous_threshold_bytes = 1; // every chunk of a paced transfer
    pc.rate.line_rate_gbps = gbps;
    pc.rate.min_rate_gbps = std::min(pc.rate.min_rate_gbps, gbps);
    std::string err;
    pacer_ = pacing::PortPacer::create(pc, *clock_, err);
    if (!pacer_) {
        why = "pacing configuration refused: " + err;
        return GW_ERR_INVALID;
    }
    return GW_OK;
}

// New CNPs the port handled since the last poll go to the pacer.
void Engine::poll_congestion()
{
    const uint64_t now = clock_->now_ns();
    if (now < next_cnp_poll_ns_) return;
    next_cnp_poll_ns_ = now + uint64_t(params_.pace_poll_us) * 1000;
    const fabric::CounterValues &d = cnp_reader_->poll();
    uint64_t cnps = d.has(fabric::CongestionCounter::RpCnpHandled)
                        ? d[fabric::CongestionCounter::RpCnpHandled]
                        : 0;
    uint32_t flows = 0;
    for (const Xfer *x : xfers_) flows += x->sending && x->paced;
    if (cnps) stats_.pace_cnps += cnps;
    pacer_->on_congestion_notifications(cnps, now, flows ? flows : 1);
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
    // No device work starts from here on (finish_recv). The device path
    // outlives the worker: UCX may write into a receive's pinned landing, or
    // read a staged send's pinned copy, until its request is gone, and every
    // landing released below goes back to the device path's cache.
    closing_ = true;
    if (worker_) abandon_xfers();
    if (worker_) {
        disconnect();
        // Receives still posted complete as cancelled.
        while (RecvOp *op = in_ucx_.pop_front()) {
            void *r = op->ucx_req;
            ucp_request_cancel(worker_, r);
            if (!op->done) {
                op->done = 1;
                release_landing(op);
                complete(op->req, GW_ERR_CANCELED);
            }
        }
        for (auto &kv : contexts_) {
            while (InboundMsg *m = kv.second->unexpected().pop_front()) release(m);
        }
        if (address_) ucp_worker_release_address(worker_, address_);
        ucp_worker_destroy(worker_);
    }
    if (context_) ucp_cleanup(context_);
    free_abandoned();
    dev_.reset(); // waits for device copies in flight; unpins every pinned buffer
    inbox_.reset(); // no copy from or into these slots is in flight any more
    outbox_.reset();
    run_completions();
}

ucp_ep_h Engine::connect(uint32_t peer, gw_status_t &status, bool quiet)
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
        if (!quiet) log(GW_LOG_ERROR, "UCX cannot reach process %u: %s", peer, ucs_status_string(s));
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

// Device copies, congestion counters, chunked transfers and acknowledgements;
// called from progress() with the lock held.
int Engine::progress_side_work()
{
    int n = 0;
    if (dev_ && dev_->busy()) {
        n += dev_->poll([this](void *token, const cuda::Status &s) {
            if (XferSlot *slot = slot_of_token(token)) {
                if (!s) log(GW_LOG_ERROR, "chunk copy failed: %s", s.message().c_str());
                slot_copied(*slot, bool(s));
                return;
            }
            auto *op = static_cast<RecvOp *>(token);
            if (!s) log(GW_LOG_ERROR, "device copy failed: %s", s.message().c_str());
            pending_acks_.push_back(PendingAck{op->ack_peer, op->ack_id});
            complete(op->req, s ? GW_OK : GW_ERR_TRANSPORT);
        });
    }
    if (cnp_reader_ && pacer_) [[unlikely]]
        poll_congestion();
    if (!xfers_.empty()) advance_xfers();
    if (!pending_acks_.empty() || !pending_hints_.empty()) flush_acks();
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
    if (!params_.device_sync) return;
    cuda::Status ws = cuda::wait_legacy_stream(device);
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
    return mi.device >= 0 ? mi.device : 0;
}

// The receive buffer's GPU (op->device), or whether host memory is pinned.
void Engine::classify_recv(RecvOp *op)
{
    bool pinned = false;
    op->device = device_of(op->buf, op->cap, &pinned);
    op->host_pinned = pinned;
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
    const uint64_t wire_tag = make_send_tag(ctx, my_rank, tag);
    req->length = len;
    if ((dev_ && len) || (flags & GW_SEND_SYNC) || (pacer_ && len >= params_.pace_min_bytes))
        [[unlikely]]
        return isend_general(req, ep, peer, wire_tag, buf, len, flags);

    // Host memory, standard mode, not paced: the user's bytes as one tagged
    // message. The operation's state is written only if UCX keeps the send
    // (nothing can call back before: progress needs the lock).
    auto *op = reinterpret_cast<SendOp *>(req->priv);
    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);
    ucs_status_ptr_t r = ucp_tag_send_nbx(ep, buf, len, wire_tag, &rp);
    if (r == nullptr) [[likely]] {
        count_host_send(len, false);
        return sent_at_once(req);
    }
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "send of %zu bytes to process %u failed: %s", len, peer,
            ucs_status_string(UCS_PTR_STATUS(r)));
        lock_.unlock();
        return from_ucs(UCS_PTR_STATUS(r));
    }
    count_host_send(len, true);
    new (op) SendOp{req, this, nullptr, 0, kWaitSend, 0, GW_OK, 0};
    lock_.unlock();
    return GW_OK;
}

// Device memory, synchronous mode or paced: every path decision. Called with
// the lock held; releases it.
gw_status_t Engine::isend_general(gw_request_t *req, ucp_ep_h ep, uint32_t peer, uint64_t wire_tag,
                                  const void *buf, size_t len, unsigned flags)
{
    gw_status_t st;
    auto *op = new (req->priv) SendOp;
    op->req = req;
    op->engine = this;
    op->side = nullptr;
    op->sync_id = 0;
    op->status = GW_OK;
    op->waiting = kWaitSend;
    op->desc = 0;
    op->pinned = 0;

    ucp_request_param_t rp = send_param(&Engine::on_send_done, op);

    // The one path decision of this message.
    const void *payload = buf;
    size_t payload_len = len;
    if (dev_ && len) [[unlikely]] {
        cuda::MemoryInfo mi;
        Protocol proto = choose(peer, buf, len, mi);
        const int device = mi.device >= 0 ? mi.device : 0; // no single GPU named: GPU 0
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
        // Another process (or UCX, on its own streams) reads this memory.
        if (proto == Protocol::ipc || proto == Protocol::ucx_device) order_after_user(device);
        if (proto == Protocol::ipc) {
            auto *d = new (std::nothrow) DeviceDescriptor{};
            cuda::Status es = d ? dev_->export_range(mi, buf, len, &d->blob)
                                : cuda::Status::error(cuda::Errc::busy, "out of memory");
            if (es) {
                d->src_peer = params_.my_peer;
                d->reserved = 0;
                d->ack_id = op->sync_id = next_sync_id_++;
                op->side = d;
                op->desc = 1;
                payload = d;
                payload_len = sizeof(*d);
                wire_tag |= kDescBit;
                op->waiting |= kWaitAck; // the receiver says when its copy is done
                sync_waiting_.emplace(op->sync_id, op);
                ++stats_.ipc_sends;
            } else {
                delete d;
                log(GW_LOG_INFO, "CUDA IPC export refused (%s): message staged",
                    es.message().c_str());
                proto = Protocol::staged;
            }
        }
        if (proto == Protocol::host && peers_[peer].into_device && params_.shared_staging_host &&
            use_shared_staging(peer, len, 0)) {
            // A host message to a receiver that takes them into GPU memory:
            // one memcpy into a slot here, one DMA out of it there. (Slots
            // not set up yet are pinned in GPU 0's context.)
            ++stats_.shared_host_sends;
            ++stats_.sends;
            stats_.bytes_sent += len;
            st = start_chunked_send(op, ep, peer, wire_tag, buf, len, -1, false, true);
            lock_.unlock();
            run_completions();
            return st;
        }
        if (proto == Protocol::staged && use_shared_staging(peer, len, device)) {
            // Through slots of host memory the receiver maps: one DMA at each
            // end. Synchronous mode holds: no chunk moves before the
            // receiver matched.
            ++stats_.staged_sends;
            ++stats_.sends;
            stats_.bytes_sent += len;
            st = start_chunked_send(op, ep, peer, wire_tag, buf, len, device, false, true);
            lock_.unlock();
            run_completions();
            return st;
        }
        // (A synchronous send stays one message: its completion must mean the
        // receiver matched it, which chunks smaller than UCX's rendezvous
        // threshold would not guarantee.)
        if (proto == Protocol::staged && params_.staged_chunked && !(flags & GW_SEND_SYNC) &&
            len >= kBlockBytes) {
            // Through pinned chunks, device copies overlapping the wire.
            ++stats_.staged_sends;
            ++stats_.sends;
            stats_.bytes_sent += len;
            st = start_chunked_send(op, ep, peer, wire_tag, buf, len, device,
                                    pacer_ && !peer_local(peer));
            lock_.unlock();
            run_completions();
            return st;
        }
        if (proto == Protocol::staged) {
            // Whole into host memory, sent as host data: one DMA into a pinned
            // bounce buffer, else through pinned chunks into the heap.
            void *bounce = lend_bounce(len, device);
            cuda::Status cs;
            if (bounce) {
                op->pinned = 1;
                cs = dev_->copy_sync(bounce, buf, len, device);
            } else {
                bounce = gw_host_buffer_alloc(len);
                cs = bounce ? dev_->copy_via_pinned(bounce, buf, len, device, false)
                            : cuda::Status::error(cuda::Errc::busy, "out of memory");
            }
            op->side = bounce;
            if (!cs) {
                free_side(op);
                log(GW_LOG_ERROR, "device-to-host staging of %zu bytes failed: %s", len,
                    cs.message().c_str());
                lock_.unlock();
                return bounce ? GW_ERR_TRANSPORT : GW_ERR_NO_MEMORY;
            }
            payload = bounce;
            ++stats_.staged_sends;
        } else if (proto == Protocol::ucx_device) {
            rp.memory_type = UCS_MEMORY_TYPE_CUDA;
            ++stats_.ucx_device_sends;
        }
    }

    if (pacer_ && len >= params_.pace_min_bytes && len >= kBlockBytes && !op->desc && !op->side &&
        rp.memory_type == UCS_MEMORY_TYPE_HOST && !(flags & GW_SEND_SYNC) &&
        !peer_local(peer)) [[unlikely]] {
        // A large host message to another node: in chunks the pacer admits.
        ++stats_.sends;
        stats_.bytes_sent += len;
        st = start_chunked_send(op, ep, peer, wire_tag, buf, len, -1, true);
        lock_.unlock();
        run_completions();
        return st;
    }
    // A synchronous send of a descriptor needs nothing more: the receiver's
    // acknowledgement comes after it matched.
    ucs_status_ptr_t r = (flags & GW_SEND_SYNC) && !op->desc
                             ? ucp_tag_send_sync_nbx(ep, payload, payload_len, wire_tag, &rp)
                             : ucp_tag_send_nbx(ep, payload, payload_len, wire_tag, &rp);
    if (r == nullptr && op->waiting == kWaitSend && !op->side) [[likely]] {
        // Done at once (the common small send): complete without the queue.
        count_host_send(len, false);
        return sent_at_once(req);
    }
    if (UCS_PTR_IS_ERR(r)) {
        if (op->waiting & kWaitAck) sync_waiting_.erase(op->sync_id);
        log(GW_LOG_ERROR, "send of %zu bytes to process %u failed: %s", len, peer,
            ucs_status_string(UCS_PTR_STATUS(r)));
        free_side(op);
        lock_.unlock();
        return from_ucs(UCS_PTR_STATUS(r));
    }
    if (!op->side) {
        count_host_send(len, r != nullptr);
    } else {
        ++stats_.sends;
        stats_.bytes_sent += len;
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
        peer == params_.my_peer || !peer_local(peer))
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

// ---------------------------------------------------------------------------
// Receiving
// ---------------------------------------------------------------------------

RecvOp *Engine::start_recv(gw_request_t *req, void *buf, size_t cap)
{
    auto *op = new (req->priv) RecvOp;
    op->buf = buf;
    op->cap = cap;
    op->req = req;
    op->engine = this;
    op->ucx_req = nullptr;
    op->landing = buf;
    op->bounce = nullptr;
    op->ack_id = 0;
    op->ack_peer = 0;
    op->device = -1;
    op->done = 0;
    op->saved = 0;
    op->pinned = 0;
    op->direct = 0;
    op->host_pinned = 0;
    return op;
}

// Whether UCX may write a device receive from (ctx, source) into the GPU
// buffer itself: it moves CUDA memory and the sender is one process on
// another node. From there a D-bit message is only a chunked transfer's
// header (never a CUDA IPC descriptor), announcing at least kBlockBytes
// (isend_general), which the transfer then overwrites: nothing of the
// user's buffer needs saving. Wildcard and same-node receives land in host
// memory, where a descriptor may arrive instead of the data.
bool Engine::lands_on_device(uint32_t ctx, int32_t source)
{
    if (!path_.ucx_has_cuda || source == GW_ANY_SOURCE || !params_.peer_of_rank) return false;
    uint32_t peer;
    return params_.peer_of_rank(params_.resolve_ctx, ctx, source, &peer) == 0 &&
           peer < peers_.size() && !peer_local(peer);
}

bool Engine::prepare_landing(RecvOp *op)
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

void Engine::release_landing(RecvOp *op)
{
    if (op->bounce) [[unlikely]] {
        if (op->pinned) {
            dev_->return_bounce(op->bounce);
        } else {
            gw_host_buffer_free(op->bounce);
        }
        op->bounce = nullptr;
        op->pinned = 0;
    }
}

static size_t landing_bytes(const RecvOp *op)
{
    return op->landing == op->buf ? op->cap : (op->bounce ? op->cap : kBlockBytes);
}

void Engine::post(RecvOp *op, uint32_t ctx, int32_t source, int32_t tag)
{
    uint64_t t, mask;
    make_recv_tag(ctx, source, tag, tag == GW_ANY_TAG, t, mask);
    ucp_request_param_t rp = recv_param(&Engine::on_recv_done, op);
    if (op->direct) rp.memory_type = UCS_MEMORY_TYPE_CUDA;
    in_ucx_.push_back(op);
    ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, op->landing, landing_bytes(op), t, mask, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        log(GW_LOG_ERROR, "receive could not be posted: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        in_ucx_.remove(op);
        release_landing(op);
        complete(op->req, from_ucs(UCS_PTR_STATUS(r)));
    } else if (!op->done) {
        op->ucx_req = r;
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
        e->complete(op->req, GW_ERR_CANCELED);
        return;
    }
    e->finish_recv(op, status, sender_tag, length);
}

bool Engine::sender_is(uint64_t sender_tag, uint32_t peer)
{
    if (peer >= peers_.size()) return false;
    if (!params_.peer_of_rank) return true;
    uint32_t p;
    if (params_.peer_of_rank(params_.resolve_ctx, ctx_of(sender_tag), rank_of(sender_tag), &p) != 0 ||
        p != peer) {
        log(GW_LOG_ERROR, "a device descriptor names process %u, but rank %d of communicator %u "
                          "is not that process: dropped", peer, rank_of(sender_tag),
            ctx_of(sender_tag));
        return false;
    }
    return true;
}

// UCX delivered a message into op->landing.
void Engine::finish_recv(RecvOp *op, ucs_status_t status, uint64_t sender_tag, size_t length)
{
    gw_request_t *req = op->req;
    req->source = rank_of(sender_tag);
    req->tag = tag_of(sender_tag);
    ++stats_.recvs;
    if (closing_ && ((sender_tag & kDescBit) || op->device >= 0)) [[unlikely]] {
        // Teardown (the worker's last progress): no device work starts now.
        if (op->saved) std::memcpy(op->buf, op->block, sizeof(DeviceDescriptor));
        release_landing(op);
        req->length = 0;
        complete(req, GW_ERR_CANCELED);
        return;
    }
    if (sender_tag & kDescBit) [[unlikely]] {
        InboundMsg m;
        alignas(16) unsigned char head[kBlockBytes];
        const void *bytes = op->landing;
        if (op->direct && status == UCS_OK) {
            // A header UCX wrote into the GPU buffer: read it back.
            if (length > sizeof(head) || !dev_->copy_sync(head, op->buf, length, op->device))
                status = UCS_ERR_IO_ERROR;
            bytes = head;
        }
        const bool ok = read_device_message(status, bytes, length, sender_tag, m);
        if (op->saved) std::memcpy(op->buf, op->block, sizeof(DeviceDescriptor));
        release_landing(op);
        if (!ok) {
            req->length = 0;
            complete(req, GW_ERR_TRANSPORT);
        } else if (m.kind == InboundMsg::CHUNKED) {
            start_chunked_recv(op, m.chunked);
        } else {
            deliver_ipc(op, m.desc);
        }
        return;
    }
    req->length = length;
    if (status != UCS_OK || length > op->cap) {
        release_landing(op);
        if (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED) {
            log(GW_LOG_INFO, "message of %zu bytes truncated: receive buffer holds %zu", length,
                op->cap);
            complete(req, GW_ERR_TRUNCATE);
        } else {
            complete(req, from_ucs(status));
        }
        return;
    }
    stats_.bytes_received += length;
    gw_status_t st = GW_OK;
    if (op->direct) {
        ++stats_.device_recvs;
        ++stats_.ucx_device_recvs;
    } else if (op->device >= 0) {
        ++stats_.device_recvs;
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
        cuda::Status s =
            op->pinned ? dev_->copy_sync(op->buf, op->landing, length, op->device)
                       : dev_->copy_via_pinned(op->buf, op->landing, length, op->device, true);
        if (!s) {
            log(GW_LOG_ERROR, "host-to-device copy failed: %s", s.message().c_str());
            st = GW_ERR_TRANSPORT;
        }
    } else if (op->landing != op->buf && length) {
        std::memcpy(op->buf, op->landing, length);
    }
    release_landing(op);
    complete(req, st);
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
    // Pageable host memory takes the copy through pinned chunks; GPU memory
    // and pinned host memory take one DMA.
    const bool pageable = op->device < 0 && !op->host_pinned;
    // The shared slots (from shared_staging_min) and a pinned bounce buffer
    // at the sender (below) do this faster.
    if (pageable) [[unlikely]]
        hint_kind(peer, kHintIntoHost);
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
                          void *buf, size_t cap)
{
    RecvOp *op = start_recv(req, buf, cap);
    lock_.lock();
    if (dev_) [[unlikely]] {
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
    lock_.unlock();
    run_completions();
    return GW_OK;
}

void Engine::receive_pulled(RecvOp *op, InboundMsg *m)
{
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

namespace {
// Waits for a UCX receive of a few bytes already at hand.
struct SmallRecv {
    bool done = false;
    ucs_status_t status = UCS_OK;
    size_t length = 0;
    static void cb(void *request, ucs_status_t s, const ucp_tag_recv_info_t *info, void *user)
    {
        auto *r = static_cast<SmallRecv *>(user);
        r->status = s;
        r->length = info ? info->length : 0; // read before the request is freed
        r->done = true;
        ucp_request_free(request);
    }
};
} // namespace

InboundMsg *Engine::pull(uint64_t t, uint64_t mask)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h h = ucp_tag_probe_nb(worker_, t, mask, 1, &info);
    if (!h) return nullptr;
    auto *m = new (std::nothrow) InboundMsg;
    if (!m) {
        // Cannot keep it: receive it into nowhere so UCX lets it go.
        log(GW_LOG_ERROR, "out of memory: a probed message of %zu bytes is dropped", info.length);
        ++stats_.dropped_messages;
        drain(h, info.length);
        return nullptr;
    }
    m->source = rank_of(info.sender_tag);
    m->tag = tag_of(info.sender_tag);
    m->ctx = ctx_of(info.sender_tag);
    m->length = info.length;
    m->sender_tag = info.sender_tag;
    m->handle = h;
    if (!(info.sender_tag & kDescBit)) return m;

    // A descriptor: read it now, a probe must report the size it names.
    alignas(16) unsigned char bytes[kBlockBytes];
    SmallRecv sr;
    ucp_request_param_t rp = recv_param(&SmallRecv::cb, &sr);
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker_, bytes, sizeof(bytes), h, &rp);
    m->handle = nullptr;
    if (UCS_PTR_IS_ERR(r)) {
        sr.status = UCS_PTR_STATUS(r);
    } else if (r != nullptr) {
        while (!sr.done) ucp_worker_progress(worker_);
    }
    if (!read_device_message(sr.status, bytes, sr.length, info.sender_tag, *m)) {
        delete m;
        return nullptr;
    }
    return m;
}

// A D-bit message's bytes: a device descriptor or a chunked-transfer header
// (told apart by size), accepted only from the process the runtime says sent
// it. Fills m's kind, payload and length; false (logged, counted) otherwise.
bool Engine::read_device_message(ucs_status_t status, const void *bytes, size_t length,
                                 uint64_t sender_tag, InboundMsg &m)
{
    const bool chunked = length == sizeof(ChunkedHeader);
    bool ok = status == UCS_OK &&
              (chunked ? decode_chunked_header(bytes, length, &m.chunked) &&
                             sender_is(sender_tag, m.chunked.src_peer)
                       : decode_descriptor(bytes, length, &m.desc) &&
                             sender_is(sender_tag, m.desc.src_peer));
    if (!ok) {
        log(GW_LOG_ERROR, "malformed %s (%zu bytes) dropped",
            chunked ? "chunked-transfer header" : "CUDA IPC descriptor", length);
        ++stats_.dropped_messages;
        return false;
    }
    m.kind = chunked ? InboundMsg::CHUNKED : InboundMsg::DESC;
    m.length = chunked ? m.chunked.length : m.desc.blob.length;
    return true;
}

InboundMsg *Engine::pull_prefix(uint32_t ctx, int32_t source, int32_t want_tag)
{
    uint64_t t, mask;
    make_recv_tag(ctx, source, 0, false, t, mask);
    mask &= ~kTagMask; // every tag of this sender, internal ones too
    Context &c = context(ctx);
    for (;;) {
        InboundMsg *m = pull(t, mask);
        if (!m) return nullptr; // (a malformed descriptor was dropped)
        c.unexpected().push_back(m);
        ++pulled_;
        ++stats_.probe_pulls;
        if (tag_matches(source, want_tag, m->source, m->tag)) return m;
    }
}

void Engine::release(InboundMsg *msg)
{
    if (msg->handle) drain(msg->handle, msg->length);
    delete msg;
}

// Receives a probed message into nowhere, so UCX frees what it holds of it.
void Engine::drain(ucp_tag_message_h handle, size_t length)
{
    void *sink = length ? gw_host_buffer_alloc(length) : nullptr;
    SmallRecv sr;
    ucp_request_param_t rp = recv_param(&SmallRecv::cb, &sr);
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker_, sink, sink ? length : 0, handle, &rp);
    if (UCS_PTR_IS_PTR(r)) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (!sr.done && std::chrono::steady_clock::now() < deadline)
            ucp_worker_progress(worker_);
        if (!sr.done) ucp_request_cancel(worker_, r);
    }
    gw_host_buffer_free(sink);
}

gw_status_t Engine::ipc_map(uint32_t peer, const void *blob, size_t len, int device, void **ptr,
                            void **lease, std::string &why)
{
    cuda::IpcBlob b;
    cuda::Status s = cuda::decode_ipc_blob(blob, len, &b);
    if (!s) {
        why = "IPC description: " + s.message();
        return GW_ERR_INVALID;
    }
    if (peer >= peers_.size()) {
        why = "no such peer";
        return GW_ERR_INVALID;
    }
    // The holder exists before the lock: a lease is made and ended under it.
    auto *held = new (std::nothrow) cuda::IpcMapping();
    if (!held) {
        why = "out of memory";
        return GW_ERR_NO_MEMORY;
    }
    lock_.lock();
    gw_status_t st = GW_OK;
    if (!dev_) {
        why = "no GPU in this process";
        st = GW_ERR_UNSUPPORTED;
    } else {
        auto m = dev_->map(peer, b, device);
        if (m) {
            *held = std::move(*m);
        } else {
            why = "mapping a peer's buffer: " + m.status().message();
            st = GW_ERR_TRANSPORT;
        }
    }
    lock_.unlock();
    if (GW_OK != st) {
        delete held; // holds nothing
        return st;
    }
    *ptr = held->ptr();
    *lease = held;
    return GW_OK;
}

void Engine::ipc_unmap(void *lease)
{
    if (!lease) return;
    lock_.lock();
    delete static_cast<cuda::IpcMapping *>(lease);
    lock_.unlock();
}

int Engine::iprobe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info)
{
    lock_.lock();
    InboundMsg *m = pulled_ ? context(ctx).peek_unexpected(source, tag) : nullptr;
    if (!m) {
        uint64_t t, mask;
        make_recv_tag(ctx, source, tag, tag == GW_ANY_TAG, t, mask);
        ucp_tag_recv_info_t ti;
        if (ucp_tag_probe_nb(worker_, t, mask, 0, &ti)) {
            if (!(ti.sender_tag & kDescBit)) {
                *info = gw_probe_info_t{rank_of(ti.sender_tag), tag_of(ti.sender_tag), ti.length};
                lock_.unlock();
                return 1;
            }
            m = pull_prefix(ctx, rank_of(ti.sender_tag), tag);
        }
    }
    if (m) *info = gw_probe_info_t{m->source, m->tag, m->length};
    lock_.unlock();
    return m != nullptr;
}

int Engine::improbe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info,
                    gw_message_t **msg)
{
    lock_.lock();
    InboundMsg *m = pulled_ ? context(ctx).match_unexpected(source, tag) : nullptr;
    if (m) {
        --pulled_;
    } else {
        uint64_t t, mask;
        make_recv_tag(ctx, source, tag, tag == GW_ANY_TAG, t, mask);
        m = pull(t, mask);
    }
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
    RecvOp *op = start_recv(req, buf, cap);
    lock_.lock();
    if (dev_) classify_recv(op);
    receive_pulled(op, m);
    lock_.unlock();
    run_completions();
    return GW_OK;
}

int Engine::cancel_recv(gw_request_t *req)
{
    auto *op = op_of<RecvOp>(req);
    lock_.lock();
    int cancelled = 0;
    if (op->link.linked() && op->ucx_req) {
        // An unmatched receive completes with UCS_ERR_CANCELED at once.
        ucp_request_cancel(worker_, op->ucx_req);
        cancelled = op->done;
    }
    lock_.unlock();
    run_completions();
    return cancelled;
}

void Engine::stats(gw_engine_stats_t *out) const
{
    lock_.lock();
    *out = stats_;
    out->ucx_moves_cuda = path_.ucx_has_cuda ? 1 : 0;
    out->pace_rate_mbps = pacer_ ? uint64_t(pacer_->rate_gbps() * 1000.0) : 0;
    if (dev_) {
        cuda::PinnedCacheCounters b = dev_->bounce_cache().counters();
        out->pinned_bounce_hits = b.hits;
        out->pinned_bounce_pins = b.pins;
        out->pinned_bounce_evictions = b.evictions;
        out->pinned_bounce_held_bytes = dev_->bounce_cache().held_bytes();
        out->pinned_staging_held_bytes = dev_->pinned_staging_bytes();
        out->ipc_mappings_open = dev_->mappings_open();
        out->ipc_mapped_bytes = dev_->mapped_bytes();
    }
    if (outbox_) {
        out->shared_chunks = outbox_->counters().lent;
        out->shared_slot_waits = outbox_->counters().busy;
    }
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
    size_t dropped = 0;
    auto drop = [&](InboundMsg *m) {
        // A sender of a descriptor waits for its acknowledgement.
        if (m->kind == InboundMsg::DESC)
            pending_acks_.push_back(PendingAck{m->desc.src_peer, m->desc.ack_id});
        if (m->kind == InboundMsg::CHUNKED)
            log(GW_LOG_WARN, "a chunked transfer of %llu bytes was never received; its sender "
                             "waits for it", (unsigned long long)m->chunked.length);
        release(m);
        ++dropped;
    };
    auto it = contexts_.find(ctx);
    if (it != contexts_.end()) {
        Context &c = *it->second;
        while (InboundMsg *m = c.unexpected().pop_front()) {
            --pulled_;
            drop(m);
        }
        if (last_context_ == &c) last_context_ = nullptr;
        contexts_.erase(it);
    }
    // What UCX still holds for this communicator can never be received.
    uint64_t t, mask;
    make_recv_tag(ctx, GW_ANY_SOURCE, 0, false, t, mask);
    mask &= ~kTagMask;
    while (InboundMsg *m = pull(t, mask)) drop(m);
    if (dropped) {
        log(GW_LOG_WARN, "%zu unreceived message(s) of communicator %u dropped", dropped, ctx);
        stats_.dropped_messages += dropped;
    }
    if (!pending_acks_.empty() || !pending_hints_.empty()) flush_acks();
    lock_.unlock();
}

} // namespace gpuwire::engine
