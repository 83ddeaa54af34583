// A window's synchronisation bookkeeping (gpuwire/osc.h): the completion
// counts per peer, the target's lock and its queue, the origin's lock
// epochs, and the handling of every message in arrival order. Nothing here
// waits: the caller polls its transport and looks at the counts.
#include "gpuwire/osc.h"

#include <cstdint>
#include <cstdlib>

namespace {

template <typename T>
bool alloc(T *&p, int n)
{
    p = static_cast<T *>(std::calloc(static_cast<size_t>(n), sizeof(T)));
    return p != nullptr;
}

// Takes the target's lock for origin's request and grants it, if it can.
bool take(gw_osc_sync_t *s, int origin, int type)
{
    if (!gw_osc_lock_try(s->lock_word, type)) return false;
    s->ops.send_ctl(s->ops.ctx, origin, GW_OSC_GRANT, 0, 0);
    return true;
}

// Where origins take target's lock themselves: the word is mapped here.
bool word_of(const gw_osc_sync_t *s, int target)
{
    return s->words != nullptr && s->words[target] != nullptr;
}

bool valid(const gw_osc_sync_t *s, int rank) { return rank >= 0 && rank < s->size; }

}  // namespace

extern "C" {

int gw_osc_sync_init(gw_osc_sync_t *s, int size, const gw_osc_sync_ops_t *ops)
{
    *s = gw_osc_sync_t{};
    s->size = size;
    s->ops = *ops;
    s->lock_word = &s->lock_state;
    int n = size > 0 ? size : 1;
    if (!alloc(s->sent, n) || !alloc(s->applied, n) || !alloc(s->flush_want, n) ||
        !alloc(s->flush_kind, n) || !alloc(s->complete_want, n) || !alloc(s->posts, n) ||
        !alloc(s->grants, n) || !alloc(s->acked, n) || !alloc(s->unlocks, n) ||
        !alloc(s->unlocks_sent, n) || !alloc(s->locked, n)) {
        gw_osc_sync_fini(s);
        return GW_OSC_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) s->complete_want[i] = UINT64_MAX;
    return 0;
}

void gw_osc_sync_fini(gw_osc_sync_t *s)
{
    std::free(s->sent);
    std::free(s->applied);
    std::free(s->flush_want);
    std::free(s->flush_kind);
    std::free(s->complete_want);
    std::free(s->posts);
    std::free(s->grants);
    std::free(s->acked);
    std::free(s->unlocks);
    std::free(s->unlocks_sent);
    std::free(s->waiters);
    std::free(s->locked);
    std::free(s->ref_want);
    gw_osc_sync_ops_t ops = s->ops;
    *s = gw_osc_sync_t{};
    s->ops = ops;
}

// ---- target side -----------------------------------------------------------

int gw_osc_sync_lock_request(gw_osc_sync_t *s, int origin, int type)
{
    if (s->nwaiters == 0 && take(s, origin, type)) return 0;
    if (s->nwaiters == s->cap_waiters) {
        int cap = s->cap_waiters ? 2 * s->cap_waiters : 8;
        auto *w = static_cast<gw_osc_waiter_t *>(
            std::realloc(s->waiters, static_cast<size_t>(cap) * sizeof(gw_osc_waiter_t)));
        if (w == nullptr) return GW_OSC_ERR_NOMEM;
        s->waiters = w;
        s->cap_waiters = cap;
    }
    s->waiters[s->nwaiters++] = gw_osc_waiter_t{origin, type};
    return 0;
}

// First come, first served: a shared request behind an exclusive one waits.
void gw_osc_sync_grant_waiters(gw_osc_sync_t *s)
{
    int granted = 0;
    while (granted < s->nwaiters &&
           take(s, s->waiters[granted].origin, s->waiters[granted].type)) {
        granted++;
    }
    for (int i = granted; i < s->nwaiters; i++) s->waiters[i - granted] = s->waiters[i];
    s->nwaiters -= granted;
}

void gw_osc_sync_check_flushes(gw_osc_sync_t *s, int origin)
{
    int kind = s->flush_kind[origin];
    if (kind == 0 || s->applied[origin] < s->flush_want[origin]) return;
    s->flush_kind[origin] = 0;
    if ((kind & 0xff) == GW_OSC_UNLOCK && (kind & 0x100)) {
        gw_osc_lock_release(s->lock_word);
        gw_osc_sync_grant_waiters(s);
    }
    // aux 1: this acknowledges an unlock.
    s->ops.send_ctl(s->ops.ctx, origin, GW_OSC_ACK, (kind & 0xff) == GW_OSC_UNLOCK,
                    s->applied[origin]);
}

int gw_osc_sync_handle(gw_osc_sync_t *s, int peer, const char *buf, size_t len)
{
    if (len < sizeof(gw_osc_hdr_t)) return GW_OSC_ERR_SHORT;
    const auto *h = reinterpret_cast<const gw_osc_hdr_t *>(buf);
    const char *body = buf + sizeof(*h);
    switch (h->kind) {
    case GW_OSC_PUT:
    case GW_OSC_GET:
    case GW_OSC_ACC:
    case GW_OSC_GACC:
    case GW_OSC_CAS:
        s->ops.apply(s->ops.ctx, peer, h, body);
        s->applied[peer]++;
        gw_osc_sync_check_flushes(s, peer);
        return 0;
    case GW_OSC_LOCK:
        return gw_osc_sync_lock_request(s, peer, h->aux);
    case GW_OSC_UNLOCK:
    case GW_OSC_FLUSH:
        s->flush_want[peer] = h->count;
        s->flush_kind[peer] = static_cast<int>(h->kind) | (h->aux ? 0x100 : 0);
        gw_osc_sync_check_flushes(s, peer);
        return 0;
    case GW_OSC_COMPLETE:
        s->complete_want[peer] = h->count;
        return 0;
    case GW_OSC_POST:
        s->posts[peer]++;
        return 0;
    case GW_OSC_REPLY:
        s->ops.reply(s->ops.ctx, h, body);
        return 0;
    case GW_OSC_GRANT:
        s->grants[peer]++;
        return 0;
    case GW_OSC_ACK:
        if (h->count > s->acked[peer]) s->acked[peer] = h->count;
        if (h->aux) s->unlocks[peer]++;
        return 0;
    default:
        return GW_OSC_ERR_KIND;
    }
}

// ---- post / start / complete / wait ----------------------------------------

int gw_osc_sync_post(gw_osc_sync_t *s, const int *ranks, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        s->complete_want[ranks[i]] = UINT64_MAX;
        // (a failed send has its caller's line; the origin would wait for it)
        int src = s->ops.send_ctl(s->ops.ctx, ranks[i], GW_OSC_POST, 0, 0);
        if (rc == 0) rc = src;
    }
    return rc;
}

