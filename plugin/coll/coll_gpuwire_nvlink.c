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
 *   larger, on a team whose ranks all share one GPU (coll_gpuwire_nvlink_delegate;
 *     coll_gpuwire_nvlink_direct 1 takes precedence for the blocking calls):
 *     delegated, one kernel launched by the last rank to initiate it
 *     (coll_gpuwire_nvlink_delegate.c); the non-blocking calls of such a
 *     team take that form at every size.
 *   larger, on a team of several GPUs, with coll_gpuwire_nvlink_direct 1 (else
 *     declined in run and run over point-to-point): direct on the application's buffers; the ranks exchange IPC
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
#include "coll_gpuwire_nvlink.h"
#include "gpuwire/cuda/reduce.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "opal/runtime/opal_progress.h"

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
    /* Larger calls than the one-shot size: whether the team runs them
     * (delegated, direct) is known once it is set up; run() declines them
     * where it does not, alike on every rank. */
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

void gw_coll_nvl_place_of(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                          gw_coll_nvl_place_t *p)
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
void gw_coll_nvl_relocate(gw_coll_nvl_place_t *p, const gw_coll_region_t r[GW_REGION_COUNT],
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

static int nvlink_call(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       const gw_coll_nvl_place_t *pp);

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
            gw_coll_nvl_setup_progress(m, comm);
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
            int rc = gw_coll_nvl_setup_start(m, comm, gpu < 0 ? 0 : gpu);
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
            __atomic_load_n(&m->nvl_nb_issued, __ATOMIC_ACQUIRE) + m->nvl_nb_early >=
                GW_NVL_ADOPT_AFTER) {
            gw_coll_nvlink_settle(m, comm);
        }
        if (GW_NVL_UNUSABLE == m->nvl_seen) return GW_COLL_DECLINED;
        if (GW_NVL_READY == m->nvl_seen && m->nvl_dl) return gw_coll_nvl_dl_start(m, a, r, request);
        if (call_bytes(a) > mca_coll_gpuwire.nvlink_oneshot_bytes) {
            /* Only the delegated form runs them: while the set-up is under
             * way, or on a team of several GPUs, over point-to-point. */
            if (GW_NVL_SETTING_UP == m->nvl_seen) ++m->nvl_nb_early;
            return GW_COLL_DECLINED;
        }
        return gw_coll_nvl_start(m, a, r, request);
    }
    /* Dispatch ended a set-up under way before this blocking call. */
    if (GW_NVL_UNKNOWN == m->nvl_state) {
        int rc = gw_coll_nvl_team_setup(m, comm, gpu < 0 ? 0 : gpu);
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

    const bool large = call_bytes(a) > mca_coll_gpuwire.nvlink_oneshot_bytes;
    /* coll_gpuwire_nvlink_direct asks for the direct form even here (its
     * tests run on one GPU). */
    if (large && m->nvl_dl && 2 == mca_coll_gpuwire.nvlink_delegate &&
        !mca_coll_gpuwire.nvlink_direct)
        return gw_coll_nvl_dl_run(m, a, r);
    /* The selection table choosing nvlink above the one-shot size asks for
     * the direct form too. */
    if (large && !(mca_coll_gpuwire.nvlink_direct || GW_SEL_NVLINK == a->sel))
        return GW_COLL_DECLINED;

    gw_coll_team_t *t = m->nvl_team;
    const int tgpu = gw_coll_team_gpu(t);
    char why[256] = "";
    gw_coll_nvl_place_t p;
    gw_coll_nvl_place_of(a, r, &p);
    gw_coll_temps_t tmp;
    if (0 != gw_coll_temps_in(r, tgpu, &tmp, why, sizeof(why))) {
        /* Only this rank knows: the others are on their way into the kernel,
         * which gives up after coll_gpuwire_nvlink_timeout seconds. */
        opal_output(0, "coll:gpuwire: %s over NVLink: %s", gw_coll_name(a->id), why);
        return OMPI_ERROR;
    }
    gw_coll_nvl_relocate(&p, r, &tmp);
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
gw_coll_team_call_t gw_coll_nvl_team_call_of(const gw_coll_args_t *a,
                                             const gw_coll_nvl_place_t *p)
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
static int nvlink_call(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       const gw_coll_nvl_place_t *pp)
{
    struct ompi_communicator_t *comm = a->comm;
    gw_coll_team_t *t = m->nvl_team;
    gw_coll_nvl_place_t p = *pp;
    char why[256] = "";
    gw_coll_team_call_t c = gw_coll_nvl_team_call_of(a, &p);
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


const gw_coll_algorithm_t gw_coll_nvlink = {"nvlink", nvlink_accepts, nvlink_run};
