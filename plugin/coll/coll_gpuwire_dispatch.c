/*
 * memory kind -> algorithm. The one place where a call's path is decided.
 */
#include "coll_gpuwire_dispatch.h"

#include "gpuwire/gpu_device.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/coll_tags.h"

static int passthrough(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       gw_coll_region_t r[GW_REGION_COUNT], gw_coll_note_t *note,
                       ompi_request_t **request)
{
    (void)note;
    if (NULL != request) return gw_coll_nb_passthrough(m, a, request);
    return gw_coll_call_previous(m, a, a->sbuf, a->rbuf, request);
}

static const gw_coll_algorithm_t gw_coll_passthrough = {"passthrough", NULL, passthrough};

/* Algorithms per memory kind, in order of preference; the last one of each
 * list accepts every call. */
static const gw_coll_algorithm_t *const host_algorithms[] = {&gw_coll_passthrough};
static const gw_coll_algorithm_t *const device_algorithms[] = {&gw_coll_local,
                                                               &gw_coll_nvlink,
                                                               &gw_coll_hier,
                                                               &gw_coll_devreduce,
                                                               &gw_coll_devmove,
                                                               &gw_coll_staged};

static const struct {
    const gw_coll_algorithm_t *const *list;
    size_t n;
} algorithms[GW_MEM_KINDS] = {
    [GW_MEM_HOST] = {host_algorithms, sizeof(host_algorithms) / sizeof(host_algorithms[0])},
    [GW_MEM_DEVICE] = {device_algorithms, sizeof(device_algorithms) / sizeof(device_algorithms[0])},
};

static inline void count(unsigned long long *counter)
{
    /* Not atomic on purpose: a statistic, kept off the host path's cost. */
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* A blocking call's agreement (coll_gpuwire_agree). Every rank decides
 * alone, and a rank whose significant buffers are all host memory passes the
 * call through to the previous module, whose messages no GPU algorithm on
 * the other ranks would answer; MPI lets ranks pass different memory kinds,
 * and datatypes of one signature but different layouts, to one call. So
 * before a GPU algorithm runs a blocking call, its ranks tell each other (one
 * host allreduce, which the previous module runs on every rank alike, in the
 * call's place among the communicator's collectives) whether they pass device
 * memory, host memory only, and a layout the NVLink kernels cannot take.
 * Non-blocking calls cannot wait for such an answer at initiation: they
 * agree without blocking (coll_gpuwire_agree.c). */
static bool must_agree(const mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a)
{
    return GW_PEERS_ALL == m->peers && GW_COLL_REDUCE_LOCAL != a->id;
}

/* any[i] = whether some rank of comm has mine[i] set: one host allreduce
 * (MPI_MAX of n ints) through the previous module, on every rank alike. */
static int any_rank(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm,
                    int *mine, int *any, int n)
{
    return m->previous_allreduce(mine, any, n, MPI_INT, MPI_MAX, comm,
                                 m->previous_allreduce_module);
}

/* Whether comm reaches processes of another job (MPI_Comm_spawn, connect):
 * the same answer on every rank, whose group they all share. The GPU
 * algorithms name processes by their rank in their own job (CUDA IPC
 * mappings), so such a communicator stages every call on device memory. */
static bool other_jobs(struct ompi_communicator_t *comm)
{
    const bool inter = OMPI_COMM_IS_INTER(comm);
    const int n = inter ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
    for (int r = 0; r < n; ++r) {
        const ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        if (NULL == p || p->super.proc_name.jobid != OMPI_PROC_MY_NAME->jobid) return true;
    }
    return false;
}

/* Which processes of comm have the GPU layer open (GW_PEERS_*), asked of
 * all of them alike: those without a GPU ask too, which is what keeps a job
 * whose processes do not all see one from hanging. */
int gw_coll_learn_peers(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm)
{
    if (!mca_coll_gpuwire.agree || NULL == m->previous_allreduce) {
        m->peers = GW_PEERS_UNASKED;
        return OMPI_SUCCESS;
    }
    /* A communicator with processes of other jobs: as if some had no GPU. */
    const bool ready = mca_coll_gpuwire.device_ready && !other_jobs(comm);
    int mine[2] = {ready, !ready}, any[2] = {0, 0};
    const int rc = any_rank(m, comm, mine, any, 2);
    if (OMPI_SUCCESS != rc) return rc;
    m->peers = !any[1] ? GW_PEERS_ALL : any[0] ? GW_PEERS_SOME : GW_PEERS_NONE;
    COLL_GPUWIRE_VERBOSE(10, "%s (cid %u): %s", comm->c_name, (unsigned)gw_comm_cid(comm),
                         GW_PEERS_ALL == m->peers    ? "every process has a GPU; blocking calls "
                                                       "agree before a GPU algorithm"
                         : GW_PEERS_SOME == m->peers ? "some processes have no GPU; every call "
                                                       "on device memory is staged"
                                                     : "no process has a GPU");
    return OMPI_SUCCESS;
}

static int agree(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a, gw_mem_kind_t kind,
                 bool *mixed, bool *uneven)
{
    /* [0] some rank passes device memory, [1] some rank does not, [2] some
     * rank's layout is one the NVLink kernels cannot take (asked only of
     * ranks with device memory: with a host rank the call is staged). */
    const bool device = GW_MEM_DEVICE == kind;
    int mine[3] = {device, !device, device && !gw_coll_nvlink_layout_ok(a)};
    int all[3] = {0, 0, 0};
    const int rc = any_rank(m, a->comm, mine, all, 3);
    if (OMPI_SUCCESS != rc) return rc;
    *mixed = all[0] && all[1];
    *uneven = 0 != all[2];
    return OMPI_SUCCESS;
}

static int run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
               gw_coll_region_t r[GW_REGION_COUNT], gw_mem_kind_t kind, ompi_request_t **request,
               bool staged_only, bool uneven);

