/*
 * osc/gpuwire: MPI one-sided communication as active messages over the
 * point-to-point layer (whatever the pml), on host and device windows.
 *
 * Every window duplicates its communicator, so its messages never match the
 * application's. Every message (operation, request, reply) is one send on
 * GW_OSC_TAG of that communicator: a gw_osc_hdr_t, the target's layout when
 * it is not contiguous, then the payload. The receiving side finds messages
 * with a matched probe from its progress callback, receives them into a
 * buffer of their size and handles them strictly in arrival order, one at a
 * time per window: that gives the per-element atomicity of the accumulate
 * family from every origin and the ordering MPI asks of one origin.
 *
 * Completion is by counts: an origin counts the operations it sent to each
 * target, the target counts those it applied from each origin; fence,
 * complete/wait, unlock and flush carry the origin's count and end once the
 * target has applied that many.
 */
#ifndef OSC_GPUWIRE_H
#define OSC_GPUWIRE_H

#include "ompi_config.h"
#include "gpuwire_compat.h"

#include <stdbool.h>
#include <stdint.h>

#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/group/group.h"
#include "ompi/mca/osc/osc.h"
#include "ompi/request/request.h"
#include "ompi/win/win.h"
#include "opal/class/opal_list.h"
#include "opal/threads/mutex.h"

#include "gpuwire/osc.h"
#include "gpuwire/osc_direct.h"

#define GW_OSC_TAG 4242

/* An origin's get (or get-accumulate, CAS): where its reply goes. */
typedef struct gw_osc_pending {
    opal_list_item_t super;
    uint64_t id;
    void *addr;
    int count;
    ompi_datatype_t *dt;
    MPI_Request greq; /* Rget's request, completed with the reply; or NULL */
    bool done;
} gw_osc_pending_t;
OBJ_CLASS_DECLARATION(gw_osc_pending_t);

/* A message being received or sent. */
typedef struct gw_osc_msg {
    opal_list_item_t super;
    ompi_request_t *req;
    char *buf;
    size_t len;
    int peer;
} gw_osc_msg_t;
OBJ_CLASS_DECLARATION(gw_osc_msg_t);

typedef struct gw_osc_module {
    ompi_osc_base_module_t super;
    opal_list_item_t link; /* in the component's list of windows */
    ompi_win_t *win;
    ompi_communicator_t *comm; /* private duplicate */
    int rank, size;
    int flavor;
    char *base;
    size_t win_size;
    int disp_unit;
    int win_gpu;           /* -1: host memory */
    bool free_base;        /* ALLOCATE: ours */
    /* CREATE, ALLOCATE: every rank's window as exchanged at creation, for
     * the origin's range check (NULL: none, dynamic windows). */
    struct gw_osc_extent {
        uint64_t size;
        int disp_unit;
    } *extents;
    gw_osc_region_t *regions; /* DYNAMIC */
    int nregions, cap_regions;

    /* The same-node direct path (the core's, gpuwire/osc_direct.h); NULL: no
     * target is direct. */
    gw_osc_direct_t *direct;
    /* The ranks' segments mapped here: their lock words (m->sync.words),
     * the bytes of their MPI_Win_allocate windows; NULL: none. seg_id: this
     * rank's (0: none). */
    gw_osc_lockwords_t *locks;
    uint64_t seg_id;
    bool shm_fence;        /* every rank's segment mapped by every rank: fences by counts */
    /* SHARED: every rank's window in rank 0's segment, at shared_off[t]
     * (shared_off[size]: the total); shared_bases[t]: as mapped here. */
    uint64_t *shared_off;
    char **shared_bases;
    bool shared_noncontig; /* info alloc_shared_noncontig: each rank's part page-aligned */

    opal_mutex_t lock;     /* everything below; trylock by progress */
    opal_list_t incoming;  /* gw_osc_msg_t, arrival order */
    opal_list_t outgoing;  /* gw_osc_msg_t, sends in flight */
    opal_list_t pending;   /* gw_osc_pending_t: replies awaited */
    uint64_t next_id;

    /* Completion counts, the target's lock, the origin's lock epochs
     * (gpuwire/osc.h, the core's one-sided engine). */
    gw_osc_sync_t sync;

    /* Origin epochs (PSCW). */
    ompi_group_t *start_group;
    int *start_ranks;      /* comm ranks of start_group */
    int nstart;
    ompi_group_t *post_group;
    int *post_ranks;
    int npost;
} gw_osc_module_t;

