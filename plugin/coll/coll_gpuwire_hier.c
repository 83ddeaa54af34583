/*
 * Allreduce, Reduce, Bcast and Allgather on device buffers across several
 * nodes, composed from what runs best at each level. Allreduce:
 *
 *   1. Reduce inside each node to the node's first rank (node communicator:
 *      the ring on the GPU over CUDA IPC/NVLink, or staged);
 *   2. Allreduce among those first ranks, one per node, in place (leaders'
 *      communicator: the ring over point-to-point, GPUDirect RDMA or the
 *      staged pipeline between nodes);
 *   3. Bcast inside each node from its first rank (NVLink kernels or point-
 *      to-point on the application's buffer).
 *
 * Reduce: inside each node to its first rank (into a device temporary
 * unless it is the root), among the first ranks to the root's node's, and
 * from there to the root by one message when the root is not its node's
 * first rank. Bcast: inside the root's node from the root, then among the
 * nodes' first ranks from the root's node's, then inside every other node
 * from its first rank.
 *
 * Allgather and Allgatherv: the blocks laid out node by node (each node's
 * in its ranks' order): inside each node into the node's run, among the
 * nodes' first ranks in place (an Allgatherv of one run per node), then a
 * Bcast of all of them inside each node from its first rank. Where that
 * layout is the receive buffer's own (every node's ranks consecutive in the
 * communicator and the blocks packed in rank order: an Allgather under
 * Open MPI's default mapping by slot), the steps run on the receive buffer;
 * otherwise on a device temporary, and one copy per block puts each in its
 * place.
 *
 * Each step is a collective on a sub-communicator, so the component's own
 * dispatch picks its algorithm there; nothing here touches the bytes. Only
 * the leaders' traffic crosses the network, once per node instead of once
 * per rank. The predefined ops it takes are commutative and associative, so
 * the order of combination does not matter (floating-point sums may round
 * differently from a flat ring, as between any two algorithms).
 *
 * The sub-communicators are made at the communicator's first call that
 * could use them (a collective split over it, host buffers only) and freed
 * with the module. Every rank decides alike: the communicator spans several
 * nodes (Open MPI's locality, the same on every rank), and after the split,
 * whether some node has two ranks or more (a host allreduce); if none has,
 * the flat algorithms are as good and every call declines from then on.
 */
#include <limits.h>
#include <stdlib.h>

#include "coll_gpuwire.h"
#include "coll_gpuwire_device.h"
#include "coll_gpuwire_dispatch.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/info/info.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"

enum { HIER_UNKNOWN = 0, HIER_READY = 1, HIER_UNUSABLE = -1 };

static bool spans_nodes(struct ompi_communicator_t *comm)
{
    const int n = ompi_comm_size(comm);
    for (int r = 0; r < n; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        if (NULL == p || !OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags)) return true;
    }
    return false;
}

