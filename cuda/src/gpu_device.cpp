// The C interface of gpuwire/gpu_device.h (coll gpuwire's view of the GPU)
// over the process's one GPU context: memory kinds, host staging, copies,
// device scratch and reductions. The NVLink teams: gpu_device_team.cpp.
#include "gpuwire/gpu_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpu_device_state.hpp"
#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/device_buffer.hpp"
#include "gpuwire/cuda/reduce.h"

namespace cu = gpuwire::cuda;
using gpuwire::cuda::coll::CollDevice;
using gpuwire::cuda::coll::fail_status;
using gpuwire::cuda::coll::g_dev;
using gpuwire::cuda::detail::fail;

namespace gpuwire::cuda::coll {
CollDevice* g_dev = nullptr;
}

namespace {

void (*g_log)(int, const char *) = nullptr;

void log_sink(cu::LogLevel level, const char *msg, void *)
{
    if (g_log) g_log(static_cast<int>(level), msg);
}

// The collectives' stream of gpu.
int stream_of(int gpu, cu::TrackedStream **out, char *why, size_t why_len)
{
    auto s = g_dev->ctx->coll_stream(gpu);
    if (!s) return fail_status(why, why_len, "stream", s.status());
    *out = *s;
    return 0;
}

} // namespace

extern "C" {

GW_CORE_API int gw_coll_device_open(const gw_coll_device_params_t *params, char *why,
                                    size_t why_len)
{
    if (g_dev) return g_dev->ctx->device_count();
    g_log = params->log;
    cu::set_log_sink(g_log ? log_sink : nullptr, nullptr);
    cu::GpuContextConfig cc;
    // Sizes only matter where the collectives create the context (pml
    // gpuwire not selected, or opened later): their staging bound then
    // becomes the shared pinned cache's, never below the engine's default.
    cc.pinned_cache_bytes = std::max(cc.pinned_cache_bytes, params->staging_bytes);
    std::string reason;
    cu::GpuContext *ctx = cu::GpuContext::acquire(cc, reason);
    if (!ctx) {
        cu::set_log_sink(nullptr, nullptr);
        return fail(why, why_len, "no GPU: %s",
                    reason == "no GPU" ? "the driver reports none" : reason.c_str());
    }
    g_dev = new CollDevice;
    g_dev->ctx = ctx;
    g_dev->pinned_staging = params->staging_bytes != 0;
    return ctx->device_count();
}

GW_CORE_API void gw_coll_device_close(void)
{
    if (!g_dev) return;
    cu::GpuContext::release(g_dev->ctx);
    delete g_dev;
    g_dev = nullptr;
    cu::set_log_sink(nullptr, nullptr);
}

GW_CORE_API int gw_coll_device_classify(const void *ptr, size_t len, gw_coll_mem_t *out,
                                        char *why, size_t why_len)
{
    cu::MemoryInfo info;
    cu::Status s = g_dev->ctx->classifier().classify(ptr, len, info);
    if (!s) return fail_status(why, why_len, "classify", s);
    out->on_gpu = info.on_gpu();
    out->gpu = info.on_gpu() ? info.device : -1;
    out->unordered = (info.flags & cu::kUnordered) != 0;
    return 0;
}

// Pinned buffers come from the context's pinned cache (owner: the buffer);
// a request the cache cannot serve gets plain host memory (owner NULL).
GW_CORE_API int gw_coll_staging_get(size_t len, int gpu, gw_coll_host_buf_t *out, char *why,
                                    size_t why_len)
{
    if (g_dev->pinned_staging) {
        cu::Result<void *> b = g_dev->ctx->with_pinned_cache(
            [&](cu::PinnedCache &c) { return c.acquire(len ? len : 1, gpu < 0 ? 0 : gpu); });
        // busy or a refused pin: plain host memory below.
        if (b) {
            *out = gw_coll_host_buf_t{*b, len, *b};
            return 0;
        }
    }
    void *p = std::malloc(len ? len : 1);
    if (!p) return fail(why, why_len, "malloc of %zu bytes of host staging failed", len);
    g_dev->plain_allocs.fetch_add(1, std::memory_order_relaxed);
    *out = gw_coll_host_buf_t{p, len, nullptr};
    return 0;
}

GW_CORE_API void gw_coll_staging_put(gw_coll_host_buf_t *buf)
{
    if (!buf->ptr) return;
    if (buf->owner) {
        void *owner = buf->owner;
        g_dev->ctx->with_pinned_cache([owner](cu::PinnedCache &c) { c.release(owner); });
    } else {
        std::free(buf->ptr);
    }
    *buf = gw_coll_host_buf_t{nullptr, 0, nullptr};
}

GW_CORE_API int gw_coll_device_wait_user(int gpu, char *why, size_t why_len)
{
    cu::Status s = cu::wait_legacy_stream(gpu);
    return s ? 0 : fail_status(why, why_len, "waiting for the default stream", s);
}

GW_CORE_API int gw_coll_copy_start(void *dst, const void *src, size_t len, int gpu,
                                   uint64_t *ticket, char *why, size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_dev->mu);
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    cu::Status s = cu::copy_async(dst, src, len, ts->stream());
    if (!s) return fail_status(why, why_len, "copy", s);
    auto t = ts->mark();
    if (!t) return fail_status(why, why_len, "copy completion", t.status());
    *ticket = *t;
    return 0;
}

