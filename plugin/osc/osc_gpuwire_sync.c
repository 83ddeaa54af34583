/*
 * osc/gpuwire's synchronisation: fence, post/start/complete/wait, locks and
 * flushes. Every epoch closes by counts (gpuwire/osc.h): the target has
 * applied as many operations from an origin as that origin sent; the direct
 * path's copies (osc_gpuwire_direct.c) are waited for first. The state and
 * its transitions -- counts, the target's lock queue, the origin's epochs --
 * are the core's one-sided engine's (m->sync); here are the waits, the
 * collectives and the groups.
 */
#include "osc_gpuwire.h"

#include <stdlib.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"
#include "opal/sys/atomic.h"
#include "opal/util/output.h"

/* Waits for one message counted in arr[peer] and consumes it. */
static void wait_one(gw_osc_module_t *m, int *arr, int peer)
{
    gw_osc_wait_until(m, (volatile int *)&arr[peer], 1);
    opal_mutex_lock(&m->lock);
    arr[peer]--;
    opal_mutex_unlock(&m->lock);
}

_Static_assert(MPI_LOCK_EXCLUSIVE == GW_OSC_LOCK_EXCLUSIVE &&
                   MPI_LOCK_SHARED == GW_OSC_LOCK_SHARED,
               "the lock types on the wire are MPI's");

/* ---- fence ------------------------------------------------------------- */

/* Sends a FLUSH to every target owed operations sent as messages (only the
 * targets of this rank's access epochs, with epoch) and waits for their
 * acknowledgements (each once the target has applied them), then for every
 * reply. Nothing is sent or allocated when none is owed. */
static int flush_targets(gw_osc_module_t *m, bool epoch)
{
#define GW_OWED(t) (m->sync.acked[t] < m->sync.sent[t] && \
                    (!epoch || gw_osc_sync_flush_check(&m->sync, t) == 0))
    bool owed = false;
    OPAL_THREAD_LOCK(&m->lock);
    for (int t = 0; t < m->size && !owed; t++) owed = GW_OWED(t);
    OPAL_THREAD_UNLOCK(&m->lock);
    if (owed) {
        uint64_t *want = calloc((size_t)m->size, sizeof(*want));
        if (want == NULL) return OMPI_ERR_OUT_OF_RESOURCE;
        OPAL_THREAD_LOCK(&m->lock);
        for (int t = 0; t < m->size; t++) {
            if (GW_OWED(t)) want[t] = gw_osc_sync_flush_send(&m->sync, t);
        }
        OPAL_THREAD_UNLOCK(&m->lock);
        for (int t = 0; t < m->size; t++) {
            if (want[t]) gw_osc_wait_reached(m, &m->sync.acked[t], want[t]);
        }
        free(want);
    }
#undef GW_OWED
    gw_osc_wait_pending(m);
    return OMPI_SUCCESS;
}

/* A flush of every target, then a barrier: when it lets the ranks go, every
 * operation of the epoch is complete at origin and target (the direct
 * path's copies are waited for first), so no rank's next epoch can overtake
 * this one. An epoch of direct operations only (host windows on one node,
 * device windows over CUDA IPC) costs the barrier alone; on a window whose
 * ranks all share one node (m->shm_fence) that is a barrier of counts in
 * their segments, without a message. */
int gw_osc_fence(int assert, ompi_win_t *win)
{
    (void)assert;
    gw_osc_module_t *m = GW_OSC(win);
    int rc = gw_osc_direct_settle(m);
    if (rc == OMPI_SUCCESS) rc = flush_targets(m, false);
    if (rc != OMPI_SUCCESS) return rc;
    if (!m->shm_fence) {
        return m->comm->c_coll->coll_barrier(m->comm, m->comm->c_coll->coll_barrier_module);
    }
    /* Every rank on this node: each raises its count in its segment and
     * waits for all the others', progressing meanwhile (a peer may still
     * wait for this rank's acknowledgements). */
    const uint64_t want = gw_osc_fence_arrive(m->locks, m->rank);
    while (!gw_osc_fence_reached(m->locks, m->size, want)) opal_progress();
    gw_osc_count(&gw_osc_state.shm_fences, 1);
    return OMPI_SUCCESS;
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
    rc = gw_osc_sync_post(&m->sync, m->post_ranks, m->npost);
    opal_mutex_unlock(&m->lock);
    return rc;
}

