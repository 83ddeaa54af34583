// See fake_gpu.hpp: gpuwire/gpu_device.h's functions that the one-sided
// engine calls, over FakeGpu::current.
#include "fake_gpu.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpuwire/cuda/reduce.h"
#include "gpuwire/gpu_device.h"

namespace gwtest {

FakeGpu *FakeGpu::current = nullptr;
FakeGpu::FakeGpu() { current = this; }
FakeGpu::~FakeGpu() { current = nullptr; }

const FakeGpu::Range *FakeGpu::find(const void *p, size_t len) const
{
    const char *c = static_cast<const char *>(p);
    for (const Range &r : ranges) {
        if (c >= r.p && c + len <= r.p + r.len) return &r;
    }
    return nullptr;
}

namespace {

int fail(char *why, size_t why_len, const char *what)
{
    std::snprintf(why, why_len, "fake %s failed", what);
    return -1;
}

// What a description holds here.
struct Desc {
    const void *p;
    size_t len;
    int gpu;
    int ok;
};

}  // namespace
}  // namespace gwtest

using gwtest::FakeGpu;

struct gw_coll_peer_mapping {
    int unused;
};

extern "C" {

int gw_coll_device_open(const gw_coll_device_params_t *, char *why, size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    if (g == nullptr || g->fail_open) return gwtest::fail(why, why_len, "open");
    g->opened = true;
    return g->ngpus;
}

void gw_coll_device_close(void)
{
    if (FakeGpu::current) FakeGpu::current->opened = false;
}

int gw_coll_device_classify(const void *ptr, size_t len, gw_coll_mem_t *out, char *why,
                            size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    if (g->fail_classify) return gwtest::fail(why, why_len, "classify");
    const FakeGpu::Range *r = g->find(ptr, len);
    out->on_gpu = r != nullptr;
    out->gpu = r ? r->gpu : -1;
    out->unordered = r ? r->unordered : false;
    return 0;
}

int gw_coll_device_wait_user(int gpu, char *why, size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    g->user_waits.push_back(gpu);
    return g->fail_user ? gwtest::fail(why, why_len, "wait_user") : 0;
}

int gw_coll_copy_device_start(void *dst, const void *src, size_t len, int gpu, bool both_device,
                              uint64_t *ticket, char *why, size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    if (g->fail_copy) return gwtest::fail(why, why_len, "copy");
    g->copies.push_back({dst, src, len, gpu, both_device});
    std::memcpy(dst, src, len);
    *ticket = ++g->tickets[gpu];
    return 0;
}

int gw_coll_copy_device_batch(const gw_coll_copy_item_t *items, int n, int gpu, uint64_t *ticket,
                              char *why, size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    if (g->fail_copy) return gwtest::fail(why, why_len, "copy");
    if (n < 1 || n > GW_COLL_COPY_BATCH_MAX) return gwtest::fail(why, why_len, "batch size");
    g->batches.push_back(n);
    for (int i = 0; i < n; i++) {
        g->copies.push_back({items[i].dst, items[i].src, items[i].len, gpu, true});
        std::memcpy(items[i].dst, items[i].src, items[i].len);
    }
    *ticket = ++g->tickets[gpu];
    return 0;
}

int gw_coll_copy_start(void *dst, const void *src, size_t len, int gpu, uint64_t *ticket,
                       char *why, size_t why_len)
{
    return gw_coll_copy_device_start(dst, src, len, gpu, false, ticket, why, why_len);
}

int gw_coll_copy_wait(int gpu, uint64_t ticket, char *why, size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    g->waits.emplace_back(gpu, ticket);
    return g->fail_wait ? gwtest::fail(why, why_len, "copy_wait") : 0;
}

// int32 SUM only, as a stand-in for the kernels' table.
bool gw_coll_reduce_supported(int op, int type) { return op == GW_OP_SUM && type == GW_TYPE_INT32; }

size_t gw_reduce_type_size(int type) { return type == GW_TYPE_INT32 ? 4 : 0; }

int gw_coll_reduce_start(int op, int type, const void *a, const void *b, void *out, size_t count,
                         int gpu, uint64_t *ticket, char *why, size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    if (g->fail_reduce || op != GW_OP_SUM || type != GW_TYPE_INT32) {
        return gwtest::fail(why, why_len, "reduce");
    }
    for (size_t i = 0; i < count; i++) {
        int32_t x, y;
        std::memcpy(&x, static_cast<const char *>(a) + 4 * i, 4);
        std::memcpy(&y, static_cast<const char *>(b) + 4 * i, 4);
        int32_t r = x + y;
        std::memcpy(static_cast<char *>(out) + 4 * i, &r, 4);
    }
    g->reductions++;
    *ticket = ++g->tickets[gpu];
    return 0;
}

int gw_coll_cas_start(void *dst, const void *origin, const void *compare, void *result,
                      size_t len, int gpu, uint64_t *ticket, char *why, size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    if (g->fail_reduce || len == 0 || len > 16) return gwtest::fail(why, why_len, "cas");
    unsigned char old[16];
    std::memcpy(old, dst, len);
    std::memcpy(result, old, len);
    if (std::memcmp(old, compare, len) == 0) std::memcpy(dst, origin, len);
    g->cas++;
    *ticket = ++g->tickets[gpu];
    return 0;
}

int gw_coll_scratch_get(size_t len, int gpu, gw_coll_dev_buf_t *out, char *why, size_t why_len)
{
    out->ptr = std::malloc(len);
    if (out->ptr == nullptr) return gwtest::fail(why, why_len, "scratch");
    out->len = len;
    out->owner = out->ptr;
    FakeGpu::current->scratch_lent++;
    (void)gpu;
    return 0;
}

void gw_coll_scratch_put(gw_coll_dev_buf_t *buf)
{
    std::free(buf->ptr);
    buf->ptr = buf->owner = nullptr;
    FakeGpu::current->scratch_lent--;
}

int gw_coll_buffer_describe(const void *ptr, size_t len, void *desc, char *why, size_t why_len)
{
    const FakeGpu::Range *r = FakeGpu::current->find(ptr, len);
    gwtest::Desc d = {ptr, len, r ? r->gpu : -1, r && r->exportable};
    std::memset(desc, 0, GW_COLL_BUF_DESC_BYTES);
    std::memcpy(desc, &d, sizeof(d));
    return d.ok ? 0 : gwtest::fail(why, why_len, "describe");
}

int gw_coll_peer_map(const void *desc, uint32_t, gw_coll_peer_mapping_t **out, void **ptr,
                     int *gpu, char *why, size_t why_len)
{
    FakeGpu *g = FakeGpu::current;
    gwtest::Desc d;
    std::memcpy(&d, desc, sizeof(d));
    if (g->fail_map || !d.ok) return gwtest::fail(why, why_len, "map");
    static gw_coll_peer_mapping_t token;
    *out = &token;
    *ptr = const_cast<void *>(d.p);
    *gpu = g->map_gpu >= 0 ? g->map_gpu : d.gpu;
    g->maps++;
    return 0;
}

void gw_coll_peer_unmap(gw_coll_peer_mapping_t *m)
{
    if (m != nullptr) FakeGpu::current->unmaps++;
}

}  // extern "C"