static bool hier_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT])
{
    (void)r;
    const int mode = mca_coll_gpuwire.hierarchical;
    if (GW_HIER_NEVER == mode || a->nonblocking || OMPI_COMM_IS_INTER(a->comm) ||
        ompi_comm_size(a->comm) < 3) {
        return false;
    }
    /* The reductions and Bcast take count and dtype; Allgather rcount and
     * rdtype (its last step, a Bcast of all the blocks, counts them in one
     * int). */
    if (GW_COLL_ALLGATHER == a->id) {
        if (a->rcount <= 0 || a->rcount > INT_MAX / ompi_comm_size(a->comm)) return false;
    } else if (GW_COLL_ALLGATHERV == a->id) {
        /* Something to move (the counts are the same on every rank). */
        bool any = false;
        for (int q = 0; q < ompi_comm_size(a->comm) && !any; ++q) any = a->rcounts[q] > 0;
        if (!any) return false;
    } else if (a->count <= 0) {
        return false;
    }
    /* auto: where the level's algorithms run on the GPU (not staged through
     * host memory, where one staged call beats three). */
    if (GW_COLL_ALLREDUCE == a->id) {
        int op, type;
        if (!gw_coll_table_ids(a->op, a->dtype, &op, &type)) return false;
        if (GW_HIER_AUTO == mode && !gw_coll_p2p_accepts(a, GW_COLL_BIT(GW_COLL_ALLREDUCE), 0,
                                                         mca_coll_gpuwire.reduce_algorithm)) {
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
            !gw_coll_p2p_accepts(a, GW_COLL_BIT(GW_COLL_REDUCE), 0,
                                 mca_coll_gpuwire.reduce_algorithm)) {
            return false;
        }
    } else if (GW_COLL_BCAST == a->id || GW_COLL_ALLGATHER == a->id ||
               GW_COLL_ALLGATHERV == a->id) {
        if (GW_HIER_AUTO == mode &&
            !gw_coll_p2p_accepts(a,
                                 GW_COLL_BIT(GW_COLL_BCAST) | GW_COLL_BIT(GW_COLL_ALLGATHER) |
                                     GW_COLL_BIT(GW_COLL_ALLGATHERV),
                                 0, mca_coll_gpuwire.move_algorithm)) {
            return false;
        }
    } else {
        return false;
    }
    return spans_nodes(a->comm);
}

void gw_coll_hier_release(mca_coll_gpuwire_module_t *m)
{
    if (NULL != m->hier_node) ompi_comm_free(&m->hier_node);
    if (NULL != m->hier_leaders) ompi_comm_free(&m->hier_leaders);
    m->hier_node = m->hier_leaders = NULL;
    free(m->hier_where);
    m->hier_where = NULL;
    m->hier_state = HIER_UNKNOWN;
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
        opal_output(0, "coll:gpuwire: hierarchical %s of %d elements failed (%d); set "
                    "coll_gpuwire_hierarchical 0", gw_coll_name(a->id),
                    GW_COLL_ALLGATHER == a->id ? a->rcount : a->count, rc);
    }
    return rc;
}

static int hier_reduce(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       const gw_coll_region_t r[GW_REGION_COUNT])
{
    struct ompi_communicator_t *node = m->hier_node, *leaders = m->hier_leaders;
    const int me = ompi_comm_rank(a->comm);
    const bool leader = 0 == ompi_comm_rank(node);
    const bool root = me == a->root;
    const int root_leader = m->hier_where[2 * a->root];
    const int root_local = m->hier_where[2 * a->root + 1];
    const bool root_node = m->hier_where[2 * me] == root_leader;
    size_t size = 0;
    ompi_datatype_type_size(a->dtype, &size);
    const size_t bytes = size * (size_t)a->count;

    /* The node's partial result lands at its first rank: in the receive
     * buffer if that rank is the root, else in a device temporary. */
    gw_coll_dev_buf_t tmp = {NULL, 0, NULL};
    void *acc = a->rbuf;
    if (leader && !root) {
        char why[256];
        const int gpu = gw_coll_regions_gpu(r);
        if (0 != gw_coll_scratch_get(bytes, gpu < 0 ? 0 : gpu, &tmp, why, sizeof(why))) {
            opal_output(0, "coll:gpuwire: hierarchical reduce: %s", why);
            return hier_done(a, OMPI_ERR_OUT_OF_RESOURCE);
        }
        acc = tmp.ptr;
    }
    /* 1. Inside the node, to its first rank. */
    const void *send = a->sbuf;
    if (root && MPI_IN_PLACE == send && !leader) send = a->rbuf;
    int rc = node->c_coll->coll_reduce(send, acc, a->count, a->dtype, a->op, 0, node,
                                       node->c_coll->coll_reduce_module);
    /* 2. Among the first ranks, to the root's node's. */
    if (OMPI_SUCCESS == rc && leader && NULL != leaders && ompi_comm_size(leaders) > 1) {
        const bool to_me = ompi_comm_rank(leaders) == root_leader;
        rc = leaders->c_coll->coll_reduce(to_me ? MPI_IN_PLACE : acc, acc, a->count, a->dtype,
                                          a->op, root_leader, leaders,
                                          leaders->c_coll->coll_reduce_module);
    }
    /* 3. To the root, when it is not its node's first rank. */
    if (OMPI_SUCCESS == rc && root_node && 0 != root_local) {
        const int tag = gw_coll_tag(GW_COLL_REDUCE);
        if (leader) {
            rc = MCA_PML_CALL(send(acc, a->count, a->dtype, root_local, tag,
                                   MCA_PML_BASE_SEND_STANDARD, node));
        } else if (root) {
            rc = MCA_PML_CALL(recv(a->rbuf, a->count, a->dtype, 0, tag, node,
                                   MPI_STATUS_IGNORE));
        }
    }
    gw_coll_scratch_put(&tmp);
    return hier_done(a, rc);
}

