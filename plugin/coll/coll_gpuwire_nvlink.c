/*
 * The NVLink kernels' glue: Allreduce, Bcast and Allgather on device
 * buffers run by the collective engine's NVLink team family
 * (gpuwire/coll_nvlink.h, ucx_glue/coll/nvlink: the team's set-up, which
 * form a call takes, the non-blocking calls' order, the delegated form).
 * Here: the calls in the engine's terms, and the team's transport over
 * this communicator -- its set-up's and arrivals' messages through the pml
 * (coll_gpuwire_transport.c), the direct form's host allgather and
 * agreement through the previous module, the non-blocking calls' requests
 * (gw_coll_nb_job), the log lines.
 *
 * What accepts() looks at is the same on every rank: the collective, the
 * op and type, the byte count, and the datatype's layout. Bcast and
 * Allgather need each rank's datatype to describe contiguous bytes; MPI lets
 * ranks pass different datatypes of one signature, so a call's ranks agree
 * on it first (gw_coll_nvlink_layout_ok, in the dispatch's agreement; a
 * non-blocking call's without blocking), as they do on every rank passing
 * device memory.
 */
#include <stdio.h>
#include <string.h>

#include "coll_gpuwire.h"
#include "coll_gpuwire_dispatch.h"
#include "coll_gpuwire_transport.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/proc/proc.h"

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

/* The call in the engine's terms; false for a collective the family does
 * not have. */
static bool describe(const gw_coll_args_t *a, gw_ce_nvl_call_t *c)
{
    memset(c, 0, sizeof(*c));
    c->nonblocking = a->nonblocking;
    c->in_place = MPI_IN_PLACE == a->sbuf;
    c->root = a->root;
    c->sel_nvlink = GW_SEL_NVLINK == a->sel;
    switch (a->id) {
    case GW_COLL_ALLREDUCE:
        c->coll = GW_CE_NVL_ALLREDUCE;
        c->bytes = type_bytes(a->dtype, a->count);
        c->count_ok = a->count > 0;
        c->ids_ok = gw_coll_table_ids(a->op, a->dtype, &c->op, &c->type);
        return true;
    case GW_COLL_BCAST:
        c->coll = GW_CE_NVL_BCAST;
        c->bytes = type_bytes(a->dtype, a->count);
        c->count_ok = a->count > 0;
        c->layout_ok = c->count_ok && contiguous(a->dtype, a->count);
        return true;
    case GW_COLL_ALLGATHER:
        c->coll = GW_CE_NVL_ALLGATHER;
        c->bytes = type_bytes(a->rdtype, a->rcount);
        c->count_ok = a->rcount > 0;
        c->layout_ok = (c->in_place || contiguous(a->sdtype, a->scount)) && c->count_ok &&
                       contiguous(a->rdtype, ompi_comm_size(a->comm) * a->rcount);
        return true;
    default:
        return false;
    }
}

bool gw_coll_nvlink_layout_ok(const gw_coll_args_t *a)
{
    if (GW_COLL_BCAST != a->id && GW_COLL_ALLGATHER != a->id) return true;
    gw_ce_nvl_call_t c;
    describe(a, &c);
    return c.layout_ok || !c.count_ok;
}

static bool nvlink_accepts(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                           gw_coll_note_t *note)
{
    (void)r;
    if (!mca_coll_gpuwire.nvlink || OMPI_COMM_IS_INTER(a->comm)) return false;
    return describe(a, &note->nvl) && gw_ce_nvl_accepts(&note->nvl, ompi_comm_size(a->comm));
}

/* A non-blocking call's request (gw_ce_nvl_transport_t.nb_job's arg). */
typedef struct {
    mca_coll_gpuwire_module_t *m;
    const gw_coll_args_t *a;
    gw_coll_region_t *r;
    ompi_request_t **request;
} nvl_req_t;

static int nvlink_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], gw_coll_note_t *note,
                      ompi_request_t **request)
{
    /* The call as accepts() described it, right before. */
    gw_ce_nvl_call_t *c = &note->nvl;
    c->gpu = gw_coll_regions_gpu(r);
    if (NULL == request) return gw_coll_ce_to_ompi(gw_ce_nvl_run(&m->nvl, c, r));
    nvl_req_t q = {m, a, r, request};
    return gw_coll_ce_to_ompi(gw_ce_nvl_start(&m->nvl, c, r, &q));
}