/* gw_coll_dispatch; staged_only: on device memory the staged algorithm,
 * whatever else would accept the call (the persistent forms where ranks pass
 * different memory kinds). */
static int dispatch(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                    ompi_request_t **request, bool staged_only)
{
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_mem_kind_t kind = GW_MEM_HOST;

    if (OPAL_UNLIKELY(m->peers <= GW_PEERS_SOME_UNTIL_ASKED) && NULL == request &&
        GW_COLL_REDUCE_LOCAL != a->id) {
        const int rc = gw_coll_learn_peers(m, a->comm);
        if (OMPI_SUCCESS != rc) return rc;
    }
    if (!mca_coll_gpuwire.device_ready) {
        /* Nothing is ever staged: no non-blocking start waits, so none
         * needs to be kept in order. Where a peer has a GPU, it stages every
         * call of this communicator on device memory (GW_PEERS_SOME). */
        count(&gw_core_counters()->coll_passthrough_calls);
        if (NULL != request && gw_coll_inplace_alltoallvw(a)) {
            return gw_coll_nb_passthrough(m, a, request);
        }
        return gw_coll_call_previous(m, a, a->sbuf, a->rbuf, request);
    }
    /* A blocking call is a place every rank passes in the same order among
     * the communicator's collectives, whatever memory it passes: the
     * non-blocking calls initiated before it act on their agreements first,
     * and where one started a team set-up whose outcome the calls do not go
     * by yet, it ends here and they go by it from now on. */
    if (NULL == request) {
        gw_coll_agree_nb_settle(m);
        if (GW_CE_NVL_SETTING_UP == m->nvl.seen) gw_ce_nvl_settle(&m->nvl);
    }
    gw_coll_regions(a, r);
    int rc = gw_coll_classify_regions(r, &kind);
    if (OMPI_SUCCESS != rc) return rc;

    /* Some process of the communicator has no GPU layer: Open MPI's
     * algorithm on every rank, staged here. */
    staged_only = staged_only || GW_PEERS_SOME == m->peers ||
                  GW_PEERS_SOME_UNTIL_ASKED == m->peers;
    bool uneven = false;
    if (!staged_only && must_agree(m, a)) {
        if (NULL != request) {
            if (mca_coll_gpuwire.agree_nb && !m->agreed_inside) {
                return gw_coll_agree_nb(m, a, r, kind, run, request);
            }
        } else {
            bool mixed = false;
            rc = agree(m, a, kind, &mixed, &uneven);
            if (OMPI_SUCCESS != rc) return rc;
            if (mixed && GW_MEM_DEVICE == kind) {
                count(&mca_coll_gpuwire.mixed_calls);
                COLL_GPUWIRE_VERBOSE(20, "%s: some ranks pass host memory only, staged",
                                     gw_coll_name(a->id));
                staged_only = true;
            }
        }
    }
    return run(m, a, r, kind, request, staged_only, uneven);
}

/* The algorithms of a call whose regions r are classified (kind) and whose
 * ranks have agreed where they must (gw_coll_run_fn). */
