/*
 * The osc/gpuwire component: version check, parameters, selection, and the
 * window's life cycle (create, allocate, dynamic attach/detach, free).
 *
 * Selection: priority 5 by default, below every osc a stock Open MPI 4.1
 * chooses when it can (sm 100 on shared windows, ucx, rdma, pt2pt), so that
 * it takes windows when named (--mca osc gpuwire) or when nothing else
 * accepts them (pml gpuwire: osc/rdma lacks an RDMA BTL, osc/ucx needs
 * pml ucx). Shared windows are declined: osc/sm provides them.
 */
#include "osc_gpuwire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire_params.h"
#include "gpuwire_preflight.h"
#include "ompi/proc/proc.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

/* The parameters, one table (gpuwire_params.h): registration, range check,
 * ompi_info's help and docs/parameters.md. */
#define GW_PARAMS_STORE gw_osc_state
static const gw_param_t params[] = {
    GW_PINT(priority, GW_OSC_DEFAULT_PRIORITY, -1, 1000, 3,
            "Selection priority of osc gpuwire: the default 5 lets osc sm, ucx, rdma and pt2pt "
            "take the windows they accept and gives osc gpuwire the rest, or every window when "
            "named alone (--mca osc gpuwire); -1 disables it",
            NULL),
    GW_PINT(gpu_priority, 200, -1, 1000, 3,
            "Selection priority of osc gpuwire in a process with a GPU (unless priority is -1): "
            "the default 200 takes every window ahead of osc sm, ucx, rdma and pt2pt, whose CPU "
            "copies cannot read device buffers; -1: priority alone decides",
            NULL),
    GW_PBOOL(device, true, 3,
             "Windows and origin buffers in GPU memory (CUDA) when a GPU is present; 0: every "
             "buffer is taken as host memory"),
    GW_PBOOL(direct, true, 4,
             "Same-node Put and Get without a message: one copy on the GPU into a peer's device "
             "window mapped over CUDA IPC, or one process_vm_writev/readv into its host window; "
             "accumulates done by the origin in a mapped window; 0: every operation is a message"),
    GW_PBOOL(lock_word, true, 4,
             "Passive-target locks of ranks on one node taken with atomics in the target's lock "
             "word (shared memory) instead of a request and a grant; 0: every lock is a message, "
             "and accumulates into device windows are not done by the origin"),
    GW_PBOOL(shm_fence, true, 4,
             "MPI_Win_fence on a window whose ranks all share one node and map one another's "
             "segments: a barrier of counts in shared memory; 0: a barrier of messages"),
    GW_PVERBOSE("Verbosity: 1 device support, 10 every window"),
};
#undef GW_PARAMS_STORE

/* The performance variables: counters the component keeps itself. */
#define GW_COUNTER MCA_BASE_PVAR_CLASS_COUNTER
static const gw_pvar_t counters[] = {
    {"direct_ops", "Put and Get done by a direct copy into a mapped window",
     &gw_osc_state.direct_ops, GW_COUNTER},
    {"direct_targets", "Targets' windows mapped for direct Put and Get, over all windows",
     &gw_osc_state.direct_targets, GW_COUNTER},
    {"shared_targets",
     "Targets' host windows (MPI_Win_allocate) mapped in shared memory, where a Put or Get is "
     "a memory copy, over all windows",
     &gw_osc_state.shared_targets, GW_COUNTER},
    {"direct_accs",
     "Accumulates, Get_accumulates, Fetch_and_ops and Compare_and_swaps done by the origin in "
     "a same-node window it reaches (host, in shared memory or by cross-memory attach, or "
     "device), under its accumulate word",
     &gw_osc_state.direct_accs, GW_COUNTER},
    {"acc_word_busy",
     "Accumulates that could have been done by the origin but went as messages: the target's "
     "accumulate word stayed held (contention)",
     &gw_osc_state.acc_word_busy, GW_COUNTER},
    {"acc_by_ref",
     "Accumulates from a device buffer sent by reference: the target reduced from the mapped "
     "origin buffer, no host staging at either end",
     &gw_osc_state.acc_by_ref, GW_COUNTER},
    {"word_locks",
     "Passive-target locks (lock and lock_all, per target) taken in a same-node target's lock "
     "word, without a message",
     &gw_osc_state.word_locks, GW_COUNTER},
    {"shm_fences",
     "Fences closed by a barrier of counts in shared memory (every rank of the window on one "
     "node) rather than of messages",
     &gw_osc_state.shm_fences, GW_COUNTER},
};

