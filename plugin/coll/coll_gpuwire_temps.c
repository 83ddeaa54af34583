/*
 * Device temporaries of the GPU algorithms (the device reductions, the
 * NVLink kernels): a significant region of the call that is host memory or
 * another GPU's memory gets a temporary on the call's GPU, one scratch
 * allocation for all of them. Each span [lo, hi) is copied whole: a receive
 * region with gaps is read before the call too (coll_gpuwire_regions.c), so
 * writing the span back leaves its gap bytes as they were.
 */
#include <string.h>

#include "gpuwire/gpu_device.h"
#include "coll_gpuwire_dispatch.h"

static bool needs_temp(const gw_coll_region_t *r, int gpu)
{
    return r->hi > r->lo && !(r->on_gpu && r->gpu == gpu);
}

/* Copies every region with a temporary and `flag` (GW_STAGE_IN: into the
 * temporaries, GW_STAGE_OUT: back out of them) and waits for the copies,
 * also after a failed start: no copy may still run when this returns. */
static int copy_regions(const gw_coll_region_t r[GW_REGION_COUNT], int gpu,
                        const gw_coll_temps_t *t, unsigned flag, char *why, size_t why_len)
{
    uint64_t ticket = 0;
    bool copying = false;
    int rc = 0;
    for (int i = 0; i < GW_REGION_COUNT && 0 == rc; ++i) {
        if (NULL == t->tmp[i] || !(r[i].flags & flag)) continue;
        char *user = (char *)r[i].user + r[i].lo;
        const bool in = GW_STAGE_IN == flag;
        rc = gw_coll_copy_start(in ? t->tmp[i] : user, in ? user : t->tmp[i],
                                gw_region_bytes(&r[i]), gpu, &ticket, why, why_len);
        copying = copying || 0 == rc;
    }
    if (copying) {
        char wwhy[128];
        int wrc = gw_coll_copy_wait(gpu, ticket, 0 == rc ? why : wwhy,
                                    0 == rc ? why_len : sizeof(wwhy));
        rc = 0 == rc ? wrc : rc;
    }
    return rc;
}

int gw_coll_temps_in(const gw_coll_region_t r[GW_REGION_COUNT], int gpu, gw_coll_temps_t *t,
                     char *why, size_t why_len)
{
    const size_t align = 256;
    size_t at[GW_REGION_COUNT] = {0}, total = 0;
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (!needs_temp(&r[i], gpu)) continue;
        at[i] = total;
        total += (gw_region_bytes(&r[i]) + align - 1) / align * align;
    }
    if (0 == total) return 0;
    if (0 != gw_coll_scratch_get(total, gpu, &t->buf, why, why_len)) return -1;
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (needs_temp(&r[i], gpu)) t->tmp[i] = (char *)t->buf.ptr + at[i];
    }
    int rc = copy_regions(r, gpu, t, GW_STAGE_IN, why, why_len);
    if (0 != rc) gw_coll_temps_release(t); /* no copy into it runs any more */
    return rc;
}

int gw_coll_temps_out(const gw_coll_region_t r[GW_REGION_COUNT], int gpu, gw_coll_temps_t *t,
                      char *why, size_t why_len)
{
    return copy_regions(r, gpu, t, GW_STAGE_OUT, why, why_len);
}

void gw_coll_temps_release(gw_coll_temps_t *t)
{
    gw_coll_scratch_put(&t->buf);
    memset(t->tmp, 0, sizeof(t->tmp));
}
