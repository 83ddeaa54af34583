/*
 * osc/gpuwire's same-node direct path: Put and Get into the windows of the
 * ranks on this node without a message to the target (docs/osc.md). The
 * path itself -- the window descriptions, the mappings, the copies and their
 * tickets, whether an Accumulate may go by reference -- is the core's
 * (gpuwire/osc_direct.h, ucx_glue/osc/direct). Here is what needs Open MPI:
 * the exchange of the descriptions (an allgather on the window's
 * communicator), which peers share this node, the datatypes' contiguity and
 * signatures, the performance variables, and the waits for the
 * acknowledgements of accumulates sent by reference.
 *
 * Everything the path does not take keeps the message path: other
 * accumulates, layouts that are not contiguous, dynamic windows, targets on
 * other nodes, windows whose description cannot be mapped.
 */
#include "osc_gpuwire.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ompi/proc/proc.h"
#include "opal/util/output.h"

/* The engine asks which ranks share this node, and their process ids. */
static bool peer_on_node(void *ctx, int t, uint32_t *peer_id)
{
    gw_osc_module_t *m = ctx;
    ompi_proc_t *p = ompi_comm_peer_lookup(m->comm, t);
    if (p == NULL || !OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags)) return false;
    /* A process of another job goes by message: CUDA IPC mappings name a
     * peer by its rank in its own job (vpid), which another job repeats. */
    if (p->super.proc_name.jobid != OMPI_PROC_MY_NAME->jobid) return false;
    *peer_id = (uint32_t)p->super.proc_name.vpid;
    return true;
}

/* This rank's segment before the exchange (ucx_glue/osc/lockword): its
 * lock word where osc_gpuwire_lock_word is on (from then on the target
 * takes its lock there for requests by message too), and the window's
 * bytes of an MPI_Win_allocate made in it. Its id goes to the peers (0:
 * none: their locks on this rank go by message). */
static int segment_create(gw_osc_module_t *m, uint64_t bytes)
{
    gw_osc_state_t *c = &gw_osc_state;
    char why[256] = "";
    if (m->locks == NULL &&
        (bytes > 0 || c->lock_word || m->flavor == MPI_WIN_FLAVOR_SHARED)) {
        int rc = gw_osc_lockwords_create(m->size, m->rank, bytes, c->lock_word, &m->locks,
                                         &m->seg_id, why, sizeof(why));
        if (rc != 0) return gw_osc_rc(rc);
        if (m->seg_id == 0) {
            opal_output_verbose(1, c->output, "osc:gpuwire: rank %d's segment of shared memory "
                                "(%s): %s", m->rank, why, bytes > 0 ? "its window is private"
                                : "its locks go by message");
            gw_osc_lockwords_close(m->locks);
            m->locks = NULL;
            return OMPI_SUCCESS;
        }
    }
    int *word = m->locks != NULL ? gw_osc_lockwords_table(m->locks)[m->rank] : NULL;
    if (word != NULL) m->sync.lock_word = word;
    return OMPI_SUCCESS;
}

/* What this rank's segment holds, as the peers learn it (GW_OSC_SEG_*). */
static uint32_t segment_holds(gw_osc_module_t *m)
{
    if (m->locks == NULL) return 0;
    return (gw_osc_lockwords_table(m->locks)[m->rank] != NULL ? GW_OSC_SEG_WORD : 0) |
           (gw_osc_lockwords_data(m->locks, m->rank) != NULL ? GW_OSC_SEG_DATA : 0);
}

int gw_osc_window_allocate(gw_osc_module_t *m, size_t size)
{
    if (gw_osc_state.direct && size > 0) {
        int rc = segment_create(m, size);
        if (rc != OMPI_SUCCESS) return rc;
        m->base = gw_osc_lockwords_data(m->locks, m->rank);
        if (m->base != NULL) return OMPI_SUCCESS;
    }
    if (posix_memalign((void **)&m->base, 64, size ? size : 64) != 0) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    m->free_base = true;
    return OMPI_SUCCESS;
}