/* Allgather and Allgatherv (the file's header): rank q's block is counts[q]
 * elements at displs[q] in the receive buffer. The temporary takes only a
 * receive datatype whose elements lie back to back (the same answer on
 * every rank: the type signatures match); otherwise every rank declines
 * alike. */
static int hier_allgather(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                          const gw_coll_region_t r[GW_REGION_COUNT], const int *counts,
                          const int *displs)
{
    struct ompi_communicator_t *node = m->hier_node, *leaders = m->hier_leaders;
    const int size = ompi_comm_size(a->comm), me = ompi_comm_rank(a->comm);
    ptrdiff_t lb, extent;
    size_t tsize = 0;
    ompi_datatype_get_extent(a->rdtype, &lb, &extent);
    ompi_datatype_type_size(a->rdtype, &tsize);
    int nnodes = 0;
    for (int q = 0; q < size; ++q) {
        if (m->hier_where[2 * q] + 1 > nnodes) nnodes = m->hier_where[2 * q] + 1;
    }
    /* Per rank, where its block starts in the node-by-node layout (elements);
     * per node, where its run starts and how long it is. */
    int64_t *at = malloc(sizeof(int64_t) * (size_t)size);
    int64_t *run_at = calloc(3 * ((size_t)nnodes + 1), sizeof(int64_t));
    int *ncounts = malloc(2 * sizeof(int) * (size_t)size);
    if (NULL == at || NULL == run_at || NULL == ncounts) {
        free(at);
        free(run_at);
        free(ncounts);
        return hier_done(a, OMPI_ERR_OUT_OF_RESOURCE);
    }
    int64_t *run_len = run_at + nnodes + 1, *fill = run_len + nnodes + 1;
    for (int q = 0; q < size; ++q) run_len[m->hier_where[2 * q]] += counts[q];
    int64_t total = 0;
    for (int l = 0; l < nnodes; ++l) {
        run_at[l] = total;
        total += run_len[l];
    }
    /* Inside a run, the node's ranks in their order there (node rank i is
     * the node's i-th rank in the communicator). */
    bool in_place_layout = true;
    for (int q = 0; q < size; ++q) {
        const int l = m->hier_where[2 * q];
        at[q] = run_at[l] + fill[l];
        fill[l] += counts[q];
        in_place_layout = in_place_layout && at[q] == displs[q];
    }
    int rc = OMPI_SUCCESS;
    /* Every count the steps pass is an int; the temporary's blocks are dense. */
    if (total > INT_MAX || (!in_place_layout && (0 != lb || (size_t)extent != tsize))) {
        rc = GW_COLL_DECLINED;
    }
    char why[256];
    gw_coll_dev_buf_t tmp = {NULL, 0, NULL};
    const int gpu = gw_coll_regions_gpu(r) < 0 ? 0 : gw_coll_regions_gpu(r);
    char *t = a->rbuf;
    if (OMPI_SUCCESS == rc && !in_place_layout) {
        if (0 != gw_coll_scratch_get((size_t)total * tsize + 1, gpu, &tmp, why, sizeof(why))) {
            opal_output(0, "coll:gpuwire: hierarchical %s: %s", gw_coll_name(a->id), why);
            rc = OMPI_ERR_OUT_OF_RESOURCE;
        }
        t = tmp.ptr;
    }
    const int mine = m->hier_where[2 * me];
    char *run = t + run_at[mine] * (int64_t)extent;
    /* 1. Inside the node, into the node's run (in place where the run is
     * the receive buffer: this rank's block is already there). */
    if (OMPI_SUCCESS == rc) {
        const void *send = a->sbuf;
        int scount = a->scount;
        struct ompi_datatype_t *sdtype = a->sdtype;
        if (MPI_IN_PLACE == send && !in_place_layout) {
            send = (const char *)a->rbuf + (ptrdiff_t)displs[me] * extent;
            scount = counts[me];
            sdtype = a->rdtype;
        }
        if (GW_COLL_ALLGATHER == a->id) {
            /* The NVLink kernels take Allgather, not Allgatherv. */
            rc = node->c_coll->coll_allgather(send, scount, sdtype, run, a->rcount, a->rdtype,
                                              node, node->c_coll->coll_allgather_module);
        } else {
            const int nn = ompi_comm_size(node);
            int *nc = ncounts, *nd = ncounts + size;
            for (int q = 0, i = 0; q < size && i < nn; ++q) {
                if (m->hier_where[2 * q] != mine) continue;
                nc[i] = counts[q];
                nd[i] = (int)(at[q] - run_at[mine]);
                ++i;
            }
            rc = node->c_coll->coll_allgatherv(send, scount, sdtype, run, nc, nd, a->rdtype, node,
                                               node->c_coll->coll_allgatherv_module);
        }
    }
    /* 2. Among the first ranks, each node's run in place. */
    if (OMPI_SUCCESS == rc && 0 == ompi_comm_rank(node) && NULL != leaders &&
        ompi_comm_size(leaders) > 1) {
        int *lc = ncounts, *ld = ncounts + size;
        for (int l = 0; l < nnodes; ++l) {
            lc[l] = (int)run_len[l];
            ld[l] = (int)run_at[l];
        }
        rc = leaders->c_coll->coll_allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t, lc, ld,
                                              a->rdtype, leaders,
                                              leaders->c_coll->coll_allgatherv_module);
    }
    /* 3. Every block to every rank of the node. */
    if (OMPI_SUCCESS == rc) {
        rc = node->c_coll->coll_bcast(t, (int)total, a->rdtype, 0, node,
                                      node->c_coll->coll_bcast_module);
    }
    /* 4. From the temporary, each block to its rank's place. */
    if (OMPI_SUCCESS == rc && !in_place_layout) {
        uint64_t ticket = 0;
        bool queued = false;
        int err = 0;
        for (int q = 0; q < size && 0 == err; ++q) {
            if (0 == counts[q]) continue;
            err = gw_coll_copy_start((char *)a->rbuf + (ptrdiff_t)displs[q] * extent,
                                     t + at[q] * (int64_t)tsize, (size_t)counts[q] * tsize, gpu,
                                     &ticket, why, sizeof(why));
            queued = true;
        }
        if (0 == err && queued) err = gw_coll_copy_wait(gpu, ticket, why, sizeof(why));
        if (0 != err) {
            opal_output(0, "coll:gpuwire: hierarchical %s: %s", gw_coll_name(a->id), why);
            rc = OMPI_ERROR;
        }
    }
    gw_coll_scratch_put(&tmp);
    free(at);
    free(run_at);
    free(ncounts);
    return GW_COLL_DECLINED == rc ? rc : hier_done(a, rc);
}

