/*
 * osc/gpuwire's synchronisation: fence, post/start/complete/wait, locks and
 * flushes. Every epoch closes by counts (osc_gpuwire.h): the target has
 * applied as many operations from an origin as that origin sent; the direct
 * path's copies (osc_gpuwire_direct.c) are waited for first.
 */
#include "osc_gpuwire.h"

#include <stdlib.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

/* Waits for one message counted in arr[peer] and consumes it. */
static void wait_one(gw_osc_module_t *m, int *arr, int peer)
{
    gw_osc_wait_until(m, (volatile int *)&arr[peer], 1);
    opal_mutex_lock(&m->lock);
    arr[peer]--;
    opal_mutex_unlock(&m->lock);
}

static int send_ctl(gw_osc_module_t *m, int peer, uint32_t kind, int aux, uint64_t count)
{
    opal_mutex_lock(&m->lock);
    int rc = gw_osc_send_ctl(m, peer, kind, aux, count);
    opal_mutex_unlock(&m->lock);
    return rc;
}

/* ---- target side ------------------------------------------------------- */

static bool grantable(gw_osc_module_t *m, int type)
{
    return type == MPI_LOCK_EXCLUSIVE ? m->lock_state == 0 : m->lock_state >= 0;
}

static void take(gw_osc_module_t *m, int origin, int type)
{
    m->lock_state = type == MPI_LOCK_EXCLUSIVE ? -1 : m->lock_state + 1;
    gw_osc_send_ctl(m, origin, GW_OSC_GRANT, 0, 0);
}

void gw_osc_lock_request(gw_osc_module_t *m, int origin, int type)
{
    if (m->nwaiters == 0 && grantable(m, type)) {
        take(m, origin, type);
        return;
    }
    if (m->nwaiters == m->cap_waiters) {
        int cap = m->cap_waiters ? 2 * m->cap_waiters : 8;
        gw_osc_waiter_t *w = realloc(m->waiters, cap * sizeof(*w));
        if (w == NULL) {
            opal_output(0, "osc:gpuwire: out of memory queueing a lock request");
            abort();
        }
        m->waiters = w;
        m->cap_waiters = cap;
    }
    m->waiters[m->nwaiters++] = (gw_osc_waiter_t){.origin = origin, .type = type};
}

/* First come, first served: a shared request behind an exclusive one waits. */
void gw_osc_grant_waiters(gw_osc_module_t *m)
{
    int granted = 0;
    while (granted < m->nwaiters && grantable(m, m->waiters[granted].type)) {
        take(m, m->waiters[granted].origin, m->waiters[granted].type);
        granted++;
    }
    for (int i = granted; i < m->nwaiters; i++) m->waiters[i - granted] = m->waiters[i];
    m->nwaiters -= granted;
}

void gw_osc_check_flushes(gw_osc_module_t *m, int origin)
{
    int kind = m->flush_kind[origin];
    if (kind == 0 || m->applied[origin] < m->flush_want[origin]) return;
    m->flush_kind[origin] = 0;
    if ((kind & 0xff) == GW_OSC_UNLOCK && (kind & 0x100)) {
        m->lock_state = m->lock_state < 0 ? 0 : m->lock_state - 1;
        gw_osc_grant_waiters(m);
    }
    /* aux 1: this acknowledges an unlock. */
    gw_osc_send_ctl(m, origin, GW_OSC_ACK, (kind & 0xff) == GW_OSC_UNLOCK, m->applied[origin]);
}

/* ---- fence ------------------------------------------------------------- */