/* The module from its link in the component's list of windows. */
static inline gw_osc_module_t *gw_osc_from_link(opal_list_item_t *item)
{
    return (gw_osc_module_t *)((char *)item - offsetof(gw_osc_module_t, link));
}

#define GW_OSC(win) ((gw_osc_module_t *)(win)->w_osc_module)

/* Adds n to a performance variable's counter: atomically only where
 * threads may count at once (a locked add is a visible part of a Put into
 * a window in shared memory). */
static inline void gw_osc_count(unsigned long long *counter, unsigned long long n)
{
    if (opal_using_threads()) {
        __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
    } else {
        *counter += n;
    }
}

/* The component's process-wide state: parameters, windows, counters
 * (osc_gpuwire_state.c, beneath every other file of the component). */
typedef struct {
    int priority;
    int gpu_priority;     /* in a process with a GPU (priority >= 0) */
    int verbose;
    int output;
    bool device;          /* GPU windows and origin buffers through the cuda layer */
    opal_list_t windows;
    opal_mutex_t windows_lock;
    bool progress_registered;
    int ngpus;            /* > 0 once the device layer opened */
    bool device_tried;    /* the device layer's opening was attempted */
    bool direct;          /* same-node Put/Get straight into mapped device windows */
    bool lock_word;       /* same-node locks taken in the target's shared lock word */
    bool shm_fence;       /* fences of one-node windows by counts in shared memory */
    unsigned long long direct_ops;     /* pvar: Put/Get on the direct path */
    unsigned long long direct_targets; /* pvar: targets mapped for it, all windows */
    unsigned long long acc_by_ref;     /* pvar: accumulates sent by reference */
    unsigned long long word_locks;     /* pvar: locks taken in a target's lock word */
    unsigned long long shared_targets; /* pvar: targets' host windows mapped in shared memory */
    unsigned long long direct_accs;    /* pvar: accumulates done by the origin */
    unsigned long long acc_word_busy;  /* pvar: ... sent as messages, the word held */
    unsigned long long shm_fences;     /* pvar: fences closed by counts in shared memory */
} gw_osc_state_t;

extern gw_osc_state_t gw_osc_state;

typedef struct {
    ompi_osc_base_component_t super;
} gw_osc_component_t;

#ifdef GW_OSC_FAKE_DEVICE
/* The test build over a simulated GPU (tests/mpi_coll/fake_device.c) loads
 * as osc "gpuwirefake" beside the real component, only where a test names it
 * and raises its priority. */
#define mca_osc_gpuwire_component mca_osc_gpuwirefake_component
#define GW_OSC_COMPONENT_NAME "gpuwirefake"
#define GW_OSC_DEFAULT_PRIORITY -1
#else
#define GW_OSC_COMPONENT_NAME "gpuwire"
#define GW_OSC_DEFAULT_PRIORITY 5
#endif

extern gw_osc_component_t mca_osc_gpuwire_component;

/* osc_gpuwire_comm.c */
/* A PMPI_ or ompi_ call that osc gpuwire needs the answer of failed: one
 * line naming it; returns rc (an MPI error code) for the caller to hand on. */
int gw_osc_call_failed(const char *call, int rc);
int gw_osc_progress(void);
int gw_osc_poll(gw_osc_module_t *m);
int gw_osc_send(gw_osc_module_t *m, int peer, const gw_osc_hdr_t *h, const void *blocks,
                size_t blocks_len, const void *payload, size_t payload_len);
/* Sends buf (len bytes from gw_osc_buf_get, a header first), which the
 * message then owns, whatever the outcome. */
int gw_osc_send_buf(gw_osc_module_t *m, int peer, char *buf, size_t len);
int gw_osc_send_ctl(gw_osc_module_t *m, int peer, uint32_t kind, int aux, uint64_t count);
/* Polls (and progresses) until *flag becomes nonzero. */
void gw_osc_wait_until(gw_osc_module_t *m, volatile int *counter, int at_least);
/* Polls until *value (a counter of m's, updated under m->lock, such as
 * acked[target] or applied[origin]) reaches want. */