bool gw_osc_sync_exposure_done(const gw_osc_sync_t *s, const int *ranks, int n)
{
    for (int i = 0; i < n; i++) {
        int o = ranks[i];
        if (s->complete_want[o] == UINT64_MAX || s->applied[o] < s->complete_want[o]) {
            return false;
        }
    }
    return true;
}

int gw_osc_sync_complete(gw_osc_sync_t *s, const int *ranks, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        int t = ranks[i];
        int src = s->ops.send_ctl(s->ops.ctx, t, GW_OSC_COMPLETE, 0, s->sent[t]);
        if (rc == 0) rc = src;
    }
    return rc;
}

// ---- passive target, origin side --------------------------------------------

int gw_osc_sync_lock(gw_osc_sync_t *s, int type, int target, bool check)
{
    if (!valid(s, target)) return GW_OSC_ERR_RANGE;
    if (s->locked[target] != 0 || s->lock_all) return GW_OSC_ERR_SYNC;
    s->locked[target] = (type == GW_OSC_LOCK_EXCLUSIVE ? 1 : 2) | (check ? 4 : 0);
    if (check && word_of(s, target)) {
        s->locked[target] |= 8;
    } else if (check) {
        // (a failed send has its caller's line)
        (void)s->ops.send_ctl(s->ops.ctx, target, GW_OSC_LOCK, type, 0);
    }
    return 0;
}