static int run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
               gw_coll_region_t r[GW_REGION_COUNT], gw_mem_kind_t kind, ompi_request_t **request,
               bool staged_only, bool uneven)
{
    if (GW_MEM_HOST == kind) count(&gw_core_counters()->coll_passthrough_calls);
    /* The selection table's choice for a blocking call (the same on every
     * rank): staged goes to the last algorithm; device and chain pass the
     * team by; nvlink tries it first at any size. An algorithm that
     * declines leaves the call to the next one, as without the table. */
    gw_coll_args_t chosen;
    if (GW_MEM_DEVICE == kind && !staged_only && NULL == request) {
        chosen = *a;
        chosen.sel = gw_coll_select(m, a);
        staged_only = GW_SEL_STAGED == chosen.sel;
        a = &chosen;
    }
    /* The last algorithm of each list accepts every call and never declines.
     * What an algorithm's accepts() found out goes to its run(). */
    gw_coll_note_t note;
    for (size_t i = staged_only ? algorithms[kind].n - 1 : 0; i < algorithms[kind].n; ++i) {
        const gw_coll_algorithm_t *algo = algorithms[kind].list[i];
        if (&gw_coll_nvlink == algo &&
            (uneven || GW_SEL_DEVICE == a->sel || GW_SEL_CHAIN == a->sel)) {
            continue;
        }
        if (NULL != algo->accepts && !algo->accepts(a, r, &note)) continue;
        if (GW_MEM_DEVICE == kind) {
            COLL_GPUWIRE_VERBOSE(20, "%s%s on device memory: %s (%zu + %zu bytes)",
                                 a->nonblocking ? "i" : "", gw_coll_name(a->id), algo->name,
                                 gw_region_bytes(&r[GW_REGION_SEND]),
                                 gw_region_bytes(&r[GW_REGION_RECV]));
        }
        const int rc = algo->run(m, a, r, &note, request);
        if (GW_COLL_DECLINED != rc) return rc;
    }
    return OMPI_ERR_NOT_SUPPORTED;
}

int gw_coll_dispatch(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                     ompi_request_t **request)
{
    /* An inter-communicator's module has the non-blocking reductions only. */
    if (OPAL_UNLIKELY(OMPI_COMM_IS_INTER(a->comm)))
        return gw_coll_inter_dispatch(m, a, request);
    return dispatch(m, a, request, false);
}

int gw_coll_dispatch_staged(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                            ompi_request_t **request)
{
    return dispatch(m, a, request, true);
}

/* Initialization of a persistent collective is nonlocal (MPI 4.0, 6.13):
 * the ranks agree here, by one host allreduce, on the form every start
 * takes, whatever memory each of them passes:
 *   - no rank passes device memory: the previous module's persistent
 *     request, once the non-blocking calls queued before it have started
 *     (libnbc reserves a persistent request's tag at its initialization,
 *     a non-blocking call's when it starts: in one order on every rank);
 *   - every rank passes device memory: a request of ours that runs the
 *     non-blocking form, the GPU algorithms included, at each start (and the
 *     hierarchical levels set up now, where they apply);
 *   - some do, some do not (host buffers, or no bytes at all in the call):
 *     a request of ours on every rank that runs the staged form at each
 *     start (host buffers pass through), so that every rank runs the
 *     previous module's non-blocking collective, in initiation order. */
int gw_coll_init(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a, struct ompi_info_t *info,
                 ompi_request_t **request)
{
    /* An inter-communicator's persistent reductions: every start runs the
     * non-blocking form, staged on device buffers (gw_coll_inter_dispatch),
     * libnbc's on host buffers, on every rank alike. */
    if (OPAL_UNLIKELY(OMPI_COMM_IS_INTER(a->comm))) return gw_coll_persistent_new(m, a, gw_coll_dispatch, request);
    gw_mem_kind_t kind = GW_MEM_HOST;
    if (mca_coll_gpuwire.device_ready) {
        gw_coll_region_t r[GW_REGION_COUNT];
        gw_coll_regions(a, r);
        const int rc = gw_coll_classify_regions(r, &kind);
        if (OMPI_SUCCESS != rc) return rc;
    }
    /* Nonlocal, so a place every rank passes in the same order: the
     * non-blocking calls before it act on their agreements, a set-up of the
     * NVLink team under way ends, and the starts go by its outcome. */
    gw_coll_agree_nb_settle(m);
    gw_ce_nvl_settle(&m->nvl);
    /* [0]: some rank passes device memory; [1]: some rank does not. */
    int mine[2] = {GW_MEM_DEVICE == kind, GW_MEM_DEVICE != kind}, seen[2] = {mine[0], mine[1]};
    if (NULL != m->previous_allreduce) {
        const int rc = any_rank(m, a->comm, mine, seen, 2);
        if (OMPI_SUCCESS != rc) return rc;
    }
    /* In place Alltoallv/w: a request of ours even on host buffers, whose
     * starts give libnbc a send copy (gw_coll_inplace_alltoallvw). */
    if (!seen[0] && !gw_coll_inplace_alltoallvw(a)) {
        gw_coll_nb_drain(m);
        return gw_coll_call_previous_init(m, a, info, request);
    }
    if (!seen[1]) {
        const int rc = gw_coll_hier_prepare(m, a);
        if (OMPI_SUCCESS != rc) return rc;
    }
    if (seen[0] && seen[1]) __atomic_fetch_add(&mca_coll_gpuwire.persistent_mixed, 1, __ATOMIC_RELAXED);
    gw_coll_args_t p = *a;
    p.agreed = !seen[1]; /* the starts need no agreement of their own */
    return gw_coll_persistent_new(m, &p, seen[1] ? gw_coll_dispatch_staged : gw_coll_dispatch,
                                  request);
}
