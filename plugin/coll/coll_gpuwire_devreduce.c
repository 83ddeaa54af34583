/*
 * The device reduction algorithm's glue: Allreduce, Reduce,
 * Reduce_scatter(_block), Scan and Exscan whose data stay on the GPU, run by
 * the collective engine's ring (gpuwire/coll_ring.h, ucx_glue/coll/ring:
 * the chunks, the steps, the segments and the waits for the kernels) over
 * the pml (coll_gpuwire_transport.c). Here: which calls it takes, the
 * buffers it cannot use as they are, the call in the engine's terms, and
 * the non-blocking forms' requests and order.
 *
 * Every rank of a call must take the same algorithm, or the call hangs. The
 * dispatch brings a rank here only when at least one of its significant
 * buffers is device memory; accepts() below then decides from what MPI
 * makes identical on every rank (the collective, blocking or not, op,
 * datatype, the algorithm parameter, the pml). So every rank that passes
 * device memory anywhere runs the ring, whatever its other buffer is: a
 * buffer the ring cannot use as it is (host memory, another GPU's memory)
 * is replaced by a temporary on this rank's GPU, copied in before the call
 * where the call reads it and copied out after it where the call writes it.
 * When it declines, every such rank goes on to the staged path.
 *
 * What stays inconsistent without communication: a rank whose significant
 * buffers are all host memory passes through to the host module while ranks
 * with device memory run the ring (an MPI_IN_PLACE root of MPI_Reduce with a
 * host buffer, non-roots of MPI_Reduce with host send buffers while the root
 * receives into device memory). Such programs need
 * coll_gpuwire_reduce_algorithm staged, which sends every rank to Open MPI's
 * host algorithm (docs/coll.md). An agreement between ranks would cost a
 * host collective on every host reduction, which the host path must not pay.
 *
 * Order: the predefined ops of the table (gw_coll_table_ids) are
 * commutative and associative, as the ring requires; user-defined ops
 * never come here.
 *
 * Tags: the ring's messages carry a tag of their own, never Open MPI's tag
 * for the collective: a call that passes through to the host module waits,
 * and the ring never takes a message of Open MPI's algorithm for one of its
 * own. Blocking calls use GW_TAG_RING; the non-blocking forms (Iallreduce,
 * Ireduce, Ireduce_scatter(_block), Iscan, Iexscan) GW_TAG_RING_NB, which no
 * blocking algorithm, Open MPI's included, uses on the communicator. On
 * each rank the non-blocking jobs of a communicator start their ring (post
 * their messages) one after the other in initiation order (the module's
 * ring_turn, gpuwire/coll_turn.h): every rank's messages of a job then meet
 * the same job's receives, as the blocking ring's do within one call.
 *
 * Regions with gaps never reach the ring: the datatypes it accepts are
 * predefined, without padding (table_ids), and the same on every rank
 * (MPI's rule for predefined ops; Open MPI refuses a predefined op on a
 * derived datatype), so every region of an accepted call is dense. A
 * derived datatype with gaps comes with a user-defined op, and a padded
 * pair (MPI_SHORT_INT) is declined by its type: every rank declines alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire_dispatch.h"
#include "coll_gpuwire_transport.h"
#include "gpuwire/coll_ring.h"
#include "gpuwire/cuda/reduce.h"
#include "ompi/communicator/communicator.h"

/* One call of the ring on this rank. */
typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t eff; /* the buffers the ring works on */
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_coll_temps_t t;
    gw_ce_transport_t tp;
    gw_ce_ring_call_t call;
    gw_ce_ring_job_t *job;     /* the non-blocking form's, once its turn came */
    gw_ce_turn_ticket_t turn; /* its place among the module's (ring_turn) */
    int *counts;              /* Reduce_scatter: a copy of the receive counts */
    char why[256];
} ring_call_t;

/* Prints one line naming the call, what failed and c->why. */
static int ring_fail(ring_call_t *c, const char *what, int err)
{
    opal_output(0, "coll:gpuwire: device %s: %s: %s", gw_coll_name(c->eff.id), what, c->why);
    return err;
}

/* The dispatch asks only when a significant buffer of this rank is device
 * memory. Nothing here may depend on this rank's buffers: other ranks of the
 * call decide from the same arguments (see the comment at the top). */
static bool devreduce_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                              gw_coll_note_t *note)
{
    (void)note;
    (void)r;
    const unsigned reductions = GW_COLL_BIT(GW_COLL_ALLREDUCE) | GW_COLL_BIT(GW_COLL_REDUCE) |
                                GW_COLL_BIT(GW_COLL_REDUCE_SCATTER) |
                                GW_COLL_BIT(GW_COLL_REDUCE_SCATTER_BLOCK) |
                                GW_COLL_BIT(GW_COLL_SCAN) | GW_COLL_BIT(GW_COLL_EXSCAN);
    if (!gw_coll_p2p_accepts(a, reductions, mca_coll_gpuwire.reduce_algorithm)) {
        return false;
    }
    int op, type;
    return gw_coll_table_ids(a->op, a->dtype, &op, &type) && !gw_coll_reduce_small(a);
}

