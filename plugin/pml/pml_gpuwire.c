#include "pml_gpuwire.h"

#include <stdlib.h>

#include "ompi/proc/proc.h"
#include "opal/runtime/opal_progress.h"
#include "gpuwire_help.h"
#include "gpuwire_stats_exchange.h"
#include "gpuwire/core.h"
#include "pml_gpuwire_datatype.h"
#include "pml_gpuwire_request.h"
#include "pml_gpuwire_p2p.h"
#include "gpuwire/cuda/pack.h"

_Static_assert(MPI_ANY_SOURCE == GW_ANY_SOURCE, "wildcard source must pass through unchanged");
_Static_assert(MPI_ANY_TAG == GW_ANY_TAG, "wildcard tag must pass through unchanged");

/* ------------------------------------------------------------------------
 * Engine life cycle
 * ------------------------------------------------------------------------ */

/* The component, under whose name the worker addresses are in the modex. */
static const mca_base_component_t *modex_key;

static void engine_log(void *ctx, int level, const char *msg)
{
    if (level <= GW_LOG_ERROR) {
        opal_output(0, "pml:gpuwire: %s", msg);
    } else {
        opal_output_verbose(level, mca_pml_gpuwire.output, "pml:gpuwire: %s", msg);
    }
}

static int resolve_peer(void *ctx, uint32_t peer, const void **addr, size_t *len)
{
    if (peer >= mca_pml_gpuwire.npeers) return -1;
    if (NULL == mca_pml_gpuwire.peer_addr[peer]) {
        opal_process_name_t name;
        if (!pml_gw_name_of_peer(peer, &name)) return -1;
        int rc;
        void *data = NULL;
        size_t size = 0;
        OPAL_MODEX_RECV(rc, modex_key, &name, &data, &size);
        if (OPAL_SUCCESS != rc || NULL == data) {
            gw_help(GW_HELP_NO_PEER_ADDRESS, peer);
            return -1;
        }
        mca_pml_gpuwire.peer_addr[peer] = data;
        mca_pml_gpuwire.peer_addr_len[peer] = size;
    }
    *addr = mca_pml_gpuwire.peer_addr[peer];
    *len = mca_pml_gpuwire.peer_addr_len[peer];
    return 0;
}

static int peer_is_local(void *ctx, uint32_t peer)
{
    opal_process_name_t name;
    if (!pml_gw_name_of_peer(peer, &name)) return 0;
    ompi_proc_t *proc = (ompi_proc_t *)ompi_proc_for_name(name);
    return proc && OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags);
}

/* Who sent a device descriptor, by the runtime's tables: the communicator
 * of that context id, the process behind that rank, and it must be a
 * process of this job. */
static int senders_of(ompi_communicator_t *comm);

static int peer_of_rank(void *ctx, uint32_t comm_ctx, int32_t rank, uint32_t *peer)
{
    (void)ctx;
    ompi_communicator_t *comm = ompi_comm_lookup(comm_ctx);
    if (NULL == comm || rank < 0 || rank >= senders_of(comm)) return -1;
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, rank);
    if (NULL == proc) return -1;
    if (proc->super.proc_name.jobid != OMPI_PROC_MY_NAME->jobid ||
        proc->super.proc_name.vpid >= mca_pml_gpuwire.world) {
        return OMPI_SUCCESS == pml_gw_other_job_add(proc, peer) ? 0 : -1;
    }
    *peer = proc->super.proc_name.vpid;
    return 0;
}

int mca_pml_gpuwire_progress(void)
{
    return gw_engine_progress(mca_pml_gpuwire.engine);
}