int gw_osc_window_shared(gw_osc_module_t *m, size_t size, opal_info_t *info)
{
    int flag = 0;
    bool noncontig = false;
    if (info != NULL && opal_info_get_bool(info, "alloc_shared_noncontig", &noncontig, &flag) !=
                            OPAL_SUCCESS) {
        noncontig = false;
    }
    m->shared_noncontig = flag && noncontig;
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t mine = m->shared_noncontig ? (size + page - 1) / page * page : size;
    uint64_t *parts = calloc((size_t)m->size, sizeof(*parts));
    m->shared_off = calloc((size_t)m->size + 1, sizeof(*m->shared_off));
    if (parts == NULL || m->shared_off == NULL) {
        free(parts);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    int rc = m->comm->c_coll->coll_allgather(&mine, 1, MPI_UINT64_T, parts, 1, MPI_UINT64_T,
                                             m->comm, m->comm->c_coll->coll_allgather_module);
    for (int t = 0; rc == OMPI_SUCCESS && t < m->size; t++) {
        m->shared_off[t + 1] = m->shared_off[t] + parts[t];
    }
    free(parts);
    if (rc != OMPI_SUCCESS) return rc;
    /* Rank 0's segment holds them all; the others' hold their words. */
    return segment_create(m, m->rank == 0 ? m->shared_off[m->size] : 0);
}

int gw_osc_window_shared_base(gw_osc_module_t *m, void **base)
{
    if (m->shared_bases == NULL) {
        opal_output(0, "osc:gpuwire: MPI_Win_allocate_shared: a rank of the window could not "
                    "map the shared memory of rank 0 (/dev/shm full or not shared between the "
                    "processes; --mca osc_gpuwire_verbose 1 says which)");
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    m->base = m->shared_bases[m->rank];
    *base = m->base;
    return OMPI_SUCCESS;
}

/* SHARED: where every rank's part lies as mapped here, from rank 0's
 * segment; false where it is not mapped (and the window holds bytes). */
static bool shared_parts(gw_osc_module_t *m, void **data)
{
    const uint64_t total = m->shared_off[m->size];
    char *all = gw_osc_lockwords_data(m->locks, 0);
    for (int t = 0; t < m->size; t++) {
        const bool empty = m->shared_off[t + 1] == m->shared_off[t];
        data[t] = all == NULL || (empty && m->shared_noncontig) ? NULL : all + m->shared_off[t];
    }
    return total == 0 || all != NULL;
}

/* After the exchange: maps the segments of the peers on this node (their
 * lock words, which this rank takes only where osc_gpuwire_lock_word is on
 * here too; their windows' bytes); returns, per rank, its window as mapped
 * here (NULL: none), for the direct path. */
static void segments_open(gw_osc_module_t *m, const gw_osc_win_desc_t *all, void **data)
{
    uint32_t id;
    for (int t = 0; m->locks != NULL && t < m->size; t++) {
        char why[256] = "";
        /* (SHARED: rank 0's segment holds every rank's part.) */
        const uint64_t bytes = m->flavor == MPI_WIN_FLAVOR_SHARED
                                   ? (t == 0 ? m->shared_off[m->size] : 0)
                                   : all[t].size;
        if (t != m->rank && all[t].seg_id != 0 && peer_on_node(m, t, &id) &&
            gw_osc_lockwords_open(m->locks, t, all[t].seg_id,
                                  (all[t].seg & GW_OSC_SEG_DATA) ? bytes : 0,
                                  gw_osc_state.lock_word &&
                                      (all[t].seg & GW_OSC_SEG_WORD) != 0,
                                  why, sizeof(why)) != 0) {
            opal_output_verbose(1, gw_osc_state.output,
                                "osc:gpuwire: rank %d cannot map rank %d's segment (%s): its "
                                "locks go by message, its window is reached otherwise",
                                m->rank, t, why);
        }
        data[t] = gw_osc_lockwords_data(m->locks, t);
    }
    if (m->locks != NULL) m->sync.words = gw_osc_lockwords_table(m->locks);
}

int gw_osc_direct_setup(gw_osc_module_t *m)
{
    gw_osc_state_t *c = &gw_osc_state;
    const gw_osc_win_self_t self = {.rank = m->rank, .base = m->base, .size = m->win_size,
                                    .disp_unit = m->disp_unit, .gpu = m->win_gpu};
    gw_osc_win_desc_t mine;
    gw_osc_win_desc_t *all = calloc((size_t)m->size, sizeof(*all));
    void **data = calloc((size_t)m->size, sizeof(*data));
    if (all == NULL || data == NULL) {
        free(all);
        free(data);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    gw_osc_direct_describe(c->direct, &self, &mine);
    int rc = segment_create(m, 0);
    /* Every rank takes part, whatever its window: the exchange is collective
     * (a rank short of memory for its segment sends none and goes on). */
    mine.seg_id = rc == OMPI_SUCCESS ? m->seg_id : 0;
    mine.seg = rc == OMPI_SUCCESS ? segment_holds(m) : 0;
    rc = m->comm->c_coll->coll_allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine),
                                         MPI_BYTE, m->comm, m->comm->c_coll->coll_allgather_module);
    const bool exchanged = rc == OMPI_SUCCESS;
    if (exchanged) m->extents = calloc((size_t)m->size, sizeof(*m->extents));
    for (int t = 0; m->extents != NULL && t < m->size; t++) {
        m->extents[t].size = all[t].size;
        m->extents[t].disp_unit = all[t].disp_unit;
    }
    bool any_seg = false;
    for (int t = 0; exchanged && t < m->size; t++) any_seg = any_seg || all[t].seg_id != 0;
    if (any_seg) segments_open(m, all, data);
    /* SHARED: every part in rank 0's segment (the same for every rank). */
    const bool is_shared = m->flavor == MPI_WIN_FLAVOR_SHARED;
    int mapped_all = !is_shared || (exchanged && shared_parts(m, data));
    int mapped = 0, shared = 0;
    if (exchanged && c->direct) {
        rc = gw_osc_rc(gw_osc_direct_open(&self, m->size, all, data, peer_on_node, m,
                                          &m->direct, &mapped));
    }
    for (int t = 0; m->direct != NULL && t < m->size; t++) shared += data[t] != NULL;
    /* Once every rank has mapped the segments, their names go. The ranks
     * agree meanwhile whether each maps every segment (so fences can go by
     * the counts in them): an allreduce, collective too (every rank got the
     * same ids), which none leaves before all have entered it. */
    if (any_seg) {
        int mine2[2] = {c->shm_fence && gw_osc_fence_ready(m->locks, m->size), mapped_all};
        int seen[2] = {0, 0};
        int brc = m->comm->c_coll->coll_allreduce(mine2, seen, 2, MPI_INT, MPI_MIN, m->comm,
                                                  m->comm->c_coll->coll_allreduce_module);
        gw_osc_lockwords_unlink(m->locks);
        m->shm_fence = brc == OMPI_SUCCESS && seen[0] == 1;
        mapped_all = brc == OMPI_SUCCESS && seen[1] == 1;
        if (rc == OMPI_SUCCESS) rc = brc;
    } else if (is_shared && m->shared_off[m->size] > 0) {
        mapped_all = 0; /* no segment anywhere (every rank sees the same ids) */
    }
    if (is_shared && mapped_all && rc == OMPI_SUCCESS) {
        m->shared_bases = malloc((size_t)m->size * sizeof(*m->shared_bases));
        if (m->shared_bases == NULL) rc = OMPI_ERR_OUT_OF_RESOURCE;
        for (int t = 0; m->shared_bases != NULL && t < m->size; t++) {
            m->shared_bases[t] = data[t];
        }
    }
    free(all);
    free(data);
    gw_osc_count(&c->direct_targets, (unsigned long long)mapped);
    gw_osc_count(&c->shared_targets, (unsigned long long)shared);
    opal_output_verbose(10, c->output, "osc:gpuwire: rank %d: Put and Get go direct to %d of %d "
                        "targets (%d in shared memory)", m->rank, mapped, m->size, shared);
    return rc;
}

bool gw_osc_in_window(const gw_osc_module_t *m, int target, ptrdiff_t tdisp, int tcount,
                      const ompi_datatype_t *tdt)
{
    if (m->extents == NULL || tcount <= 0 || tdt->super.size == 0) return true;
    const struct gw_osc_extent *e = &m->extents[target];
    /* [first, last): the bytes the layout touches, as Open MPI spans them. */
    const int64_t first = (int64_t)tdisp * e->disp_unit + tdt->super.true_lb;
    const int64_t span = (int64_t)(tcount - 1) * (tdt->super.ub - tdt->super.lb) +
                         (tdt->super.true_ub - tdt->super.true_lb);
    if (span < 0) return true; /* (a negative extent: not judged here) */
    return first >= 0 && (uint64_t)(first + span) <= e->size;
}

int gw_osc_direct_settle(gw_osc_module_t *m) { return gw_osc_rc(gw_osc_direct_wait(m->direct)); }

void gw_osc_direct_release(gw_osc_module_t *m)
{
    /* (Progress kicks the path under the window's lock.) */
    opal_mutex_lock(&m->lock);
    gw_osc_direct_t *d = m->direct;
    m->direct = NULL;
    opal_mutex_unlock(&m->lock);
    gw_osc_direct_close(d);
}

/* Both layouts contiguous and of one size: what the direct path can take. */
static bool plain(int ocount, ompi_datatype_t *odt, int tcount, ompi_datatype_t *tdt,
                  size_t bytes)
{
    return (size_t)ocount * odt->super.size == bytes &&
           ompi_datatype_is_contiguous_memory_layout(tdt, tcount) &&
           ompi_datatype_is_contiguous_memory_layout(odt, ocount);
}

int gw_osc_direct_try(gw_osc_module_t *m, bool put, void *oaddr, int ocount,
                      ompi_datatype_t *odt, int target, ptrdiff_t tdisp, int tcount,
                      ompi_datatype_t *tdt, bool wait, int *rc)
{
    size_t bytes = (size_t)tcount * tdt->super.size;
    /* Mismatched signatures and scattered layouts: the message path. */
    if (m->direct == NULL || !plain(ocount, odt, tcount, tdt, bytes)) return 0;
    int erc = 0;
    int r = gw_osc_direct_rma(m->direct, put, (char *)oaddr + odt->super.true_lb, bytes, target,
                              tdisp, tdt->super.true_lb, wait, &erc);
    if (r == GW_OSC_DIRECT_NO) return 0;
    if (r == GW_OSC_DIRECT_MOVED) {
        gw_osc_count(&gw_osc_state.direct_ops, 1);
    }
    *rc = gw_osc_rc(erc);
    return 1;
}

bool gw_osc_direct_by_ref(gw_osc_module_t *m, const void *oaddr, int ocount,
                          ompi_datatype_t *odt, int target, int tcount, ompi_datatype_t *tdt,
                          MPI_Datatype el, MPI_Op op, void *desc)
{
    size_t bytes = (size_t)tcount * tdt->super.size;
    if (m->direct == NULL || op == MPI_NO_OP || !plain(ocount, odt, tcount, tdt, bytes)) {
        return false;
    }
    return gw_osc_direct_acc_ref(m->direct, target, (const char *)oaddr + odt->super.true_lb,
                                 bytes, gw_osc_kernel_op(op), gw_osc_kernel_type(el), desc);
}

int gw_osc_direct_wait_refs(gw_osc_module_t *m, int target)
{
    /* (None sent by reference yet: nothing to look at, no lock taken.) */
    if (m->sync.ref_want == NULL || target >= m->size) return OMPI_SUCCESS;
    for (int t = target < 0 ? 0 : target; t < (target < 0 ? m->size : target + 1); t++) {
        opal_mutex_lock(&m->lock);
        uint64_t want = gw_osc_sync_ref_flush(&m->sync, t);
        opal_mutex_unlock(&m->lock);
        if (want) gw_osc_wait_reached(m, &m->sync.acked[t], want);
    }
    return OMPI_SUCCESS;
}