int gw_osc_fence(int assert, ompi_win_t *win)
{
    (void)assert;
    gw_osc_module_t *m = GW_OSC(win);
    int drc = gw_osc_direct_wait(m);
    if (drc != OMPI_SUCCESS) return drc;
    uint64_t *expect = calloc(m->size, sizeof(*expect));
    uint64_t *sent = calloc(m->size, sizeof(*sent));
    if (expect == NULL || sent == NULL) {
        free(expect);
        free(sent);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    opal_mutex_lock(&m->lock);
    memcpy(sent, m->sent, m->size * sizeof(*sent));
    opal_mutex_unlock(&m->lock);
    /* How many operations each origin ever sent here. */
    int rc = m->comm->c_coll->coll_alltoall(sent, 1, MPI_UINT64_T, expect, 1, MPI_UINT64_T,
                                            m->comm, m->comm->c_coll->coll_alltoall_module);
    if (rc == OMPI_SUCCESS) {
        for (int o = 0; o < m->size; o++) gw_osc_wait_reached(m, &m->applied[o], expect[o]);
        gw_osc_wait_pending(m);
        rc = m->comm->c_coll->coll_barrier(m->comm, m->comm->c_coll->coll_barrier_module);
    }
    free(expect);
    free(sent);
    return rc;
}

/* ---- post / start / complete / wait ------------------------------------ */

/* Opens a post or start epoch: the ranks of group in the window's
 * communicator into *out (malloc'd) and *n. OMPI_ERR_RMA_SYNC when the epoch
 * is open already (*out set). */
static int epoch_open(ompi_win_t *win, ompi_group_t *group, int **out, int *n)
{
    if (*out != NULL) return OMPI_ERR_RMA_SYNC;
    int size = ompi_group_size(group);
    int *in = malloc((size + 1) * sizeof(int));
    int *ranks = malloc((size + 1) * sizeof(int));
    if (in == NULL || ranks == NULL) {
        free(in);
        free(ranks);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    for (int i = 0; i < size; i++) in[i] = i;
    int rc = ompi_group_translate_ranks(group, size, in, win->w_group, ranks);
    free(in);
    if (rc != OMPI_SUCCESS) {
        free(ranks);
        return rc;
    }
    *out = ranks;
    *n = size;
    return OMPI_SUCCESS;
}

/* Closes the epoch epoch_open opened. */
static void epoch_close(int **ranks, int *n)
{
    free(*ranks);
    *ranks = NULL;
    *n = 0;
}

int gw_osc_post(ompi_group_t *group, int assert, ompi_win_t *win)
{
    (void)assert;
    gw_osc_module_t *m = GW_OSC(win);
    int rc = epoch_open(win, group, &m->post_ranks, &m->npost);
    if (rc != OMPI_SUCCESS) return rc;
    opal_mutex_lock(&m->lock);
    for (int i = 0; i < m->npost; i++) {
        m->complete_want[m->post_ranks[i]] = UINT64_MAX;
        /* (a failed send has its line; the origin would wait for it) */
        int src = gw_osc_send_ctl(m, m->post_ranks[i], GW_OSC_POST, 0, 0);
        if (rc == OMPI_SUCCESS) rc = src;
    }
    opal_mutex_unlock(&m->lock);
    return rc;
}

int gw_osc_start(ompi_group_t *group, int assert, ompi_win_t *win)
{
    (void)assert;
    gw_osc_module_t *m = GW_OSC(win);
    int rc = epoch_open(win, group, &m->start_ranks, &m->nstart);
    if (rc != OMPI_SUCCESS) return rc;
    for (int i = 0; i < m->nstart; i++) wait_one(m, m->posts, m->start_ranks[i]);
    return OMPI_SUCCESS;
}

int gw_osc_complete(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (m->start_ranks == NULL) return OMPI_ERR_RMA_SYNC;
    /* The direct copies land before the targets hear of the end; origin
     * buffers lent by reference are free once complete returns. */
    int rc = gw_osc_direct_wait(m);
    for (int i = 0; i < m->nstart; i++) gw_osc_direct_wait_refs(m, m->start_ranks[i]);
    opal_mutex_lock(&m->lock);
    for (int i = 0; i < m->nstart; i++) {
        int t = m->start_ranks[i];
        int src = gw_osc_send_ctl(m, t, GW_OSC_COMPLETE, 0, m->sent[t]);
        if (rc == OMPI_SUCCESS) rc = src;
    }
    opal_mutex_unlock(&m->lock);
    gw_osc_wait_pending(m);
    epoch_close(&m->start_ranks, &m->nstart);
    return rc;
}

static bool exposure_done(gw_osc_module_t *m)
{
    for (int i = 0; i < m->npost; i++) {
        int o = m->post_ranks[i];
        if (m->complete_want[o] == UINT64_MAX || m->applied[o] < m->complete_want[o]) {
            return false;
        }
    }
    return true;
}

int gw_osc_test(ompi_win_t *win, int *flag)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (m->post_ranks == NULL) return OMPI_ERR_RMA_SYNC;
    opal_mutex_lock(&m->lock);
    gw_osc_poll(m);
    *flag = exposure_done(m);
    opal_mutex_unlock(&m->lock);
    if (*flag) {
        epoch_close(&m->post_ranks, &m->npost);
    } else {
        opal_progress();
    }
    return OMPI_SUCCESS;
}

int gw_osc_wait(ompi_win_t *win)
{
    int flag = 0;
    if (GW_OSC(win)->post_ranks == NULL) return OMPI_ERR_RMA_SYNC;
    while (!flag) {
        int rc = gw_osc_test(win, &flag);
        if (rc != OMPI_SUCCESS) return rc;
    }
    return OMPI_SUCCESS;
}

/* ---- passive target ---------------------------------------------------- */

int gw_osc_lock(int type, int target, int assert, ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (target < 0 || target >= m->size) return OMPI_ERR_RMA_RANGE;
    if (m->locked[target] != 0 || m->lock_all) return OMPI_ERR_RMA_SYNC;
    /* 1 exclusive, 2 shared; | 4 when the target really holds it. */
    bool check = !(assert & MPI_MODE_NOCHECK);
    m->locked[target] = (type == MPI_LOCK_EXCLUSIVE ? 1 : 2) | (check ? 4 : 0);
    if (check) {
        send_ctl(m, target, GW_OSC_LOCK, type, 0);
        wait_one(m, m->grants, target);
    }
    return OMPI_SUCCESS;
}

/* The target acknowledges an unlock once it has applied every operation
 * sent before it and released the lock. Unlock waits for that
 * acknowledgement only when operations went as messages since the last
 * acknowledgement: an epoch of direct operations only is complete once their
 * copies are (waited for before), and the target releases the lock when the
 * message arrives (a later lock request from this origin comes after it).
 * Win_free waits for every acknowledgement still owed. Returns the count of
 * unlock acknowledgements to wait for (0: none). */
static uint64_t unlock_send(gw_osc_module_t *m, int target)
{
    opal_mutex_lock(&m->lock);
    bool wait = m->acked[target] < m->sent[target];
    gw_osc_send_ctl(m, target, GW_OSC_UNLOCK, (m->locked[target] & 4) ? 1 : 0,
                    m->sent[target]);
    uint64_t want = ++m->unlocks_sent[target];
    opal_mutex_unlock(&m->lock);
    return wait ? want : 0;
}

/* Returns the count the acknowledgement must reach; sends a flush only when
 * operations are unacknowledged. */
static uint64_t flush_send(gw_osc_module_t *m, int target)
{
    opal_mutex_lock(&m->lock);
    uint64_t want = m->sent[target];
    if (m->acked[target] < want) gw_osc_send_ctl(m, target, GW_OSC_FLUSH, 0, want);
    opal_mutex_unlock(&m->lock);
    return want;
}

int gw_osc_unlock(int target, ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (target < 0 || target >= m->size || m->locked[target] == 0 || m->lock_all) {
        return OMPI_ERR_RMA_SYNC;
    }
    int rc = gw_osc_direct_wait(m);
    uint64_t want = unlock_send(m, target);
    if (want) gw_osc_wait_reached(m, &m->unlocks[target], want);
    gw_osc_wait_pending(m);
    m->locked[target] = 0;
    return rc;
}

int gw_osc_lock_all(int assert, ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (m->lock_all) return OMPI_ERR_RMA_SYNC;
    for (int t = 0; t < m->size; t++) {
        if (m->locked[t]) return OMPI_ERR_RMA_SYNC;
    }
    bool check = !(assert & MPI_MODE_NOCHECK);
    for (int t = 0; t < m->size; t++) {
        m->locked[t] = 2 | (check ? 4 : 0);
        if (check) send_ctl(m, t, GW_OSC_LOCK, MPI_LOCK_SHARED, 0);
    }
    if (check) {
        for (int t = 0; t < m->size; t++) wait_one(m, m->grants, t);
    }
    m->lock_all = true;
    return OMPI_SUCCESS;
}

int gw_osc_unlock_all(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (!m->lock_all) return OMPI_ERR_RMA_SYNC;
    int rc = gw_osc_direct_wait(m);
    uint64_t *want = calloc((size_t)m->size, sizeof(*want));
    if (want == NULL) return OMPI_ERR_OUT_OF_RESOURCE;
    for (int t = 0; t < m->size; t++) want[t] = unlock_send(m, t);
    for (int t = 0; t < m->size; t++) {
        if (want[t]) gw_osc_wait_reached(m, &m->unlocks[t], want[t]);
    }
    free(want);
    gw_osc_wait_pending(m);
    for (int t = 0; t < m->size; t++) m->locked[t] = 0;
    m->lock_all = false;
    return rc;
}

/* Unified memory model: nothing to reconcile. */
int gw_osc_sync(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    opal_mutex_lock(&m->lock);
    gw_osc_poll(m);
    opal_mutex_unlock(&m->lock);
    return OMPI_SUCCESS;
}

int gw_osc_flush(int target, ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (target < 0 || target >= m->size) return OMPI_ERR_RMA_RANGE;
    if (m->locked[target] == 0 && !m->lock_all) return OMPI_ERR_RMA_SYNC;
    /* Direct copies: complete once their tickets are reached; a flush
     * message goes only when operations went as messages. */
    int rc = gw_osc_direct_wait(m);
    gw_osc_wait_reached(m, &m->acked[target], flush_send(m, target));
    gw_osc_wait_pending(m);
    return rc;
}

int gw_osc_flush_all(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    int rc = gw_osc_direct_wait(m);
    uint64_t *want = calloc(m->size, sizeof(*want));
    if (want == NULL) return OMPI_ERR_OUT_OF_RESOURCE;
    for (int t = 0; t < m->size; t++) {
        if (m->locked[t] || m->lock_all) want[t] = flush_send(m, t);
    }
    for (int t = 0; t < m->size; t++) {
        if (want[t]) gw_osc_wait_reached(m, &m->acked[t], want[t]);
    }
    free(want);
    gw_osc_wait_pending(m);
    return rc;
}

/* Puts and accumulates as messages are sent from copies (locally complete
 * at once); what remains is the data of gets, the direct copies, which read
 * the origin buffer until they are done, and accumulates sent by reference,
 * whose buffer the target reads until it has applied them. */
int gw_osc_flush_local(int target, ompi_win_t *win)
{
    int rc = gw_osc_direct_wait(GW_OSC(win));
    gw_osc_direct_wait_refs(GW_OSC(win), target);
    gw_osc_wait_pending(GW_OSC(win));
    return rc;
}

int gw_osc_flush_local_all(ompi_win_t *win)
{
    int rc = gw_osc_direct_wait(GW_OSC(win));
    gw_osc_direct_wait_refs(GW_OSC(win), -1);
    gw_osc_wait_pending(GW_OSC(win));
    return rc;
}