int mca_pml_gpuwire_open_engine(bool enable_mpi_threads, const mca_base_component_t *key)
{
    modex_key = key;
    mca_pml_gpuwire.my_peer = OMPI_PROC_MY_NAME->vpid;
    mca_pml_gpuwire.world = (uint32_t)ompi_process_info.num_procs;
    mca_pml_gpuwire.npeers = mca_pml_gpuwire.world + GW_PML_OTHER_JOBS_MAX;
    mca_pml_gpuwire.nother = 0;

    gw_engine_params_t p;
    gw_engine_params_init(&p);
    p.my_peer = mca_pml_gpuwire.my_peer;
    p.npeers = mca_pml_gpuwire.npeers;
    p.job_peers = mca_pml_gpuwire.world;
    p.thread_multiple = enable_mpi_threads;
    p.resolve_peer = resolve_peer;
    p.log = engine_log;
    p.verbose = mca_pml_gpuwire_params.verbose;
    p.rndv_threshold = mca_pml_gpuwire_params.rndv_threshold;
    p.err_mode_peer = mca_pml_gpuwire_params.err_handling;
    p.device_support = mca_pml_gpuwire_params.device;
    p.peer_is_local = peer_is_local;
    p.peer_of_rank = peer_of_rank;
    p.ipc_enabled = mca_pml_gpuwire_params.ipc;
    p.device_sync = mca_pml_gpuwire_params.device_sync;
    p.ipc_threshold = mca_pml_gpuwire_params.ipc_threshold;
    p.ipc_sync_max = mca_pml_gpuwire_params.ipc_sync_max;
    p.ipc_kernel_max = mca_pml_gpuwire_params.ipc_kernel_max;
    p.chunk_bytes = mca_pml_gpuwire_params.chunk_bytes;
    p.pace_gbps = (double)mca_pml_gpuwire_params.pace_mbps / 1000.0;
    p.pace_min_bytes = mca_pml_gpuwire_params.pace_min_bytes;
    p.recv_window_bytes = mca_pml_gpuwire_params.recv_window_bytes;
    p.staged_chunked = mca_pml_gpuwire_params.staged_chunked ? 1 : 0;
    p.pace_auto = mca_pml_gpuwire_params.pace_auto ? 1 : 0;
    p.roce_apply = mca_pml_gpuwire_params.roce_apply ? 1 : 0;
    p.pace_poll_us = (unsigned)mca_pml_gpuwire_params.pace_poll_us;
    p.ipc_cache_entries = mca_pml_gpuwire_params.ipc_cache_entries;
    p.ipc_cache_bytes = mca_pml_gpuwire_params.ipc_cache_bytes;
    p.pinned_bounce_bytes = mca_pml_gpuwire_params.pinned_bounce_bytes;
    p.staging_bytes = mca_pml_gpuwire_params.staging_bytes;
    p.shared_staging = mca_pml_gpuwire_params.shared_staging ? 1 : 0;
    p.shared_staging_min = mca_pml_gpuwire_params.shared_staging_min;
    p.shared_staging_bytes = mca_pml_gpuwire_params.shared_staging_bytes;
    p.shared_staging_host = mca_pml_gpuwire_params.shared_staging_host ? 1 : 0;
    p.bounce_to_host_max = mca_pml_gpuwire_params.bounce_to_host_max;
    p.shared_piece_bytes = mca_pml_gpuwire_params.shared_piece_bytes;
    p.shared_push = mca_pml_gpuwire_params.shared_push ? 1 : 0;
    p.push_pageable_min = mca_pml_gpuwire_params.push_pageable_min;
    p.host_register_bytes = mca_pml_gpuwire_params.host_register_bytes;
    p.host_register_min = mca_pml_gpuwire_params.host_register_min;

    char why[256] = "";
    gw_status_t st = gw_engine_create(&p, &mca_pml_gpuwire.engine, why, sizeof(why));
    if (GW_OK != st) {
        gw_help(GW_HELP_DECLINED, "pml", why);
        mca_pml_gpuwire.engine = NULL;
        return OMPI_ERROR;
    }

    const void *addr;
    size_t len;
    int rc;
    gw_engine_address(mca_pml_gpuwire.engine, &addr, &len);
    OPAL_MODEX_SEND(rc, GW_MODEX_SCOPE_GLOBAL, modex_key, addr, len);
    if (OPAL_SUCCESS != rc) {
        snprintf(why, sizeof(why), "the worker address could not be published to the other "
                                   "processes (error %d); check that the job was started by "
                                   "mpirun or a PMIx-enabled launcher", rc);
        gw_help(GW_HELP_DECLINED, "pml", why);
        gw_engine_destroy(mca_pml_gpuwire.engine);
        mca_pml_gpuwire.engine = NULL;
        return OMPI_ERROR;
    }

    mca_pml_gpuwire.peer_addr = calloc(mca_pml_gpuwire.npeers, sizeof(void *));
    mca_pml_gpuwire.peer_addr_len = calloc(mca_pml_gpuwire.npeers, sizeof(size_t));
    mca_pml_gpuwire.other = calloc(GW_PML_OTHER_JOBS_MAX, sizeof(opal_process_name_t));
    if (!mca_pml_gpuwire.peer_addr || !mca_pml_gpuwire.peer_addr_len || !mca_pml_gpuwire.other) {
        mca_pml_gpuwire_close_engine();
        return OMPI_ERR_OUT_OF_RESOURCE;
    }

    OBJ_CONSTRUCT(&mca_pml_gpuwire.requests, opal_free_list_t);
    rc = opal_free_list_init(&mca_pml_gpuwire.requests, sizeof(mca_pml_gpuwire_request_t),
                             opal_cache_line_size, OBJ_CLASS(mca_pml_gpuwire_request_t), 0,
                             opal_cache_line_size, 128, -1, 128, NULL, 0, NULL, NULL, NULL);
    if (OPAL_SUCCESS != rc) {
        mca_pml_gpuwire_close_engine();
        return rc;
    }
    opal_progress_register(mca_pml_gpuwire_progress);
    mca_pml_gpuwire.progress_registered = true;
    PML_GPUWIRE_VERBOSE(2, "ready: process %u of %u, %s", mca_pml_gpuwire.my_peer,
                        mca_pml_gpuwire.world, enable_mpi_threads ? "MPI_THREAD_MULTIPLE" : "single thread");
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Statistics (pml_gpuwire_stats): one table per job, printed by process 0
 * at finalize from every process's counters.
 * ------------------------------------------------------------------------ */

enum {
    ST_SENT, ST_SENT_BYTES, ST_RECVD, ST_RECVD_BYTES, ST_HOST, ST_IPC, ST_STAGED, ST_SHARED, ST_PUSH,
    ST_GDR, ST_RNDV_OUT, ST_CHUNKED, ST_PACER_WAIT, ST_DEV_IN, ST_KIND_HIT, ST_KIND_MISS, ST_MAP_HIT, ST_MAP_NEW, ST_MAP_EVICT,
    ST_COLL_PASS, ST_COLL_GPU, ST_COLL_STAGED, ST_NCOLS
};

static const char *const stats_columns[ST_NCOLS] = {
    "sent", "sent B", "recvd", "recvd B", "host", "ipc", "staged", "shm chunks", "push", "gdr",
    "rndv out", "chunked", "paced wait", "dev in", "kind hit", "kind miss", "map hit", "map new", "map evict",
    "coll pass", "coll gpu", "coll staged",
};

static const char stats_legend[] =
    "sent, recvd: messages (B: bytes); sent by path: host (UCX, host memory), ipc (CUDA IPC, "
    "NVLink where present), staged (GPU memory through host memory), shm chunks (chunks of staged "
    "messages through shared staging slots to this node's processes), push (host messages this "
    "process copied into a receiver's GPU memory itself), gdr (UCX on GPU memory)\n"
    "rndv out: host messages sent by rendezvous; chunked: sent in chunks (staged device memory, "
    "paced sends), paced wait: admission attempts the pacer deferred; dev in: received into GPU memory; kind: memory-kind "
    "cache; map: CUDA IPC mappings of peer buffers (hit, new, evicted)\n"
    "coll (coll gpuwire, 0 where it is not loaded): host collectives passed through, device "
    "reductions run on the GPU, device collectives staged through host memory";

/* Processes shown one per row; above this many, min and max rows instead. */
#define PML_GW_STATS_MAX_ROWS 32

static void stats_row(uint64_t row[ST_NCOLS])
{
    gw_engine_stats_t s;
    gw_engine_stats(mca_pml_gpuwire.engine, &s);
    uint64_t device_sends = s.ipc_sends + s.staged_sends + s.ucx_device_sends;
    row[ST_SENT] = s.sends;
    row[ST_SENT_BYTES] = s.bytes_sent;
    row[ST_RECVD] = s.recvs;
    row[ST_RECVD_BYTES] = s.bytes_received;
    row[ST_HOST] = s.sends > device_sends ? s.sends - device_sends : 0;
    row[ST_IPC] = s.ipc_sends;
    row[ST_STAGED] = s.staged_sends;
    row[ST_SHARED] = s.shared_chunks;
    row[ST_PUSH] = s.shared_push_sends;
    row[ST_GDR] = s.ucx_device_sends;
    row[ST_RNDV_OUT] = s.rndv_sends;
    row[ST_CHUNKED] = s.chunked_sends;
    row[ST_PACER_WAIT] = s.pacer_deferrals;
    row[ST_DEV_IN] = s.device_recvs;
    row[ST_KIND_HIT] = s.classifier_host_hits + s.classifier_device_hits;
    row[ST_KIND_MISS] = s.classifier_misses;
    row[ST_MAP_HIT] = s.ipc_map_hits;
    row[ST_MAP_NEW] = s.ipc_map_misses;
    row[ST_MAP_EVICT] = s.ipc_map_evictions;
    /* coll gpuwire counts in the core both components share (0 where it is
     * not selected): one table covers both components. */
    const gw_core_counters_t *core = gw_core_counters();
    row[ST_COLL_PASS] = __atomic_load_n(&core->coll_passthrough_calls, __ATOMIC_RELAXED);
    row[ST_COLL_GPU] = __atomic_load_n(&core->coll_device_calls, __ATOMIC_RELAXED);
    row[ST_COLL_STAGED] = __atomic_load_n(&core->coll_staged_calls, __ATOMIC_RELAXED);
}

/* Collective: every process's row to process 0, which prints the table. */
static int stats_exchange(void)
{
    uint64_t row[ST_NCOLS];
    char title[96];
    stats_row(row);
    snprintf(title, sizeof(title), "pml:gpuwire: statistics of %u processes at finalize",
             mca_pml_gpuwire.world);
    const gw_stats_exchange_t x = {
        .key = "gpuwire.pml.stats",
        .title = title,
        .columns = stats_columns,
        .ncols = ST_NCOLS,
        .legend = stats_legend,
        .max_rows = PML_GW_STATS_MAX_ROWS,
        .progress = mca_pml_gpuwire_progress,
    };
    return gw_stats_exchange(&x, row);
}

/* This process's counters on one line (MPI_Pcontrol-style dumps). */
static void print_own_stats(void)
{
    uint64_t row[ST_NCOLS];
    char line[1024];
    size_t used = 0;
    stats_row(row);
    used += (size_t)snprintf(line, sizeof(line), "pml:gpuwire: process %u:", mca_pml_gpuwire.my_peer);
    for (int c = 0; c < ST_NCOLS && used < sizeof(line); ++c) {
        used += (size_t)snprintf(line + used, sizeof(line) - used, " %s %llu%s", stats_columns[c],
                                 (unsigned long long)row[c], c + 1 < ST_NCOLS ? "," : "");
    }
    opal_output(0, "%s", line);
}

void mca_pml_gpuwire_close_engine(void)
{
    if (mca_pml_gpuwire.progress_registered) {
        opal_progress_unregister(mca_pml_gpuwire_progress);
        mca_pml_gpuwire.progress_registered = false;
    }
    if (mca_pml_gpuwire.engine) {
        mca_pml_gpuwire.closing = true;
        gw_engine_destroy(mca_pml_gpuwire.engine);
        mca_pml_gpuwire.engine = NULL;
        OBJ_DESTRUCT(&mca_pml_gpuwire.requests);
        mca_pml_gpuwire.closing = false;
        gw_dev_temp_drain(); /* device temporaries of non-contiguous messages */
    }
    if (mca_pml_gpuwire.peer_addr) {
        for (uint32_t i = 0; i < mca_pml_gpuwire.npeers; ++i) free(mca_pml_gpuwire.peer_addr[i]);
        free(mca_pml_gpuwire.peer_addr);
        mca_pml_gpuwire.peer_addr = NULL;
    }
    free(mca_pml_gpuwire.peer_addr_len);
    mca_pml_gpuwire.peer_addr_len = NULL;
    free(mca_pml_gpuwire.other);
    mca_pml_gpuwire.other = NULL;
    mca_pml_gpuwire.nother = 0;
}

/* ------------------------------------------------------------------------
 * Processes and communicators: endpoints are made lazily, contexts too.
 * ------------------------------------------------------------------------ */

/* A peer UCX cannot reach (UCX_TLS=cma or =self on a node of several
 * processes) must stop MPI_Init, not the first message to it. Endpoints stay
 * lazy: the check makes the endpoints of representative peers only -- this
 * process itself, the next process on this node and the next one on another
 * node (by rank, cyclically) -- since every process of the job runs with the
 * same UCX transports, and what UCX's lane selection depends on is the
 * transports and whether the peer shares the node. A job whose nodes differ
 * in devices can still meet an unreachable peer later; that send fails with
 * an error (never completes as if delivered). Why not every peer: see
 * ucx_glue/engine/reach.cpp. */
static int pml_add_procs(struct ompi_proc_t **procs, size_t nprocs)
{
    const uint32_t me = mca_pml_gpuwire.my_peer, n = mca_pml_gpuwire.world;
    uint32_t pick[3] = {me, UINT32_MAX, UINT32_MAX}; /* self, next local, next remote */
    uint32_t dist[3] = {0, UINT32_MAX, UINT32_MAX};
    for (size_t i = 0; i < nprocs; ++i) {
        const ompi_proc_t *proc = procs[i];
        if (proc->super.proc_name.jobid != OMPI_PROC_MY_NAME->jobid) {
            uint32_t peer; /* without a number, its messages fail with one line */
            (void)pml_gw_other_job_add(proc, &peer);
            continue;
        }
        const uint32_t v = proc->super.proc_name.vpid;
        if (v == me || v >= n) continue;
        const uint32_t d = (v + n - me) % n;
        const int k = OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags) ? 1 : 2;
        if (d < dist[k]) {
            dist[k] = d;
            pick[k] = v;
        }
    }
    for (int k = 0; k < 3; ++k) {
        if (UINT32_MAX == pick[k]) continue;
        char why[512];
        if (GW_OK != gw_engine_check_reachable(mca_pml_gpuwire.engine, pick[k], why, sizeof(why))) {
            gw_help(GW_HELP_DECLINED, "pml", why);
            return OMPI_ERR_UNREACH;
        }
    }
    return OMPI_SUCCESS;
}