void gw_osc_wait_reached(gw_osc_module_t *m, const uint64_t *value, uint64_t want);
void gw_osc_wait_pending(gw_osc_module_t *m);
void gw_osc_wait_sends(gw_osc_module_t *m);

/* An error of the core's one-sided engine (gpuwire/osc.h) as Open MPI's. */
static inline int gw_osc_rc(int rc)
{
    switch (rc) {
    case 0:
        return OMPI_SUCCESS;
    case GW_OSC_ERR_SYNC:
        return OMPI_ERR_RMA_SYNC;
    case GW_OSC_ERR_RANGE:
        return OMPI_ERR_RMA_RANGE;
    case GW_OSC_ERR_NOMEM:
        return OMPI_ERR_OUT_OF_RESOURCE;
    default: /* the engine's other codes; a callback's own pass through */
        return rc >= GW_OSC_ERR_FAILED && rc <= GW_OSC_ERR_SYNC ? OMPI_ERROR : rc;
    }
}

/* osc_gpuwire_ops.c */
int gw_osc_put(const void *, int, ompi_datatype_t *, int, ptrdiff_t, int, ompi_datatype_t *,
               ompi_win_t *);
int gw_osc_get(void *, int, ompi_datatype_t *, int, ptrdiff_t, int, ompi_datatype_t *,
               ompi_win_t *);
int gw_osc_accumulate(const void *, int, ompi_datatype_t *, int, ptrdiff_t, int,
                      ompi_datatype_t *, struct ompi_op_t *, ompi_win_t *);
int gw_osc_compare_and_swap(const void *, const void *, void *, ompi_datatype_t *, int,
                            ptrdiff_t, ompi_win_t *);
int gw_osc_fetch_and_op(const void *, void *, ompi_datatype_t *, int, ptrdiff_t, struct ompi_op_t *,
                        ompi_win_t *);
int gw_osc_get_accumulate(const void *, int, ompi_datatype_t *, void *, int, ompi_datatype_t *,
                          int, ptrdiff_t, int, ompi_datatype_t *, struct ompi_op_t *, ompi_win_t *);
int gw_osc_rput(const void *, int, ompi_datatype_t *, int, ptrdiff_t, int, ompi_datatype_t *,
                ompi_win_t *, ompi_request_t **);
int gw_osc_rget(void *, int, ompi_datatype_t *, int, ptrdiff_t, int, ompi_datatype_t *,
                ompi_win_t *, ompi_request_t **);
int gw_osc_raccumulate(const void *, int, ompi_datatype_t *, int, ptrdiff_t, int,
                       ompi_datatype_t *, struct ompi_op_t *, ompi_win_t *, ompi_request_t **);
int gw_osc_rget_accumulate(const void *, int, ompi_datatype_t *, void *, int,
                           ompi_datatype_t *, int, ptrdiff_t, int, ompi_datatype_t *,
                           struct ompi_op_t *, ompi_win_t *, ompi_request_t **);
/* Target side: apply one received operation (any kind up to GW_OSC_CAS). */
void gw_osc_apply(gw_osc_module_t *m, int origin, const gw_osc_hdr_t *h, const char *body);
/* An accumulate-kind operation (kind) of bytes, el elements under op, done
 * by this origin on target's window where it reaches it -- a host window
 * in shared memory or by cross-memory attach, a device window -- under
 * word, the target's
 * accumulate word (the core's gw_osc_direct_acc): GW_OSC_DIRECT_NO when it
 * cannot; else done, *rc its result. Buffers contiguous, at their first
 * byte; origin NULL for MPI_NO_OP. */
int gw_osc_apply_direct(gw_osc_module_t *m, int *word, uint32_t kind, int target,
                        ptrdiff_t tdisp, int64_t off, size_t bytes, const void *origin,
                        const void *compare, void *result, MPI_Datatype el, MPI_Op op, int *rc);
/* Origin side: a reply for a pending get. */
void gw_osc_reply(gw_osc_module_t *m, const gw_osc_hdr_t *h, const char *body);

