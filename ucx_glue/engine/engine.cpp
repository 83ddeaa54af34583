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

Engine::Engine(const gw_engine_params_t &params)
    : params_(params), lock_(params.thread_multiple != 0), peers_(params.npeers),
      local_(params.npeers, -1)
{
    done_.reserve(64);
    device_recv_rp_.memory_type = UCS_MEMORY_TYPE_CUDA;
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
    // The fabric before UCX starts: the RoCE port, GID and traffic class,
    // DCQCN's state, and (roce_apply) UCX's GID settings.
    fabric_ = setup_fabric(params_.sysfs_root, params_.roce_apply != 0, fabric_once_,
                           fabric_sink());
    for (const auto &[name, value] : fabric_.ucx_settings) {
        s = ucp_config_modify(config, name.c_str(), value.c_str());
        if (s != UCS_OK) {
            ucp_config_release(config);
            why = "UCX refused " + name + "=" + value + ": " + ucs_status_string(s);
            return from_ucs(s);
        }
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

    if (gw_status_t ls = create_layout_dts(why); ls != GW_OK) return ls;

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
    path_.ipc_kernel_max = params_.ipc_kernel_max;
    path_.push = PushConfig{params_.shared_push != 0, params_.push_pageable_min};
    if (params_.device_support) {
        DeviceConfig dc;
        dc.ipc_cache_entries = params_.ipc_cache_entries;
        dc.ipc_cache_bytes = params_.ipc_cache_bytes;
        dc.bounce_max_bytes = params_.pinned_bounce_bytes;
        dc.staging_max_bytes = params_.staging_bytes;
        dc.order_after_user = params_.device_sync != 0;
        dc.host_register_bytes = params_.host_register_bytes;
        dc.host_register_min = params_.host_register_min;
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
    if (dev_ && params_.host_register_bytes)
        log(GW_LOG_INFO, "pageable host buffers used again: %s",
            dev_->host_registry_hooked() ? "pinned on their second use (host registry)"
                                   : "staged; no unmap events from UCX's memory hooks (UCM), "
                                     "so the host registry is off");
    log(GW_LOG_INFO, "engine up: peer %u of %u, worker address %zu bytes, %s threads",
        params_.my_peer, params_.npeers, address_length_,
        params_.thread_multiple ? "multiple" : "single");
    return GW_OK;
}

// The fabric layer's lines, at the engine's levels; they carry their own
// prefix ("fabric: ...", "roce: ...").
fabric::LogSink Engine::fabric_sink()
{
    return [this](fabric::LogLevel level, std::string_view line) {
        int l = level == fabric::LogLevel::Error     ? GW_LOG_ERROR
                : level == fabric::LogLevel::Warning ? GW_LOG_WARN
                : level == fabric::LogLevel::Info    ? GW_LOG_INFO
                                                     : GW_LOG_DEBUG;
        // Most of the fabric library's lines carry their own prefix.
        const bool prefixed = line.substr(0, 8) == "fabric: " || line.substr(0, 6) == "roce: ";
        log(l, "%s%.*s", prefixed ? "" : "fabric: ", int(line.size()), line.data());
    };
}

// Pacing toward other nodes: at pace_gbps, or (pace_auto) at the rate of the
// RoCE port the fabric set-up chose; that port's CNP counter feeds the controller.
gw_status_t Engine::start_pacing(std::string &why)
{
    double gbps = params_.pace_gbps;
    const fabric::SysfsRoot root(params_.sysfs_root ? params_.sysfs_root : "/");
    if (gbps > 0 || params_.pace_auto) {
        if (const auto &port = fabric_.pace_port) {
            if (gbps <= 0) gbps = port->rate_gbps;
            auto reader = std::make_unique<fabric::CongestionCounterReader>(
                root, port->device, port->port_number, fabric_sink(),
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
    // DCQCN's constants scaled to the rate: any rate pml_gpuwire_pace_mbps
    // allows (1 Mb/s up) is a valid configuration.
    pc.rate = pacing::dcqcn_config_for_rate(gbps);
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
    std::unique_lock<EngineLock> guard(lock_);
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
    guard.unlock();
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
    if (layout_dts_) {
        ucp_dt_destroy(layout_send_dt_);
        ucp_dt_destroy(layout_recv_dt_);
    }
    if (context_) ucp_cleanup(context_);
    free_abandoned();
    dev_.reset(); // waits for device copies in flight; unpins every pinned buffer
    inbox_.reset(); // no copy from or into these slots is in flight any more
    outbox_.reset();
    run_completions();
}

// Device copies, congestion counters, chunked transfers and acknowledgements;
// called from progress() with the lock held.
int Engine::progress_side_work()
{
    int n = 0;
    if (dev_ && dev_->busy()) {
        dev_->flush_copies(); // those queued by this call's receives
        n += dev_->poll([this](void *token, const cuda::Status &s) {
            if (XferSlot *slot = slot_of_token(token)) {
                if (!s) log(GW_LOG_ERROR, "chunk copy failed: %s", s.message().c_str());
                slot_copied(*slot, bool(s));
                return;
            }
            auto *op = static_cast<RecvOp *>(token);
            if (!s) log(GW_LOG_ERROR, "device copy failed: %s", s.message().c_str());
            pending_acks_.push_back(PendingAck{op->ack_peer, op->ack_id});
            // A sender that failed meanwhile may have taken its memory with
            // it: the copy proves nothing (fail_peer).
            const bool gone = op->ack_peer < peers_.size() && peers_[op->ack_peer].failed;
            complete(op->req, !s ? GW_ERR_TRANSPORT : gone ? GW_ERR_UNREACHABLE : GW_OK);
        });
    }
    if (cnp_reader_ && pacer_) [[unlikely]]
        poll_congestion();
    if (!xfers_.empty()) advance_xfers();
    if (!pending_acks_.empty() || !pending_hints_.empty()) flush_acks();
    return n;
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
    std::unique_lock<EngineLock> guard(lock_);
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
    guard.unlock();
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
    std::lock_guard<EngineLock> guard(lock_);
    delete static_cast<cuda::IpcMapping *>(lease);
}

void Engine::stats(gw_engine_stats_t *out) const
{
    std::unique_lock<EngineLock> guard(lock_);
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
    guard.unlock();
    if (dev_) {
        auto c = dev_->classifier_counters();
        out->classifier_host_hits = c.host_hits;
        out->classifier_device_hits = c.device_hits;
        out->classifier_misses = c.misses;
        auto m = dev_->mapping_counters();
        out->ipc_map_hits = m.hits;
        out->ipc_map_misses = m.misses;
        out->ipc_map_evictions = m.evictions;
        cuda::HostRegistryCounters r = dev_->host_registry_counters();
        out->host_registered = r.pinned;
        out->host_register_hits = r.hits;
        out->host_register_unmapped = r.unmapped;
        out->host_register_refused = r.failed;
        out->host_registered_bytes = r.bytes;
    }
}

// An unreceived message a communicator's release or reuse drops.
void Engine::drop_unreceived(InboundMsg *m)
{
    // A sender of a descriptor waits for its acknowledgement.
    if (m->kind == InboundMsg::DESC)
        pending_acks_.push_back(PendingAck{m->desc.src_peer, m->desc.ack_id});
    if (m->kind == InboundMsg::CHUNKED)
        log(GW_LOG_WARN, "a chunked transfer of %llu bytes was never received; its sender "
                         "waits for it", (unsigned long long)m->chunked.length);
    release(m);
}

// The engine's own queue of the communicator goes now. What UCX holds for
// it stays until the id is opened again (context_open): looking for it is a
// scan of every message UCX holds, of all communicators, which done at each
// release made freeing N communicators that each wait behind others cost
// N^2 (bench/gwscale comms).
void Engine::context_release(uint32_t ctx)
{
    std::lock_guard<EngineLock> guard(lock_);
    size_t dropped = 0;
    auto it = contexts_.find(ctx);
    if (it != contexts_.end()) {
        Context &c = *it->second;
        while (InboundMsg *m = c.unexpected().pop_front()) {
            --pulled_;
            drop_unreceived(m);
            ++dropped;
        }
        if (last_context_ == &c) last_context_ = nullptr;
        contexts_.erase(it);
    }
    released_.insert(ctx);
    if (dropped) {
        log(GW_LOG_WARN, "%zu unreceived message(s) of communicator %u dropped", dropped, ctx);
        stats_.dropped_messages += dropped;
    }
    if (!pending_acks_.empty() || !pending_hints_.empty()) flush_acks();
}

// Called before any process may send on the new communicator: everything
// UCX holds with this id belongs to a released one and can never be received.
void Engine::context_open(uint32_t ctx)
{
    std::lock_guard<EngineLock> guard(lock_);
    if (released_.erase(ctx) == 0) return;
    uint64_t t, mask;
    make_recv_tag(ctx, GW_ANY_SOURCE, 0, false, t, mask);
    mask &= ~kTagMask;
    size_t dropped = 0;
    while (InboundMsg *m = pull(t, mask)) {
        drop_unreceived(m);
        ++dropped;
    }
    if (dropped) {
        log(GW_LOG_WARN, "%zu unreceived message(s) of a freed communicator with id %u dropped",
            dropped, ctx);
        stats_.dropped_messages += dropped;
    }
    if (!pending_acks_.empty() || !pending_hints_.empty()) flush_acks();
}

} // namespace gpuwire::engine
