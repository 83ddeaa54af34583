/*
 * osc/gpuwire's same-node direct path: Put and Get into the device windows of
 * the ranks on this node without a message to the target.
 *
 * At MPI_Win_create (and MPI_Win_allocate) every rank describes its window (a CUDA IPC description
 * of device memory, through the core) and the descriptions go to every rank
 * once (an allgather on the window's communicator). An origin maps the
 * description of each target on its node through the process's one IPC
 * mapping cache (the pml's and the collectives' too) and keeps the mapping
 * until the window is freed. A Put or Get with contiguous layouts at both
 * ends to such a target is then one asynchronous copy on the core's stream
 * (one kernel that copies and signals when both ends are device memory, a
 * copy engine otherwise) whose ticket the module remembers; nothing waits per
 * operation. Every synchronisation that completes operations (fence,
 * complete, unlock, flush and their _all and _local forms, freeing the
 * window) first waits for the tickets, then does what it did before: the
 * copies have landed before the target hears of the epoch's end.
 *
 * Accumulates stay messages, applied one at a time by the target for MPI's
 * per-element atomicity; but a contiguous Accumulate from a device buffer on
 * the target window's GPU, with an op the GPU reduces, sends a description
 * of the origin buffer instead of its bytes: the target maps it and reduces
 * from it into the window (no host memory at either end). The origin buffer
 * is then in use until the target acknowledges the operation: flush_local
 * and complete ask for that acknowledgement (a flush message), as flush,
 * unlock and fence already do.
 *
 * Host windows (create and allocate) on this node: the description is the
 * process and the window's address, and a contiguous Put or Get from a host
 * buffer is one cross-memory-attach system call (the core's gw_osc_cma_copy,
 * gpuwire/osc.h), complete
 * on return, where the origin may ptrace the target.
 *
 * Everything else keeps the message path: other accumulates, layouts that
 * are not contiguous, dynamic windows, targets on other nodes, and windows whose description cannot be mapped (stream-ordered
 * pools, VMM, managed memory: the exporter says so in its description and no
 * origin maps it; a mapping that fails at one origin sends that origin's
 * operations to that target as messages, which is correct on its own: the
 * paths of different origins never need to agree).
 */
#include "osc_gpuwire.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "osc_gpuwire_device.h"
#include "ompi/proc/proc.h"
#include "opal/util/output.h"

/* One rank's part of the exchange. */
enum { WIN_MESSAGES, WIN_DEVICE, WIN_HOST };

typedef struct {
    uint32_t kind;     /* WIN_DEVICE: desc describes it; WIN_HOST: pid, base */
    int32_t disp_unit;
    uint64_t size;
    int32_t pid;
    uint32_t pad;
    uint64_t base;
    char desc[GW_OSC_DESC_BYTES];
} gw_osc_win_desc_t;

static void describe_mine(gw_osc_module_t *m, gw_osc_win_desc_t *mine)
{
    gw_osc_component_t *c = &mca_osc_gpuwire_component;
    char why[256] = "";
    memset(mine, 0, sizeof(*mine));
    if (!c->direct || m->win_size == 0) return;
    mine->disp_unit = m->disp_unit;
    mine->size = m->win_size;
    if (m->win_gpu < 0) {
        mine->kind = WIN_HOST;
        mine->pid = (int32_t)getpid();
        mine->base = (uint64_t)(uintptr_t)m->base;
        return;
    }
    /* The application's earlier work on the window (a cudaMemset, say) lands
     * before any peer copies into it. */
    if (gw_osc_dev_wait_user(m->win_gpu) != 0) return;
    if (gw_osc_dev_describe(m->base, m->win_size, mine->desc, why, sizeof(why)) != 0) {
        opal_output_verbose(1, c->output,
                            "osc:gpuwire: rank %d's window cannot be mapped by its peers (%s): "
                            "their Put and Get go as messages", m->rank, why);
        return;
    }
    mine->kind = WIN_DEVICE;
}

