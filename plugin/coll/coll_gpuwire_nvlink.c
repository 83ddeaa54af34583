/*
 * Allreduce, Bcast and Allgather on device buffers by kernels that read and
 * write the other GPUs of the node (gpuwire/cuda/nvlink_coll.h).
 *
 * A communicator gets a team at its first call that could use one: every
 * rank on this node (Open MPI's locality), 2 to GW_NVL_MAX_RANKS ranks, each
 * on a GPU of its own that the others can map. Setting the team up is
 * collective over the communicator's modules below (host buffers): an
 * allgather of the ranks' descriptions, then an allreduce of whether every
 * rank could map every peer. A communicator that cannot have a team declines
 * every call from then on, on every rank alike, and its calls go to the
 * algorithms over point-to-point.
 *
 * Per call, chosen alike on every rank from the call's arguments:
 *   bytes <= coll_gpuwire_nvlink_oneshot_bytes: one-shot through the
 *     workspace slots; no host communication at all.
 *   larger, with coll_gpuwire_nvlink_direct 1 (else declined in accepts and
 *     run over point-to-point): direct on the application's buffers; the ranks exchange IPC
 *     descriptions of them (one host allgather), map them (cached), and agree
 *     that every rank could (one host allreduce) before the kernels run; a
 *     buffer CUDA IPC cannot export (stream-ordered pools, VMM, managed)
 *     makes every rank decline the call.
 *
 * What accepts() looks at is the same on every rank: the collective, the
 * op and type, the datatype's layout, the byte count. As with the device
 * reductions, every rank of a call must pass device buffers; Bcast and
 * Allgather also need each rank's datatype to describe contiguous bytes
 * (different datatypes with the same signature may mix only if each one is
 * contiguous).
 */
#include <string.h>

#include "coll_gpuwire.h"
#include "gpuwire/gpu_device.h"
#include "coll_gpuwire_dispatch.h"
#include "gpuwire/cuda/reduce.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "opal/runtime/opal_progress.h"

#define GW_NVL_MAX_TEAM 8
/* Non-blocking calls given to a team being set up after which a rank waits,
 * at the next one's initiation, for the outcome and goes by it: the place
 * where every rank adopts it when no blocking collective comes. */
#define GW_NVL_ADOPT_AFTER 16

static size_t type_bytes(struct ompi_datatype_t *dt, int count)
{
    size_t size = 0;
    ompi_datatype_type_size(dt, &size);
    return size * (size_t)(count < 0 ? 0 : count);
}

static bool contiguous(struct ompi_datatype_t *dt, int count)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    return 0 == lb && ompi_datatype_is_contiguous_memory_layout(dt, count);
}

/* Bytes per rank of the call, the same on every rank (type signatures match). */
static size_t call_bytes(const gw_coll_args_t *a)
{
    switch (a->id) {
    case GW_COLL_ALLREDUCE:
    case GW_COLL_BCAST: return type_bytes(a->dtype, a->count);
    default: return type_bytes(a->rdtype, a->rcount);
    }
}

static bool nvlink_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT])
{
    (void)r;
    if (!mca_coll_gpuwire.nvlink) return false;
    const int n = ompi_comm_size(a->comm);
    if (n < 2 || n > GW_NVL_MAX_TEAM || OMPI_COMM_IS_INTER(a->comm)) return false;
    if (GW_COLL_ALLREDUCE != a->id && GW_COLL_BCAST != a->id && GW_COLL_ALLGATHER != a->id) {
        return false;
    }
    /* The non-blocking forms are one-shot only (the direct form exchanges
     * and agrees on the host first). */
    if ((a->nonblocking || !mca_coll_gpuwire.nvlink_direct) &&
        call_bytes(a) > mca_coll_gpuwire.nvlink_oneshot_bytes) {
        return false;
    }
    switch (a->id) {
    case GW_COLL_ALLREDUCE: {
        int op, type;
        return a->count > 0 && gw_coll_table_ids(a->op, a->dtype, &op, &type) &&
               gw_coll_team_reduce_supported(op, type);
    }
    case GW_COLL_BCAST:
        return a->count > 0 && contiguous(a->dtype, a->count);
    case GW_COLL_ALLGATHER:
        if (MPI_IN_PLACE != a->sbuf && !contiguous(a->sdtype, a->scount)) return false;
        return a->rcount > 0 && contiguous(a->rdtype, n * a->rcount);
    default:
        return false;
    }
}

