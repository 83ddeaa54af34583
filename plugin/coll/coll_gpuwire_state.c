/*
 * What every other file of coll gpuwire stands on: the component's globals,
 * the module object's life (its saved previous modules, NVLink team and
 * hierarchy released with it), and the small answers the algorithms share
 * (a collective's tag, whether a point-to-point algorithm takes a call).
 */
#include "coll_gpuwire_dispatch.h"

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/coll_tags.h"

/* The parameters' defaults come from the table (gw_params_register,
 * coll_gpuwire_component.c). */
mca_coll_gpuwire_globals_t mca_coll_gpuwire = {
    .output = -1,
};

#define GW_RELEASE_PREVIOUS(m, name)                                              \
    do {                                                                          \
        if (NULL != (m)->previous_##name##_module) {                              \
            OBJ_RELEASE((m)->previous_##name##_module);                           \
            (m)->previous_##name##_module = NULL;                                 \
        }                                                                         \
    } while (0)

void gw_coll_hier_release(mca_coll_gpuwire_module_t *m)
{
    if (NULL != m->hier_node) ompi_comm_free(&m->hier_node);
    if (NULL != m->hier_leaders) ompi_comm_free(&m->hier_leaders);
    m->hier_node = m->hier_leaders = NULL;
    free(m->hier_where);
    m->hier_where = NULL;
    m->hier_state = HIER_UNKNOWN;
}

static void module_construct(mca_coll_gpuwire_module_t *m)
{
    /* Everything after the base struct: functions and modules NULL. */
    memset((char *)m + sizeof(m->super), 0, sizeof(*m) - sizeof(m->super));
}

static void module_destruct(mca_coll_gpuwire_module_t *m)
{
    gw_ce_nvl_release(&m->nvl);
    gw_coll_hier_release(m);
#define GW_RELEASE(name) GW_RELEASE_PREVIOUS(m, name);
    GW_COLL_PREVIOUS(GW_RELEASE)
#undef GW_RELEASE
}

OBJ_CLASS_INSTANCE(mca_coll_gpuwire_module_t, mca_coll_base_module_t, module_construct,
                   module_destruct);

int gw_coll_tag(gw_coll_id_t id)
{
    static const int tags[GW_COLL_COUNT] = {
        [GW_COLL_ALLGATHER] = MCA_COLL_BASE_TAG_ALLGATHER,
        [GW_COLL_ALLGATHERV] = MCA_COLL_BASE_TAG_ALLGATHERV,
        [GW_COLL_ALLREDUCE] = MCA_COLL_BASE_TAG_ALLREDUCE,
        [GW_COLL_ALLTOALL] = MCA_COLL_BASE_TAG_ALLTOALL,
        [GW_COLL_ALLTOALLV] = MCA_COLL_BASE_TAG_ALLTOALLV,
        [GW_COLL_ALLTOALLW] = MCA_COLL_BASE_TAG_ALLTOALLW,
        [GW_COLL_BCAST] = MCA_COLL_BASE_TAG_BCAST,
        [GW_COLL_EXSCAN] = MCA_COLL_BASE_TAG_EXSCAN,
        [GW_COLL_GATHER] = MCA_COLL_BASE_TAG_GATHER,
        [GW_COLL_GATHERV] = MCA_COLL_BASE_TAG_GATHERV,
        [GW_COLL_REDUCE] = MCA_COLL_BASE_TAG_REDUCE,
        [GW_COLL_REDUCE_SCATTER] = MCA_COLL_BASE_TAG_REDUCE_SCATTER,
        [GW_COLL_REDUCE_SCATTER_BLOCK] = MCA_COLL_BASE_TAG_REDUCE_SCATTER_BLOCK,
        [GW_COLL_SCAN] = MCA_COLL_BASE_TAG_SCAN,
        [GW_COLL_SCATTER] = MCA_COLL_BASE_TAG_SCATTER,
        [GW_COLL_SCATTERV] = MCA_COLL_BASE_TAG_SCATTERV,
        [GW_COLL_BARRIER] = MCA_COLL_BASE_TAG_BARRIER,
    };
    return tags[id];
}

bool gw_coll_p2p_accepts(const gw_coll_args_t *a, unsigned ids, int algorithm)
{
    if (GW_REDUCE_ALGO_STAGED == algorithm || !(ids & GW_COLL_BIT(a->id))) return false;
    return GW_REDUCE_ALGO_AUTO != algorithm || mca_coll_gpuwire.device_p2p;
}

bool gw_coll_reduce_small(const gw_coll_args_t *a)
{
    const size_t min = mca_coll_gpuwire.reduce_device_min_bytes;
    const int n = ompi_comm_size(a->comm);
    /* The selection table measured it: the GPU, whatever the threshold. */
    if (GW_SEL_DEVICE == a->sel) return false;
    if (GW_REDUCE_ALGO_AUTO != mca_coll_gpuwire.reduce_algorithm || 0 == min || n < 2) {
        return false;
    }
    size_t elems = 0, size = 0;
    switch (a->id) {
    case GW_COLL_REDUCE_SCATTER:
        for (int q = 0; q < n; ++q) elems += (size_t)(a->rcounts[q] > 0 ? a->rcounts[q] : 0);
        break;
    case GW_COLL_REDUCE_SCATTER_BLOCK:
        elems = (size_t)(a->rcount > 0 ? a->rcount : 0) * (size_t)n;
        break;
    default:
        elems = (size_t)(a->count > 0 ? a->count : 0);
        break;
    }
    ompi_datatype_type_size(a->dtype, &size);
    /* In 128 bits: neither product can wrap. */
    return (unsigned __int128)elems * size < (unsigned __int128)min * (size_t)(n - 1);
}