/* Maps target t's window; true when the direct path takes it. */
static bool map_target(gw_osc_module_t *m, int t, const gw_osc_win_desc_t *w,
                       gw_osc_direct_t *d)
{
    gw_osc_component_t *c = &mca_osc_gpuwire_component;
    char why[256] = "";
    memset(d, 0, sizeof(*d));
    d->size = w->size;
    d->disp_unit = w->disp_unit;
    if (w->kind == WIN_HOST) {
        ompi_proc_t *p = ompi_comm_peer_lookup(m->comm, t);
        if (p == NULL || !OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags)) return false;
        if (gw_osc_cma_probe(w->pid, w->base, why, sizeof(why)) != 0) {
            opal_output_verbose(1, c->output,
                                "osc:gpuwire: rank %d cannot reach rank %d's host window (%s): "
                                "messages instead", m->rank, t, why);
            return false;
        }
        d->ptr = (char *)(uintptr_t)w->base;
        d->pid = w->pid;
        d->gpu = -1;
        return true;
    }
    if (t == m->rank) {
        d->ptr = m->base;
        d->gpu = m->win_gpu;
    } else {
        ompi_proc_t *p = ompi_comm_peer_lookup(m->comm, t);
        if (p == NULL || !OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags)) return false;
        void *ptr = NULL;
        if (gw_osc_dev_map(w->desc, (uint32_t)p->super.proc_name.vpid, &d->mapping, &ptr,
                           &d->gpu, why, sizeof(why)) != 0) {
            opal_output_verbose(1, c->output,
                                "osc:gpuwire: rank %d cannot map rank %d's window (%s): "
                                "messages instead", m->rank, t, why);
            return false;
        }
        d->ptr = ptr;
    }
    if (d->gpu < 0 || d->gpu >= GW_OSC_MAX_GPUS) {
        gw_osc_dev_unmap(d->mapping);
        memset(d, 0, sizeof(*d));
        return false;
    }
    return true;
}

int gw_osc_direct_setup(gw_osc_module_t *m)
{
    gw_osc_component_t *c = &mca_osc_gpuwire_component;
    gw_osc_win_desc_t mine;
    gw_osc_win_desc_t *all = calloc((size_t)m->size, sizeof(*all));
    if (all == NULL) return OMPI_ERR_OUT_OF_RESOURCE;
    describe_mine(m, &mine);
    /* Every rank takes part, whatever its window: the exchange is collective. */
    int rc = m->comm->c_coll->coll_allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine),
                                             MPI_BYTE, m->comm,
                                             m->comm->c_coll->coll_allgather_module);
    int mapped = 0;
    for (int t = 0; rc == OMPI_SUCCESS && c->direct && t < m->size; t++) {
        if (all[t].kind != WIN_DEVICE && all[t].kind != WIN_HOST) continue;
        gw_osc_direct_t d;
        if (!map_target(m, t, &all[t], &d)) continue;
        if (m->direct == NULL) {
            m->direct = calloc((size_t)m->size, sizeof(*m->direct));
            if (m->direct == NULL) {
                gw_osc_dev_unmap(d.mapping);
                rc = OMPI_ERR_OUT_OF_RESOURCE;
                break;
            }
        }
        m->direct[t] = d;
        mapped++;
    }
    free(all);
    __atomic_fetch_add(&c->direct_targets, (unsigned long long)mapped, __ATOMIC_RELAXED);
    opal_output_verbose(10, c->output, "osc:gpuwire: rank %d: Put and Get go direct to %d of %d "
                        "targets", m->rank, mapped, m->size);
    return rc;
}

int gw_osc_direct_wait(gw_osc_module_t *m)
{
    int rc = OMPI_SUCCESS;
    uint64_t want[GW_OSC_MAX_GPUS];
    if (m->direct == NULL) return rc;
    /* One look under the lock at the GPUs this window has copied on (a flush
     * per operation pays for this on every call). The bits stay: a wait on a
     * ticket passed already is one load, and another thread's wait in
     * progress must not make this one return early. */
    opal_mutex_lock(&m->lock);
    unsigned gpus = m->direct_gpus;
    for (int g = 0; g < GW_OSC_MAX_GPUS; g++) want[g] = m->direct_issued[g];
    opal_mutex_unlock(&m->lock);
    for (int g = 0; gpus != 0 && g < GW_OSC_MAX_GPUS; g++) {
        if (!(gpus & (1u << g))) continue;
        if (gw_osc_dev_copy_wait(g, want[g]) != 0) rc = OMPI_ERROR;
    }
    return rc;
}

void gw_osc_direct_release(gw_osc_module_t *m)
{
    if (m->direct == NULL) return;
    (void)gw_osc_direct_wait(m);
    for (int t = 0; t < m->size; t++) {
        if (m->direct[t].mapping != NULL) gw_osc_dev_unmap(m->direct[t].mapping);
    }
    free(m->direct);
    m->direct = NULL;
}