static int host_allgather(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm,
                          const void *mine, void *all, int bytes)
{
    return m->previous_allgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, comm,
                                 m->previous_allgather_module);
}

/* Whether every rank says ok (a host allreduce). */
static int all_agree(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm, int ok,
                     int *all_ok)
{
    return m->previous_allreduce(&ok, all_ok, 1, MPI_INT, MPI_MIN, comm,
                                 m->previous_allreduce_module);
}

/* Setting a team up, collectively, without blocking: each rank opens its
 * side (local), sends its description to every other rank and posts a
 * receive for each of theirs; once they have come, it maps the peers'
 * workspaces (local) and sends every other rank whether it could, and once
 * every rank's answer has come, every rank knows alike whether the team is
 * usable. The messages go point-to-point on the communicator with a tag of
 * their own (GW_TAG_NVL_SETUP: descriptions, then answers, in that order
 * from every rank), so no other collective's messages can meet their
 * receives whenever they are sent. A blocking call drives it to the end
 * itself; a non-blocking one leaves it to MPI's progress (its request's
 * polls), so that initiation never waits for another rank. */
typedef struct gw_nvl_setup {
    gw_coll_team_t *team; /* NULL: this rank cannot take part */
    int gpu, n, me, phase; /* 1: descriptions coming, 2: answers coming */
    int ok;                /* this rank's answer */
    char why[256];
    char *descs;           /* every rank's description, rank order */
    int answers[GW_NVL_MAX_TEAM];
    uint32_t ids[GW_NVL_MAX_TEAM];
    /* [0]: the descriptions' receives and sends; [1]: the answers'. */
    int nreqs[2];
    ompi_request_t *reqs[2][2 * GW_NVL_MAX_TEAM];
} gw_nvl_setup_t;

static void setup_free(gw_nvl_setup_t *st)
{
    if (NULL == st) return;
    for (int k = 0; k < 2; ++k) {
        for (int i = 0; i < st->nreqs[k]; ++i) {
            if (MPI_REQUEST_NULL != st->reqs[k][i]) ompi_request_free(&st->reqs[k][i]);
        }
    }
    if (NULL != st->team) gw_coll_team_close(st->team);
    free(st->descs);
    free(st);
}

void gw_coll_nvlink_release(mca_coll_gpuwire_module_t *m)
{
    setup_free(m->nvl_setup);
    m->nvl_setup = NULL;
    if (NULL != m->nvl_team) gw_coll_team_close(m->nvl_team);
    m->nvl_team = NULL;
    m->nvl_state = GW_NVL_UNKNOWN;
}

/* Posts one set-up message of group k (0 descriptions, 1 answers). */
static int post(gw_nvl_setup_t *st, int k, bool send, void *buf, int bytes, int peer,
                struct ompi_communicator_t *comm)
{
    ompi_request_t **r = &st->reqs[k][st->nreqs[k]];
    *r = MPI_REQUEST_NULL;
    int rc = send ? MCA_PML_CALL(isend(buf, bytes, MPI_BYTE, peer, GW_TAG_NVL_SETUP,
                                       MCA_PML_BASE_SEND_STANDARD, comm, r))
                  : MCA_PML_CALL(irecv(buf, bytes, MPI_BYTE, peer, GW_TAG_NVL_SETUP, comm, r));
    if (OMPI_SUCCESS == rc) ++st->nreqs[k];
    return rc;
}

/* Whether every message of group k has completed; an error of one in *err. */
static bool setup_reqs_done(const gw_nvl_setup_t *st, int k, int *err)
{
    for (int i = 0; i < st->nreqs[k]; ++i) {
        if (!REQUEST_COMPLETE(st->reqs[k][i])) return false;
        const int e = st->reqs[k][i]->req_status.MPI_ERROR;
        if (MPI_SUCCESS != e) *err = e;
    }
    return true;
}

/* Starts setting the communicator's team up: GW_NVL_SETTING_UP, or
 * GW_NVL_UNUSABLE at once where the communicator cannot have a team (ranks on
 * other nodes: the same answer on every rank, nothing exchanged). */
