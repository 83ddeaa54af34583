/*
 * The staged algorithm: correct for every collective, datatype and op, and
 * slow. Device regions are copied into host memory, the previous (host)
 * module runs the collective on the host copies, results are copied back.
 * Reductions, user-defined ops included, run on the host copies.
 *
 * Blocking: copy in, call, copy back, return.
 *
 * Non-blocking: the staging below, moved on by the requests of
 * coll_gpuwire_requests.c (which tell its steps and the order of starts).
 * Persistent: coll_gpuwire_persistent.c.
 *
 * Tickets are one load each (TrackedStream); CUDA is asked only now and then,
 * for a stream that failed. The CPU never touches device memory.
 */
#include <stdlib.h>
#include <string.h>

#include "gpuwire/gpu_device.h"
#include "coll_gpuwire_staged.h"

void gw_coll_stage_release(gw_staging_t *st)
{
    for (int i = 0; i < GW_REGION_COUNT; ++i) gw_coll_staging_put(&st->s[i].host);
}

static int device_failed(const char *what, const char *why)
{
    opal_output(0, "coll:gpuwire: %s: %s", what, why);
    return OMPI_ERROR;
}

/* Polls the copies queued for st; *done when none is left. A failed stream
 * never reaches its ticket: query asks CUDA (about 1.5 us) whether it
 * failed. A copy found failed is no longer waited for; the others are. */
int gw_coll_stage_poll(gw_staging_t *st, bool query, bool *done, const char *what)
{
    char why[256];
    int rc = OMPI_SUCCESS;
    *done = true;
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        gw_stage_t *s = &st->s[i];
        if (!s->queued) continue;
        bool d = false;
        if (0 != gw_coll_copy_done(s->region.gpu, s->ticket, query, &d, why, sizeof(why))) {
            s->queued = false;
            if (OMPI_SUCCESS == rc) rc = device_failed(what, why);
            continue;
        }
        if (d) {
            s->queued = false;
        } else {
            *done = false;
        }
    }
    return rc;
}

/* Waits for every copy queued for st; returns the first error. */
static int copies_wait(gw_staging_t *st, const char *what)
{
    char why[256];
    int rc = OMPI_SUCCESS;
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        gw_stage_t *s = &st->s[i];
        if (!s->queued) continue;
        s->queued = false;
        if (0 != gw_coll_copy_wait(s->region.gpu, s->ticket, why, sizeof(why)) &&
            OMPI_SUCCESS == rc) {
            rc = device_failed(what, why);
        }
    }
    return rc;
}

bool gw_coll_stage_queued(const gw_staging_t *st)
{
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (st->s[i].queued) return true;
    }
    return false;
}

/* Takes host memory for every device region and queues the copies in of
 * what the call reads (and of the gaps of receive regions that have them).
 * Returns before they have finished; on failure, after what was queued has
 * finished (the caller releases the staging). */
int gw_coll_stage_in_start(gw_coll_region_t r[GW_REGION_COUNT], gw_staging_t *st)
{
    char why[256];
    int synced_gpu = -1;
    int rc = OMPI_SUCCESS;
    memset(st, 0, sizeof(*st));
    for (int i = 0; i < GW_REGION_COUNT && OMPI_SUCCESS == rc; ++i) {
        gw_stage_t *s = &st->s[i];
        s->region = r[i];
        if (!r[i].on_gpu) continue;
        if ((s->region.flags & GW_STAGE_OUT) && !s->region.dense) s->region.flags |= GW_STAGE_IN;
        const size_t len = gw_region_bytes(&s->region);
        if (0 != gw_coll_staging_get(len, s->region.gpu, &s->host, why, sizeof(why))) {
            rc = device_failed("host staging", why);
            break;
        }
        /* The application's work on the default stream (cudaMemcpy D2D,
         * kernels) comes before MPI reads or writes its buffers. */
        if (mca_coll_gpuwire.device_sync && synced_gpu != s->region.gpu) {
            if (0 != gw_coll_device_wait_user(s->region.gpu, why, sizeof(why))) {
                rc = device_failed("device sync", why);
                break;
            }
            synced_gpu = s->region.gpu;
        }
        if (s->region.flags & GW_STAGE_IN) {
            const char *src = (const char *)s->region.user + s->region.lo;
            if (0 != gw_coll_copy_start(s->host.ptr, src, len, s->region.gpu, &s->ticket, why,
                                        sizeof(why))) {
                rc = device_failed("copy to host", why);
                break;
            }
            s->queued = true;
        }
    }
    /* The staging must not go back while a copy may still write into it. */
    if (OMPI_SUCCESS != rc) (void)copies_wait(st, "copy to host");
    return rc;
}

/* The pointer the host module gets for region i: the staging buffer moved
 * back by lo, so that the datatype's displacements land inside it. */
void *gw_coll_stage_host_view(const gw_staging_t *st, int i, const void *user)
{
    const gw_stage_t *s = &st->s[i];
    if (NULL == s->host.ptr) return (void *)user;
    return (void *)((uintptr_t)s->host.ptr - (uintptr_t)s->region.lo);
}

static bool copies_back(const gw_stage_t *s)
{
    return NULL != s->host.ptr && (s->region.flags & GW_STAGE_OUT);
}

/* Queues the copies back; those queued before a failure stay queued (wait
 * for them before the staging goes back). */
int gw_coll_stage_out_start(gw_staging_t *st)
{
    char why[256];
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        gw_stage_t *s = &st->s[i];
        if (!copies_back(s)) continue;
        char *dst = (char *)s->region.user + s->region.lo;
        if (0 != gw_coll_copy_start(dst, s->host.ptr, gw_region_bytes(&s->region), s->region.gpu,
                                    &s->ticket, why, sizeof(why))) {
            return device_failed("copy to device", why);
        }
        s->queued = true;
    }
    return OMPI_SUCCESS;
}

void gw_coll_stage_count(const gw_staging_t *st)
{
    __atomic_fetch_add(&gw_core_counters()->coll_staged_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&mca_coll_gpuwire.staged_bytes,
                       (unsigned long long)(st->s[0].host.len + st->s[1].host.len),
                       __ATOMIC_RELAXED);
}


static int staged_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    if (NULL != request) return gw_coll_staged_start(m, a, r, request);

    gw_staging_t st;
    int rc = gw_coll_stage_in_start(r, &st);
    if (OMPI_SUCCESS == rc) rc = copies_wait(&st, "copy to host");
    if (OMPI_SUCCESS != rc) {
        gw_coll_stage_release(&st);
        return rc;
    }
    gw_coll_stage_count(&st);
    const void *hs = gw_coll_stage_host_view(&st, GW_REGION_SEND, a->sbuf);
    void *hr = gw_coll_stage_host_view(&st, GW_REGION_RECV, a->rbuf);
    rc = gw_coll_call_previous(m, a, hs, hr, NULL);
    if (OMPI_SUCCESS == rc) rc = gw_coll_stage_out_start(&st);
    const int wait_rc = copies_wait(&st, "copy to device");
    if (OMPI_SUCCESS == rc) rc = wait_rc;
    gw_coll_stage_release(&st);
    return rc;
}

const gw_coll_algorithm_t gw_coll_staged = {"staged", NULL, staged_run};
