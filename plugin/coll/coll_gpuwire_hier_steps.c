/*
 * The hierarchical algorithm's calls as steps (coll_gpuwire_hier.c says
 * what they compose).
 *
 * Steps 0 to 2 are each at most one sub-collective (or, for Reduce, one
 * message) on this rank; step 3 is local (Allgather's copies out of its
 * temporary). The blocking form runs them one after the other; the
 * non-blocking form (a job of the non-blocking machinery) starts each once
 * the one before it has completed, from MPI's progress.
 *
 * Separate from coll_gpuwire_hier.c, which decides whether a call runs here
 * and drives the steps: this file holds what each collective's steps do.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire_hier.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/pml/pml.h"


/* A sub-collective on comm, blocking when req is NULL, else its
 * non-blocking form (the request in *req). */
#define HIER_SUB(comm, fn, req, ...)                                                          \
    (NULL == (req) ? (comm)->c_coll->coll_##fn(__VA_ARGS__, (comm),                            \
                                               (comm)->c_coll->coll_##fn##_module)             \
                   : (comm)->c_coll->coll_i##fn(__VA_ARGS__, (comm), (req),                    \
                                                (comm)->c_coll->coll_i##fn##_module))

static bool is_leader(const gw_coll_hier_call_t *c) { return 0 == ompi_comm_rank(c->m->hier_node); }

/* Whether this rank takes part in the leaders' step. */
static bool across(const gw_coll_hier_call_t *c)
{
    return is_leader(c) && NULL != c->m->hier_leaders && ompi_comm_size(c->m->hier_leaders) > 1;
}

static int allreduce_step(gw_coll_hier_call_t *c, int step, ompi_request_t **req)
{
    const gw_coll_args_t *a = &c->a;
    struct ompi_communicator_t *node = c->m->hier_node, *leaders = c->m->hier_leaders;
    switch (step) {
    case 0: { /* Into the leader's receive buffer. */
        const void *send = !is_leader(c) && MPI_IN_PLACE == a->sbuf ? a->rbuf : a->sbuf;
        return HIER_SUB(node, reduce, req, send, a->rbuf, a->count, a->dtype, a->op, 0);
    }
    case 1: /* Among the leaders, in place. */
        if (!across(c)) return OMPI_SUCCESS;
        return HIER_SUB(leaders, allreduce, req, MPI_IN_PLACE, a->rbuf, a->count, a->dtype, a->op);
    case 2: /* Back to every rank of the node. */
        return HIER_SUB(node, bcast, req, a->rbuf, a->count, a->dtype, 0);
    }
    return HIER_END;
}

static int bcast_step(gw_coll_hier_call_t *c, int step, ompi_request_t **req)
{
    const gw_coll_args_t *a = &c->a; /* Bcast's buffer is rbuf */
    struct ompi_communicator_t *node = c->m->hier_node, *leaders = c->m->hier_leaders;
    const int *where = c->m->hier_where;
    const int root_leader = where[2 * a->root], root_local = where[2 * a->root + 1];
    const bool root_node = where[2 * ompi_comm_rank(a->comm)] == root_leader;
    switch (step) {
    case 0: /* Inside the root's node. */
        if (!root_node) return OMPI_SUCCESS;
        return HIER_SUB(node, bcast, req, a->rbuf, a->count, a->dtype, root_local);
    case 1: /* Among the leaders, from the root's node's. */
        if (!across(c)) return OMPI_SUCCESS;
        return HIER_SUB(leaders, bcast, req, a->rbuf, a->count, a->dtype, root_leader);
    case 2: /* Inside every other node. */
        if (root_node) return OMPI_SUCCESS;
        return HIER_SUB(node, bcast, req, a->rbuf, a->count, a->dtype, 0);
    }
    return HIER_END;
}

/* The call's device temporary (c->tmp) of len bytes, or NULL once said why. */
static void *hier_temp(gw_coll_hier_call_t *c, size_t len)
{
    char why[256];
    if (0 != gw_coll_scratch_get(len, c->gpu, &c->tmp, why, sizeof(why))) {
        opal_output(0, "coll:gpuwire: hierarchical %s: %s", gw_coll_name(c->a.id), why);
        return NULL;
    }
    return c->tmp.ptr;
}

/* The node's partial result lands at its first rank: in the receive buffer
 * if that rank is the root, else in a device temporary. */
static int reduce_prepare(gw_coll_hier_call_t *c)
{
    const gw_coll_args_t *a = &c->a;
    c->acc = a->rbuf;
    if (!is_leader(c) || ompi_comm_rank(a->comm) == a->root) return OMPI_SUCCESS;
    size_t size = 0;
    ompi_datatype_type_size(a->dtype, &size);
    c->acc = hier_temp(c, size * (size_t)a->count);
    return NULL == c->acc ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_SUCCESS;
}

static int reduce_step(gw_coll_hier_call_t *c, int step, ompi_request_t **req)
{
    const gw_coll_args_t *a = &c->a;
    struct ompi_communicator_t *node = c->m->hier_node, *leaders = c->m->hier_leaders;
    const int *where = c->m->hier_where;
    const int me = ompi_comm_rank(a->comm);
    const bool root = me == a->root;
    const int root_leader = where[2 * a->root], root_local = where[2 * a->root + 1];
    switch (step) {
    case 0: { /* Inside the node, to its first rank. */
        const void *send = root && MPI_IN_PLACE == a->sbuf && !is_leader(c) ? a->rbuf : a->sbuf;
        return HIER_SUB(node, reduce, req, send, c->acc, a->count, a->dtype, a->op, 0);
    }
    case 1: { /* Among the first ranks, to the root's node's. */
        if (!across(c)) return OMPI_SUCCESS;
        const bool to_me = ompi_comm_rank(leaders) == root_leader;
        return HIER_SUB(leaders, reduce, req, to_me ? MPI_IN_PLACE : c->acc, c->acc, a->count,
                        a->dtype, a->op, root_leader);
    }
    case 2: { /* To the root, when it is not its node's first rank. */
        if (where[2 * me] != root_leader || 0 == root_local) return OMPI_SUCCESS;
        const int tag = gw_coll_tag(GW_COLL_REDUCE);
        if (is_leader(c)) {
            return NULL == req ? MCA_PML_CALL(send(c->acc, a->count, a->dtype, root_local, tag,
                                                   MCA_PML_BASE_SEND_STANDARD, node))
                               : MCA_PML_CALL(isend(c->acc, a->count, a->dtype, root_local, tag,
                                                    MCA_PML_BASE_SEND_STANDARD, node, req));
        }
        if (!root) return OMPI_SUCCESS;
        return NULL == req
                   ? MCA_PML_CALL(recv(a->rbuf, a->count, a->dtype, 0, tag, node, MPI_STATUS_IGNORE))
                   : MCA_PML_CALL(irecv(a->rbuf, a->count, a->dtype, 0, tag, node, req));
    }
    }
    return HIER_END;
}

/* Allgather and Allgatherv (the file's header): the node-by-node layout of
 * the blocks, and the temporary that holds it where the receive buffer does
 * not. The temporary takes only a receive datatype whose elements lie back
 * to back (the same answer on every rank: the type signatures match);
 * otherwise every rank declines alike (GW_COLL_DECLINED). */
static int allgather_prepare(gw_coll_hier_call_t *c, const int *counts, const int *displs)
{
    const gw_coll_args_t *a = &c->a;
    const int *where = c->m->hier_where;
    const int size = ompi_comm_size(a->comm);
    ptrdiff_t lb;
    ompi_datatype_get_extent(a->rdtype, &lb, &c->extent);
    ompi_datatype_type_size(a->rdtype, &c->tsize);
    c->counts = counts;
    c->displs = displs;
    int nnodes = 0;
    for (int q = 0; q < size; ++q) {
        if (where[2 * q] + 1 > nnodes) nnodes = where[2 * q] + 1;
    }
    c->at = malloc(sizeof(int64_t) * (size_t)size);
    c->run_at = calloc(3 * ((size_t)nnodes + 1), sizeof(int64_t));
    c->ncounts = malloc(2 * sizeof(int) * (size_t)size);
    if (NULL == c->at || NULL == c->run_at || NULL == c->ncounts) return OMPI_ERR_OUT_OF_RESOURCE;
    c->run_len = c->run_at + nnodes + 1;
    int64_t *fill = c->run_len + nnodes + 1;
    for (int q = 0; q < size; ++q) c->run_len[where[2 * q]] += counts[q];
    c->total = 0;
    for (int l = 0; l < nnodes; ++l) {
        c->run_at[l] = c->total;
        c->total += c->run_len[l];
    }
    /* Inside a run, the node's ranks in their order there (node rank i is
     * the node's i-th rank in the communicator). */
    c->in_place_layout = true;
    for (int q = 0; q < size; ++q) {
        const int l = where[2 * q];
        c->at[q] = c->run_at[l] + fill[l];
        fill[l] += counts[q];
        c->in_place_layout = c->in_place_layout && c->at[q] == displs[q];
    }
    /* Every count the steps pass is an int; the temporary's blocks are dense. */
    if (c->total > INT_MAX ||
        (!c->in_place_layout && (0 != lb || (size_t)c->extent != c->tsize))) {
        return GW_COLL_DECLINED;
    }
    c->t = c->in_place_layout ? a->rbuf : hier_temp(c, (size_t)c->total * c->tsize + 1);
    return NULL == c->t ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_SUCCESS;
}

static int allgather_step(gw_coll_hier_call_t *c, int step, ompi_request_t **req)
{
    const gw_coll_args_t *a = &c->a;
    struct ompi_communicator_t *node = c->m->hier_node, *leaders = c->m->hier_leaders;
    const int *where = c->m->hier_where;
    const int size = ompi_comm_size(a->comm), me = ompi_comm_rank(a->comm);
    const int mine = where[2 * me];
    int *nc = c->ncounts, *nd = c->ncounts + size;
    switch (step) {
    case 0: { /* Inside the node, into the node's run (in place where the
               * run is the receive buffer: this rank's block is there). */
        char *run = c->t + c->run_at[mine] * (int64_t)c->extent;
        const void *send = a->sbuf;
        int scount = a->scount;
        struct ompi_datatype_t *sdtype = a->sdtype;
        if (MPI_IN_PLACE == send && !c->in_place_layout) {
            send = (const char *)a->rbuf + (ptrdiff_t)c->displs[me] * c->extent;
            scount = c->counts[me];
            sdtype = a->rdtype;
        }
        if (GW_COLL_ALLGATHER == a->id) { /* the NVLink kernels take Allgather */
            return HIER_SUB(node, allgather, req, send, scount, sdtype, run, a->rcount,
                            a->rdtype);
        }
        const int nn = ompi_comm_size(node);
        for (int q = 0, i = 0; q < size && i < nn; ++q) {
            if (where[2 * q] != mine) continue;
            nc[i] = c->counts[q];
            nd[i] = (int)(c->at[q] - c->run_at[mine]);
            ++i;
        }
        return HIER_SUB(node, allgatherv, req, send, scount, sdtype, run, nc, nd, a->rdtype);
    }
    case 1: { /* Among the first ranks, each node's run in place. */
        if (!across(c)) return OMPI_SUCCESS;
        const int nl = ompi_comm_size(leaders);
        for (int l = 0; l < nl; ++l) {
            nc[l] = (int)c->run_len[l];
            nd[l] = (int)c->run_at[l];
        }
        return HIER_SUB(leaders, allgatherv, req, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->t, nc,
                        nd, a->rdtype);
    }
    case 2: /* Every block to every rank of the node. */
        return HIER_SUB(node, bcast, req, c->t, (int)c->total, a->rdtype, 0);
    case 3: { /* From the temporary, each block to its rank's place. */
        if (c->in_place_layout) return OMPI_SUCCESS;
        char why[256];
        bool queued = false;
        int err = 0;
        for (int q = 0; q < size && 0 == err; ++q) {
            if (0 == c->counts[q]) continue;
            err = gw_coll_copy_start((char *)a->rbuf + (ptrdiff_t)c->displs[q] * c->extent,
                                     c->t + c->at[q] * (int64_t)c->tsize,
                                     (size_t)c->counts[q] * c->tsize, c->gpu, &c->ticket, why,
                                     sizeof(why));
            queued = true;
        }
        if (0 == err && queued) {
            if (NULL == req) {
                err = gw_coll_copy_wait(c->gpu, c->ticket, why, sizeof(why));
            } else {
                c->copying = true; /* waited for by the job's poll */
            }
        }
        if (0 != err) {
            opal_output(0, "coll:gpuwire: hierarchical %s: %s", gw_coll_name(a->id), why);
            return OMPI_ERROR;
        }
        return OMPI_SUCCESS;
    }
    }
    return HIER_END;
}

/* Starts the call's next step: OMPI_SUCCESS (with *req set when req is not
 * NULL and the step is a collective or message on this rank), HIER_END when
 * none is left, or an error. */
int gw_coll_hier_step(gw_coll_hier_call_t *c, ompi_request_t **req)
{
    const int step = c->step++;
    switch (c->a.id) {
    case GW_COLL_ALLREDUCE: return allreduce_step(c, step, req);
    case GW_COLL_BCAST: return bcast_step(c, step, req);
    case GW_COLL_REDUCE: return reduce_step(c, step, req);
    default: return allgather_step(c, step, req);
    }
}

void gw_coll_hier_call_fini(gw_coll_hier_call_t *c)
{
    gw_coll_scratch_put(&c->tmp);
    free(c->cd);
    free(c->at);
    free(c->run_at);
    free(c->ncounts);
}

/* OMPI_SUCCESS, GW_COLL_DECLINED (every rank alike) or an error; c is
 * finished with gw_coll_hier_call_fini in every case. */
int gw_coll_hier_call_init(gw_coll_hier_call_t *c, mca_coll_gpuwire_module_t *m,
                           const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT])
{
    memset(c, 0, sizeof(*c));
    c->m = m;
    c->a = *a;
    c->gpu = gw_coll_regions_gpu(r) < 0 ? 0 : gw_coll_regions_gpu(r);
    switch (a->id) {
    case GW_COLL_REDUCE: return reduce_prepare(c);
    case GW_COLL_ALLGATHER: {
        /* Every rank's block rcount elements, in rank order. */
        const int size = ompi_comm_size(a->comm);
        c->cd = malloc(2 * sizeof(int) * (size_t)size);
        if (NULL == c->cd) return OMPI_ERR_OUT_OF_RESOURCE;
        for (int q = 0; q < size; ++q) {
            c->cd[q] = a->rcount;
            c->cd[size + q] = q * a->rcount; /* at most size * rcount (accepts) */
        }
        return allgather_prepare(c, c->cd, c->cd + size);
    }
    case GW_COLL_ALLGATHERV: return allgather_prepare(c, a->rcounts, a->rdispls);
    default: return OMPI_SUCCESS;
    }
}
