// The extern "C" face of the engine (gpuwire/engine.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/engine.hpp"

using gpuwire::engine::Engine;

struct gw_engine {
    std::unique_ptr<Engine> impl;
};

extern "C" {

void gw_engine_params_init(gw_engine_params_t *params)
{
    std::memset(params, 0, sizeof(*params));
    params->verbose = GW_LOG_WARN;
    params->device_support = 1;
    params->ipc_enabled = 1;
    params->device_sync = 0;
    params->ipc_threshold = 0;
    params->ipc_sync_max = 16384;
    params->ipc_kernel_max = size_t{64} << 20;
    params->ipc_cache_entries = 512;
    params->ipc_cache_bytes = size_t{64} << 30;
    params->chunk_bytes = size_t{4} << 20;
    params->pace_gbps = 0;
    params->pace_min_bytes = size_t{1} << 20;
    params->recv_window_bytes = size_t{64} << 20;
    params->pace_auto = 1;
    params->pace_poll_us = 100;
    params->pinned_bounce_bytes = size_t{256} << 20;
    params->staging_bytes = size_t{64} << 20;
    params->shared_staging = 1;
    params->shared_staging_min = size_t{32} << 10;
    params->shared_staging_bytes = size_t{32} << 20;
    params->shared_staging_host = 1;
    params->bounce_to_host_max = 4096;
    params->shared_piece_bytes = size_t{1} << 20;
    // A pinned host sender copies into the receiver's GPU memory itself: the
    // slots' CPU copy held it to 11 GB/s against 54 for one DMA. Pageable
    // senders stay on the slots (measured at the pageable cudaMemcpy rate).
    params->shared_push = 1;
    params->push_pageable_min = 0;
    params->host_register_bytes = size_t{1} << 30;
    params->host_register_min = size_t{1} << 20;
}

gw_status_t gw_engine_create(const gw_engine_params_t *params, gw_engine_t **engine, char *why,
                             size_t why_len)
{
    std::string reason;
    auto *e = new (std::nothrow) gw_engine;
    gw_status_t st = e ? Engine::create(*params, e->impl, reason) : GW_ERR_NO_MEMORY;
    if (st != GW_OK) {
        if (!e) reason = "out of memory";
        delete e;
        if (why && why_len) std::snprintf(why, why_len, "%s", reason.c_str());
        return st;
    }
    *engine = e;
    return GW_OK;
}

void gw_engine_destroy(gw_engine_t *engine) { delete engine; }

void gw_engine_disconnect(gw_engine_t *engine) { engine->impl->disconnect(); }

gw_status_t gw_engine_check_reachable(gw_engine_t *engine, uint32_t peer, char *why,
                                      size_t why_len)
{
    std::string reason;
    gw_status_t st = engine->impl->check_reachable(peer, reason);
    if (st != GW_OK && why && why_len) std::snprintf(why, why_len, "%s", reason.c_str());
    return st;
}

void gw_engine_address(const gw_engine_t *engine, const void **addr, size_t *len)
{
    *addr = engine->impl->address();
    *len = engine->impl->address_length();
}

int gw_engine_progress(gw_engine_t *engine) { return engine->impl->progress(); }

// Tags enter the engine folded into the wire's field (wire.hpp, fold_tag),
// so the engine's own queues match exactly what UCX matches.
gw_status_t gw_isend(gw_engine_t *engine, gw_request_t *req, uint32_t peer, uint32_t ctx,
                     int32_t my_rank, int32_t tag, const void *buf, size_t len, unsigned flags)
{
    return engine->impl->isend(req, peer, ctx, my_rank, gpuwire::engine::fold_tag(tag), buf, len, flags);
}

gw_status_t gw_irecv(gw_engine_t *engine, gw_request_t *req, uint32_t ctx, int32_t source,
                     int32_t tag, void *buf, size_t cap)
{
    return engine->impl->irecv(req, ctx, source, gpuwire::engine::fold_tag(tag), buf, cap);
}

gw_status_t gw_isend_layout(gw_engine_t *engine, gw_request_t *req, uint32_t peer, uint32_t ctx,
                            int32_t my_rank, int32_t tag, const gw_layout_t *layout,
                            unsigned flags)
{
    return engine->impl->isend_layout(req, peer, ctx, my_rank, gpuwire::engine::fold_tag(tag),
                                      layout, flags);
}

gw_status_t gw_irecv_layout(gw_engine_t *engine, gw_request_t *req, uint32_t ctx,
                            int32_t source, int32_t tag, const gw_layout_t *layout)
{
    return engine->impl->irecv_layout(req, ctx, source, gpuwire::engine::fold_tag(tag), layout);
}

gw_status_t gw_ipc_map(gw_engine_t *engine, uint32_t peer, const void *blob, size_t len,
                       int device, void **ptr, void **lease, char *why, size_t why_len)
{
    std::string reason;
    const gw_status_t st = engine->impl->ipc_map(peer, blob, len, device, ptr, lease, reason);
    if (GW_OK != st && why && why_len) snprintf(why, why_len, "%s", reason.c_str());
    return st;
}

void gw_ipc_unmap(gw_engine_t *engine, void *lease) { engine->impl->ipc_unmap(lease); }

int gw_iprobe(gw_engine_t *engine, uint32_t ctx, int32_t source, int32_t tag,
              gw_probe_info_t *info)
{
    return engine->impl->iprobe(ctx, source, gpuwire::engine::fold_tag(tag), info);
}

int gw_improbe(gw_engine_t *engine, uint32_t ctx, int32_t source, int32_t tag,
               gw_probe_info_t *info, gw_message_t **msg)
{
    return engine->impl->improbe(ctx, source, gpuwire::engine::fold_tag(tag), info, msg);
}

gw_status_t gw_imrecv(gw_engine_t *engine, gw_request_t *req, gw_message_t *msg, void *buf,
                      size_t cap)
{
    return engine->impl->imrecv(req, msg, buf, cap);
}

int gw_cancel_recv(gw_engine_t *engine, gw_request_t *req)
{
    return engine->impl->cancel_recv(req);
}

void gw_context_release(gw_engine_t *engine, uint32_t ctx) { engine->impl->context_release(ctx); }
void gw_context_open(gw_engine_t *engine, uint32_t ctx) { engine->impl->context_open(ctx); }

int gw_engine_is_device_memory(gw_engine_t *engine, const void *buf, size_t len)
{
    return engine->impl->is_device_memory(buf, len);
}

int gw_engine_has_device(const gw_engine_t *engine, const char **why_not)
{
    return engine->impl->has_device(why_not);
}

void gw_engine_stats(const gw_engine_t *engine, gw_engine_stats_t *stats)
{
    engine->impl->stats(stats);
}

} // extern "C"