static int setup_start(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm, int gpu)
{
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    bool local = true;
    for (int r = 0; r < n; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        local = local && NULL != p && OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags);
    }
    if (!local || NULL == m->previous_allgather || NULL == m->previous_allreduce) {
        COLL_GPUWIRE_VERBOSE(10, "NVLink: %s spans more than this node: not used",
                             comm->c_name);
        m->nvl_state = GW_NVL_UNUSABLE;
        return OMPI_SUCCESS;
    }
    gw_nvl_setup_t *st = calloc(1, sizeof(*st));
    char *descs = malloc((size_t)n * GW_COLL_TEAM_DESC_BYTES);
    if (NULL == st || NULL == descs) {
        free(st);
        free(descs);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    st->descs = descs;
    st->gpu = gpu;
    st->n = n;
    st->me = me;
    st->phase = 1;
    for (int r = 0; r < n; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        st->ids[r] = (uint32_t)p->super.proc_name.vpid;
    }
    const size_t slot = (mca_coll_gpuwire.nvlink_oneshot_bytes + 255) / 256 * 256;
    char *mine = descs + (size_t)me * GW_COLL_TEAM_DESC_BYTES;
    /* On failure the description still goes out: it tells the others this
     * rank cannot take part. */
    st->ok = 0 == gw_coll_team_open(gpu, me, n, slot, (double)mca_coll_gpuwire.nvlink_timeout,
                                    &st->team, mine, st->why, sizeof(st->why));
    int rc = OMPI_SUCCESS;
    /* Per peer, the description's receive before the answer's: the peer
     * sends them in that order on the one tag. */
    for (int q = 0; q < n && OMPI_SUCCESS == rc; ++q) {
        if (q == me) continue;
        rc = post(st, 0, false, descs + (size_t)q * GW_COLL_TEAM_DESC_BYTES,
                  GW_COLL_TEAM_DESC_BYTES, q, comm);
        if (OMPI_SUCCESS == rc) rc = post(st, 1, false, &st->answers[q], (int)sizeof(int), q, comm);
        if (OMPI_SUCCESS == rc) rc = post(st, 0, true, mine, GW_COLL_TEAM_DESC_BYTES, q, comm);
    }
    m->nvl_setup = st;
    m->nvl_state = GW_NVL_SETTING_UP;
    if (OMPI_SUCCESS != rc) {
        /* The others wait for what this rank could not send: an MPI error. */
        opal_output(0, "coll:gpuwire: NVLink team of %s: posting the set-up messages failed (%d)",
                    comm->c_name, rc);
        gw_coll_nvlink_release(m);
        m->nvl_state = GW_NVL_UNUSABLE;
    }
    return rc;
}

/* Moves the set-up on without waiting; at its end m->nvl_state is
 * GW_NVL_READY or GW_NVL_UNUSABLE, the same on every rank. */
static void setup_progress(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm)
{
    gw_nvl_setup_t *st = m->nvl_setup;
    int err = MPI_SUCCESS;
    if (NULL == st) return;
    if (1 == st->phase) {
        if (!setup_reqs_done(st, 0, &err)) return;
        /* Every description is here. A failed message makes this rank
         * answer no, so every rank still decides alike. */
        if (MPI_SUCCESS != err) {
            st->ok = 0;
            snprintf(st->why, sizeof(st->why), "a description's message failed (MPI error %d)",
                     err);
            err = MPI_SUCCESS;
        }
        if (st->ok) {
            st->ok = 0 == gw_coll_team_connect(st->team, st->descs, st->ids,
                                               mca_coll_gpuwire.nvlink_shared_gpu, st->why,
                                               sizeof(st->why));
        }
        st->answers[st->me] = st->ok;
        st->phase = 2;
        int rc = OMPI_SUCCESS;
        for (int q = 0; q < st->n && OMPI_SUCCESS == rc; ++q) {
            if (q != st->me) rc = post(st, 1, true, &st->answers[st->me], (int)sizeof(int), q, comm);
        }
        if (OMPI_SUCCESS != rc) err = MPI_ERR_OTHER;
    }
    if (MPI_SUCCESS == err && !setup_reqs_done(st, 1, &err)) return;
    bool all_ok = MPI_SUCCESS == err;
    for (int q = 0; q < st->n; ++q) all_ok = all_ok && 0 != st->answers[q];
    if (!all_ok) {
        if (MPI_SUCCESS != err) {
            opal_output(0, "coll:gpuwire: NVLink team of %s: a set-up message failed (MPI "
                        "error %d); not used", comm->c_name, err);
        } else {
            COLL_GPUWIRE_VERBOSE(1, "NVLink: not used on %s: %s", comm->c_name,
                                 st->ok ? "another rank could not take part" : st->why);
        }
        gw_coll_nvlink_release(m);
        m->nvl_state = GW_NVL_UNUSABLE;
        return;
    }
    m->nvl_team = st->team;
    st->team = NULL;
    COLL_GPUWIRE_VERBOSE(10, "NVLink: team of %d ranks on %s (GPU %d, one-shot up to %zu bytes; "
                         "direct calls map through %s)",
                         st->n, comm->c_name, st->gpu, gw_coll_team_slot_bytes(m->nvl_team),
                         gw_coll_ipc_shared() ? "the process's one cache" : "a cache of their own");
    setup_free(st);
    m->nvl_setup = NULL;
    m->nvl_state = GW_NVL_READY;
}

