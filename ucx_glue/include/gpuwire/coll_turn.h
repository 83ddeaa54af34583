/*
 * Turns of the non-blocking calls of one family on one communicator: every
 * rank must post a family's messages, or start its sub-collectives, in one
 * order, whatever order the calls in flight are polled or progress in. A
 * call takes a ticket at initiation (gw_ce_turn_take); it may start only
 * once every call initiated before it has passed (gw_ce_turn_mine), and
 * passes exactly once (gw_ce_turn_pass), when it is through with what must
 * stay in order, or when it is released before that. A blocking call of
 * the family waits until no call is left to pass (gw_ce_turn_idle).
 *
 * The counters are atomics: a turn may be read from another thread's
 * progress; a ticket belongs to its call. A zeroed gw_ce_turn_t has no call
 * issued; a zeroed ticket was never taken, and passing it does nothing.
 */
#ifndef GPUWIRE_COLL_TURN_H
#define GPUWIRE_COLL_TURN_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gw_ce_turn {
    uint64_t issued; /* tickets taken */
    uint64_t passed; /* tickets passed */
} gw_ce_turn_t;

typedef struct {
    uint64_t seq; /* 1 + how many tickets were taken before; 0: none taken */
    bool passed;
} gw_ce_turn_ticket_t;

static inline void gw_ce_turn_take(gw_ce_turn_t *t, gw_ce_turn_ticket_t *k)
{
    k->seq = __atomic_add_fetch(&t->issued, 1, __ATOMIC_ACQ_REL);
    k->passed = false;
}

/* Whether every call initiated before k's has passed. */
static inline bool gw_ce_turn_mine(const gw_ce_turn_t *t, const gw_ce_turn_ticket_t *k)
{
    return __atomic_load_n(&t->passed, __ATOMIC_ACQUIRE) + 1 == k->seq;
}

/* Lets the next call go (once per ticket). */
static inline void gw_ce_turn_pass(gw_ce_turn_t *t, gw_ce_turn_ticket_t *k)
{
    if (k->passed || 0 == k->seq) return;
    k->passed = true;
    __atomic_fetch_add(&t->passed, 1, __ATOMIC_RELEASE);
}

/* Whether every ticket taken has passed. */
static inline bool gw_ce_turn_idle(const gw_ce_turn_t *t)
{
    return __atomic_load_n(&t->passed, __ATOMIC_ACQUIRE) ==
           __atomic_load_n(&t->issued, __ATOMIC_ACQUIRE);
}

#ifdef __cplusplus
}
#endif

#endif
