#include "engine/device_path.hpp"

#include <algorithm>
#include <cstring>

#include "engine/protocol.hpp"
#include "gpuwire/cuda/copy.hpp"

namespace gpuwire::engine {

const char *protocol_name(Protocol p)
{
    switch (p) {
    case Protocol::host: return "host";
    case Protocol::ipc: return "ipc";
    case Protocol::ucx_device: return "ucx-device";
    case Protocol::staged: return "staged";
    }
    return "?";
}

std::unique_ptr<DevicePath> DevicePath::create(const DeviceConfig &config, std::string &why)
{
    cuda::GpuContextConfig cc;
    cc.ipc_cache_entries = config.ipc_cache_entries;
    cc.ipc_cache_bytes = config.ipc_cache_bytes;
    cc.p2p_streams = config.streams_per_device;
    cc.staging_chunk_bytes = config.staging_chunk_bytes;
    cc.staging_max_bytes = config.staging_max_bytes;
    cc.pinned_cache_bytes = config.bounce_max_bytes;
    cuda::GpuContext *ctx = cuda::GpuContext::acquire(cc, why);
    if (!ctx) return nullptr;
    ctx->configure_host_registry(config.host_register_bytes, config.host_register_min);
    return std::unique_ptr<DevicePath>(new DevicePath(ctx, config.order_after_user));
}

DevicePath::~DevicePath()
{
    queue_.clear(); // never started: nothing reads or writes their buffers
    // Copies still in flight hold mapping leases: wait for them.
    for (Pending &p : pending_) {
        while (!p.stream->reached(p.ticket) && p.stream->check_sometimes()) {
        }
    }
    pending_.clear();
    cuda::GpuContext::release(ctx_);
}

cuda::Status DevicePath::copy_sync(void *dst, const void *src, size_t len, int device)
{
    cuda::Status os = order_after_user(device);
    if (!os) return os;
    auto s = ctx_->p2p_stream(device, 0);
    if (!s) return s.status();
    cuda::Status st = cuda::copy_async(dst, src, len, (*s)->stream());
    if (!st) return st;
    return (*s)->stream().synchronize();
}

cuda::Status DevicePath::copy_via_pinned(void *dst, const void *src, size_t len, int device,
                                         bool to_device)
{
    auto c0 = acquire_pinned(device);
    if (!c0) return copy_sync(dst, src, len, device); // staging exhausted: direct copy
    if (len <= c0->size()) {
        // One piece: a plain synchronize is the cheapest wait (no stream write).
        char *pin = static_cast<char *>(c0->data());
        if (to_device) std::memcpy(pin, src, len);
        cuda::Status st = copy_sync(to_device ? dst : pin, to_device ? pin : src, len, device);
        if (st && !to_device) std::memcpy(dst, pin, len);
        return st;
    }
    cuda::Status os = order_after_user(device);
    if (!os) return os;
    auto c1 = acquire_pinned(device);
    auto ts = ctx_->p2p_stream(device, 0);
    if (!ts) return ts.status();
    cuda::TrackedStream *s = *ts;
    cuda::PinnedChunk *chunk[2] = {&*c0, c1 ? &*c1 : &*c0};
    uint64_t ticket[2] = {0, 0};
    const size_t piece = chunk[0]->size();
    auto wait = [&](uint64_t t) -> cuda::Status {
        while (t && !s->reached(t)) {
            cuda::Status st = s->check_sometimes();
            if (!st) return st;
        }
        return cuda::Status{};
    };
    for (size_t off = 0, i = 0; off < len; off += piece, ++i) {
        size_t n = std::min(piece, len - off);
        unsigned b = i & 1;
        cuda::Status st = wait(ticket[b]); // the chunk's previous DMA is done
        if (!st) return st;
        char *pin = static_cast<char *>(chunk[b]->data());
        if (to_device) {
            std::memcpy(pin, static_cast<const char *>(src) + off, n);
            st = cuda::copy_async(static_cast<char *>(dst) + off, pin, n, s->stream());
        } else {
            st = cuda::copy_async(pin, static_cast<const char *>(src) + off, n, s->stream());
            if (st) {
                auto t = s->mark();
                if (!t) return t.status();
                st = wait(*t);
                if (st) std::memcpy(static_cast<char *>(dst) + off, pin, n);
                continue;
            }
        }
        if (!st) return st;
        auto t = s->mark();
        if (!t) return t.status();
        ticket[b] = *t;
    }
    cuda::Status st = wait(ticket[0]);
    return st ? wait(ticket[1]) : st;
}

cuda::Status DevicePath::start_copy(void *dst, const void *src, size_t len, int device,
                                    cuda::IpcMapping mapping, void *token)
{
    cuda::Status st = order_after_user(device);
    if (!st) return st;
    auto s = ctx_->next_p2p_stream(device);
    if (!s) return s.status();
    st = cuda::copy_async(dst, src, len, (*s)->stream());
    if (!st) return st;
    auto ticket = (*s)->mark();
    if (!ticket) return ticket.status();
    pending_.push_back(Pending{token, std::move(mapping), *s, *ticket, cuda::Status{}});
    return cuda::Status{};
}

void DevicePath::queue_copy(void *dst, const void *src, size_t len, int device,
                            cuda::IpcMapping mapping, void *token)
{
    queue_.push_back(Queued{cuda::CopyItem{dst, src, len}, device, std::move(mapping), token});
    if (queue_.size() == cuda::kCopyBatchMax) flush_copies();
}

// One kernel per GPU among the queued copies (almost always one): the items
// of a GPU go in queue order, and each gets the kernel's ticket.
void DevicePath::flush_copies()
{
    size_t begin = 0;
    while (begin < queue_.size()) {
        const int device = queue_[begin].device;
        cuda::CopyItem items[cuda::kCopyBatchMax];
        size_t end = begin, n = 0;
        for (; end < queue_.size() && queue_[end].device == device; ++end) items[n++] = queue_[end].item;
        // Ordered after the application's work: on its legacy stream, which
        // costs nothing on the CPU (a wait for that stream costs 1.5 us once
        // the process has run a kernel).
        cuda::Status st;
        cuda::TrackedStream *stream = nullptr;
        uint64_t ticket = 0;
        auto s = order_ ? ctx_->legacy_stream(device) : ctx_->next_p2p_stream(device);
        if (s) {
            stream = *s;
            auto t = stream->copy_and_mark(items, static_cast<int>(n));
            if (t) ticket = *t;
            else st = t.status();
        } else {
            st = s.status();
        }
        for (size_t i = begin; i < end; ++i)
            pending_.push_back(
                Pending{queue_[i].token, std::move(queue_[i].mapping), stream, ticket, st});
        begin = end;
    }
    queue_.clear();
}

} // namespace gpuwire::engine
