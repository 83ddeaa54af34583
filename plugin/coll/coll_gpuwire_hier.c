/*
 * The glue of the hierarchical collectives: Allreduce, Reduce, Bcast and
 * Allgather(v) on device buffers across several nodes, composed from what
 * runs best at each level. The algorithm -- which rank starts which
 * collective or message at which level, on which bytes -- is the collective
 * engine's (gpuwire/coll_hier.h, ucx_glue/coll/hier). Here: whether a call
 * runs that way, the levels as sub-communicators, the engine's transport
 * over them, and the blocking and non-blocking drivers of its steps.
 *
 * Each step is a collective on a sub-communicator (the node's ranks, or
 * the nodes' first ranks), so the component's own dispatch picks its
 * algorithm there: the ring on the GPU over CUDA IPC/NVLink or staged
 * inside a node, point-to-point, GPUDirect RDMA or the staged pipeline
 * between nodes.
 *
 * The sub-communicators are made at the communicator's first call that
 * could use them (a collective split over it, host buffers only) and freed
 * with the module. Every rank decides alike: the communicator spans several
 * nodes (Open MPI's locality, the same on every rank), and after the split,
 * whether some node has two ranks or more (a host allreduce); if none has,
 * the flat algorithms are as good and every call declines from then on.
 *
 * The non-blocking forms (and so the persistent ones) run the same steps as
 * a job of the non-blocking machinery, each step's sub-collective started
 * in its non-blocking form once the one before has completed, from MPI's
 * progress. A split blocks, so they use the sub-communicators only once a
 * blocking call has made them; until then they run flat (the same on every
 * rank). Every rank must start the sub-communicators' collectives in one
 * order, whatever order the steps of several calls in flight complete in:
 * a call starts its first step only once the calls initiated before it
 * have started their last (the engine's driver keeps that order, in the
 * module's turn), and a blocking call waits for that as well.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire.h"
#include "coll_gpuwire_dispatch.h"
#include "coll_gpuwire_transport.h"
#include "gpuwire/coll_hier.h"
#include "gpuwire/gpu_device.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/info/info.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"

static bool spans_nodes(struct ompi_communicator_t *comm)
{
    const int n = ompi_comm_size(comm);
    for (int r = 0; r < n; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        if (NULL == p || !OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags)) return true;
    }
    return false;
}

static gw_ce_hier_coll_t hier_coll(int id)
{
    switch (id) {
    case GW_COLL_ALLREDUCE: return GW_CE_HIER_ALLREDUCE;
    case GW_COLL_REDUCE: return GW_CE_HIER_REDUCE;
    case GW_COLL_BCAST: return GW_CE_HIER_BCAST;
    case GW_COLL_ALLGATHER: return GW_CE_HIER_ALLGATHER;
    default: return GW_CE_HIER_ALLGATHERV;
    }
}

static bool hier_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                         gw_coll_note_t *note)
{
    (void)note;
    (void)r;
    const int mode = mca_coll_gpuwire.hierarchical;
    if (GW_HIER_NEVER == mode || OMPI_COMM_IS_INTER(a->comm) ||
        ompi_comm_size(a->comm) < 3) {
        return false;
    }
    /* Something to move, in counts the steps can carry (the reductions and
     * Bcast take count and dtype; Allgather(v) rcount(s) and rdtype). */
    const unsigned hier_ids = GW_COLL_BIT(GW_COLL_ALLREDUCE) | GW_COLL_BIT(GW_COLL_REDUCE) |
                              GW_COLL_BIT(GW_COLL_BCAST) | GW_COLL_BIT(GW_COLL_ALLGATHER) |
                              GW_COLL_BIT(GW_COLL_ALLGATHERV);
    if (0 == (hier_ids & GW_COLL_BIT(a->id)) ||
        !gw_ce_hier_fits(hier_coll(a->id), ompi_comm_size(a->comm), a->count, a->rcount,
                         a->rcounts)) {
        return false;
    }
    /* auto: where the level's algorithms run on the GPU (not staged through
     * host memory, where one staged call beats three; reductions too small
     * for the GPU over point-to-point are staged). */
    if (GW_COLL_ALLREDUCE == a->id) {
        int op, type;
        if (!gw_coll_table_ids(a->op, a->dtype, &op, &type)) return false;
        const unsigned id = GW_COLL_BIT(GW_COLL_ALLREDUCE);
        if (GW_HIER_AUTO == mode &&
            (!gw_coll_p2p_accepts(a, id, mca_coll_gpuwire.reduce_algorithm) ||
             gw_coll_reduce_small(a))) {
            return false;
        }
    } else if (GW_COLL_REDUCE == a->id) {
        /* Whole elements back to back (the temporaries' size), and the
         * result goes to the root by a message: the pml must move device
         * memory. */
        int op, type;
        ptrdiff_t lb, extent;
        size_t size = 0;
        ompi_datatype_get_extent(a->dtype, &lb, &extent);
        ompi_datatype_type_size(a->dtype, &size);
        if (!gw_coll_table_ids(a->op, a->dtype, &op, &type) || 0 != lb ||
            (size_t)extent != size ||
            !gw_coll_p2p_accepts(a, GW_COLL_BIT(GW_COLL_REDUCE),
                                 mca_coll_gpuwire.reduce_algorithm) ||
            (GW_HIER_AUTO == mode && gw_coll_reduce_small(a))) {
            return false;
        }
    } else if (GW_COLL_BCAST == a->id || GW_COLL_ALLGATHER == a->id ||
               GW_COLL_ALLGATHERV == a->id) {
        const unsigned ids = GW_COLL_BIT(GW_COLL_BCAST) | GW_COLL_BIT(GW_COLL_ALLGATHER) |
                             GW_COLL_BIT(GW_COLL_ALLGATHERV);
        if (GW_HIER_AUTO == mode &&
            !gw_coll_p2p_accepts(a, ids, mca_coll_gpuwire.move_algorithm)) {
            return false;
        }
    } else {
        return false;
    }
    return spans_nodes(a->comm);
}


