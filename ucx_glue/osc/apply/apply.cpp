// An operation applied to the target's window (gpuwire/osc.h): the blocks
// of the target's layout located in the window, the fetching kinds' old
// bytes read first, then the new ones written, combined or compared. Host
// memory is copied here; device memory and the reduction of an op are the
// caller's (gw_osc_mem_ops_t).
#include "gpuwire/osc.h"

#include <cstdint>
#include <cstring>

namespace {

int copy(const gw_osc_mem_ops_t *ops, char *dst, const char *src, size_t len, int gpu)
{
    if (gpu < 0) {
        std::memcpy(dst, src, len);
        return 0;
    }
    return ops->copy(ops->ctx, dst, src, len, gpu);
}

// The attached region holding address a; nullptr when none does.
const gw_osc_region_t *region_of(const gw_osc_window_t *w, uintptr_t a)
{
    for (int i = 0; i < w->nregions; i++) {
        const gw_osc_region_t *r = &w->regions[i];
        auto base = reinterpret_cast<uintptr_t>(r->base);
        if (a >= base && a - base < r->len) return r;
    }
    return nullptr;
}

}  // namespace

extern "C" {

char *gw_osc_locate(const gw_osc_window_t *w, int64_t disp, int64_t off, uint64_t len, int *gpu)
{
    if (w->dynamic) {
        uintptr_t a = static_cast<uintptr_t>(disp) + static_cast<uintptr_t>(off);
        const gw_osc_region_t *r = region_of(w, a);
        if (r == nullptr) return nullptr;
        // Host regions attached end to end are one range of the process's
        // memory; device ones are separate allocations (one copy each).
        uintptr_t end = reinterpret_cast<uintptr_t>(r->base) + r->len;
        while (a + len > end && r->gpu < 0) {
            r = region_of(w, end);
            if (r == nullptr || r->gpu >= 0) return nullptr;
            end = reinterpret_cast<uintptr_t>(r->base) + r->len;
        }
        if (a + len > end) return nullptr;
        *gpu = r->gpu;
        return reinterpret_cast<char *>(a);
    }
    int64_t at = disp * w->disp_unit + off;
    if (at < 0 || static_cast<uint64_t>(at) + len > w->size) return nullptr;
    *gpu = w->gpu;
    return w->base + at;
}

bool gw_osc_fetches(uint32_t kind)
{
    return kind == GW_OSC_GET || kind == GW_OSC_GACC || kind == GW_OSC_CAS;
}

int gw_osc_apply_at(const gw_osc_mem_ops_t *ops, uint32_t kind, int32_t type, int32_t op,
                    char *at, int gpu, const char *payload, const char *compare, char *reply,
                    size_t len)
{
    int failed = reply != nullptr ? copy(ops, reply, at, len, gpu) : 0;
    switch (kind) {
    case GW_OSC_PUT:
        failed |= copy(ops, at, payload, len, gpu);
        break;
    case GW_OSC_ACC:
    case GW_OSC_GACC:
        failed |= ops->combine(ops->ctx, at, payload, len, type, op, gpu);
        break;
    case GW_OSC_CAS:
        // Against the old value just read.
        if (reply != nullptr && std::memcmp(reply, compare, len) == 0) {
            failed |= copy(ops, at, payload, len, gpu);
        }
        break;
    default:
        break;
    }
    return failed ? GW_OSC_ERR_FAILED : 0;
}

int gw_osc_apply_blocks(const gw_osc_window_t *w, const gw_osc_hdr_t *h, const char *body,
                        char *reply, const gw_osc_mem_ops_t *ops, gw_osc_miss_t *miss)
{
    const auto *blocks = reinterpret_cast<const gw_osc_block_t *>(body);
    const char *payload = body + h->nblocks * sizeof(*blocks);
    const bool fetch = gw_osc_fetches(h->kind);
    size_t pos = 0;
    for (uint32_t i = 0; i < h->nblocks; i++) {
        int gpu = -1;
        const size_t len = blocks[i].len;
        char *at = gw_osc_locate(w, h->disp, blocks[i].off, len, &gpu);
        if (at == nullptr) {
            miss->at = h->disp + blocks[i].off;
            miss->len = len;
            return GW_OSC_ERR_RANGE;
        }
        // CAS: one element, so one block: the new value, then the compare
        // value.
        if (gw_osc_apply_at(ops, h->kind, h->type, h->op, at, gpu, payload + pos,
                            payload + pos + len, fetch ? reply + pos : nullptr, len) != 0) {
            return GW_OSC_ERR_FAILED;
        }
        pos += len;
    }
    return 0;
}

}  // extern "C"