int gw_osc_start(ompi_group_t *group, int assert, ompi_win_t *win)
{
    (void)assert;
    gw_osc_module_t *m = GW_OSC(win);
    int rc = epoch_open(win, group, &m->start_ranks, &m->nstart);
    if (rc != OMPI_SUCCESS) return rc;
    for (int i = 0; i < m->nstart; i++) wait_one(m, m->sync.posts, m->start_ranks[i]);
    return OMPI_SUCCESS;
}

int gw_osc_complete(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (m->start_ranks == NULL) return OMPI_ERR_RMA_SYNC;
    /* The direct copies land before the targets hear of the end; origin
     * buffers lent by reference are free once complete returns. */
    int rc = gw_osc_direct_settle(m);
    for (int i = 0; i < m->nstart; i++) gw_osc_direct_wait_refs(m, m->start_ranks[i]);
    opal_mutex_lock(&m->lock);
    int src = gw_osc_sync_complete(&m->sync, m->start_ranks, m->nstart);
    if (rc == OMPI_SUCCESS) rc = src;
    opal_mutex_unlock(&m->lock);
    gw_osc_wait_pending(m);
    epoch_close(&m->start_ranks, &m->nstart);
    return rc;
}

int gw_osc_test(ompi_win_t *win, int *flag)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (m->post_ranks == NULL) return OMPI_ERR_RMA_SYNC;
    opal_mutex_lock(&m->lock);
    gw_osc_poll(m);
    *flag = gw_osc_sync_exposure_done(&m->sync, m->post_ranks, m->npost);
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

/* Holds the lock on target once gw_osc_sync_lock (or _lock_all) opened the
 * epoch: takes the target's word where it is mapped here, polling between
 * tries, or waits for the target's grant. */
static void take_lock(gw_osc_module_t *m, int target, int type)
{
    if (!gw_osc_sync_in_word(&m->sync, target)) {
        wait_one(m, m->sync.grants, target);
        return;
    }
    while (!gw_osc_lock_try(m->sync.words[target], type)) opal_progress();
    gw_osc_count(&gw_osc_state.word_locks, 1);
}

int gw_osc_lock(int type, int target, int assert, ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    bool check = !(assert & MPI_MODE_NOCHECK);
    opal_mutex_lock(&m->lock);
    int rc = gw_osc_sync_lock(&m->sync, type, target, check);
    opal_mutex_unlock(&m->lock);
    if (rc != 0) return gw_osc_rc(rc);
    if (check) take_lock(m, target, type);
    return OMPI_SUCCESS;
}

/* The unlock's acknowledgement is waited for only when operations went as
 * messages (gw_osc_sync_unlock_send); Win_free waits for every one still
 * owed. A lock held in the target's word: released once the operations sent
 * as messages are acknowledged. */
static uint64_t unlock_send(gw_osc_module_t *m, int target)
{
    opal_mutex_lock(&m->lock);
    uint64_t want = gw_osc_sync_unlock_send(&m->sync, target);
    opal_mutex_unlock(&m->lock);
    return want;
}

static void unlock_wait(gw_osc_module_t *m, int target, uint64_t want)
{
    if (gw_osc_sync_in_word(&m->sync, target)) {
        gw_osc_wait_reached(m, &m->sync.acked[target], want);
        gw_osc_lock_release(m->sync.words[target]);
    } else if (want) {
        gw_osc_wait_reached(m, &m->sync.unlocks[target], want);
    }
}

