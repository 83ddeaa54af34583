/*
 * The NVLink team family of the collective engine (ucx_glue/coll/nvlink):
 * Allreduce, Bcast and Allgather on device buffers by kernels that read and
 * write the other GPUs of the node (gw_coll_team_* of gpuwire/gpu_device.h).
 *
 * A communicator gets a team (gw_ce_nvl_t, one per communicator, zeroed:
 * GW_CE_NVL_UNKNOWN) at its first call that could use one: every rank on
 * this node, 2 to GW_CE_NVL_MAX_TEAM ranks, each on a GPU the others can
 * map (or all on one GPU: the delegated form below). A team that cannot be
 * set up declines every call from then on, on every rank alike.
 *
 * Set-up (nvl_setup.cpp), collective and without blocking: each rank opens
 * its side, sends its description to every other rank and posts a receive
 * for each of theirs; once they have come, it maps the peers' workspaces
 * and sends every other rank whether it could (bit 0; bit 1: it has the
 * delegated form's board); once every answer has come, every rank knows
 * alike whether the team is usable. The messages go point-to-point with the
 * transport's setup_tag, descriptions before answers from every rank.
 *
 * A call comes in plain terms (gw_ce_nvl_call_t: its collective, op and
 * type ids, bytes, whether the layouts suit; its regions with memory kinds);
 * accepts, its place on this rank and the kernels' terms: nvl_desc.cpp.
 * Per call, chosen alike on every rank from the call's arguments
 * (nvl_call.cpp):
 *   bytes <= oneshot_bytes: one-shot through the workspace slots;
 *   larger, on a team whose ranks all share one GPU (delegate 2, not
 *     direct): delegated (nvl_delegate.cpp); the non-blocking calls of such
 *     a team take that form at every size (delegate 1 or 2);
 *   larger, with direct (or the selection table's nvlink): direct on the
 *     application's buffers, after one host allgather of their IPC
 *     descriptions and one host agreement that every rank mapped them;
 *     otherwise declined.
 *
 * Non-blocking one-shot calls (nvl_nb.cpp): a kernel must not run before
 * every rank has initiated its call, so initiation sends a zero-byte
 * arrival to every other rank (arrive_tag, in initiation order) and posts a
 * receive for each of theirs; the job launches once every arrival has come
 * and every earlier call of the team has launched. The calls initiated
 * while a non-blocking call's set-up is under way keep their places in the
 * communicator's order of staged calls (the job is ordered): where the team
 * turns out unusable, every rank runs them staged, in their turn. The
 * outcome becomes what the non-blocking calls go by (seen) only at a place
 * every rank passes alike: a blocking call or a persistent initialization
 * (gw_ce_nvl_settle), or the GW_CE_NVL_ADOPT_AFTER-th call.
 *
 * Delegated form (nvl_delegate.cpp), ranks that all share one GPU: a board
 * of entries in shared memory (created by rank 0 at the set-up, name from
 * the caller); calls numbered alike on every rank; each rank posts its
 * buffers' IPC descriptions, the last to post launches one kernel for the
 * whole call, whose stream writes the entry's completion word, which every
 * rank's poll reads. A rank that cannot take part posts a description no
 * peer accepts, so the call fails on every rank.
 *
 * Return codes: GW_CE_OK, GW_CE_DECLINED (gpuwire/coll_sched.h: every rank
 * declines alike), GW_CE_ERR / GW_CE_ERR_NOMEM, or the transport's own
 * codes passed through. A job's poll returns GW_CE_OK, GW_CE_ERR or
 * GW_CE_DECLINED. Errors are logged where they are decided, through the
 * transport's log.
 *
 * Threads: calls on one team come from one thread at a time, except that
 * jobs may be polled from another thread's progress; the counters shared
 * between them (nb_issued, nb_launched, state) are atomics.
 */
