/*
 * Agreements without blocking (ucx_glue/coll/agree): the ranks of a
 * communicator learn the OR of a few flags every rank gives, while each goes
 * on. Up to GW_CE_AGREE_DIRECT_MAX ranks in one round: every rank sends its
 * flags to every other at the start (4 bytes each), so an agreement is over
 * one message after the last rank started. Beyond, dissemination over the
 * transport: ceil(log2 size) rounds; in round k a rank sends what it knows
 * to rank + 2^k and receives from rank - 2^k, one 4-byte message each way.
 * After the last round every rank knows every rank's flags (OR is
 * idempotent, so no size needs to be a power of two).
 *
 * One line per communicator (gw_ce_agree_line_t, zeroed: none started)
 * keeps the agreements of that communicator apart: every round's receive is
 * posted when an agreement starts, and a round's send waits until every
 * agreement started before it on the line has sent that round, so that the
 * messages of one tag meet in initiation order on every rank. The line also
 * keeps the turn of the decisions: the owner of an agreement acts on its
 * outcome only once every agreement started before it has been acted on
 * (gw_ce_agree_my_turn, then gw_ce_agree_decided).
 *
 * A known outcome (gw_ce_agree_known) sends nothing and only takes its turn
 * among the decisions. Threads: an agreement belongs to one thread at a
 * time; the line's counters are atomics.
 */
#ifndef GPUWIRE_COLL_AGREE_H
#define GPUWIRE_COLL_AGREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/coll_engine.h"
#include "gpuwire/coll_turn.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { GW_CE_AGREE_MAX_ROUNDS = 32, GW_CE_AGREE_DIRECT_MAX = 16 };

typedef struct gw_ce_agree_line {
    uint64_t started;                          /* agreements with messages */
    uint64_t sent[GW_CE_AGREE_MAX_ROUNDS];     /* of those, how many sent round k */
    gw_ce_turn_t decisions;                    /* outcomes acted on, in order */
} gw_ce_agree_line_t;

typedef struct gw_ce_agree gw_ce_agree_t;

/* Starts an agreement on line over t (which must outlive it) with tag:
 * posts every round's receive and the first round's send. GW_CE_OK with
 * *out, or an error with why. */
GW_CORE_API int gw_ce_agree_start(const gw_ce_transport_t *t, gw_ce_agree_line_t *line, int tag,
                                  uint32_t mine, gw_ce_agree_t **out, char *why, size_t why_len);
/* An agreement whose outcome is known already (no message): it only takes
 * its turn among line's decisions. */
GW_CORE_API int gw_ce_agree_known(gw_ce_agree_line_t *line, uint32_t all, gw_ce_agree_t **out);
/* Moves a on without blocking; *done once every rank's flags are in *all
 * and this rank's messages have completed. */
GW_CORE_API int gw_ce_agree_poll(gw_ce_agree_t *a, bool *done, uint32_t *all, char *why,
                                 size_t why_len);
/* Whether every agreement started before a on its line has been acted on. */
GW_CORE_API bool gw_ce_agree_my_turn(const gw_ce_agree_t *a);
/* a's outcome has been acted on: the next agreement's turn (once). */
GW_CORE_API void gw_ce_agree_decided(gw_ce_agree_t *a);
/* Frees a; one not done cancels its messages (an error path: the line's
 * later agreements may then never meet theirs), and passes its turn. */
GW_CORE_API void gw_ce_agree_free(gw_ce_agree_t *a);
/* Whether every agreement started on line has been acted on. */
GW_CORE_API bool gw_ce_agree_line_idle(const gw_ce_agree_line_t *line);

#ifdef __cplusplus
}
#endif

#endif
