// The C interface of gpuwire/gpu_layer.h (libgpuwire_mpi.so's view of the
// GPU) over the process's one GPU context: memory kinds from its classifier,
// copies with the core's CUDA runtime, host temporaries from its pinned cache.
#include "gpuwire/gpu_layer.h"

#include <cstdlib>
#include <mutex>
#include <string>

#include "gpuwire/cuda/gpu_context.hpp"
#include "gpuwire/cuda/why.hpp"
#include "internal.hpp"

namespace cu = gpuwire::cuda;
using gpuwire::cuda::detail::fail;

namespace {

// The layer's one reference on the context, taken by the first open and
// given back by the last close. Set before gw_layer_open returns and read by
// the other calls, which the contract allows only in between.
constinit std::mutex g_mu;
constinit cu::GpuContext *g_ctx = nullptr;
constinit unsigned long long g_opens = 0;

int fail_status(char *why, size_t why_len, const char *what, const cu::Status &s)
{
    return fail(why, why_len, "%s: %s", what, s.message().c_str());
}

} // namespace

extern "C" {

GW_CORE_API int gw_layer_open(char *why, size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_mu);
    __atomic_fetch_add(&gw_core_counters()->layer_opens, 1, __ATOMIC_RELAXED);
    if (!g_ctx) {
        // Sizes only matter where the layer creates the context (no gpuwire
        // component opened with device support): the engine's defaults.
        std::string reason;
        cu::GpuContext *ctx = cu::GpuContext::acquire(cu::GpuContextConfig{}, reason);
        if (!ctx)
            return fail(why, why_len, "no GPU: %s",
                        reason == "no GPU" ? "the driver reports none" : reason.c_str());
        g_ctx = ctx;
    }
    ++g_opens;
    return g_ctx->device_count();
}

GW_CORE_API void gw_layer_close(void)
{
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_opens == 0) return;
    if (--g_opens == 0) {
        cu::GpuContext::release(g_ctx);
        g_ctx = nullptr;
    }
}

GW_CORE_API int gw_layer_classify(const void *ptr, int *gpu, char *why, size_t why_len)
{
    cu::MemoryInfo info;
    cu::Status s = g_ctx->classifier().classify(ptr, 1, info);
    if (!s) return fail_status(why, why_len, "classify", s);
    *gpu = info.on_gpu() ? info.device : -1;
    // Managed memory is readable by the CPU: Open MPI's own code handles it.
    return info.kind == cu::MemoryKind::device || info.kind == cu::MemoryKind::vmm;
}

GW_CORE_API int gw_layer_copy(void *dst, const void *src, size_t len, int gpu, char *why,
                              size_t why_len)
{
    if (len == 0) return 0;
#if GPUWIRE_HAVE_CUDA
    // In the context of the GPU holding the device side, never in one made
    // on GPU 0 for the purpose.
    cu::DeviceGuard guard(gpu < 0 ? 0 : gpu);
    if (!guard.status()) return fail_status(why, why_len, "copy", guard.status());
    // The legacy default stream, as the application's own cudaMemcpy: ordered
    // after what it queued there, synchronous for the host side.
    cu::Status s = cu::rt_check(cudaMemcpy(dst, src, len, cudaMemcpyDefault), "cudaMemcpy");
    if (!s) return fail(why, why_len, "copy of %zu bytes: %s", len, s.message().c_str());
    return 0;
#else
    (void)dst;
    (void)src;
    (void)gpu;
    return fail_status(why, why_len, "copy", cu::no_cuda_status());
#endif
}

GW_CORE_API int gw_layer_host_get(size_t len, int gpu, gw_layer_host_buf_t *out, char *why,
                                  size_t why_len)
{
    // busy (the cache's bound, shared with pml gpuwire's bounce buffers) or a
    // refused pin: plain host memory below, slower to copy but as correct.
    cu::Result<void *> b = g_ctx->with_pinned_cache(
        [&](cu::PinnedCache &c) { return c.acquire(len ? len : 1, gpu < 0 ? 0 : gpu); });
    if (b) {
        *out = gw_layer_host_buf_t{*b, len, *b};
        return 0;
    }
    void *p = std::malloc(len ? len : 1);
    if (!p) return fail(why, why_len, "malloc of a %zu-byte host temporary failed", len);
    *out = gw_layer_host_buf_t{p, len, nullptr};
    return 0;
}

GW_CORE_API void gw_layer_host_put(gw_layer_host_buf_t *buf)
{
    if (!buf->ptr) return;
    if (buf->owner) {
        void *owner = buf->owner;
        g_ctx->with_pinned_cache([owner](cu::PinnedCache &c) { c.release(owner); });
    } else {
        std::free(buf->ptr);
    }
    *buf = gw_layer_host_buf_t{nullptr, 0, nullptr};
}

} // extern "C"