#ifndef GPUWIRE_COLL_NVLINK_H
#define GPUWIRE_COLL_NVLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/coll_engine.h"
#include "gpuwire/coll_sched.h"
#include "gpuwire/coll_stage.h"
#include "gpuwire/gpu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GW_CE_NVL_MAX_TEAM 8
/* Non-blocking calls given to a team being set up after which a rank waits,
 * at the next one's initiation, for the outcome and goes by it. */
#define GW_CE_NVL_ADOPT_AFTER 16

/* States of a team (state, seen). */
enum {
    GW_CE_NVL_UNKNOWN = 0,
    GW_CE_NVL_READY = 1,
    GW_CE_NVL_SETTING_UP = 2,
    GW_CE_NVL_UNUSABLE = -1
};

typedef enum { GW_CE_NVL_ALLREDUCE, GW_CE_NVL_BCAST, GW_CE_NVL_ALLGATHER } gw_ce_nvl_coll_t;

/* The parameters (coll_gpuwire_nvlink_*), fixed for the team's life. */
typedef struct {
    size_t oneshot_bytes; /* largest call through the workspace slots */
    bool direct;          /* blocking calls above it on the application's buffers */
    int timeout_s;        /* seconds a kernel (or a delegated call) waits for the peers */
    bool shared_gpu;      /* ranks that share a GPU may form a team (testing) */
    int delegate;         /* 0 off; 1 non-blocking calls on one GPU; 2 also blocking large */
    bool device_sync;     /* wait for the application's default stream first */
    /* Counters added to (relaxed atomics; NULL: not kept): calls run, and
     * non-blocking calls launched. */
    unsigned long long *calls, *nb_calls;
} gw_ce_nvl_params_t;

/* What the set-up needs of the communicator. */
typedef struct {
    bool local; /* every rank on this node, and the host collectives there */
    uint32_t ids[GW_CE_NVL_MAX_TEAM]; /* a process-unique id per rank (IPC cache keys) */
    char board[64]; /* the delegated form's board name, the same on every rank */
} gw_ce_nvl_peers_t;

/* How the team reaches the other ranks: p2p's messages (gpuwire/
 * coll_engine.h's contract) and, through ctx, the rest. */
typedef struct {
    gw_ce_transport_t p2p;
    int setup_tag, arrive_tag; /* tags of the set-up's and the arrivals' messages */
    void *ctx;
    /* The set-up's view of the communicator. */
    int (*peers)(void *ctx, gw_ce_nvl_peers_t *out);
    /* Blocking host collectives over the communicator (the direct form):
     * every rank's bytes in rank order; the minimum of every rank's value. */
    int (*allgather)(void *ctx, const void *mine, void *all, size_t bytes);
    int (*all_min)(void *ctx, int mine, int *min);
    /* A request for a non-blocking call (arg: gw_ce_nvl_start's) run by
     * job; ordered: it keeps its place among the staged calls. On failure
     * the caller has released the job (ops->release). */
    int (*nb_job)(void *ctx, void *arg, const gw_ce_job_ops_t *ops, void *job, bool ordered);
    /* The communicator's name, for log lines. */
    const char *(*name)(void *ctx);
    /* One line: level 0 an error, always shown; higher: verbose levels. */
    void (*log)(void *ctx, int level, const char *line);
} gw_ce_nvl_transport_t;

typedef struct gw_ce_nvl_setup gw_ce_nvl_setup_t;

/* A communicator's team. Zeroed, then gw_ce_nvl_init. */
typedef struct gw_ce_nvl {
    int state; /* GW_CE_NVL_* */
    /* The state the non-blocking calls go by (see the top). */
    int seen;
    gw_coll_team_t *team;
    gw_ce_nvl_setup_t *setup; /* while the team is being set up */
    /* Non-blocking calls given to the team, and how many have launched. */
    uint64_t nb_issued, nb_launched;
    /* Non-blocking calls above the one-shot size declined during the
     * set-up: they count towards adopting its outcome too. */
    uint64_t nb_early;
    bool dl;         /* the delegated form: every rank on one GPU, with the board */
    uint64_t dl_seq; /* its calls, numbered from 1 */
    gw_ce_nvl_transport_t tp;
    gw_ce_nvl_params_t params;
} gw_ce_nvl_t;