int gw_osc_direct_rma(gw_osc_module_t *m, bool put, void *oaddr, int ocount,
                      ompi_datatype_t *odt, int target, ptrdiff_t tdisp, int tcount,
                      ompi_datatype_t *tdt, bool wait, int *rc)
{
    if (m->direct == NULL || target < 0 || target >= m->size) return 0;
    const gw_osc_direct_t *d = &m->direct[target];
    if (d->ptr == NULL) return 0;
    size_t bytes = (size_t)tcount * tdt->super.size;
    /* Mismatched signatures and scattered layouts: the message path. */
    if ((size_t)ocount * odt->super.size != bytes ||
        !ompi_datatype_is_contiguous_memory_layout(tdt, tcount) ||
        !ompi_datatype_is_contiguous_memory_layout(odt, ocount)) {
        return 0;
    }
    *rc = OMPI_SUCCESS;
    if (bytes == 0) return 1;
    int64_t at = (int64_t)tdisp * d->disp_unit + tdt->super.true_lb;
    if (at < 0 || (uint64_t)at + bytes > d->size) {
        opal_output(0, "osc:gpuwire: rank %d accessed [%lld, +%zu) outside rank %d's window of "
                    "%llu bytes", m->rank, (long long)at, bytes, target,
                    (unsigned long long)d->size);
        *rc = OMPI_ERR_RMA_RANGE;
        return 1;
    }
    char *origin = (char *)oaddr + odt->super.true_lb;
    char *remote = d->ptr + at;
    bool unordered = false;
    int ogpu = gw_osc_dev_where_order(origin, bytes, &unordered);
    if (d->pid != 0) {
        /* A host window: the kernel copies, the call returns with the bytes
         * there. Device origin buffers keep the message path. */
        if (ogpu >= 0) return 0;
        char why[256];
        if (gw_osc_cma_copy(d->pid, put, origin, (uint64_t)(uintptr_t)remote, bytes, why,
                            sizeof(why)) != 0) {
            /* Memory the kernel will not copy (a driver's mapping, say): the
             * message path does it again, whole. */
            opal_output_verbose(1, mca_osc_gpuwire_component.output,
                                "osc:gpuwire: %s; sent as a message instead", why);
            return 0;
        }
        __atomic_fetch_add(&mca_osc_gpuwire_component.direct_ops, 1ULL, __ATOMIC_RELAXED);
        return 1;
    }
    if (unordered && gw_osc_dev_wait_user(ogpu) != 0) {
        *rc = OMPI_ERROR;
        return 1;
    }
    uint64_t ticket = 0;
    opal_mutex_lock(&m->lock);
    int r = gw_osc_dev_copy_start(put ? remote : origin, put ? origin : remote, bytes, d->gpu,
                                  ogpu == d->gpu, &ticket);
    if (r == 0) {
        if (ticket > m->direct_issued[d->gpu]) m->direct_issued[d->gpu] = ticket;
        m->direct_gpus |= 1u << d->gpu;
    }
    opal_mutex_unlock(&m->lock);
    if (r != 0) {
        *rc = OMPI_ERROR;
        return 1;
    }
    __atomic_fetch_add(&mca_osc_gpuwire_component.direct_ops, 1ULL, __ATOMIC_RELAXED);
    /* Rput, Rget: the request completes with the copy. */
    if (wait && gw_osc_dev_copy_wait(d->gpu, ticket) != 0) *rc = OMPI_ERROR;
    return 1;
}

bool gw_osc_direct_acc_ref(gw_osc_module_t *m, const void *oaddr, int ocount,
                           ompi_datatype_t *odt, int target, int tcount, ompi_datatype_t *tdt,
                           MPI_Datatype el, MPI_Op op, void *desc)
{
    if (m->direct == NULL || target < 0 || target >= m->size || target == m->rank) return false;
    const gw_osc_direct_t *d = &m->direct[target];
    size_t bytes = (size_t)tcount * tdt->super.size;
    if (d->ptr == NULL || d->pid != 0 || bytes == 0 || op == MPI_NO_OP ||
        (size_t)ocount * odt->super.size != bytes ||
        !ompi_datatype_is_contiguous_memory_layout(tdt, tcount) ||
        !ompi_datatype_is_contiguous_memory_layout(odt, ocount) ||
        !gw_osc_dev_reduce_supported(el, op)) {
        return false;
    }
    const char *origin = (const char *)oaddr + odt->super.true_lb;
    bool unordered = false;
    /* The target maps the buffer on its window's GPU: only an origin buffer on
     * that same GPU is read there. */
    int ogpu = gw_osc_dev_where_order(origin, bytes, &unordered);
    if (ogpu < 0 || ogpu != d->gpu) return false;
    if (unordered && gw_osc_dev_wait_user(ogpu) != 0) return false;
    char why[256];
    return gw_osc_dev_describe(origin, bytes, desc, why, sizeof(why)) == 0;
}

int gw_osc_direct_wait_refs(gw_osc_module_t *m, int target)
{
    if (m->ref_want == NULL || target >= m->size) return OMPI_SUCCESS;
    for (int t = target < 0 ? 0 : target; t < (target < 0 ? m->size : target + 1); t++) {
        opal_mutex_lock(&m->lock);
        uint64_t want = m->ref_want[t];
        bool need = want > m->sync.acked[t];
        if (need) gw_osc_send_ctl(m, t, GW_OSC_FLUSH, 0, want);
        opal_mutex_unlock(&m->lock);
        if (need) gw_osc_wait_reached(m, &m->sync.acked[t], want);
    }
    return OMPI_SUCCESS;
}