static int component_register(void);
static int component_init(bool progress_threads, bool mpi_threads);
static int component_finalize(void);
static int component_query(ompi_win_t *win, void **base, size_t size, int disp_unit,
                           ompi_communicator_t *comm, opal_info_t *info, int flavor);
static int component_select(ompi_win_t *win, void **base, size_t size, int disp_unit,
                            ompi_communicator_t *comm, opal_info_t *info, int flavor,
                            int *model);

__attribute__((visibility("default"))) gw_osc_component_t mca_osc_gpuwire_component = {
    .super = {
        .osc_version = {
            OMPI_OSC_BASE_VERSION_3_0_0,
            .mca_component_name = GW_OSC_COMPONENT_NAME,
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_register_component_params = component_register,
        },
        .osc_data = {.param_field = MCA_BASE_METADATA_PARAM_NONE},
        .osc_init = component_init,
        .osc_query = component_query,
        .osc_select = component_select,
        .osc_finalize = component_finalize,
    },
};

/* MPI_Win_shared_query: a rank's part of an MPI_Win_allocate_shared window
 * as mapped here (MPI_PROC_NULL: the first rank's part with bytes). */
static int shared_query(ompi_win_t *win, int rank, size_t *size, int *disp_unit, void *base)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (m->flavor != MPI_WIN_FLAVOR_SHARED) return OMPI_ERR_RMA_FLAVOR; /* as MPI-3.1 says */
    if (m->shared_bases == NULL) return OMPI_ERR_WIN;
    if (rank == MPI_PROC_NULL) {
        for (rank = 0; rank < m->size && m->extents[rank].size == 0; rank++) {
        }
        if (rank == m->size) {
            *size = 0;
            *disp_unit = 0;
            *(void **)base = NULL;
            return OMPI_SUCCESS;
        }
    }
    if (rank < 0 || rank >= m->size) return OMPI_ERR_BAD_PARAM;
    *size = (size_t)m->extents[rank].size;
    *disp_unit = m->extents[rank].disp_unit;
    *(void **)base = m->shared_bases[rank];
    return OMPI_SUCCESS;
}

static int win_attach(ompi_win_t *win, void *base, size_t len);
static int win_detach(ompi_win_t *win, const void *base);
static int win_free(ompi_win_t *win);

static const ompi_osc_base_module_t module_template = {
    .osc_win_shared_query = shared_query,
    .osc_win_attach = win_attach,
    .osc_win_detach = win_detach,
    .osc_free = win_free,
    .osc_put = gw_osc_put,
    .osc_get = gw_osc_get,
    .osc_accumulate = gw_osc_accumulate,
    .osc_compare_and_swap = gw_osc_compare_and_swap,
    .osc_fetch_and_op = gw_osc_fetch_and_op,
    .osc_get_accumulate = gw_osc_get_accumulate,
    .osc_rput = gw_osc_rput,
    .osc_rget = gw_osc_rget,
    .osc_raccumulate = gw_osc_raccumulate,
    .osc_rget_accumulate = gw_osc_rget_accumulate,
    .osc_fence = gw_osc_fence,
    .osc_start = gw_osc_start,
    .osc_complete = gw_osc_complete,
    .osc_post = gw_osc_post,
    .osc_wait = gw_osc_wait,
    .osc_test = gw_osc_test,
    .osc_lock = gw_osc_lock,
    .osc_unlock = gw_osc_unlock,
    .osc_lock_all = gw_osc_lock_all,
    .osc_unlock_all = gw_osc_unlock_all,
    .osc_sync = gw_osc_sync,
    .osc_flush = gw_osc_flush,
    .osc_flush_all = gw_osc_flush_all,
    .osc_flush_local = gw_osc_flush_local,
    .osc_flush_local_all = gw_osc_flush_local_all,
};

