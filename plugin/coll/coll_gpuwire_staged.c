/*
 * The staged algorithm: correct for every collective, datatype and op, and
 * slow. Device regions are copied into host memory, the previous (host)
 * module runs the collective on the host copies, results are copied back.
 * Reductions, user-defined ops included, run on the host copies. The
 * staging itself is the collective engine's (gpuwire/coll_stage.h).
 *
 * Blocking: copy in, call, copy back, return.
 * Non-blocking: a request of ours (coll_gpuwire_requests.c), moved on by
 * the engine's scheduler. Persistent: coll_gpuwire_persistent.c.
 */
#include "coll_gpuwire_staged.h"

void gw_coll_stage_count(const gw_ce_staging_t *st)
{
    __atomic_fetch_add(&gw_core_counters()->coll_staged_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&mca_coll_gpuwire.staged_bytes, (unsigned long long)gw_ce_stage_bytes(st),
                       __ATOMIC_RELAXED);
}

static int stage_failed(const char *why)
{
    opal_output(0, "coll:gpuwire: %s", why);
    return OMPI_ERROR;
}

static int staged_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], gw_coll_note_t *note,
                      ompi_request_t **request)
{
    (void)note;
    /* A call decided after its agreement is staged in its own place. */
    if (NULL != a->adopt) return GW_COLL_IN_PLACE;
    if (NULL != request) return gw_coll_staged_start(m, a, r, request);

    char why[320];
    gw_ce_staging_t st;
    int rc = gw_ce_stage_in_start(r, mca_coll_gpuwire.device_sync, &st, why, sizeof(why));
    if (GW_CE_OK == rc) rc = gw_ce_stage_wait(&st, "copy to host", why, sizeof(why));
    if (GW_CE_OK != rc) {
        gw_ce_stage_release(&st);
        return stage_failed(why);
    }
    gw_coll_stage_count(&st);
    const void *hs = gw_ce_stage_host_view(&st, GW_REGION_SEND, a->sbuf);
    void *hr = gw_ce_stage_host_view(&st, GW_REGION_RECV, a->rbuf);
    rc = gw_coll_call_previous(m, a, hs, hr, NULL);
    if (OMPI_SUCCESS == rc && GW_CE_OK != gw_ce_stage_out_start(&st, why, sizeof(why))) {
        rc = stage_failed(why);
    }
    /* What was queued back is waited for, also after a failure. */
    if (GW_CE_OK != gw_ce_stage_wait(&st, "copy to device", why, sizeof(why))) {
        const int wait_rc = stage_failed(why);
        if (OMPI_SUCCESS == rc) rc = wait_rc;
    }
    gw_ce_stage_release(&st);
    return rc;
}

const gw_coll_algorithm_t gw_coll_staged = {"staged", NULL, staged_run};
