/*
 * Host staging of a call's device regions (gpuwire/coll_stage.h): host
 * memory from the staging pool, copies queued on the region's GPU and
 * followed by ticket. A ticket is one load; CUDA is asked only when the
 * caller says query, for a stream that failed.
 */
#include <cstdio>
#include <cstring>

#include "gpuwire/coll_stage.h"

namespace {

/* One line naming what failed; the first failure of a call is kept. */
int failed(const char *what, const char *cause, char *why, size_t why_len)
{
    if (nullptr != why && why_len > 0) std::snprintf(why, why_len, "%s: %s", what, cause);
    return GW_CE_ERR;
}

bool copies_back(const gw_ce_stage_t &s)
{
    return nullptr != s.host.ptr && (s.region.flags & GW_CE_STAGE_OUT);
}

} // namespace

extern "C" void gw_ce_stage_release(gw_ce_staging_t *st)
{
    for (auto &s : st->s) gw_coll_staging_put(&s.host);
}

extern "C" int gw_ce_stage_poll(gw_ce_staging_t *st, bool query, bool *done, const char *what,
                                char *why, size_t why_len)
{
    char cause[256];
    int rc = GW_CE_OK;
    *done = true;
    for (auto &s : st->s) {
        if (!s.queued) continue;
        bool d = false;
        if (0 != gw_coll_copy_done(s.region.gpu, s.ticket, query, &d, cause, sizeof(cause))) {
            s.queued = false;
            if (GW_CE_OK == rc) rc = failed(what, cause, why, why_len);
            continue;
        }
        if (d) {
            s.queued = false;
        } else {
            *done = false;
        }
    }
    return rc;
}

extern "C" int gw_ce_stage_wait(gw_ce_staging_t *st, const char *what, char *why,
                                size_t why_len)
{
    char cause[256];
    int rc = GW_CE_OK;
    for (auto &s : st->s) {
        if (!s.queued) continue;
        s.queued = false;
        if (0 != gw_coll_copy_wait(s.region.gpu, s.ticket, cause, sizeof(cause)) &&
            GW_CE_OK == rc) {
            rc = failed(what, cause, why, why_len);
        }
    }
    return rc;
}

extern "C" bool gw_ce_stage_queued(const gw_ce_staging_t *st)
{
    for (const auto &s : st->s) {
        if (s.queued) return true;
    }
    return false;
}

extern "C" int gw_ce_stage_in_start(const gw_ce_region_t r[GW_CE_REGION_COUNT], bool device_sync,
                                    gw_ce_staging_t *st, char *why, size_t why_len)
{
    char cause[256];
    int synced_gpu = -1;
    int rc = GW_CE_OK;
    std::memset(st, 0, sizeof(*st));
    for (int i = 0; i < GW_CE_REGION_COUNT && GW_CE_OK == rc; ++i) {
        gw_ce_stage_t *s = &st->s[i];
        s->region = r[i];
        if (!r[i].on_gpu) continue;
        if ((s->region.flags & GW_CE_STAGE_OUT) && !s->region.dense) {
            s->region.flags |= GW_CE_STAGE_IN; /* the gaps are written back as they were */
        }
        const size_t len = gw_ce_region_bytes(&s->region);
        if (0 != gw_coll_staging_get(len, s->region.gpu, &s->host, cause, sizeof(cause))) {
            rc = failed("host staging", cause, why, why_len);
            break;
        }
        /* The application's work on the default stream (cudaMemcpy D2D,
         * kernels) comes before the call reads or writes its buffers. */
        if (device_sync && synced_gpu != s->region.gpu) {
            if (0 != gw_coll_device_wait_user(s->region.gpu, cause, sizeof(cause))) {
                rc = failed("device sync", cause, why, why_len);
                break;
            }
            synced_gpu = s->region.gpu;
        }
        if (s->region.flags & GW_CE_STAGE_IN) {
            const char *src = static_cast<const char *>(s->region.user) + s->region.lo;
            if (0 != gw_coll_copy_start(s->host.ptr, src, len, s->region.gpu, &s->ticket, cause,
                                        sizeof(cause))) {
                rc = failed("copy to host", cause, why, why_len);
                break;
            }
            s->queued = true;
        }
    }
    /* The staging must not go back while a copy may still write into it;
     * the first failure stays the one reported. */
    if (GW_CE_OK != rc) (void)gw_ce_stage_wait(st, "copy to host", nullptr, 0);
    return rc;
}

extern "C" void *gw_ce_stage_host_view(const gw_ce_staging_t *st, int i, const void *user)
{
    const gw_ce_stage_t *s = &st->s[i];
    if (nullptr == s->host.ptr) return const_cast<void *>(user);
    return static_cast<char *>(s->host.ptr) - s->region.lo;
}

extern "C" int gw_ce_stage_out_start(gw_ce_staging_t *st, char *why, size_t why_len)
{
    char cause[256];
    for (auto &s : st->s) {
        if (!copies_back(s)) continue;
        char *dst = static_cast<char *>(const_cast<void *>(s.region.user)) + s.region.lo;
        if (0 != gw_coll_copy_start(dst, s.host.ptr, gw_ce_region_bytes(&s.region), s.region.gpu,
                                    &s.ticket, cause, sizeof(cause))) {
            return failed("copy to device", cause, why, why_len);
        }
        s.queued = true;
    }
    return GW_CE_OK;
}

extern "C" size_t gw_ce_stage_bytes(const gw_ce_staging_t *st)
{
    size_t n = 0;
    for (const auto &s : st->s) n += s.host.len;
    return n;
}
