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
#include "coll_gpuwire_device.h"
#include "coll_gpuwire_dispatch.h"
#include "gpuwire/cuda/reduce.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "opal/runtime/opal_progress.h"

#define GW_NVL_MAX_TEAM 8

enum { NVL_UNKNOWN = 0, NVL_READY = 1, NVL_UNUSABLE = -1 };

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

void gw_coll_nvlink_release(mca_coll_gpuwire_module_t *m)
{
    if (NULL != m->nvl_team) gw_coll_team_close(m->nvl_team);
    m->nvl_team = NULL;
    m->nvl_state = NVL_UNKNOWN;
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

/* Sets the team up, collectively; NVL_READY or NVL_UNUSABLE in m->nvl_state,
 * the same on every rank. An error return is an MPI error of the host
 * exchange itself. */
static int team_setup(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm, int gpu)
{
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    uint32_t ids[GW_NVL_MAX_TEAM];
    bool local = true;
    for (int r = 0; r < n; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        local = local && NULL != p && OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags);
        ids[r] = NULL != p ? (uint32_t)p->super.proc_name.vpid : 0;
    }
    if (!local || NULL == m->previous_allgather || NULL == m->previous_allreduce) {
        /* Locality is the same on every rank: nobody exchanges anything. */
        COLL_GPUWIRE_VERBOSE(10, "NVLink: %s spans more than this node: not used",
                             comm->c_name);
        m->nvl_state = NVL_UNUSABLE;
        return OMPI_SUCCESS;
    }
    char why[256] = "";
    char mine[GW_COLL_TEAM_DESC_BYTES];
    char *all = malloc((size_t)n * GW_COLL_TEAM_DESC_BYTES);
    if (NULL == all) return OMPI_ERR_OUT_OF_RESOURCE;
    size_t slot = (mca_coll_gpuwire.nvlink_oneshot_bytes + 255) / 256 * 256;
    gw_coll_team_t *team = NULL;
    int ok = 0 == gw_coll_team_open(gpu, me, n, slot, (double)mca_coll_gpuwire.nvlink_timeout,
                                    &team, mine, why, sizeof(why));
    int rc = host_allgather(m, comm, mine, all, GW_COLL_TEAM_DESC_BYTES);
    if (OMPI_SUCCESS == rc && ok) {
        ok = 0 == gw_coll_team_connect(team, all, ids, mca_coll_gpuwire.nvlink_shared_gpu, why,
                                       sizeof(why));
    }
    free(all);
    int all_ok = 0;
    if (OMPI_SUCCESS == rc) rc = all_agree(m, comm, ok, &all_ok);
    if (OMPI_SUCCESS != rc || !all_ok) {
        if (OMPI_SUCCESS == rc) {
            COLL_GPUWIRE_VERBOSE(1, "NVLink: not used on %s: %s", comm->c_name,
                                 ok ? "another rank could not take part" : why);
        }
        gw_coll_team_close(team);
        m->nvl_state = NVL_UNUSABLE;
        return rc;
    }
    m->nvl_team = team;
    m->nvl_state = NVL_READY;
    COLL_GPUWIRE_VERBOSE(10, "NVLink: team of %d ranks on %s (GPU %d, one-shot up to %zu bytes)",
                         n, comm->c_name, gpu, slot);
    return OMPI_SUCCESS;
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

static int nvlink_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    struct ompi_communicator_t *comm = a->comm;
    const int gpu = gw_coll_regions_gpu(r);
    if (NULL != request) {
        /* Setting a team up is a blocking exchange, which an initiation must
         * not make: the non-blocking forms use the team a blocking call has
         * set up (the state is the same on every rank). */
        if (NVL_READY != m->nvl_state) return GW_COLL_DECLINED;
        return nvlink_start(m, a, r, request);
    }
    if (NVL_UNKNOWN == m->nvl_state) {
        int rc = team_setup(m, comm, gpu < 0 ? 0 : gpu);
        if (OMPI_SUCCESS != rc) return rc;
    }
    if (NVL_READY != m->nvl_state) return GW_COLL_DECLINED;
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
 * waits for before initiating would hang. Initiation therefore copies in
 * what needs a temporary, sends a zero-byte arrival message to every other
 * rank and posts a receive for each of theirs, and returns. From MPI's
 * progress, the call launches once every arrival has come and every earlier
 * call of the team has launched, then completes when the stream's ticket is
 * reached (and its temporaries are copied back).
 *
 * The arrivals use the collective's own tag (gw_coll_tag) on the
 * communicator. Every other user of that tag there (the blocking algorithms
 * over point-to-point) posts its receives inside its call, from named
 * sources, in the same order on every rank; the pml matches messages of one
 * source and tag in order, so each arrival meets the receive posted for it.
 * ------------------------------------------------------------------------ */

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_team_call_t c;
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_coll_temps_t tmp;
    uint64_t order; /* 1 + how many of the team's non-blocking calls came before */
    uint64_t ticket;
    bool launched;
    gw_coll_id_t id;
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
    opal_output(0, "coll:gpuwire: i%s over NVLink: %s", gw_coll_name(j->id), why);
    return OMPI_ERROR;
}