/* The call's context: its GPU, its ids, its transport; fails on a dispatch
 * error. */
static int ring_prepare(ring_call_t *c, const gw_coll_args_t *a,
                        const gw_coll_region_t r[GW_REGION_COUNT], int tag)
{
    gw_ce_ring_call_t *d = &c->call;
    c->eff = *a;
    memcpy(c->r, r, sizeof(c->r));
    if (!gw_coll_table_ids(a->op, a->dtype, &d->op, &d->type)) return OMPI_ERR_NOT_SUPPORTED;
    if (GW_COLL_REDUCE_SCATTER == a->id) {
        /* The ring reads the counts until it ends, the non-blocking form
         * long after its initiation returned: the application's array may
         * be gone by then. */
        const size_t n = (size_t)ompi_comm_size(a->comm);
        if (NULL == (c->counts = malloc(n * sizeof(int)))) return OMPI_ERR_OUT_OF_RESOURCE;
        memcpy(c->counts, a->rcounts, n * sizeof(int));
        c->eff.rcounts = c->counts;
    }
    d->es = gw_reduce_type_size(d->type);
    d->gpu = gw_coll_regions_gpu(r);
    d->tag = tag;
    d->segment_bytes = mca_coll_gpuwire.reduce_segment_bytes;
    if (d->gpu < 0) {
        snprintf(c->why, sizeof(c->why), "no buffer of this rank is device memory (a dispatch "
                 "error); set coll_gpuwire_reduce_algorithm staged");
        return ring_fail(c, "dispatch", OMPI_ERROR);
    }
    gw_coll_transport_init(&c->tp, a->comm);
    return OMPI_SUCCESS;
}

/* Points eff's buffers at device temporaries where the ring cannot use the
 * application's (gw_coll_temps_in: copied in and waited for, since the pml
 * may read a temporary as soon as the ring starts), then describes the call
 * to the engine. The ring treats every buffer as dense elements. */
static int ring_temps_in(ring_call_t *c)
{
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (c->r[i].hi > c->r[i].lo && !c->r[i].dense) {
            snprintf(c->why, sizeof(c->why),
                     "a buffer with gaps reached the device reduction (a datatype check is "
                     "missing); set coll_gpuwire_reduce_algorithm staged");
            return ring_fail(c, "layout", OMPI_ERROR);
        }
    }
    if (0 != gw_coll_temps_in(c->r, c->call.gpu, &c->t, c->why, sizeof(c->why))) {
        return ring_fail(c, "device scratch", OMPI_ERROR);
    }
    /* The datatype's displacements start at lo: the pointer the ring gets is
     * moved back by lo, as the staged path's host view. */
    gw_coll_args_t *a = &c->eff;
    if (NULL != c->t.tmp[GW_REGION_SEND]) a->sbuf = c->t.tmp[GW_REGION_SEND] - c->r[GW_REGION_SEND].lo;
    if (NULL != c->t.tmp[GW_REGION_RECV]) a->rbuf = c->t.tmp[GW_REGION_RECV] - c->r[GW_REGION_RECV].lo;

    gw_ce_ring_call_t *d = &c->call;
    d->count = (size_t)a->count;
    switch (a->id) {
    case GW_COLL_ALLREDUCE: d->coll = GW_CE_RING_ALLREDUCE; break;
    case GW_COLL_REDUCE: d->coll = GW_CE_RING_REDUCE; break;
    case GW_COLL_REDUCE_SCATTER: d->coll = GW_CE_RING_REDUCE_SCATTER; d->counts = a->rcounts; break;
    case GW_COLL_REDUCE_SCATTER_BLOCK:
        d->coll = GW_CE_RING_REDUCE_SCATTER;
        d->count = (size_t)a->rcount;
        break;
    case GW_COLL_SCAN: d->coll = GW_CE_RING_SCAN; break;
    case GW_COLL_EXSCAN: d->coll = GW_CE_RING_EXSCAN; break;
    default: return OMPI_ERR_NOT_SUPPORTED;
    }
    d->in_place = MPI_IN_PLACE == a->sbuf;
    d->sbuf = d->in_place ? NULL : a->sbuf;
    d->rbuf = a->rbuf;
    d->root = a->root;
    return OMPI_SUCCESS;
}