/* Marks level's module, where it is one of this component's (whose enable
 * is m's), as one whose calls come from algorithms whose ranks agreed. */
static void agreed_inside(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *level)
{
    mca_coll_base_module_t *mod = level->c_coll->coll_iallreduce_module;
    if (NULL != mod && m->super.coll_module_enable == mod->coll_module_enable) {
        ((mca_coll_gpuwire_module_t *)mod)->agreed_inside = true;
    }
}

/* Collective over comm: the node and leaders' communicators, or
 * HIER_UNUSABLE on every rank alike. An error return is an MPI error of the
 * split or the host exchange. */
static int hier_setup(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm)
{
    struct ompi_communicator_t *node = NULL, *leaders = NULL;
    int rc = ompi_comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, &ompi_mpi_info_null.info.super,
                                  &node);
    if (OMPI_SUCCESS != rc) return rc;
    const bool leader = 0 == ompi_comm_rank(node);
    rc = ompi_comm_split(comm, leader ? 0 : MPI_UNDEFINED, ompi_comm_rank(comm), &leaders, false);
    if (OMPI_SUCCESS != rc) {
        ompi_comm_free(&node);
        return rc;
    }
    int mine = ompi_comm_size(node), most = 0;
    rc = m->previous_allreduce(&mine, &most, 1, MPI_INT, MPI_MAX, comm,
                               m->previous_allreduce_module);
    m->hier_node = node;
    m->hier_leaders = MPI_COMM_NULL == leaders ? NULL : leaders;
    /* The levels' calls come from a call whose ranks agreed: theirs need
     * no agreement without blocking of their own. */
    agreed_inside(m, node);
    if (NULL != m->hier_leaders) agreed_inside(m, m->hier_leaders);
    /* Where every rank is: its node leader's rank among the leaders (told by
     * the leader inside the node) and its rank in the node. */
    int where[2] = {leader ? ompi_comm_rank(m->hier_leaders) : 0, ompi_comm_rank(node)};
    if (OMPI_SUCCESS == rc) {
        rc = node->c_coll->coll_bcast(where, 1, MPI_INT, 0, node, node->c_coll->coll_bcast_module);
    }
    if (OMPI_SUCCESS == rc) {
        m->hier_where = malloc(2 * sizeof(int) * (size_t)ompi_comm_size(comm));
        rc = NULL == m->hier_where
                 ? OMPI_ERR_OUT_OF_RESOURCE
                 : m->previous_allgather(where, 2, MPI_INT, m->hier_where, 2, MPI_INT, comm,
                                         m->previous_allgather_module);
    }
    if (OMPI_SUCCESS != rc || most < 2) {
        gw_coll_hier_release(m);
        m->hier_state = HIER_UNUSABLE;
        if (OMPI_SUCCESS == rc) {
            COLL_GPUWIRE_VERBOSE(10, "hierarchical: %s has one rank per node: not used",
                                 comm->c_name);
        }
        return rc;
    }
    m->hier_state = HIER_READY;
    COLL_GPUWIRE_VERBOSE(10, "hierarchical: %s: %d rank(s) on this node, %s", comm->c_name,
                         mine, leader ? "its leader" : "not its leader");
    return OMPI_SUCCESS;
}

