// Probes: messages taken out of UCX (pulled) into the context queues,
// and the draining of messages nobody will receive.
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
    if (!control_length(info.length)) return m;

    // Maybe one of the engine's messages: read it now, a probe must report
    // the size a control message names.
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
    if (sr.status == UCS_OK && control_kind(bytes, sr.length) == Control::none) {
        std::memcpy(m->bytes, bytes, sr.length); // user bytes after all
        m->kind = InboundMsg::BYTES;
        m->length = sr.length;
        return m;
    }
    if (!read_device_message(sr.status, bytes, sr.length, info.sender_tag, *m)) {
        delete m;
        return nullptr;
    }
    return m;
}

// A control message's bytes: a device descriptor or a chunked-transfer header
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

int Engine::iprobe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info)
{
    std::lock_guard<EngineLock> guard(lock_);
    InboundMsg *m = pulled_ ? context(ctx).peek_unexpected(source, tag) : nullptr;
    if (!m) {
        uint64_t t, mask;
        make_recv_tag(ctx, source, tag, tag == GW_ANY_TAG, t, mask);
        ucp_tag_recv_info_t ti;
        if (ucp_tag_probe_nb(worker_, t, mask, 0, &ti)) {
            if (!control_length(ti.length)) {
                *info = gw_probe_info_t{rank_of(ti.sender_tag), tag_of(ti.sender_tag), ti.length};
                return 1;
            }
            m = pull_prefix(ctx, rank_of(ti.sender_tag), tag);
        }
    }
    if (m) {
        *info = gw_probe_info_t{m->source, m->tag, m->length};
        return 1;
    }
    return probe_source_gone(ctx, source) ? -1 : 0;
}

int Engine::improbe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info,
                    gw_message_t **msg)
{
    std::lock_guard<EngineLock> guard(lock_);
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
        return 1;
    }
    return probe_source_gone(ctx, source) ? -1 : 0;
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

} // namespace gpuwire::engine