/* One call on this rank, in plain terms. */
typedef struct {
    gw_ce_nvl_coll_t coll;
    bool nonblocking;
    int op, type;   /* allreduce: ids of gpuwire/cuda/reduce.h */
    bool ids_ok;    /* allreduce: op and type have ids */
    bool count_ok;  /* count (allgather: the receive count) > 0 */
    bool layout_ok; /* bcast, allgather: every datatype describes contiguous bytes */
    size_t bytes;   /* allreduce, bcast: the call's; allgather: per rank */
    bool in_place;  /* MPI_IN_PLACE as the send buffer */
    int root;       /* bcast */
    int gpu;        /* the regions' GPU (-1: none) */
    bool sel_nvlink; /* the selection table chose nvlink above the one-shot size */
} gw_ce_nvl_call_t;

/* Where the call's bytes are on this rank. */
typedef struct {
    const void *in;
    void *out;
    size_t bytes;
} gw_ce_nvl_place_t;

GW_CORE_API void gw_ce_nvl_init(gw_ce_nvl_t *nvl, const gw_ce_nvl_transport_t *tp,
                                const gw_ce_nvl_params_t *params);
/* Whether the family runs the call on a communicator of size ranks: decided
 * from what is the same on every rank. */
GW_CORE_API bool gw_ce_nvl_accepts(const gw_ce_nvl_call_t *c, int size);
/* The call's place on this rank (regions r); relocate re-points what lies
 * in a region that has a temporary on the team's GPU. */
GW_CORE_API void gw_ce_nvl_place(const gw_ce_nvl_call_t *c, const gw_ce_region_t r[GW_CE_REGION_COUNT],
                                 int rank, gw_ce_nvl_place_t *p);
GW_CORE_API void gw_ce_nvl_relocate(gw_ce_nvl_place_t *p, const gw_ce_region_t r[GW_CE_REGION_COUNT],
                                    const gw_ce_temps_t *t);
/* The kernels' description of the call on place p. */
GW_CORE_API gw_coll_team_call_t gw_ce_nvl_team_call(const gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
                                                    const gw_ce_nvl_place_t *p);

/* The set-up: started without waiting (GW_CE_NVL_UNUSABLE at once where the
 * communicator cannot have a team), moved on without waiting, or driven to
 * its end. At the end state is GW_CE_NVL_READY or GW_CE_NVL_UNUSABLE, the
 * same on every rank. */
GW_CORE_API int gw_ce_nvl_setup_start(gw_ce_nvl_t *nvl, int gpu);
GW_CORE_API void gw_ce_nvl_setup_progress(gw_ce_nvl_t *nvl);
GW_CORE_API int gw_ce_nvl_setup(gw_ce_nvl_t *nvl, int gpu);
/* Ends a set-up under way by the transport's progress and adopts its
 * outcome (a place every rank passes alike). */
GW_CORE_API void gw_ce_nvl_settle(gw_ce_nvl_t *nvl);
/* False while a set-up is under way; else adopts the outcome, true. */
GW_CORE_API bool gw_ce_nvl_settled(gw_ce_nvl_t *nvl);
/* Releases the team and a set-up under way; the state is UNKNOWN again. */
GW_CORE_API void gw_ce_nvl_release(gw_ce_nvl_t *nvl);

/* A blocking call on regions r (classified). */
GW_CORE_API int gw_ce_nvl_run(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
                              gw_ce_region_t r[GW_CE_REGION_COUNT]);
/* A non-blocking call: its request through tp.nb_job(arg). */
GW_CORE_API int gw_ce_nvl_start(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
                                const gw_ce_region_t r[GW_CE_REGION_COUNT], void *arg);

#ifdef __cplusplus
}
#endif

#endif