static int hier_done(const gw_coll_args_t *a, int rc)
{
    if (OMPI_SUCCESS == rc) {
        __atomic_fetch_add(&mca_coll_gpuwire.hier_calls, 1, __ATOMIC_RELAXED);
    } else {
        opal_output(0, "coll:gpuwire: hierarchical %s%s of %d elements failed (%d); set "
                    "coll_gpuwire_hierarchical 0", a->nonblocking ? "i" : "", gw_coll_name(a->id),
                    GW_COLL_ALLGATHER == a->id ? a->rcount : a->count, rc);
    }
    return rc;
}

/* ------------------------------------------------------------------------
 * One call: the engine's job, and its transport over the sub-communicators.
 * ------------------------------------------------------------------------ */

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t a;
    gw_ce_hier_job_t *job;
    gw_ce_hier_transport_t t; /* ctx: this call */
    int gpu;                  /* the GPU of the temporary and the copies */
    gw_coll_dev_buf_t tmp;
    uint64_t ticket; /* step 3's last copy */
    bool finished;   /* the non-blocking form's last step has completed */
} gw_coll_hier_call_t;

static struct ompi_datatype_t *hier_type(const gw_coll_hier_call_t *c, gw_ce_hier_type_t t)
{
    switch (t) {
    case GW_CE_HIER_STYPE: return c->a.sdtype;
    case GW_CE_HIER_RTYPE: return c->a.rdtype;
    case GW_CE_HIER_NOTYPE: return MPI_DATATYPE_NULL;
    default: return c->a.dtype;
    }
}

/* A sub-collective on comm, blocking when req is NULL, else its
 * non-blocking form (the request in *req). */