/* Sets the team up and waits for the end (blocking calls: no request of
 * this communicator is setting it up, so the set-up is driven here). */
static int team_setup(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm, int gpu)
{
    int rc = setup_start(m, comm, gpu);
    while (OMPI_SUCCESS == rc && GW_NVL_SETTING_UP == m->nvl_state) {
        setup_progress(m, comm);
        if (GW_NVL_SETTING_UP == m->nvl_state) opal_progress();
    }
    return rc;
}

/* Where the call's bytes are on this rank. */
typedef struct {
    const void *in;
    void *out;
    size_t bytes;
} place_t;

static void place_of(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                     place_t *p)
{
    const gw_coll_region_t *sr = &r[GW_REGION_SEND], *rr = &r[GW_REGION_RECV];
    const int me = ompi_comm_rank(a->comm);
    p->out = (char *)rr->user + rr->lo;
    switch (a->id) {
    case GW_COLL_ALLREDUCE:
        p->bytes = type_bytes(a->dtype, a->count);
        p->in = MPI_IN_PLACE == a->sbuf ? p->out : (const char *)sr->user + sr->lo;
        break;
    case GW_COLL_BCAST:
        p->bytes = type_bytes(a->dtype, a->count);
        p->in = p->out;
        break;
    default: /* allgather */
        p->bytes = type_bytes(a->rdtype, a->rcount);
        p->in = MPI_IN_PLACE == a->sbuf ? (const char *)p->out + (size_t)me * p->bytes
                                        : (const char *)sr->user + sr->lo;
        break;
    }
}

/* Re-points whatever of the call lies in a region that has a temporary on
 * the team's GPU (host memory, another GPU): the kernels and the peers'
 * mappings need the team GPU's memory. */
static void relocate(place_t *p, const gw_coll_region_t r[GW_REGION_COUNT],
                     const gw_coll_temps_t *t)
{
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (NULL == t->tmp[i]) continue;
        const char *user = (const char *)r[i].user + r[i].lo;
        const size_t len = gw_region_bytes(&r[i]);
        if ((const char *)p->in >= user && (const char *)p->in < user + len) {
            p->in = t->tmp[i] + ((const char *)p->in - user);
        }
        if ((const char *)p->out >= user && (const char *)p->out < user + len) {
            p->out = t->tmp[i] + ((const char *)p->out - user);
        }
    }
}

static int nvlink_call(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a, const place_t *pp);
static int nvlink_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                        gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request);

void gw_coll_nvlink_settle(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm)
{
    /* The non-blocking calls that started the set-up have their places in
     * the team's order already. Their requests' progress drives it,
     * possibly from another thread; only if none got a request does it end
     * here. */
    while (GW_NVL_SETTING_UP == m->nvl_state) {
        /* During a set-up no call launches: calls issued and not launched
         * are requests waiting for it. */
        if (__atomic_load_n(&m->nvl_nb_launched, __ATOMIC_ACQUIRE) ==
            __atomic_load_n(&m->nvl_nb_issued, __ATOMIC_ACQUIRE)) {
            setup_progress(m, comm);
        }
        if (GW_NVL_SETTING_UP == m->nvl_state) opal_progress();
    }
    m->nvl_seen = m->nvl_state;
}