static int component_register(void)
{
    if (gw_component_preflight("osc", &mca_osc_gpuwire_component) != 0) {
        return OMPI_ERR_NOT_SUPPORTED;
    }
    mca_base_component_t *c = &mca_osc_gpuwire_component.super.osc_version;
    gw_params_register(c, params, GW_PARAM_COUNT(params));
    gw_pvars_register(c, counters, sizeof(counters) / sizeof(counters[0]));
    return OMPI_SUCCESS;
}

void gw_osc_log(int verbosity, const char *msg)
{
    if (verbosity == 0) {
        opal_output(0, "osc:gpuwire: %s", msg);
    } else {
        opal_output_verbose(verbosity, gw_osc_state.output, "osc:gpuwire: %s", msg);
    }
}

static int component_init(bool progress_threads, bool mpi_threads)
{
    (void)progress_threads;
    (void)mpi_threads;
    gw_osc_state_t *c = &gw_osc_state;
    if (gw_params_component_open(&mca_osc_gpuwire_component.super.osc_version, params, GW_PARAM_COUNT(params),
                                 c->verbose, &c->output) != 0) {
        return OMPI_ERR_BAD_PARAM;
    }
    gw_osc_log_set(gw_osc_log);
    OBJ_CONSTRUCT(&c->windows, opal_list_t);
    OBJ_CONSTRUCT(&c->windows_lock, opal_mutex_t);
    c->ngpus = 0;
    c->device_tried = false;
    return OMPI_SUCCESS;
}

/* The device layer opens with the first window, not at MPI_Init: jobs that
 * never create a window pay nothing for it. */
static void device_open_once(gw_osc_state_t *c)
{
    if (c->device_tried || !c->device) return;
    c->device_tried = true;
    char why[256] = "";
    int n = gw_osc_dev_open(why, sizeof(why));
    c->ngpus = n > 0 ? n : 0;
    opal_output_verbose(1, c->output, "osc:gpuwire: %s%s",
                        n > 0 ? "device windows on" : "host windows only: ", n > 0 ? "" : why);
}

static int component_finalize(void)
{
    gw_osc_state_t *c = &gw_osc_state;
    if (c->progress_registered) {
        opal_progress_unregister(gw_osc_progress);
        c->progress_registered = false;
    }
    gw_osc_dev_close();
    OBJ_DESTRUCT(&c->windows);
    OBJ_DESTRUCT(&c->windows_lock);
    gw_osc_log_set(NULL);
    gw_params_component_close(&c->output);
    return OMPI_SUCCESS;
}

/* Whether every rank of comm shares this node (MPI_Win_allocate_shared). */
static bool all_on_node(ompi_communicator_t *comm)
{
    for (int r = 0; r < ompi_comm_size(comm); r++) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        if (p == NULL || !OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags)) return false;
    }
    return true;
}

/* In a process with a GPU, every window (gpu_priority): Open MPI's own osc
 * components copy with the CPU, which cannot read a device origin buffer. */
static int component_query(ompi_win_t *win, void **base, size_t size, int disp_unit,
                           ompi_communicator_t *comm, opal_info_t *info, int flavor)
{
    (void)win;
    (void)base;
    (void)size;
    (void)disp_unit;
    (void)info;
    gw_osc_state_t *c = &gw_osc_state;
    if (c->priority < 0) return -1;
    if (flavor == MPI_WIN_FLAVOR_SHARED && !all_on_node(comm)) return -1;
    opal_mutex_lock(&c->windows_lock);
    device_open_once(c);
    opal_mutex_unlock(&c->windows_lock);
    return c->ngpus > 0 && c->gpu_priority >= 0 ? c->gpu_priority : c->priority;
}