/* osc_gpuwire_direct.c: the glue of the core's same-node direct path. */
/* Collective over the window: every rank's description of its window goes
 * to every rank; the origin maps those of same-node targets it can. */
int gw_osc_direct_setup(gw_osc_module_t *m);
/* Whether tcount x tdt at tdisp lies inside target's window (true where
 * the window's extent is not known: dynamic windows). For the message path:
 * the direct path checks its own accesses. */
bool gw_osc_in_window(const gw_osc_module_t *m, int target, ptrdiff_t tdisp, int tcount,
                      const ompi_datatype_t *tdt);
/* MPI_Win_allocate's memory: in this rank's segment (shared memory the
 * ranks on its node map) where the direct path is on, else private. */
int gw_osc_window_allocate(gw_osc_module_t *m, size_t size);
/* MPI_Win_allocate_shared's, before gw_osc_direct_setup: every rank's part
 * in rank 0's segment, one after the other (page-aligned parts with the
 * info alloc_shared_noncontig). Collective. */
int gw_osc_window_shared(gw_osc_module_t *m, size_t size, opal_info_t *info);
/* After gw_osc_direct_setup: this rank's part as mapped here in *base, or an
 * error (the same on every rank) where some rank could not map the segment. */
int gw_osc_window_shared_base(gw_osc_module_t *m, void **base);
void gw_osc_direct_release(gw_osc_module_t *m);
/* A Put (put) or Get to a direct target, both sides contiguous: one
 * asynchronous copy. Returns 1 when taken (*rc its result; the copy is
 * complete only after gw_osc_direct_settle, or at once when wait), 0 when
 * the message path must take it. */
int gw_osc_direct_try(gw_osc_module_t *m, bool put, void *oaddr, int ocount,
                      ompi_datatype_t *odt, int target, ptrdiff_t tdisp, int tcount,
                      ompi_datatype_t *tdt, bool wait, int *rc);
/* Waits for every direct copy issued so far (origin buffers reusable, data
 * at the targets). Called before any synchronisation's messages. */
int gw_osc_direct_settle(gw_osc_module_t *m);
/* Whether an Accumulate to target may go by reference: then desc holds the
 * description of the origin buffer (GW_OSC_DESC_BYTES) to send instead of its
 * bytes (hdr aux GW_OSC_BY_REF). el: the element type. */
bool gw_osc_direct_by_ref(gw_osc_module_t *m, const void *oaddr, int ocount,
                          ompi_datatype_t *odt, int target, int tcount, ompi_datatype_t *tdt,
                          MPI_Datatype el, MPI_Op op, void *desc);
/* Waits until target (-1: every target) has applied the accumulates this
 * origin sent it by reference: their origin buffers are free again. */
int gw_osc_direct_wait_refs(gw_osc_module_t *m, int target);

/* osc_gpuwire_device.c: op and element type as the core's reduction kernels
 * name them (gpuwire/cuda/reduce.h); -1: none (GW_OSC_OP_REPLACE for
 * MPI_REPLACE). */
int gw_osc_kernel_op(MPI_Op op);
int gw_osc_kernel_type(MPI_Datatype type);
/* Where the core's one-sided engine's lines go (gw_osc_log_set). */
void gw_osc_log(int verbosity, const char *msg);

/* osc_gpuwire_sync.c */
int gw_osc_fence(int, ompi_win_t *);
int gw_osc_start(ompi_group_t *, int, ompi_win_t *);
int gw_osc_complete(ompi_win_t *);
int gw_osc_post(ompi_group_t *, int, ompi_win_t *);
int gw_osc_wait(ompi_win_t *);
int gw_osc_test(ompi_win_t *, int *);
int gw_osc_lock(int, int, int, ompi_win_t *);
int gw_osc_unlock(int, ompi_win_t *);
int gw_osc_lock_all(int, ompi_win_t *);
int gw_osc_unlock_all(ompi_win_t *);
int gw_osc_sync(ompi_win_t *);
int gw_osc_flush(int, ompi_win_t *);
int gw_osc_flush_all(ompi_win_t *);
int gw_osc_flush_local(int, ompi_win_t *);
int gw_osc_flush_local_all(ompi_win_t *);

#endif
