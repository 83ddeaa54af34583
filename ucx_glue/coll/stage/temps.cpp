/*
 * Device temporaries of the GPU algorithms (gpuwire/coll_stage.h): a
 * significant region of the call that is host memory or another GPU's
 * memory gets a temporary on the call's GPU, one scratch allocation for all
 * of them. Each span [lo, hi) is copied whole: a receive region with gaps is
 * read before the call too, so writing the span back leaves its gap bytes as
 * they were.
 */
#include <cstring>

#include "gpuwire/coll_stage.h"

namespace {

bool needs_temp(const gw_ce_region_t &r, int gpu)
{
    return r.hi > r.lo && !(r.on_gpu && r.gpu == gpu);
}

/* Copies every region with a temporary and `flag` (in: into the
 * temporaries, out: back out of them) and waits for the copies, also after a
 * failed start: no copy may still run when this returns. */
int copy_regions(const gw_ce_region_t r[GW_CE_REGION_COUNT], int gpu, const gw_ce_temps_t *t,
                 unsigned flag, char *why, size_t why_len)
{
    uint64_t ticket = 0;
    bool copying = false;
    int rc = 0;
    for (int i = 0; i < GW_CE_REGION_COUNT && 0 == rc; ++i) {
        if (nullptr == t->tmp[i] || !(r[i].flags & flag)) continue;
        char *user = static_cast<char *>(const_cast<void *>(r[i].user)) + r[i].lo;
        const bool in = GW_CE_STAGE_IN == flag;
        rc = gw_coll_copy_start(in ? t->tmp[i] : user, in ? user : t->tmp[i],
                                gw_ce_region_bytes(&r[i]), gpu, &ticket, why, why_len);
        copying = copying || 0 == rc;
    }
    if (copying) {
        char wwhy[128];
        const int wrc = gw_coll_copy_wait(gpu, ticket, 0 == rc ? why : wwhy,
                                          0 == rc ? why_len : sizeof(wwhy));
        rc = 0 == rc ? wrc : rc;
    }
    return rc;
}

} // namespace

extern "C" int gw_ce_temps_in(const gw_ce_region_t r[GW_CE_REGION_COUNT], int gpu,
                              gw_ce_temps_t *t, char *why, size_t why_len)
{
    const size_t align = 256;
    size_t at[GW_CE_REGION_COUNT] = {0}, total = 0;
    std::memset(t, 0, sizeof(*t));
    for (int i = 0; i < GW_CE_REGION_COUNT; ++i) {
        if (!needs_temp(r[i], gpu)) continue;
        at[i] = total;
        total += (gw_ce_region_bytes(&r[i]) + align - 1) / align * align;
    }
    if (0 == total) return 0;
    if (0 != gw_coll_scratch_get(total, gpu, &t->buf, why, why_len)) return -1;
    for (int i = 0; i < GW_CE_REGION_COUNT; ++i) {
        if (needs_temp(r[i], gpu)) t->tmp[i] = static_cast<char *>(t->buf.ptr) + at[i];
    }
    const int rc = copy_regions(r, gpu, t, GW_CE_STAGE_IN, why, why_len);
    if (0 != rc) gw_ce_temps_release(t); /* no copy into it runs any more */
    return rc;
}

extern "C" int gw_ce_temps_out(const gw_ce_region_t r[GW_CE_REGION_COUNT], int gpu,
                               gw_ce_temps_t *t, char *why, size_t why_len)
{
    return copy_regions(r, gpu, t, GW_CE_STAGE_OUT, why, why_len);
}

extern "C" void gw_ce_temps_release(gw_ce_temps_t *t)
{
    gw_coll_scratch_put(&t->buf);
    std::memset(t->tmp, 0, sizeof(t->tmp));
}

extern "C" int gw_ce_wait_user_regions(const gw_ce_region_t r[GW_CE_REGION_COUNT],
                                       bool device_sync, char *why, size_t why_len)
{
    int synced[GW_CE_REGION_COUNT], nsynced = 0;
    for (int i = 0; i < GW_CE_REGION_COUNT; ++i) {
        if (r[i].hi <= r[i].lo || !r[i].on_gpu) continue;
        /* Without device_sync: only memory a cudaMemcpy may still be
         * writing (first seen, or not markable SYNC_MEMOPS). */
        if (!device_sync && !r[i].unordered) continue;
        bool seen = false;
        for (int j = 0; j < nsynced; ++j) seen = seen || synced[j] == r[i].gpu;
        if (seen) continue;
        if (0 != gw_coll_device_wait_user(r[i].gpu, why, why_len)) return -1;
        synced[nsynced++] = r[i].gpu;
    }
    return 0;
}