static void module_release(gw_osc_module_t *m)
{
    gw_osc_direct_release(m);
    if (m->comm != NULL) ompi_comm_free(&m->comm);
    if (m->free_base) free(m->base);
    free(m->shared_off);
    free(m->shared_bases);
    free(m->regions);
    free(m->extents);
    gw_osc_sync_fini(&m->sync);
    gw_osc_lockwords_close(m->locks);
    free(m->start_ranks);
    free(m->post_ranks);
    OBJ_DESTRUCT(&m->incoming);
    OBJ_DESTRUCT(&m->outgoing);
    OBJ_DESTRUCT(&m->pending);
    OBJ_DESTRUCT(&m->lock);
    free(m);
}

/* The core's one-sided engine (gpuwire/osc.h) calls these back, under
 * m->lock, as it handles the window's messages. */
static int ctl_cb(void *ctx, int peer, uint32_t kind, int aux, uint64_t count)
{
    return gw_osc_send_ctl(ctx, peer, kind, aux, count);
}

static void apply_cb(void *ctx, int origin, const gw_osc_hdr_t *h, const char *body)
{
    gw_osc_apply(ctx, origin, h, body);
}

static void reply_cb(void *ctx, const gw_osc_hdr_t *h, const char *body)
{
    gw_osc_reply(ctx, h, body);
}

/* The window's synchronisation state (m->sync) with these callbacks. */
static int sync_setup(gw_osc_module_t *m)
{
    const gw_osc_sync_ops_t ops = {.send_ctl = ctl_cb, .apply = apply_cb, .reply = reply_cb,
                                   .ctx = m};
    return gw_osc_rc(gw_osc_sync_init(&m->sync, m->size, &ops));
}

static int component_select(ompi_win_t *win, void **base, size_t size, int disp_unit,
                            ompi_communicator_t *comm, opal_info_t *info, int flavor,
                            int *model)
{
    (void)info;
    gw_osc_state_t *c = &gw_osc_state;
    opal_mutex_lock(&c->windows_lock);
    device_open_once(c);
    opal_mutex_unlock(&c->windows_lock);
    gw_osc_module_t *m = calloc(1, sizeof(*m));
    if (m == NULL) return OMPI_ERR_OUT_OF_RESOURCE;
    m->super = module_template;
    OBJ_CONSTRUCT(&m->lock, opal_mutex_t);
    OBJ_CONSTRUCT(&m->incoming, opal_list_t);
    OBJ_CONSTRUCT(&m->outgoing, opal_list_t);
    OBJ_CONSTRUCT(&m->pending, opal_list_t);
    OBJ_CONSTRUCT(&m->link, opal_list_item_t);
    m->win = win;
    m->flavor = flavor;
    m->win_gpu = -1;
    m->disp_unit = disp_unit;
    m->win_size = size;
    int rc = ompi_comm_dup(comm, &m->comm);
    if (rc != OMPI_SUCCESS) {
        m->comm = NULL;
        module_release(m);
        return rc;
    }
    m->rank = ompi_comm_rank(m->comm);
    m->size = ompi_comm_size(m->comm);
    rc = sync_setup(m);
    if (rc != OMPI_SUCCESS) {
        module_release(m);
        return rc;
    }
    switch (flavor) {
    case MPI_WIN_FLAVOR_CREATE:
        m->base = *base;
        m->win_gpu = gw_osc_dev_where(m->base, size);
        break;
    case MPI_WIN_FLAVOR_ALLOCATE:
        rc = gw_osc_window_allocate(m, size);
        if (rc != OMPI_SUCCESS) {
            module_release(m);
            return rc;
        }
        *base = m->base;
        break;
    case MPI_WIN_FLAVOR_DYNAMIC:
        m->base = NULL;
        m->disp_unit = 1;
        break;
    case MPI_WIN_FLAVOR_SHARED:
        rc = gw_osc_window_shared(m, size, info);
        if (rc != OMPI_SUCCESS) {
            module_release(m);
            return rc;
        }
        break;
    default:
        module_release(m);
        return OMPI_ERR_NOT_SUPPORTED;
    }
    if (flavor != MPI_WIN_FLAVOR_DYNAMIC) {
        /* Collective: every rank of the window calls it (same flavor). */
        rc = gw_osc_direct_setup(m);
        if (rc == OMPI_SUCCESS && flavor == MPI_WIN_FLAVOR_SHARED) {
            rc = gw_osc_window_shared_base(m, base);
        }
        if (rc != OMPI_SUCCESS) {
            module_release(m);
            return rc;
        }
    }
    win->w_osc_module = &m->super;
    /* The name error messages give the window ("on win gpuwire window N"). */
    snprintf(win->w_name, MPI_MAX_OBJECT_NAME, "gpuwire window %u", gw_comm_cid(m->comm));
    *model = MPI_WIN_UNIFIED;
    opal_mutex_lock(&c->windows_lock);
    opal_list_append(&c->windows, &m->link);
    if (!c->progress_registered) {
        opal_progress_register(gw_osc_progress);
        c->progress_registered = true;
    }
    opal_mutex_unlock(&c->windows_lock);
    opal_output_verbose(10, c->output,
                        "osc:gpuwire: window of %zu bytes (flavor %d) on %s memory", size,
                        flavor, m->win_gpu >= 0 ? "GPU" : "host");
    return OMPI_SUCCESS;
}