/* Allgather: every rank's block rcount elements, in rank order. */
static int hier_allgather_blocks(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                                 const gw_coll_region_t r[GW_REGION_COUNT])
{
    const int size = ompi_comm_size(a->comm);
    int *cd = malloc(2 * sizeof(int) * (size_t)size);
    if (NULL == cd) return hier_done(a, OMPI_ERR_OUT_OF_RESOURCE);
    for (int q = 0; q < size; ++q) {
        cd[q] = a->rcount;
        cd[size + q] = q * a->rcount; /* at most size * rcount (accepts) */
    }
    const int rc = hier_allgather(m, a, r, cd, cd + size);
    free(cd);
    return rc;
}

static int hier_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                    gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    (void)request; /* blocking forms only (accepts) */
    if (HIER_UNKNOWN == m->hier_state) {
        if (NULL == m->previous_allreduce || NULL == m->previous_allgather) {
            m->hier_state = HIER_UNUSABLE; /* the same on every rank */
        } else {
            int rc = hier_setup(m, a->comm);
            if (OMPI_SUCCESS != rc) return rc;
        }
    }
    if (HIER_READY != m->hier_state) return GW_COLL_DECLINED;
    if (GW_COLL_ALLGATHER == a->id) return hier_allgather_blocks(m, a, r);
    if (GW_COLL_ALLGATHERV == a->id) return hier_allgather(m, a, r, a->rcounts, a->rdispls);

    struct ompi_communicator_t *node = m->hier_node, *leaders = m->hier_leaders;
    const bool leader = 0 == ompi_comm_rank(node);
    const bool across = NULL != leaders && ompi_comm_size(leaders) > 1;
    void *rbuf = a->rbuf;
    if (GW_COLL_BCAST == a->id) {
        /* Bcast's buffer is rbuf. */
        const int root_leader = m->hier_where[2 * a->root];
        const int root_local = m->hier_where[2 * a->root + 1];
        const bool root_node = m->hier_where[2 * ompi_comm_rank(a->comm)] == root_leader;
        int rc = OMPI_SUCCESS;
        if (root_node) {
            rc = node->c_coll->coll_bcast(rbuf, a->count, a->dtype, root_local, node,
                                          node->c_coll->coll_bcast_module);
        }
        if (OMPI_SUCCESS == rc && leader && across) {
            rc = leaders->c_coll->coll_bcast(rbuf, a->count, a->dtype, root_leader, leaders,
                                             leaders->c_coll->coll_bcast_module);
        }
        if (OMPI_SUCCESS == rc && !root_node) {
            rc = node->c_coll->coll_bcast(rbuf, a->count, a->dtype, 0, node,
                                          node->c_coll->coll_bcast_module);
        }
        return hier_done(a, rc);
    }
    if (GW_COLL_REDUCE == a->id) return hier_reduce(m, a, r);
    /* 1. Into the leader's receive buffer. */
    const void *send = a->sbuf;
    if (!leader && MPI_IN_PLACE == send) send = rbuf;
    int rc = node->c_coll->coll_reduce(send, rbuf, a->count, a->dtype, a->op, 0, node,
                                       node->c_coll->coll_reduce_module);
    /* 2. Among the leaders, in place. */
    if (OMPI_SUCCESS == rc && leader && across) {
        rc = leaders->c_coll->coll_allreduce(MPI_IN_PLACE, rbuf, a->count, a->dtype, a->op,
                                             leaders, leaders->c_coll->coll_allreduce_module);
    }
    /* 3. Back to every rank of the node. */
    if (OMPI_SUCCESS == rc) {
        rc = node->c_coll->coll_bcast(rbuf, a->count, a->dtype, 0, node,
                                      node->c_coll->coll_bcast_module);
    }
    return hier_done(a, rc);
}

const gw_coll_algorithm_t gw_coll_hier = {"hierarchical", hier_accepts, hier_run};