GW_CORE_API int gw_coll_copy_device_start(void *dst, const void *src, size_t len, int gpu,
                                          bool both_device, uint64_t *ticket, char *why,
                                          size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_dev->mu);
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    if (both_device && len > 0) {
        // One submission for the copy and its signal (an 8-byte copy and a
        // mark are two, about 1.5 us more).
        const cu::CopyItem item{dst, src, len};
        auto t = ts->copy_and_mark(&item, 1);
        if (t) {
            *ticket = *t;
            return 0;
        }
        if (t.status().code() != cu::Errc::not_supported)
            return fail_status(why, why_len, "copy", t.status());
    }
    cu::Status s = cu::copy_async(dst, src, len, ts->stream());
    if (!s) return fail_status(why, why_len, "copy", s);
    auto t = ts->mark();
    if (!t) return fail_status(why, why_len, "copy completion", t.status());
    *ticket = *t;
    return 0;
}

GW_CORE_API int gw_coll_copy_device_batch(const gw_coll_copy_item_t *items, int n, int gpu,
                                          uint64_t *ticket, char *why, size_t why_len)
{
    static_assert(GW_COLL_COPY_BATCH_MAX == cu::kCopyBatchMax, "one batch size");
    static_assert(sizeof(gw_coll_copy_item_t) == sizeof(cu::CopyItem), "one item layout");
    if (n < 1 || n > GW_COLL_COPY_BATCH_MAX)
        return fail(why, why_len, "a batch of %d copies (1 to %d)", n, GW_COLL_COPY_BATCH_MAX);
    std::lock_guard<std::mutex> lock(g_dev->mu);
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    cu::CopyItem batch[cu::kCopyBatchMax];
    for (int i = 0; i < n; i++) batch[i] = cu::CopyItem{items[i].dst, items[i].src, items[i].len};
    auto t = ts->copy_and_mark(batch, n);
    if (t) {
        *ticket = *t;
        return 0;
    }
    if (t.status().code() != cu::Errc::not_supported)
        return fail_status(why, why_len, "copy", t.status());
    // A stream without the kernel's counter: one copy each, one mark.
    for (int i = 0; i < n; i++) {
        cu::Status s = cu::copy_async(batch[i].dst, batch[i].src, batch[i].len, ts->stream());
        if (!s) return fail_status(why, why_len, "copy", s);
    }
    auto m = ts->mark();
    if (!m) return fail_status(why, why_len, "copy completion", m.status());
    *ticket = *m;
    return 0;
}