/* Copies the temporaries of what the call wrote back. */
static int ring_temps_out(ring_call_t *c)
{
    if (0 != gw_coll_temps_out(c->r, c->call.gpu, &c->t, c->why, sizeof(c->why))) {
        return ring_fail(c, "device copy", OMPI_ERROR);
    }
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Non-blocking forms: the engine's job, polled by a request of ours
 * (gw_coll_nb_job) from MPI's progress; each job of the module starts once
 * the ones initiated before it are through with their messages.
 * ------------------------------------------------------------------------ */

/* Lets the next job of the module post its messages (once). */
static void ring_pass(ring_call_t *c) { gw_ce_turn_pass(&c->m->ring_turn, &c->turn); }

static int ring_job_poll(void *p, bool query, bool *done)
{
    ring_call_t *c = p;
    *done = false;
    if (NULL == c->job) {
        if (!gw_ce_turn_mine(&c->m->ring_turn, &c->turn)) return OMPI_SUCCESS;
        __atomic_fetch_add(&mca_coll_gpuwire.device_nb_calls, 1, __ATOMIC_RELAXED);
        int err = ring_temps_in(c);
        if (OMPI_SUCCESS != err) return err;
        err = gw_ce_ring_start(&c->call, &c->tp, &c->job, c->why, sizeof(c->why));
        if (GW_CE_OK != err) return ring_fail(c, "ring", gw_coll_ce_to_ompi(err));
    }
    bool finished = false;
    const int err = gw_ce_ring_poll(c->job, query, &finished, c->why, sizeof(c->why));
    if (GW_CE_OK != err) return ring_fail(c, "ring", gw_coll_ce_to_ompi(err));
    if (!finished) return OMPI_SUCCESS;
    ring_pass(c);
    const int rc = ring_temps_out(c);
    *done = OMPI_SUCCESS == rc;
    return rc;
}

static void ring_job_release(void *p)
{
    ring_call_t *c = p;
    /* A failed job may leave messages in flight into its scratch and
     * temporaries: those are then never given back (an error ends the
     * program's use of MPI anyway), rather than reused under them. */
    if (gw_ce_ring_free(c->job)) gw_coll_temps_release(&c->t);
    ring_pass(c);
    free(c->counts);
    free(c);
}

/* Never declines: outside the FIFO of staged calls (not ordered). */
static const gw_coll_job_ops_t ring_job_ops = {ring_job_poll, ring_job_release, NULL};

static int ring_nb_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    ring_call_t *c = calloc(1, sizeof(*c));
    if (NULL == c) return OMPI_ERR_OUT_OF_RESOURCE;
    c->m = m;
    int err = ring_prepare(c, a, r, GW_TAG_RING_NB);
    /* The application's work on the default stream of every GPU the call
     * reads or writes before its initiation comes first. */
    if (OMPI_SUCCESS == err && 0 != gw_coll_wait_user_regions(r, c->why, sizeof(c->why))) {
        err = ring_fail(c, "device sync", OMPI_ERROR);
    }
    if (OMPI_SUCCESS != err) {
        free(c->counts);
        free(c);
        return err;
    }
    gw_ce_turn_take(&m->ring_turn, &c->turn);
    /* On failure the job is released, which passes its turn. */
    return gw_coll_nb_job(m, a, r, &ring_job_ops, c, false, request);
}

/* ------------------------------------------------------------------------
 * Blocking forms: the engine runs the call to its end.
 * ------------------------------------------------------------------------ */

static int devreduce_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], gw_coll_note_t *note,
                         ompi_request_t **request)
{
    (void)note;
    if (NULL != request) return ring_nb_start(m, a, r, request);
    ring_call_t c;
    memset(&c, 0, sizeof(c));
    int err = ring_prepare(&c, a, r, GW_TAG_RING);
    /* The application's work on the default stream of every GPU the call
     * reads or writes comes first. */
    if (OMPI_SUCCESS == err && 0 != gw_coll_wait_user_regions(r, c.why, sizeof(c.why))) {
        err = ring_fail(&c, "device sync", OMPI_ERROR);
    }
    if (OMPI_SUCCESS != err) {
        free(c.counts);
        return err;
    }
    __atomic_fetch_add(&gw_core_counters()->coll_device_calls, 1, __ATOMIC_RELAXED);
    err = ring_temps_in(&c);
    if (OMPI_SUCCESS == err) {
        const int rc = gw_ce_ring_run(&c.call, &c.tp, c.why, sizeof(c.why));
        if (GW_CE_OK != rc) err = ring_fail(&c, "ring", gw_coll_ce_to_ompi(rc));
    }
    if (OMPI_SUCCESS == err) err = ring_temps_out(&c);
    gw_coll_temps_release(&c.t);
    free(c.counts);
    return err;
}

const gw_coll_algorithm_t gw_coll_devreduce = {"device", devreduce_accepts, devreduce_run};