/* ------------------------------------------------------------------------
 * The team's transport over the module's communicator (ctx: the module).
 * ------------------------------------------------------------------------ */

/* Every rank on this node (Open MPI's locality), the host collectives the
 * direct form uses, each rank's vpid, and the board's name: known to every
 * rank of this job alike. */
static int nvl_peers(void *ctx, gw_ce_nvl_peers_t *out)
{
    mca_coll_gpuwire_module_t *m = ctx;
    struct ompi_communicator_t *comm = m->nvl_comm;
    const int n = ompi_comm_size(comm);
    bool local = n <= GW_CE_NVL_MAX_TEAM;
    for (int r = 0; r < n && local; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        local = NULL != p && OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags);
        if (local) out->ids[r] = (uint32_t)p->super.proc_name.vpid;
    }
    out->local = local && NULL != m->previous_allgather && NULL != m->previous_allreduce;
    snprintf(out->board, sizeof(out->board), "/gwnvl-%x-%x-%x",
             (unsigned)OMPI_PROC_MY_NAME->jobid, (unsigned)out->ids[0],
             (unsigned)gw_comm_cid(comm));
    return OMPI_SUCCESS;
}

static int nvl_allgather(void *ctx, const void *mine, void *all, size_t bytes)
{
    mca_coll_gpuwire_module_t *m = ctx;
    return m->previous_allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                                 m->nvl_comm, m->previous_allgather_module);
}

static int nvl_all_min(void *ctx, int mine, int *min)
{
    mca_coll_gpuwire_module_t *m = ctx;
    return m->previous_allreduce(&mine, min, 1, MPI_INT, MPI_MIN, m->nvl_comm,
                                 m->previous_allreduce_module);
}

static int nvl_nb_job(void *ctx, void *arg, const gw_ce_job_ops_t *ops, void *job, bool ordered)
{
    (void)ctx;
    nvl_req_t *q = arg;
    return gw_coll_nb_job(q->m, q->a, q->r, ops, job, ordered, q->request);
}

static const char *nvl_name(void *ctx)
{
    return ((mca_coll_gpuwire_module_t *)ctx)->nvl_comm->c_name;
}

static void nvl_log(void *ctx, int level, const char *line)
{
    (void)ctx;
    if (0 == level) {
        opal_output(0, "coll:gpuwire: %s", line);
    } else {
        COLL_GPUWIRE_VERBOSE(level, "%s", line);
    }
}

void gw_coll_nvlink_init(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm)
{
    m->nvl_comm = comm;
    gw_ce_nvl_transport_t tp = {
        .setup_tag = GW_TAG_NVL_SETUP,
        .arrive_tag = GW_TAG_NVL_ARRIVE,
        .ctx = m,
        .peers = nvl_peers,
        .allgather = nvl_allgather,
        .all_min = nvl_all_min,
        .nb_job = nvl_nb_job,
        .name = nvl_name,
        .log = nvl_log,
    };
    gw_coll_transport_init(&tp.p2p, comm);
    const gw_ce_nvl_params_t params = {
        .oneshot_bytes = mca_coll_gpuwire.nvlink_oneshot_bytes,
        .direct = mca_coll_gpuwire.nvlink_direct,
        .timeout_s = mca_coll_gpuwire.nvlink_timeout,
        .shared_gpu = mca_coll_gpuwire.nvlink_shared_gpu,
        .delegate = mca_coll_gpuwire.nvlink_delegate,
        .device_sync = mca_coll_gpuwire.device_sync,
        .calls = &mca_coll_gpuwire.nvlink_calls,
        .nb_calls = &mca_coll_gpuwire.nvlink_nb_calls,
    };
    gw_ce_nvl_init(&m->nvl, &tp, &params);
}

bool gw_coll_nvlink_settled(struct ompi_communicator_t *comm)
{
    /* The module that runs comm's non-blocking Bcast (one NVLink takes):
     * one of this component's, or none of this concern. */
    const opal_object_t *mod = (const opal_object_t *)comm->c_coll->coll_ibcast_module;
    if (NULL == mod || mod->obj_class != OBJ_CLASS(mca_coll_gpuwire_module_t)) return true;
    return gw_ce_nvl_settled(&((mca_coll_gpuwire_module_t *)mod)->nvl);
}

const gw_coll_algorithm_t gw_coll_nvlink = {"nvlink", nvlink_accepts, nvlink_run};