int gw_osc_sync_lock_all(gw_osc_sync_t *s, bool check)
{
    if (s->lock_all) return GW_OSC_ERR_SYNC;
    for (int t = 0; t < s->size; t++) {
        if (s->locked[t]) return GW_OSC_ERR_SYNC;
    }
    for (int t = 0; t < s->size; t++) {
        s->locked[t] = 2 | (check ? 4 : 0);
        if (check && word_of(s, t)) {
            s->locked[t] |= 8;
        } else if (check) {
            (void)s->ops.send_ctl(s->ops.ctx, t, GW_OSC_LOCK, GW_OSC_LOCK_SHARED, 0);
        }
    }
    s->lock_all = true;
    return 0;
}

int gw_osc_sync_unlock_check(const gw_osc_sync_t *s, int target, bool all)
{
    if (all) return s->lock_all ? 0 : GW_OSC_ERR_SYNC;
    if (!valid(s, target) || s->locked[target] == 0 || s->lock_all) return GW_OSC_ERR_SYNC;
    return 0;
}

// The target acknowledges an unlock once it has applied every operation
// sent before it and released the lock. Unlock waits for that
// acknowledgement only when operations went as messages since the last
// acknowledgement: an epoch of direct operations only is complete once
// their copies are (waited for before), and the target releases the lock
// when the message arrives (a later lock request from this origin comes
// after it). Freeing the window waits for every acknowledgement still owed.
uint64_t gw_osc_sync_unlock_send(gw_osc_sync_t *s, int target)
{
    // Taken in the word: the target has nothing to release, only operations
    // sent as messages to apply before the caller releases it.
    if (gw_osc_sync_in_word(s, target)) return gw_osc_sync_flush_send(s, target);
    bool wait = s->acked[target] < s->sent[target];
    (void)s->ops.send_ctl(s->ops.ctx, target, GW_OSC_UNLOCK, (s->locked[target] & 4) ? 1 : 0,
                          s->sent[target]);
    uint64_t want = ++s->unlocks_sent[target];
    return wait ? want : 0;
}

bool gw_osc_sync_in_word(const gw_osc_sync_t *s, int target)
{
    return valid(s, target) && (s->locked[target] & 8) != 0;
}

void gw_osc_sync_unlocked(gw_osc_sync_t *s, int target, bool all)
{
    if (!all) {
        s->locked[target] = 0;
        return;
    }
    for (int t = 0; t < s->size; t++) s->locked[t] = 0;
    s->lock_all = false;
}

int gw_osc_sync_flush_check(const gw_osc_sync_t *s, int target)
{
    if (!valid(s, target)) return GW_OSC_ERR_RANGE;
    if (s->locked[target] == 0 && !s->lock_all) return GW_OSC_ERR_SYNC;
    return 0;
}

uint64_t gw_osc_sync_flush_send(gw_osc_sync_t *s, int target)
{
    uint64_t want = s->sent[target];
    if (s->acked[target] < want) (void)s->ops.send_ctl(s->ops.ctx, target, GW_OSC_FLUSH, 0, want);
    return want;
}

int gw_osc_sync_ref_sent(gw_osc_sync_t *s, int target)
{
    if (s->ref_want == nullptr && !alloc(s->ref_want, s->size > 0 ? s->size : 1)) {
        return GW_OSC_ERR_NOMEM;
    }
    s->ref_want[target] = s->sent[target];
    return 0;
}

uint64_t gw_osc_sync_ref_flush(gw_osc_sync_t *s, int target)
{
    if (s->ref_want == nullptr || s->ref_want[target] <= s->acked[target]) return 0;
    const uint64_t want = s->ref_want[target];
    (void)s->ops.send_ctl(s->ops.ctx, target, GW_OSC_FLUSH, 0, want);
    return want;
}

}  // extern "C"