static int nvlink_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    struct ompi_communicator_t *comm = a->comm;
    const int gpu = gw_coll_regions_gpu(r);
    if (NULL != request) {
        /* The first call starts setting the team up and goes on from MPI's
         * progress; so do the calls initiated until the outcome is adopted
         * (gw_coll_nvlink_settle, at the blocking calls: dispatch), whether
         * this rank has seen it or not:
         * where the team is unusable, every rank runs them staged, in their
         * turn (nvl_job_poll). Going by the outcome as soon as this rank
         * sees it would give one call to the next algorithm on one rank
         * and to staging on a rank that initiated it earlier in the set-up. */
        if (GW_NVL_UNKNOWN == m->nvl_seen) {
            int rc = setup_start(m, comm, gpu < 0 ? 0 : gpu);
            /* GW_NVL_UNUSABLE at once only where that is every rank's answer
             * (a communicator across nodes) or on an error, returned. */
            m->nvl_seen = m->nvl_state;
            if (OMPI_SUCCESS != rc) return rc;
        }
        /* Where the program makes no blocking collective on comm, the
         * calls would stage forever on a team that turned out unusable. The
         * set-up has long ended by now, on every rank, but this rank's
         * progress may not have seen it yet: it waits for that here. */
        if (GW_NVL_SETTING_UP == m->nvl_seen &&
            __atomic_load_n(&m->nvl_nb_issued, __ATOMIC_ACQUIRE) >= GW_NVL_ADOPT_AFTER) {
            gw_coll_nvlink_settle(m, comm);
        }
        if (GW_NVL_UNUSABLE == m->nvl_seen) return GW_COLL_DECLINED;
        return nvlink_start(m, a, r, request);
    }
    /* Dispatch ended a set-up under way before this blocking call. */
    if (GW_NVL_UNKNOWN == m->nvl_state) {
        int rc = team_setup(m, comm, gpu < 0 ? 0 : gpu);
        m->nvl_seen = m->nvl_state;
        if (OMPI_SUCCESS != rc) return rc;
    }
    if (GW_NVL_READY != m->nvl_state) return GW_COLL_DECLINED;
    /* The team's kernels run in initiation order on every rank: the
     * non-blocking calls initiated before this one launch first. Every rank
     * has initiated them (MPI's order), so their arrivals come. */
    while (__atomic_load_n(&m->nvl_nb_launched, __ATOMIC_ACQUIRE) <
           __atomic_load_n(&m->nvl_nb_issued, __ATOMIC_ACQUIRE)) {
        opal_progress();
    }

    gw_coll_team_t *t = m->nvl_team;
    const int tgpu = gw_coll_team_gpu(t);
    char why[256] = "";
    place_t p;
    place_of(a, r, &p);
    gw_coll_temps_t tmp;
    if (0 != gw_coll_temps_in(r, tgpu, &tmp, why, sizeof(why))) {
        /* Only this rank knows: the others are on their way into the kernel,
         * which gives up after coll_gpuwire_nvlink_timeout seconds. */
        opal_output(0, "coll:gpuwire: %s over NVLink: %s", gw_coll_name(a->id), why);
        return OMPI_ERROR;
    }
    relocate(&p, r, &tmp);
    int err = nvlink_call(m, a, &p);
    if (OMPI_SUCCESS == err && 0 != gw_coll_temps_out(r, tgpu, &tmp, why, sizeof(why))) {
        opal_output(0, "coll:gpuwire: %s over NVLink: %s", gw_coll_name(a->id), why);
        err = OMPI_ERROR;
    }
    gw_coll_temps_release(&tmp);
    return err;
}

/* The kernels' description of the call on this rank's place. The slots hold
 * coll_gpuwire_nvlink_oneshot_bytes (rounded up): a call within it fits
 * them (gw_nvl_launch checks again); a larger one is direct. */
