/*
 * Agreements of non-blocking calls (coll_gpuwire_agree_nb). A rank decides
 * alone, and one whose significant buffers are all host memory hands the
 * call to libnbc, whose messages no GPU algorithm of the other ranks would
 * answer. A blocking call asks first (one host allreduce, the dispatch); a
 * non-blocking one cannot wait for an answer at its initiation, which MPI
 * makes local. So every rank starts an agreement without blocking (the
 * collective engine's, gpuwire/coll_agree.h: three flags -- some rank passes
 * device memory, some does not, some passes a layout the NVLink kernels
 * cannot take) and the call runs as the dispatch decides from its outcome,
 * the same on every rank:
 *   - when the agreement ends within coll_gpuwire_agree_nb_wait_us of the
 *     initiation (the ranks initiated together) and no call initiated
 *     before waits for its own, at once, as the blocking forms do;
 *   - otherwise a request of ours takes the call's place among the
 *     communicator's non-blocking calls and acts on the outcome from MPI's
 *     progress, in initiation order: staged in that place where some rank
 *     passes host memory only (libnbc's collective on every rank), or the
 *     GPU algorithm's job in that place.
 * A blocking call, or a persistent initialization, waits until the calls
 * before it have acted (gw_coll_agree_nb_settle): the algorithms' own
 * orders then see the calls in one order on every rank.
 */
#include <stdlib.h>
#include <time.h>

#include "coll_gpuwire_staged.h"
#include "coll_gpuwire_transport.h"
#include "opal/runtime/opal_progress.h"

enum { AGREE_DEVICE = 1u, AGREE_HOST = 2u, AGREE_UNEVEN = 4u };

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t a; /* adopt: the request below */
    gw_coll_run_fn run;
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_mem_kind_t kind;
    gw_ce_agree_t *ag;
    bool decided;
    ompi_request_t *inner; /* an algorithm's request that is not ours in place */
} agree_job_t;

static uint32_t my_flags(const gw_coll_args_t *a, gw_mem_kind_t kind)
{
    if (GW_MEM_DEVICE != kind) return AGREE_HOST;
    return AGREE_DEVICE | (gw_coll_nvlink_layout_ok(a) ? 0u : AGREE_UNEVEN);
}

/* Some rank passes host memory only (or nothing): every rank runs Open
 * MPI's algorithm, staged here. */
static bool staged_outcome(const gw_coll_args_t *a, gw_mem_kind_t kind, uint32_t all)
{
    const bool staged = 0 != (all & AGREE_HOST);
    if (staged && GW_MEM_DEVICE == kind) {
        __atomic_fetch_add(&mca_coll_gpuwire.mixed_calls, 1, __ATOMIC_RELAXED);
        COLL_GPUWIRE_VERBOSE(20, "i%s: some ranks pass host memory only, staged",
                             gw_coll_name(a->id));
    }
    return staged;
}

static int agree_job_poll(void *p, bool query, bool *done)
{
    (void)query;
    agree_job_t *j = p;
    *done = false;
    if (!j->decided) {
        char why[256];
        bool over = false;
        uint32_t all = 0;
        const int rc = gw_ce_agree_poll(j->ag, &over, &all, why, sizeof(why));
        if (GW_CE_OK != rc) {
            opal_output(0, "coll:gpuwire: i%s: %s", gw_coll_name(j->a.id), why);
            return OMPI_ERROR;
        }
        if (!over || !gw_ce_agree_my_turn(j->ag)) return OMPI_SUCCESS;
        j->decided = true;
        __atomic_fetch_add(&mca_coll_gpuwire.nb_agreements_late, 1, __ATOMIC_RELAXED);
        /* The turn passes once the call has its algorithm. */
        int run = GW_COLL_IN_PLACE;
        if (!staged_outcome(&j->a, j->kind, all)) {
            run = j->run(j->m, &j->a, j->r, j->kind, &j->inner, false,
                         0 != (all & AGREE_UNEVEN));
        }
        gw_ce_agree_decided(j->ag);
        if (GW_COLL_IN_PLACE == run) return GW_CE_DECLINED; /* staged in its place */
        if (OMPI_SUCCESS != run) return run;
        gw_coll_request_t *req = j->a.adopt;
        if (j->inner == req->mpi) {
            j->inner = NULL; /* the algorithm's job replaces this one */
            return OMPI_SUCCESS;
        }
    }
    /* Otherwise the call's own request, polled here until it completes. */
    if (NULL == j->inner) {
        *done = true;
        return OMPI_SUCCESS;
    }
    if (!REQUEST_COMPLETE(j->inner)) return OMPI_SUCCESS;
    const int status = j->inner->req_status.MPI_ERROR;
    ompi_request_free(&j->inner);
    *done = true;
    return status;
}

