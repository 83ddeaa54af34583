// The one-sided engine's only door to the GPU (gpuwire/osc_direct.h): where
// a buffer lives, copies, the reduction kernels, peers' buffers mapped --
// over the core's C device API (gpuwire/gpu_device.h), the process's one GPU
// context, shared with pml and coll gpuwire. Without a GPU (open failed)
// every buffer is host memory and nothing here touches the device API.
#include "gpuwire/osc_direct.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "gpuwire/cuda/reduce.h"
#include "gpuwire/gpu_device.h"
#include "osc_log.hpp"

namespace gpuwire::osc {
namespace {

// Set by open (the osc component's window lock serialises it), read by any
// thread after.
std::atomic<int> ngpus{0};

// The cuda layer's own lines: errors and warnings shown, as the engine's.
void dev_log(int level, const char *msg)
{
    if (level <= 1) log(0, "%s", msg);
}

}  // namespace
}  // namespace gpuwire::osc

using gpuwire::osc::log;
using gpuwire::osc::ngpus;

static_assert(GW_OSC_DESC_BYTES == GW_COLL_BUF_DESC_BYTES, "one description size");

extern "C" {

int gw_osc_dev_open(char *why, size_t why_len)
{
    // No pinned staging: the component stages through its own messages.
    gw_coll_device_params_t p = {0, gpuwire::osc::dev_log};
    int n = gw_coll_device_open(&p, why, why_len);
    ngpus.store(n > 0 ? n : 0);
    return n;
}

void gw_osc_dev_close(void)
{
    if (ngpus.exchange(0) > 0) gw_coll_device_close();
}

int gw_osc_dev_where_order(const void *p, size_t len, bool *unordered)
{
    *unordered = false;
    if (ngpus.load(std::memory_order_relaxed) <= 0 || p == nullptr) return -1;
    gw_coll_mem_t mem;
    char why[256];
    if (gw_coll_device_classify(p, len ? len : 1, &mem, why, sizeof(why)) != 0) {
        log(0, "cannot tell where %p lives (%s); taken as host memory", p, why);
        return -1;
    }
    *unordered = mem.on_gpu && mem.unordered;
    return mem.on_gpu ? mem.gpu : -1;
}

int gw_osc_dev_where(const void *p, size_t len)
{
    bool unordered;
    return gw_osc_dev_where_order(p, len, &unordered);
}

int gw_osc_dev_wait_user(int gpu)
{
    char why[256];
    if (gw_coll_device_wait_user(gpu, why, sizeof(why)) != 0) {
        log(0, "waiting for the application's work on GPU %d failed: %s", gpu, why);
        return -1;
    }
    return 0;
}

int gw_osc_dev_describe(const void *p, size_t len, void *desc, char *why, size_t why_len)
{
    if (ngpus.load(std::memory_order_relaxed) <= 0) {
        std::memset(desc, 0, GW_OSC_DESC_BYTES);
        std::snprintf(why, why_len, "no GPU");
        return -1;
    }
    return gw_coll_buffer_describe(p, len ? len : 1, desc, why, why_len);
}

int gw_osc_dev_map(const void *desc, uint32_t peer_id, void **mapping, void **ptr, int *gpu,
                   char *why, size_t why_len)
{
    gw_coll_peer_mapping_t *m = nullptr;
    if (ngpus.load(std::memory_order_relaxed) <= 0) {
        std::snprintf(why, why_len, "no GPU");
        return -1;
    }
    if (gw_coll_peer_map(desc, peer_id, &m, ptr, gpu, why, why_len) != 0) return -1;
    *mapping = m;
    return 0;
}

void gw_osc_dev_unmap(void *mapping)
{
    gw_coll_peer_unmap(static_cast<gw_coll_peer_mapping_t *>(mapping));
}

int gw_osc_dev_copy_start(void *dst, const void *src, size_t len, int gpu, bool both_device,
                          uint64_t *ticket)
{
    char why[256];
    if (gw_coll_copy_device_start(dst, src, len, gpu, both_device, ticket, why, sizeof(why)) !=
        0) {
        log(0, "direct copy of %zu bytes on GPU %d failed: %s", len, gpu, why);
        return -1;
    }
    return 0;
}

int gw_osc_dev_copy_batch(const gw_coll_copy_item_t *items, int n, int gpu, uint64_t *ticket)
{
    char why[256];
    if (gw_coll_copy_device_batch(items, n, gpu, ticket, why, sizeof(why)) != 0) {
        size_t bytes = 0;
        for (int i = 0; i < n && i < GW_OSC_COPY_BATCH; i++) bytes += items[i].len;
        log(0, "direct copies (%d, %zu bytes) on GPU %d failed: %s", n, bytes, gpu, why);
        return -1;
    }
    return 0;
}

int gw_osc_dev_copy_wait(int gpu, uint64_t ticket)
{
    char why[256];
    if (gw_coll_copy_wait(gpu, ticket, why, sizeof(why)) != 0) {
        log(0, "direct copies on GPU %d failed: %s", gpu, why);
        return -1;
    }
    return 0;
}

int gw_osc_dev_copy(void *dst, const void *src, size_t len, int gpu)
{
    uint64_t ticket = 0;
    char why[256];
    if (len == 0) return 0;
    // Work the application queued on the legacy stream comes first.
    if (gw_coll_device_wait_user(gpu, why, sizeof(why)) != 0 ||
        gw_coll_copy_start(dst, src, len, gpu, &ticket, why, sizeof(why)) != 0 ||
        gw_coll_copy_wait(gpu, ticket, why, sizeof(why)) != 0) {
        log(0, "device copy of %zu bytes failed: %s", len, why);
        return -1;
    }
    return 0;
}

int gw_osc_dev_reduce(void *dst, const void *src, size_t len, int op, int type, int gpu)
{
    if (op < 0 || type < 0 || !gw_coll_reduce_supported(op, type)) return 0;
    size_t esize = gw_reduce_type_size(type);
    if (esize == 0 || len % esize) return 0;
    gw_coll_dev_buf_t scratch = {};
    uint64_t ticket = 0;
    char why[256];
    // The origin's values go to the GPU, the kernel combines them into the
    // window there: the window's bytes never cross to the host.
    int rc = gw_coll_device_wait_user(gpu, why, sizeof(why));
    if (rc == 0) rc = gw_coll_scratch_get(len, gpu, &scratch, why, sizeof(why));
    if (rc == 0) rc = gw_coll_copy_start(scratch.ptr, src, len, gpu, &ticket, why, sizeof(why));
    if (rc == 0) {
        rc = gw_coll_reduce_start(op, type, scratch.ptr, dst, dst, len / esize, gpu, &ticket,
                                  why, sizeof(why));
    }
    if (rc == 0) rc = gw_coll_copy_wait(gpu, ticket, why, sizeof(why));
    if (scratch.owner != nullptr || scratch.ptr != nullptr) gw_coll_scratch_put(&scratch);
    if (rc != 0) {
        log(0, "reduction of %zu bytes on GPU %d failed: %s", len, gpu, why);
        return -1;
    }
    return 1;
}

int gw_osc_dev_acc(void *dst, int gpu, const void *src, bool src_here, void *result,
                   bool result_here, size_t len, int op, int type)
{
    if (len == 0) return 0;
    const size_t esize = op == GW_OSC_OP_REPLACE || src == nullptr ? 1
                         : type >= 0                               ? gw_reduce_type_size(type)
                                                                   : 0;
    if (esize == 0 || len % esize) return -1;
    gw_coll_dev_buf_t scratch = {};
    uint64_t ticket = 0;
    char why[256] = "";
    int rc = 0;
    // In the stream's order: the window's bytes before, into result; then
    // the origin's combined into the window (from a copy on this GPU when
    // the origin buffer is elsewhere); one wait for both.
    if (result != nullptr) {
        rc = gw_coll_copy_device_start(result, dst, len, gpu, result_here, &ticket, why,
                                       sizeof(why));
    }
    if (rc == 0 && src != nullptr && op == GW_OSC_OP_REPLACE) {
        rc = gw_coll_copy_device_start(dst, src, len, gpu, src_here, &ticket, why, sizeof(why));
    } else if (rc == 0 && src != nullptr) {
        const void *a = src;
        if (!src_here) {
            rc = gw_coll_scratch_get(len, gpu, &scratch, why, sizeof(why));
            if (rc == 0) {
                rc = gw_coll_copy_device_start(scratch.ptr, src, len, gpu, false, &ticket, why,
                                               sizeof(why));
            }
            a = scratch.ptr;
        }
        if (rc == 0) {
            rc = gw_coll_reduce_start(op, type, a, dst, dst, len / esize, gpu, &ticket, why,
                                      sizeof(why));
        }
    }
    if (rc == 0 && ticket != 0) rc = gw_coll_copy_wait(gpu, ticket, why, sizeof(why));
    if (scratch.owner != nullptr || scratch.ptr != nullptr) gw_coll_scratch_put(&scratch);
    if (rc != 0) {
        log(0, "accumulate of %zu bytes into a window on GPU %d failed: %s", len, gpu, why);
        return -1;
    }
    return 0;
}

int gw_osc_dev_cas(void *dst, int gpu, const void *origin, bool origin_here,
                   const void *compare, bool compare_here, void *result, bool result_here,
                   size_t len)
{
    constexpr size_t kMax = 16;
    if (len == 0 || len > kMax) return -1;
    gw_coll_dev_buf_t scratch = {};
    uint64_t ticket = 0;
    char why[256] = "";
    int rc = 0;
    // Values that are not this GPU's memory go through scratch: origin,
    // compare, result at 0, kMax, 2 kMax.
    if (!origin_here || !compare_here || !result_here) {
        rc = gw_coll_scratch_get(3 * kMax, gpu, &scratch, why, sizeof(why));
    }
    char *s = static_cast<char *>(scratch.ptr);
    const void *o = origin, *c = compare;
    void *r = result;
    if (rc == 0 && !origin_here) {
        o = s;
        rc = gw_coll_copy_device_start(s, origin, len, gpu, false, &ticket, why, sizeof(why));
    }
    if (rc == 0 && !compare_here) {
        c = s + kMax;
        rc = gw_coll_copy_device_start(s + kMax, compare, len, gpu, false, &ticket, why,
                                       sizeof(why));
    }
    if (rc == 0 && !result_here) r = s + 2 * kMax;
    if (rc == 0) rc = gw_coll_cas_start(dst, o, c, r, len, gpu, &ticket, why, sizeof(why));
    if (rc == 0 && !result_here) {
        rc = gw_coll_copy_device_start(result, r, len, gpu, false, &ticket, why, sizeof(why));
    }
    if (rc == 0) rc = gw_coll_copy_wait(gpu, ticket, why, sizeof(why));
    if (scratch.owner != nullptr || scratch.ptr != nullptr) gw_coll_scratch_put(&scratch);
    if (rc != 0) {
        log(0, "compare-and-swap of %zu bytes in a window on GPU %d failed: %s", len, gpu, why);
        return -1;
    }
    return 0;
}

bool gw_osc_dev_reduce_supported(int op, int type)
{
    if (op == GW_OSC_OP_REPLACE) return true;
    return op >= 0 && type >= 0 && gw_coll_reduce_supported(op, type);
}

int gw_osc_dev_reduce_mapped(void *dst, const void *desc, uint32_t peer_id, size_t len, int op,
                             int type, int gpu)
{
    gw_coll_peer_mapping_t *map = nullptr;
    void *src = nullptr;
    int mgpu = -1, rc = 0;
    uint64_t ticket = 0;
    char why[256] = "";
    if (gw_coll_peer_map(desc, peer_id, &map, &src, &mgpu, why, sizeof(why)) != 0) {
        rc = -1;
    } else if (mgpu != gpu) {
        std::snprintf(why, sizeof(why), "the origin buffer is on GPU %d, the window on GPU %d",
                      mgpu, gpu);
        rc = -1;
    } else if (op == GW_OSC_OP_REPLACE) {
        rc = gw_coll_copy_device_start(dst, src, len, gpu, true, &ticket, why, sizeof(why));
    } else {
        size_t esize = type >= 0 ? gw_reduce_type_size(type) : 0;
        if (op < 0 || esize == 0 || len % esize) {
            std::snprintf(why, sizeof(why), "no kernel for this op and type");
            rc = -1;
        } else {
            rc = gw_coll_reduce_start(op, type, src, dst, dst, len / esize, gpu, &ticket, why,
                                      sizeof(why));
        }
    }
    // The origin waits for this operation's acknowledgement before it may
    // reuse its buffer: the reduction must be over before the mapping goes.
    if (rc == 0) rc = gw_coll_copy_wait(gpu, ticket, why, sizeof(why));
    gw_coll_peer_unmap(map);
    if (rc != 0) {
        log(0, "accumulate of %zu bytes from a mapped origin buffer on GPU %d failed: %s", len,
            gpu, why);
    }
    return rc;
}

}  // extern "C"