static int nvl_job_poll(void *p, bool query, bool *done)
{
    nvl_job_t *j = p;
    char why[256] = "";
    *done = false;
    if (!j->launched) {
        if (__atomic_load_n(&j->m->nvl_nb_launched, __ATOMIC_ACQUIRE) + 1 != j->order) {
            return OMPI_SUCCESS;
        }
        for (int i = 0; i < j->nreqs; ++i) {
            if (!REQUEST_COMPLETE(j->reqs[i])) return OMPI_SUCCESS;
        }
        /* Launched or failed, it no longer holds the later calls back. */
        j->launched = true;
        __atomic_fetch_add(&j->m->nvl_nb_launched, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < j->nreqs; ++i) {
            const int err = j->reqs[i]->req_status.MPI_ERROR;
            if (MPI_SUCCESS != err) {
                snprintf(why, sizeof(why), "an arrival message failed (MPI error %d)", err);
                return nvl_job_failed(j, why);
            }
        }
        if (0 != gw_coll_team_start(j->m->nvl_team, &j->c, &j->ticket, why, sizeof(why))) {
            return nvl_job_failed(j, why);
        }
    }
    bool finished = false;
    if (0 != gw_coll_team_done(j->m->nvl_team, j->ticket, query, &finished, why, sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    if (!finished) return OMPI_SUCCESS;
    if (0 != gw_coll_temps_out(j->r, gw_coll_team_gpu(j->m->nvl_team), &j->tmp, why,
                               sizeof(why))) {
        return nvl_job_failed(j, why);
    }
    *done = true;
    return OMPI_SUCCESS;
}

static const gw_coll_job_ops_t nvl_job_ops = {nvl_job_poll, nvl_job_release};

static int nvlink_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                        gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    struct ompi_communicator_t *comm = a->comm;
    char why[256] = "";
    nvl_job_t *j = calloc(1, sizeof(*j));
    if (NULL == j) return OMPI_ERR_OUT_OF_RESOURCE;
    j->m = m;
    j->id = a->id;
    memcpy(j->r, r, sizeof(j->r));
    place_t p;
    place_of(a, r, &p);
    /* Only this rank knows of a failure here: the others' calls wait for
     * its arrival, which never comes, and the team's next blocking call
     * waits for them. */
    if (0 != gw_coll_temps_in(r, gw_coll_team_gpu(m->nvl_team), &j->tmp, why, sizeof(why))) {
        free(j);
        opal_output(0, "coll:gpuwire: i%s over NVLink: %s", gw_coll_name(a->id), why);
        return OMPI_ERROR;
    }
    relocate(&p, r, &j->tmp);
    j->c = team_call_of(a, &p);
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm), tag = gw_coll_tag(a->id);
    int rc = OMPI_SUCCESS;
    for (int q = 0; q < n && OMPI_SUCCESS == rc; ++q) {
        if (q == me) continue;
        j->reqs[j->nreqs] = MPI_REQUEST_NULL;
        rc = MCA_PML_CALL(irecv(NULL, 0, MPI_BYTE, q, tag, comm, &j->reqs[j->nreqs]));
        if (OMPI_SUCCESS == rc) ++j->nreqs;
    }
    for (int q = 0; q < n && OMPI_SUCCESS == rc; ++q) {
        if (q == me) continue;
        j->reqs[j->nreqs] = MPI_REQUEST_NULL;
        rc = MCA_PML_CALL(isend(NULL, 0, MPI_BYTE, q, tag, MCA_PML_BASE_SEND_STANDARD, comm,
                                &j->reqs[j->nreqs]));
        if (OMPI_SUCCESS == rc) ++j->nreqs;
    }
    if (OMPI_SUCCESS != rc) {
        nvl_job_release(j);
        opal_output(0, "coll:gpuwire: i%s over NVLink: posting the arrival messages failed (%d)",
                    gw_coll_name(a->id), rc);
        return rc;
    }
    j->order = __atomic_add_fetch(&m->nvl_nb_issued, 1, __ATOMIC_ACQ_REL);
    const uint64_t order = j->order;
    rc = gw_coll_nb_job(m, a, &nvl_job_ops, j, request); /* j is the request's now */
    if (OMPI_SUCCESS != rc) {
        /* The newest of the team's calls (collectives on one communicator
         * are initiated one at a time): its place goes back. */
        __atomic_store_n(&m->nvl_nb_issued, order - 1, __ATOMIC_RELEASE);
        return rc;
    }
    __atomic_fetch_add(&mca_coll_gpuwire.nvlink_nb_calls, 1, __ATOMIC_RELAXED);
    return OMPI_SUCCESS;
}

const gw_coll_algorithm_t gw_coll_nvlink = {"nvlink", nvlink_accepts, nvlink_run};