static void agree_job_release(void *p)
{
    agree_job_t *j = p;
    gw_ce_agree_free(j->ag);
    if (NULL != j->inner) {
        /* Released before its call completed: an error path. */
        ompi_request_free(&j->inner);
    }
    free(j);
}

/* In the order until it has acted on the outcome: a call staged in its
 * place must start there. */
static bool agree_job_ordered(void *p) { return !((agree_job_t *)p)->decided; }

static const gw_coll_job_ops_t agree_job_ops = {agree_job_poll, agree_job_release,
                                                agree_job_ordered};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

int gw_coll_agree_nb(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                     gw_coll_region_t r[GW_REGION_COUNT], gw_mem_kind_t kind, gw_coll_run_fn run,
                     ompi_request_t **request)
{
    const bool first = gw_ce_agree_line_idle(&m->agree_line);
    /* A persistent start whose ranks all pass device memory knows the
     * outcome; it waits only for the calls before it to act on theirs. */
    if (a->agreed && first) return run(m, a, r, kind, request, false, false);
    __atomic_fetch_add(&mca_coll_gpuwire.nb_agreements, 1, __ATOMIC_RELAXED);
    char why[256];
    gw_ce_agree_t *ag = NULL;
    int rc;
    if (a->agreed) {
        rc = gw_ce_agree_known(&m->agree_line, AGREE_DEVICE, &ag);
    } else {
        if (NULL == m->agree_tp.isend) gw_coll_transport_init(&m->agree_tp, a->comm);
        rc = gw_ce_agree_start(&m->agree_tp, &m->agree_line, GW_TAG_AGREE_NB, my_flags(a, kind),
                               &ag, why, sizeof(why));
    }
    if (GW_CE_OK != rc) {
        opal_output(0, "coll:gpuwire: i%s: %s", gw_coll_name(a->id),
                    a->agreed ? "out of host memory" : why);
        return gw_coll_ce_to_ompi(rc);
    }
    /* Ranks that initiate together agree within microseconds; a call
     * initiated by an algorithm's step (inside MPI's progress) waits for
     * nothing. */
    if (first && !gw_ce_sched_in_progress(gw_coll_sched())) {
        const double until = now_us() + mca_coll_gpuwire.agree_nb_wait_us;
        for (;;) {
            bool over = false;
            uint32_t all = 0;
            rc = gw_ce_agree_poll(ag, &over, &all, why, sizeof(why));
            if (GW_CE_OK != rc) {
                opal_output(0, "coll:gpuwire: i%s: %s", gw_coll_name(a->id), why);
                gw_ce_agree_free(ag);
                return OMPI_ERROR;
            }
            if (over) {
                gw_ce_agree_free(ag); /* passes the turn: this call acts now */
                return run(m, a, r, kind, request, staged_outcome(a, kind, all),
                           0 != (all & AGREE_UNEVEN));
            }
            if (now_us() >= until) break;
            opal_progress();
        }
    }
    agree_job_t *j = calloc(1, sizeof(*j));
    gw_coll_request_t *req = NULL == j ? NULL : gw_coll_request_new(m, a);
    if (NULL == req) {
        free(j);
        gw_ce_agree_free(ag);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    j->m = m;
    j->a = req->args; /* with the request's copies of the call's arrays */
    j->a.adopt = req;
    for (int i = 0; i < GW_REGION_COUNT; ++i) j->r[i] = r[i];
    j->kind = kind;
    j->run = run;
    j->ag = ag;
    gw_coll_request_job(req, &agree_job_ops, j, r, true);
    *request = req->mpi;
    return OMPI_SUCCESS;
}

void gw_coll_agree_nb_settle(mca_coll_gpuwire_module_t *m)
{
    while (!gw_ce_agree_line_idle(&m->agree_line)) opal_progress();
}