static gw_coll_team_call_t team_call_of(const gw_coll_args_t *a, const place_t *p)
{
    gw_coll_team_call_t c = {
        .in = p->in, .out = p->out, .bytes = p->bytes, .root = a->root,
    };
    switch (a->id) {
    case GW_COLL_ALLREDUCE:
        c.coll = GW_COLL_TEAM_ALLREDUCE;
        (void)gw_coll_table_ids(a->op, a->dtype, &c.op, &c.type);
        break;
    case GW_COLL_BCAST: c.coll = GW_COLL_TEAM_BCAST; break;
    default: c.coll = GW_COLL_TEAM_ALLGATHER; break;
    }
    c.direct = p->bytes > mca_coll_gpuwire.nvlink_oneshot_bytes;
    return c;
}

/* The call on this rank's place; GW_COLL_DECLINED where every rank agreed
 * that a direct call cannot map every buffer. */
static int nvlink_call(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a, const place_t *pp)
{
    struct ompi_communicator_t *comm = a->comm;
    gw_coll_team_t *t = m->nvl_team;
    place_t p = *pp;
    char why[256] = "";
    gw_coll_team_call_t c = team_call_of(a, &p);
    if (c.direct) {
        const int n = ompi_comm_size(comm);
        const bool need_in = GW_COLL_TEAM_ALLREDUCE == c.coll;
        /* Each rank sends both descriptions; unused ones stay zero. */
        char mine[2 * GW_COLL_BUF_DESC_BYTES];
        memset(mine, 0, sizeof(mine));
        int ok = 1;
        if (need_in) {
            ok = ok && 0 == gw_coll_buffer_describe(p.in, p.bytes, mine, why, sizeof(why));
        }
        const size_t out_bytes = GW_COLL_TEAM_ALLGATHER == c.coll ? (size_t)n * p.bytes : p.bytes;
        ok = ok && 0 == gw_coll_buffer_describe(p.out, out_bytes, mine + GW_COLL_BUF_DESC_BYTES,
                                                why, sizeof(why));
        char *all = malloc((size_t)n * sizeof(mine));
        char *ins = malloc((size_t)n * GW_COLL_BUF_DESC_BYTES);
        char *outs = malloc((size_t)n * GW_COLL_BUF_DESC_BYTES);
        if (NULL == all || NULL == ins || NULL == outs) {
            free(all);
            free(ins);
            free(outs);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        int rc = host_allgather(m, comm, mine, all, (int)sizeof(mine));
        if (OMPI_SUCCESS == rc) {
            for (int q = 0; q < n; ++q) {
                memcpy(ins + q * GW_COLL_BUF_DESC_BYTES, all + q * sizeof(mine),
                       GW_COLL_BUF_DESC_BYTES);
                memcpy(outs + q * GW_COLL_BUF_DESC_BYTES,
                       all + q * sizeof(mine) + GW_COLL_BUF_DESC_BYTES, GW_COLL_BUF_DESC_BYTES);
            }
            /* Bcast: only the root writes into the others' buffers. */
            const bool maps = GW_COLL_TEAM_BCAST != c.coll || ompi_comm_rank(comm) == a->root;
            if (ok && maps) {
                ok = 0 == gw_coll_team_map(t, need_in ? ins : NULL, outs, why, sizeof(why));
            }
            int all_ok = 0;
            rc = all_agree(m, comm, ok, &all_ok);
            ok = OMPI_SUCCESS == rc && all_ok;
        }
        free(all);
        free(ins);
        free(outs);
        if (OMPI_SUCCESS != rc) {
            gw_coll_team_unmap(t);
            return rc;
        }
        if (!ok) {
            gw_coll_team_unmap(t);
            COLL_GPUWIRE_VERBOSE(10, "NVLink: %s of %zu bytes declined: %s", gw_coll_name(a->id),
                                 p.bytes, why[0] ? why : "another rank's buffer cannot be mapped");
            return GW_COLL_DECLINED;
        }
    }
    if (0 != gw_coll_team_run(t, &c, why, sizeof(why))) {
        opal_output(0, "coll:gpuwire: %s of %zu bytes over NVLink failed: %s", gw_coll_name(a->id),
                    p.bytes, why);
        return OMPI_ERROR;
    }
    __atomic_fetch_add(&mca_coll_gpuwire.nvlink_calls, 1, __ATOMIC_RELAXED);
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Non-blocking forms (Iallreduce, Ibcast, Iallgather; one-shot sizes).
 *
 * A kernel must not run before every rank has initiated its call: it spins
 * at its barrier until the others' kernels arrive, and meanwhile the
 * application's cudaDeviceSynchronize does not return, so a rank that
 * initiates, synchronizes its device and only then sends what another rank
 * waits for before initiating would hang. Initiation therefore sends a
 * zero-byte arrival message to every other rank and posts a receive for
 * each of theirs (tag GW_TAG_NVL_ARRIVE, in initiation order on every rank),
 * and returns. From MPI's progress, the call launches once every arrival has
 * come and every earlier call of the team has launched (its temporaries
 * copied in first), then completes when the stream's ticket is reached and
 * its temporaries are copied back.
 *
 * A communicator's first call starts setting its team up (above) instead of
 * waiting for it. The calls initiated until that ends keep their places in
 * the communicator's FIFO of staged calls (gw_coll_nb_job, ordered): where
 * the team turns out unusable, every rank runs them staged, in their turn;
 * where it is ready, they take their places in the team's order, in
 * initiation order.
 * ------------------------------------------------------------------------ */

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t args;
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_coll_temps_t tmp;
    uint64_t order; /* 1 + how many of the team's non-blocking calls were initiated before */
    uint64_t ticket;
    bool launched;
    int nreqs;
    ompi_request_t *reqs[2 * GW_NVL_MAX_TEAM]; /* the arrivals: receives, then sends */
} nvl_job_t;


static void nvl_job_release(void *p)
{
    nvl_job_t *j = p;
    for (int i = 0; i < j->nreqs; ++i) {
        if (MPI_REQUEST_NULL != j->reqs[i]) ompi_request_free(&j->reqs[i]);
    }
    gw_coll_temps_release(&j->tmp);
    free(j);
}

static int nvl_job_failed(nvl_job_t *j, const char *why)
{
    opal_output(0, "coll:gpuwire: i%s over NVLink: %s", gw_coll_name(j->args.id), why);
    return OMPI_ERROR;
}

/* Copies in what needs a temporary and launches the call. */
static int nvl_job_launch(nvl_job_t *j)
{
    char why[256] = "";
    for (int i = 0; i < j->nreqs; ++i) {
        const int err = j->reqs[i]->req_status.MPI_ERROR;
        if (MPI_SUCCESS != err) {
            snprintf(why, sizeof(why), "an arrival message failed (MPI error %d)", err);
            return nvl_job_failed(j, why);
        }
    }
    place_t p;
    place_of(&j->args, j->r, &p);
    if (0 != gw_coll_temps_in(j->r, gw_coll_team_gpu(j->m->nvl_team), &j->tmp, why,
                              sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    relocate(&p, j->r, &j->tmp);
    const gw_coll_team_call_t c = team_call_of(&j->args, &p);
    if (0 != gw_coll_team_start(j->m->nvl_team, &c, &j->ticket, why, sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    return OMPI_SUCCESS;
}

static int nvl_job_poll(void *p, bool query, bool *done)
{
    nvl_job_t *j = p;
    mca_coll_gpuwire_module_t *m = j->m;
    char why[256] = "";
    *done = false;
    if (GW_NVL_SETTING_UP == m->nvl_state) {
        setup_progress(m, j->args.comm);
        if (GW_NVL_SETTING_UP == m->nvl_state) return OMPI_SUCCESS;
    }
    /* Every rank found the team unusable: the call runs staged instead. */
    if (GW_NVL_READY != m->nvl_state) return GW_COLL_DECLINED;
    if (!j->launched) {
        if (__atomic_load_n(&m->nvl_nb_launched, __ATOMIC_ACQUIRE) + 1 != j->order) {
            return OMPI_SUCCESS;
        }
        for (int i = 0; i < j->nreqs; ++i) {
            if (!REQUEST_COMPLETE(j->reqs[i])) return OMPI_SUCCESS;
        }
        j->launched = true;
        const int rc = nvl_job_launch(j);
        /* Launched (queued on the team's stream) or failed, it no longer
         * holds the later calls back; counted only now, so that a blocking
         * call waiting on another thread queues its kernel after this one. */
        __atomic_fetch_add(&m->nvl_nb_launched, 1, __ATOMIC_RELEASE);
        if (OMPI_SUCCESS != rc) return rc;
        __atomic_fetch_add(&mca_coll_gpuwire.nvlink_nb_calls, 1, __ATOMIC_RELAXED);
    }
    bool finished = false;
    if (0 != gw_coll_team_done(m->nvl_team, j->ticket, query, &finished, why, sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    if (!finished) return OMPI_SUCCESS;
    if (0 != gw_coll_temps_out(j->r, gw_coll_team_gpu(m->nvl_team), &j->tmp, why,
                               sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    *done = true;
    return OMPI_SUCCESS;
}

/* A call initiated while the team is being set up may still run staged: it
 * keeps its place among the communicator's staged calls until then. */
static bool nvl_job_ordered(void *p)
{
    const nvl_job_t *j = p;
    return GW_NVL_SETTING_UP == j->m->nvl_state;
}

static const gw_coll_job_ops_t nvl_job_ops = {nvl_job_poll, nvl_job_release, nvl_job_ordered};

static int nvlink_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                        gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    struct ompi_communicator_t *comm = a->comm;
    nvl_job_t *j = calloc(1, sizeof(*j));
    if (NULL == j) return OMPI_ERR_OUT_OF_RESOURCE;
    j->m = m;
    j->args = *a;
    memcpy(j->r, r, sizeof(j->r));
    /* The arrivals, posted at initiation on their own tag, so every rank
     * posts and sends them in initiation order. */
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    int rc = OMPI_SUCCESS;
    for (int q = 0; q < n && OMPI_SUCCESS == rc; ++q) {
        if (q == me) continue;
        j->reqs[j->nreqs] = MPI_REQUEST_NULL;
        rc = MCA_PML_CALL(irecv(NULL, 0, MPI_BYTE, q, GW_TAG_NVL_ARRIVE, comm, &j->reqs[j->nreqs]));
        if (OMPI_SUCCESS == rc) ++j->nreqs;
    }
    for (int q = 0; q < n && OMPI_SUCCESS == rc; ++q) {
        if (q == me) continue;
        j->reqs[j->nreqs] = MPI_REQUEST_NULL;
        rc = MCA_PML_CALL(isend(NULL, 0, MPI_BYTE, q, GW_TAG_NVL_ARRIVE,
                                MCA_PML_BASE_SEND_STANDARD, comm, &j->reqs[j->nreqs]));
        if (OMPI_SUCCESS == rc) ++j->nreqs;
    }
    if (OMPI_SUCCESS != rc) {
        nvl_job_release(j);
        opal_output(0, "coll:gpuwire: i%s over NVLink: posting the arrival messages failed (%d)",
                    gw_coll_name(a->id), rc);
        return rc;
    }
    /* Its place in the team's order: if the set-up under way ends with no
     * team, no call launches, and the blocking ones never look again. */
    const bool ready = GW_NVL_READY == m->nvl_state;
    const uint64_t order = j->order = __atomic_add_fetch(&m->nvl_nb_issued, 1, __ATOMIC_ACQ_REL);
    rc = gw_coll_nb_job(m, a, r, &nvl_job_ops, j, !ready, request); /* j is the request's now */
    if (OMPI_SUCCESS != rc) {
        /* The newest of the team's calls (collectives on one communicator
         * are initiated one at a time): its place goes back. */
        __atomic_store_n(&m->nvl_nb_issued, order - 1, __ATOMIC_RELEASE);
        return rc;
    }
    return OMPI_SUCCESS;
}

bool gw_coll_nvlink_settled(struct ompi_communicator_t *comm)
{
    /* The module that runs comm's non-blocking Bcast (one NVLink takes):
     * one of this component's, or none of this concern. */
    const opal_object_t *mod = (const opal_object_t *)comm->c_coll->coll_ibcast_module;
    if (NULL == mod || mod->obj_class != OBJ_CLASS(mca_coll_gpuwire_module_t)) return true;
    mca_coll_gpuwire_module_t *m = (mca_coll_gpuwire_module_t *)mod;
    const int state = __atomic_load_n(&m->nvl_state, __ATOMIC_ACQUIRE);
    if (GW_NVL_SETTING_UP == state) return false;
    m->nvl_seen = state;
    return true;
}

const gw_coll_algorithm_t gw_coll_nvlink = {"nvlink", nvlink_accepts, nvlink_run};