static int win_free(ompi_win_t *win)
{
    gw_osc_module_t *m = GW_OSC(win);
    gw_osc_state_t *c = &gw_osc_state;
    gw_osc_wait_pending(m);
    /* Unlocks that returned without their acknowledgement: every target has
     * handled them before any rank frees. */
    for (int t = 0; t < m->size; t++) {
        gw_osc_wait_reached(m, &m->sync.unlocks[t], m->sync.unlocks_sent[t]);
    }
    gw_osc_wait_sends(m);
    /* The mappings of the peers' windows go before the peers may free them. */
    gw_osc_direct_release(m);
    /* No rank frees before every rank's last message has been handled. */
    int rc = m->comm->c_coll->coll_barrier(m->comm, m->comm->c_coll->coll_barrier_module);
    opal_mutex_lock(&c->windows_lock);
    opal_list_item_t *item;
    OPAL_LIST_FOREACH(item, &c->windows, opal_list_item_t) {
        if (gw_osc_from_link(item) == m) {
            opal_list_remove_item(&c->windows, item);
            break;
        }
    }
    opal_mutex_unlock(&c->windows_lock);
    OBJ_DESTRUCT(&m->link);
    win->w_osc_module = NULL;
    module_release(m);
    return rc;
}

static int win_attach(ompi_win_t *win, void *base, size_t len)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (m->flavor != MPI_WIN_FLAVOR_DYNAMIC) return OMPI_ERR_RMA_FLAVOR;
    opal_mutex_lock(&m->lock);
    if (m->nregions == m->cap_regions) {
        int cap = m->cap_regions ? 2 * m->cap_regions : 8;
        gw_osc_region_t *r = realloc(m->regions, cap * sizeof(*r));
        if (r == NULL) {
            opal_mutex_unlock(&m->lock);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        m->regions = r;
        m->cap_regions = cap;
    }
    m->regions[m->nregions++] =
        (gw_osc_region_t){.base = base, .len = len, .gpu = gw_osc_dev_where(base, len)};
    opal_mutex_unlock(&m->lock);
    return OMPI_SUCCESS;
}

static int win_detach(ompi_win_t *win, const void *base)
{
    gw_osc_module_t *m = GW_OSC(win);
    if (m->flavor != MPI_WIN_FLAVOR_DYNAMIC) return OMPI_ERR_RMA_FLAVOR;
    opal_mutex_lock(&m->lock);
    for (int i = 0; i < m->nregions; i++) {
        if (m->regions[i].base == base) {
            m->regions[i] = m->regions[--m->nregions];
            opal_mutex_unlock(&m->lock);
            return OMPI_SUCCESS;
        }
    }
    opal_mutex_unlock(&m->lock);
    return OMPI_ERR_BAD_PARAM;
}