#define HIER_SUB(comm, fn, req, ...)                                                          \
    (NULL == (req) ? (comm)->c_coll->coll_##fn(__VA_ARGS__, (comm),                            \
                                               (comm)->c_coll->coll_##fn##_module)             \
                   : (comm)->c_coll->coll_i##fn(__VA_ARGS__, (comm), (req),                    \
                                                (comm)->c_coll->coll_i##fn##_module))

/* The engine's start: the step's sub-collective on the level's communicator
 * (the call's op and datatypes), or Reduce's message inside the node. */
static int hier_sub_start(void *ctx, const gw_ce_hier_sub_t *s, void **reqp)
{
    gw_coll_hier_call_t *c = ctx;
    struct ompi_communicator_t *comm =
        GW_CE_HIER_NODE == s->level ? c->m->hier_node : c->m->hier_leaders;
    ompi_request_t *r = NULL, **req = NULL == reqp ? NULL : &r;
    const void *send = s->in_place ? MPI_IN_PLACE : s->sbuf;
    struct ompi_datatype_t *st = hier_type(c, s->stype), *rt = hier_type(c, s->rtype);
    const int tag = gw_coll_tag(GW_COLL_REDUCE);
    int rc;
    switch (s->kind) {
    case GW_CE_HIER_SUB_REDUCE:
        rc = HIER_SUB(comm, reduce, req, send, s->rbuf, s->count, rt, c->a.op, s->root);
        break;
    case GW_CE_HIER_SUB_ALLREDUCE:
        rc = HIER_SUB(comm, allreduce, req, send, s->rbuf, s->count, rt, c->a.op);
        break;
    case GW_CE_HIER_SUB_BCAST:
        rc = HIER_SUB(comm, bcast, req, s->rbuf, s->count, rt, s->root);
        break;
    case GW_CE_HIER_SUB_ALLGATHER:
        rc = HIER_SUB(comm, allgather, req, send, s->scount, st, s->rbuf, s->count, rt);
        break;
    case GW_CE_HIER_SUB_ALLGATHERV:
        rc = HIER_SUB(comm, allgatherv, req, send, s->scount, st, s->rbuf, (int *)s->counts,
                      (int *)s->displs, rt);
        break;
    case GW_CE_HIER_SUB_SEND:
        rc = NULL == req ? MCA_PML_CALL(send(s->sbuf, s->count, rt, s->root, tag,
                                             MCA_PML_BASE_SEND_STANDARD, comm))
                         : MCA_PML_CALL(isend(s->sbuf, s->count, rt, s->root, tag,
                                              MCA_PML_BASE_SEND_STANDARD, comm, req));
        break;
    case GW_CE_HIER_SUB_RECV:
        rc = NULL == req
                 ? MCA_PML_CALL(recv(s->rbuf, s->count, rt, s->root, tag, comm, MPI_STATUS_IGNORE))
                 : MCA_PML_CALL(irecv(s->rbuf, s->count, rt, s->root, tag, comm, req));
        break;
    default: return OMPI_ERR_BAD_PARAM;
    }
    if (NULL != reqp) *reqp = r;
    return rc;
}

/* The engine's temporary: the call's device scratch. */
static int hier_sub_temp(void *ctx, size_t len, void **ptr)
{
    gw_coll_hier_call_t *c = ctx;
    char why[256];
    if (0 != gw_coll_scratch_get(len, c->gpu, &c->tmp, why, sizeof(why))) {
        opal_output(0, "coll:gpuwire: hierarchical %s: %s", gw_coll_name(c->a.id), why);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    *ptr = c->tmp.ptr;
    return OMPI_SUCCESS;
}

static int hier_copy_fail(const gw_coll_hier_call_t *c, const char *why)
{
    opal_output(0, "coll:gpuwire: hierarchical %s: %s", gw_coll_name(c->a.id), why);
    return OMPI_ERROR;
}

/* The engine's copies, on the call's GPU; the non-blocking form's are
 * waited for by the engine's poll (hier_sub_copied). */
static int hier_sub_copy(void *ctx, const gw_ce_hier_copy_t *cp, size_t n, bool wait)
{
    gw_coll_hier_call_t *c = ctx;
    char why[256];
    int err = 0;
    for (size_t i = 0; i < n && 0 == err; ++i) {
        err = gw_coll_copy_start(cp[i].dst, cp[i].src, cp[i].bytes, c->gpu, &c->ticket, why,
                                 sizeof(why));
    }
    if (0 == err && wait) err = gw_coll_copy_wait(c->gpu, c->ticket, why, sizeof(why));
    return 0 == err ? OMPI_SUCCESS : hier_copy_fail(c, why);
}

/* Whether the copies queued without waiting have landed. */
static int hier_sub_copied(void *ctx, bool query, bool wait, bool *done)
{
    gw_coll_hier_call_t *c = ctx;
    char why[256];
    *done = false;
    const int err = wait ? gw_coll_copy_wait(c->gpu, c->ticket, why, sizeof(why))
                         : gw_coll_copy_done(c->gpu, c->ticket, query, done, why, sizeof(why));
    if (0 != err) return hier_copy_fail(c, why);
    if (wait) *done = true;
    return OMPI_SUCCESS;
}

static void hier_sub_wait(void *ctx, void **req)
{
    (void)ctx;
    ompi_request_t *r = *req;
    ompi_request_wait(&r, MPI_STATUS_IGNORE);
    *req = NULL;
}

/* Whether a level's NVLink team is being set up (by an earlier step). The
 * next step waits for the outcome and adopts it: every rank does so before
 * the same sub-collective of each level, so the level's later non-blocking
 * calls go by the outcome (without it they would run staged wherever the
 * team turned out unusable, until a blocking call on the level). */
static bool hier_levels_ready(void *ctx)
{
    const gw_coll_hier_call_t *c = ctx;
    return gw_coll_nvlink_settled(c->m->hier_node) &&
           (NULL == c->m->hier_leaders || gw_coll_nvlink_settled(c->m->hier_leaders));
}

/* OMPI_SUCCESS, GW_COLL_DECLINED (every rank alike) or an error; c is
 * finished with hier_call_fini in every case. The non-blocking form
 * (turn set) takes its place among the module's calls on success. */
static int hier_call_init(gw_coll_hier_call_t *c, mca_coll_gpuwire_module_t *m,
                          const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                          gw_ce_turn_t *turn)
{
    memset(c, 0, sizeof(*c));
    c->m = m;
    c->a = *a;
    c->gpu = gw_coll_regions_gpu(r) < 0 ? 0 : gw_coll_regions_gpu(r);
    c->t = (gw_ce_hier_transport_t){.ctx = c, .start = hier_sub_start, .temp = hier_sub_temp,
                                    .copy = hier_sub_copy, .test = gw_coll_request_test,
                                    .wait = hier_sub_wait, .copied = hier_sub_copied,
                                    .ready = hier_levels_ready};
    gw_ce_hier_call_t h = {.coll = hier_coll(a->id), .op = -1, .type = -1, .turn = turn,
                           .size = ompi_comm_size(a->comm), .rank = ompi_comm_rank(a->comm),
                           .where = m->hier_where, .in_place = MPI_IN_PLACE == a->sbuf,
                           .sbuf = a->sbuf, .rbuf = a->rbuf, .count = a->count, .root = a->root,
                           .scount = a->scount, .rcount = a->rcount, .rcounts = a->rcounts,
                           .rdispls = a->rdispls};
    if (GW_CE_HIER_ALLREDUCE == h.coll || GW_CE_HIER_REDUCE == h.coll) {
        gw_coll_table_ids(a->op, a->dtype, &h.op, &h.type); /* the accepts checked it */
        ompi_datatype_type_size(a->dtype, &h.es);          /* dense (the accepts) */
    } else if (GW_CE_HIER_ALLGATHER == h.coll || GW_CE_HIER_ALLGATHERV == h.coll) {
        ptrdiff_t lb, extent;
        ompi_datatype_get_extent(a->rdtype, &lb, &extent);
        ompi_datatype_type_size(a->rdtype, &h.r_size);
        h.r_extent = (size_t)extent;
        h.r_dense = 0 == lb && (size_t)extent == h.r_size;
    }
    char why[256] = "";
    const int rc = gw_ce_hier_start(&h, &c->t, &c->job, why, sizeof(why));
    if (GW_CE_HIER_DECLINED == rc) return GW_COLL_DECLINED;
    if ('\0' != why[0]) { /* the engine's own error; the transport's said why already */
        opal_output(0, "coll:gpuwire: hierarchical %s: %s", gw_coll_name(a->id), why);
        return GW_CE_ERR_NOMEM == rc ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_ERR_BAD_PARAM;
    }
    return rc;
}

/* Gives back what the call holds. */
static void hier_call_fini(gw_coll_hier_call_t *c)
{
    gw_ce_hier_free(c->job);
    c->job = NULL;
    gw_coll_scratch_put(&c->tmp);
}

/* ------------------------------------------------------------------------
 * The non-blocking form: a job (gw_coll_nb_job) whose poll is the engine's
 * (gw_ce_hier_poll: each step once the one before has completed, the
 * module's calls in their turn, hier_turn), from MPI's progress; a blocking
 * call waits for those initiated before it to pass (hier_wait_turn).
 * ------------------------------------------------------------------------ */

static int hier_job_poll(void *p, bool query, bool *done)
{
    gw_coll_hier_call_t *c = p;
    const int rc = gw_ce_hier_poll(c->job, query, done);
    if (OMPI_SUCCESS != rc) return hier_done(&c->a, rc);
    if (*done && !c->finished) {
        c->finished = true;
        hier_done(&c->a, OMPI_SUCCESS);
    }
    return OMPI_SUCCESS;
}

/* The engine's job waits for a step still in flight and passes its turn
 * before it goes, so nothing the call holds goes back under a step. */
static void hier_job_release(void *p)
{
    gw_coll_hier_call_t *c = p;
    hier_call_fini(c);
    free(c);
}

/* Never declines once started: outside the FIFO of staged calls. */
static const gw_coll_job_ops_t hier_job_ops = {hier_job_poll, hier_job_release, NULL};

static int hier_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    gw_coll_hier_call_t *c = malloc(sizeof(*c));
    if (NULL == c) return hier_done(a, OMPI_ERR_OUT_OF_RESOURCE);
    int rc = hier_call_init(c, m, a, r, &m->hier_turn);
    if (OMPI_SUCCESS != rc) {
        hier_call_fini(c);
        free(c);
        return GW_COLL_DECLINED == rc ? rc : hier_done(a, rc);
    }
    /* The first step starts now when nothing initiated before is left to
     * start; otherwise from MPI's progress, in its turn. */
    bool done = false;
    rc = hier_job_poll(c, false, &done);
    if (OMPI_SUCCESS != rc) {
        hier_job_release(c);
        return rc;
    }
    return gw_coll_nb_job(m, a, r, &hier_job_ops, c, false, request); /* c is the request's */
}

/* Before a blocking call's steps: the non-blocking calls initiated before it
 * have started all theirs (they start from progress). */
static void hier_wait_turn(mca_coll_gpuwire_module_t *m)
{
    while (!gw_ce_turn_idle(&m->hier_turn)) opal_progress();
}

static int hier_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                    gw_coll_region_t r[GW_REGION_COUNT], gw_coll_note_t *note,
                    ompi_request_t **request)
{
    (void)note;
    /* The set-up is collective and blocks: a non-blocking call cannot make
     * it, and runs flat until a blocking one has (the same on every rank). */
    if (NULL != request) {
        return HIER_READY == m->hier_state ? hier_start(m, a, r, request) : GW_COLL_DECLINED;
    }
    const int set_up = gw_coll_hier_prepare(m, a);
    if (OMPI_SUCCESS != set_up) return set_up;
    if (HIER_READY != m->hier_state) return GW_COLL_DECLINED;

    gw_coll_hier_call_t c;
    int rc = hier_call_init(&c, m, a, r, NULL);
    if (OMPI_SUCCESS == rc) {
        hier_wait_turn(m);
        while (OMPI_SUCCESS == (rc = gw_ce_hier_step(c.job, NULL))) {
        }
        if (GW_CE_HIER_END == rc) rc = OMPI_SUCCESS;
    }
    hier_call_fini(&c);
    return GW_COLL_DECLINED == rc ? rc : hier_done(a, rc);
}

int gw_coll_hier_prepare(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a)
{
    if (HIER_UNKNOWN != m->hier_state || !hier_accepts(a, NULL, NULL)) {
        return OMPI_SUCCESS;
    }
    if (NULL == m->previous_allreduce || NULL == m->previous_allgather) {
        m->hier_state = HIER_UNUSABLE; /* the same on every rank */
        return OMPI_SUCCESS;
    }
    return hier_setup(m, a->comm);
}

const gw_coll_algorithm_t gw_coll_hier = {"hierarchical", hier_accepts, hier_run};