int gw_osc_unlock(int target, ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    int rc = gw_osc_sync_unlock_check(&m->sync, target, false);
    if (rc != 0) return gw_osc_rc(rc);
    rc = gw_osc_direct_settle(m);
    unlock_wait(m, target, unlock_send(m, target));
    gw_osc_wait_pending(m);
    gw_osc_sync_unlocked(&m->sync, target, false);
    return rc;
}

int gw_osc_lock_all(int assert, ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    bool check = !(assert & MPI_MODE_NOCHECK);
    opal_mutex_lock(&m->lock);
    int rc = gw_osc_sync_lock_all(&m->sync, check);
    opal_mutex_unlock(&m->lock);
    if (rc != 0) return gw_osc_rc(rc);
    if (check) {
        for (int t = 0; t < m->size; t++) take_lock(m, t, MPI_LOCK_SHARED);
    }
    return OMPI_SUCCESS;
}

int gw_osc_unlock_all(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    int rc = gw_osc_sync_unlock_check(&m->sync, -1, true);
    if (rc != 0) return gw_osc_rc(rc);
    rc = gw_osc_direct_settle(m);
    uint64_t *want = calloc((size_t)m->size, sizeof(*want));
    if (want == NULL) return OMPI_ERR_OUT_OF_RESOURCE;
    for (int t = 0; t < m->size; t++) want[t] = unlock_send(m, t);
    for (int t = 0; t < m->size; t++) unlock_wait(m, t, want[t]);
    free(want);
    gw_osc_wait_pending(m);
    gw_osc_sync_unlocked(&m->sync, -1, true);
    return rc;
}

/* Unified memory model: nothing to reconcile but the order of this rank's
 * loads and stores in shared memory against its peers'. */
int gw_osc_sync(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    opal_atomic_mb();
    opal_mutex_lock(&m->lock);
    gw_osc_poll(m);
    opal_mutex_unlock(&m->lock);
    return OMPI_SUCCESS;
}

int gw_osc_flush(int target, ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    int rc = gw_osc_sync_flush_check(&m->sync, target);
    if (rc != 0) return gw_osc_rc(rc);
    /* Direct copies: complete once their tickets are reached; a flush
     * message goes only when operations went as messages. */
    rc = gw_osc_direct_settle(m);
    /* (The lock only where threads may hold it: progress runs on this
     * thread otherwise.) */
    OPAL_THREAD_LOCK(&m->lock);
    const uint64_t want = gw_osc_sync_flush_send(&m->sync, target);
    /* Nothing owed (only direct operations since the last acknowledgement,
     * no reply awaited): done, without another look under the lock. */
    const bool done = m->sync.acked[target] >= want && opal_list_is_empty(&m->pending);
    OPAL_THREAD_UNLOCK(&m->lock);
    if (done) return rc;
    gw_osc_wait_reached(m, &m->sync.acked[target], want);
    gw_osc_wait_pending(m);
    return rc;
}

int gw_osc_flush_all(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    int rc = gw_osc_direct_settle(m);
    const int frc = flush_targets(m, true);
    return rc != OMPI_SUCCESS ? rc : frc;
}

/* Puts and accumulates as messages are sent from copies (locally complete
 * at once); what remains is the data of gets, the direct copies, which read
 * the origin buffer until they are done, and accumulates sent by reference,
 * whose buffer the target reads until it has applied them. */
int gw_osc_flush_local(int target, ompi_win_t *win)
{
    int rc = gw_osc_direct_settle(GW_OSC(win));
    gw_osc_direct_wait_refs(GW_OSC(win), target);
    gw_osc_wait_pending(GW_OSC(win));
    return rc;
}

int gw_osc_flush_local_all(ompi_win_t *win)
{
    int rc = gw_osc_direct_settle(GW_OSC(win));
    gw_osc_direct_wait_refs(GW_OSC(win), -1);
    gw_osc_wait_pending(GW_OSC(win));
    return rc;
}