static int pml_del_procs(struct ompi_proc_t **procs, size_t nprocs)
{
    /* Every endpoint is closed (flushed) before any process tears its worker
     * down: close, then wait for everybody. */
    gw_engine_disconnect(mca_pml_gpuwire.engine);
    static bool stats_done = false;
    if (mca_pml_gpuwire_params.stats && !stats_done) {
        /* This fence also carries every process's counters to process 0. */
        stats_done = true;
        return stats_exchange();
    }
    return gw_compat_fence(mca_pml_gpuwire_progress);
}

/* Open MPI enables the PML it selected, once, in MPI_Init. */
static int pml_enable(bool enable)
{
    if (enable) {
        mca_pml_gpuwire_layer_install(mca_pml_gpuwire_params.mpi_layer,
                                      gw_engine_has_device(mca_pml_gpuwire.engine, NULL),
                                      mca_pml_gpuwire.output);
    }
    return OMPI_SUCCESS;
}
/* How many ranks send to this process on comm: the remote group, which for an
 * intra-communicator is the communicator itself (Open MPI reports its remote
 * size as 0). */
static int senders_of(ompi_communicator_t *comm)
{
    return OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
}

static int pml_add_comm(struct ompi_communicator_t *comm)
{
    /* The envelope travels in a UCX tag: context id and rank have fixed widths. */
    if (OPAL_UNLIKELY(gw_comm_cid(comm) > GW_MAX_CONTEXT || ompi_comm_size(comm) > GW_MAX_RANK + 1 ||
                      senders_of(comm) > GW_MAX_RANK + 1)) {
        opal_output(0, "pml:gpuwire: communicator id %u or size %d is beyond gpuwire's limits "
                       "(ids up to %u, %u processes); use fewer communicators or another pml",
                    (unsigned)gw_comm_cid(comm), ompi_comm_size(comm), (unsigned)GW_MAX_CONTEXT,
                    (unsigned)GW_MAX_RANK + 1);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    /* Before the barrier after which the new communicator carries messages
     * (ompi_comm_activate): the engine drops what a freed communicator with
     * the same id left behind. */
    if (mca_pml_gpuwire.engine) gw_context_open(mca_pml_gpuwire.engine, gw_comm_cid(comm));
    return OMPI_SUCCESS;
}

static int pml_del_comm(struct ompi_communicator_t *comm)
{
    /* A request holds its communicator, so the last reference can go while
     * the engine is torn down (a request it completes or drops): nothing is
     * left to release then. */
    if (!mca_pml_gpuwire.engine || mca_pml_gpuwire.closing) return OMPI_SUCCESS;
    gw_context_release(mca_pml_gpuwire.engine, gw_comm_cid(comm));
    return OMPI_SUCCESS;
}

static int pml_dump(ompi_communicator_t *comm, int verbose)
{
    print_own_stats();
    return OMPI_SUCCESS;
}

static const mca_pml_base_module_t pml_functions = {
    .pml_add_procs = pml_add_procs,
    .pml_del_procs = pml_del_procs,
    .pml_enable = pml_enable,
    .pml_progress = NULL,
    .pml_add_comm = pml_add_comm,
    .pml_del_comm = pml_del_comm,
    .pml_irecv_init = mca_pml_gpuwire_irecv_init,
    .pml_irecv = mca_pml_gpuwire_irecv,
    .pml_recv = mca_pml_gpuwire_recv,
    .pml_isend_init = mca_pml_gpuwire_isend_init,
    .pml_isend = mca_pml_gpuwire_isend,
    .pml_send = mca_pml_gpuwire_send,
    .pml_iprobe = mca_pml_gpuwire_iprobe,
    .pml_probe = mca_pml_gpuwire_probe,
    .pml_start = mca_pml_gpuwire_start,
    .pml_improbe = mca_pml_gpuwire_improbe,
    .pml_mprobe = mca_pml_gpuwire_mprobe,
    .pml_imrecv = mca_pml_gpuwire_imrecv,
    .pml_mrecv = mca_pml_gpuwire_mrecv,
    .pml_dump = pml_dump,
    .pml_max_contextid = GW_MAX_CONTEXT,
    .pml_max_tag = GW_MAX_TAG,
    .pml_flags = 0,
};

mca_pml_base_module_t *mca_pml_gpuwire_module(void)
{
    mca_pml_gpuwire.super = pml_functions;
    return &mca_pml_gpuwire.super;
}