GW_CORE_API int gw_coll_copy_wait(int gpu, uint64_t ticket, char *why, size_t why_len)
{
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    while (!ts->reached(ticket)) {
        cu::Status s = ts->check_sometimes();
        if (!s) return fail_status(why, why_len, "copy", s);
    }
    return 0;
}

GW_CORE_API int gw_coll_copy_done(int gpu, uint64_t ticket, bool query_errors, bool *done,
                                  char *why, size_t why_len)
{
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    if (ts->reached(ticket)) {
        *done = true;
        return 0;
    }
    if (query_errors) {
        cu::Status s = ts->check();
        if (!s) return fail_status(why, why_len, "copy", s);
    }
    *done = false;
    return 0;
}

GW_CORE_API int gw_coll_scratch_get(size_t len, int gpu, gw_coll_dev_buf_t *out, char *why,
                                    size_t why_len)
{
    cu::Result<cu::DeviceBuffer *> b =
        g_dev->ctx->with_scratch([&](cu::ScratchCache &c) { return c.get(len, gpu); });
    if (!b) return fail_status(why, why_len, "device scratch (cudaMalloc)", b.status());
    *out = gw_coll_dev_buf_t{(*b)->data(), len, *b};
    return 0;
}

GW_CORE_API void gw_coll_scratch_put(gw_coll_dev_buf_t *buf)
{
    if (!buf->owner) return;
    auto *b = static_cast<cu::DeviceBuffer *>(buf->owner);
    *buf = gw_coll_dev_buf_t{nullptr, 0, nullptr};
    g_dev->ctx->with_scratch([b](cu::ScratchCache &c) { c.put(b); });
}

GW_CORE_API bool gw_coll_reduce_supported(int op, int type)
{
    return gw_reduce_supported(op, type) != 0;
}

GW_CORE_API int gw_coll_reduce_start(int op, int type, const void *a, const void *b, void *out,
                                     size_t count, int gpu, uint64_t *ticket, char *why,
                                     size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_dev->mu);
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    {
        cu::DeviceGuard guard(gpu);
        if (!guard.status()) return fail_status(why, why_len, "reduction", guard.status());
        if (gw_dev_reduce3(op, type, a, b, out, count, ts->handle(), why, why_len) != 0) return -1;
    }
    auto t = ts->mark();
    if (!t) return fail_status(why, why_len, "reduction completion", t.status());
    *ticket = *t;
    return 0;
}

GW_CORE_API int gw_coll_cas_start(void *dst, const void *origin, const void *compare,
                                  void *result, size_t len, int gpu, uint64_t *ticket, char *why,
                                  size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_dev->mu);
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    {
        cu::DeviceGuard guard(gpu);
        if (!guard.status()) return fail_status(why, why_len, "compare-and-swap", guard.status());
        if (gw_dev_cas(dst, origin, compare, result, len, ts->handle(), why, why_len) != 0) {
            return -1;
        }
    }
    auto t = ts->mark();
    if (!t) return fail_status(why, why_len, "compare-and-swap completion", t.status());
    *ticket = *t;
    return 0;
}

GW_CORE_API void gw_coll_device_stats(gw_coll_device_stats_t *out)
{
    *out = gw_coll_device_stats_t{};
    if (!g_dev) return;
    cu::ClassifierCounters c = g_dev->ctx->classifier().counters();
    out->host_hits = c.host_hits;
    out->misses = c.misses;
    out->stale = c.stale;
    out->invalidated = c.invalidated;
    out->classified = c.host_hits + c.device_hits + c.misses;
    g_dev->ctx->with_pinned_cache([out](cu::PinnedCache &pc) {
        out->pinned_bytes = pc.held_bytes();
        out->pinned_lent = pc.lent_bytes();
    });
    out->plain_allocs = g_dev->plain_allocs.load(std::memory_order_relaxed);
    out->unmap_hooked = g_dev->ctx->unmap_hooked();
}

} // extern "C"
