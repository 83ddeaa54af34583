/*
 * A call's regions: the collective engine's gw_ce_regions
 * (gpuwire/coll_regions.h) over this call's arguments, with Open MPI's
 * datatypes answered as layouts and MPI_IN_PLACE, MPI_ROOT and
 * MPI_PROC_NULL translated into the engine's terms.
 */
#include "coll_gpuwire_dispatch.h"
#include "ompi/datatype/ompi_datatype.h"

static void type_layout(const void *type, gw_ce_type_layout_t *out)
{
    struct ompi_datatype_t *dt = (struct ompi_datatype_t *)type;
    ompi_datatype_type_size(dt, &out->size);
    ompi_datatype_get_extent(dt, &out->lb, &out->extent);
    ompi_datatype_get_true_extent(dt, &out->true_lb, &out->true_extent);
    /* Open MPI's answer depends on the count only as 1 or more than 1. */
    out->contiguous = ompi_datatype_is_contiguous_memory_layout(dt, 1);
    out->contiguous_run = ompi_datatype_is_contiguous_memory_layout(dt, 2);
}

static int engine_root(int root)
{
    if (MPI_ROOT == root) return GW_CE_ROOT_SELF;
    if (MPI_PROC_NULL == root) return GW_CE_ROOT_NONE;
    return root;
}

void gw_coll_regions(const gw_coll_args_t *a, gw_coll_region_t r[GW_REGION_COUNT])
{
    const gw_ce_regions_call_t c = {
        .id = (gw_ce_coll_t)a->id,
        .sbuf = a->sbuf,
        .rbuf = a->rbuf,
        .send_in_place = MPI_IN_PLACE == a->sbuf,
        .recv_in_place = MPI_IN_PLACE == a->rbuf,
        .count = a->count,
        .type = a->dtype,
        .scount = a->scount,
        .rcount = a->rcount,
        .scounts = a->scounts,
        .sdispls = a->sdispls,
        .rcounts = a->rcounts,
        .rdispls = a->rdispls,
        .stype = a->sdtype,
        .rtype = a->rdtype,
        .stypes = (const void *const *)a->sdtypes,
        .rtypes = (const void *const *)a->rdtypes,
        .rank = ompi_comm_rank(a->comm),
        .size = ompi_comm_size(a->comm),
        .root = engine_root(a->root),
        .inter = OMPI_COMM_IS_INTER(a->comm),
        .layout = type_layout,
    };
    gw_ce_regions(&c, r);
}

/* One classification per significant buffer; host memory answers from the
 * classifier's cache without a driver call. */
int gw_coll_classify_regions(gw_coll_region_t r[GW_REGION_COUNT], gw_mem_kind_t *kind)
{
    char why[256];
    *kind = GW_MEM_HOST;
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (r[i].hi <= r[i].lo) continue;
        gw_coll_mem_t mem;
        const char *first = (const char *)r[i].user + r[i].lo;
        if (0 != gw_coll_device_classify(first, gw_region_bytes(&r[i]), &mem, why, sizeof(why))) {
            opal_output(0, "coll:gpuwire: cannot tell the memory kind of %p: %s", (void *)first,
                        why);
            return OMPI_ERROR;
        }
        r[i].on_gpu = mem.on_gpu;
        r[i].unordered = mem.unordered;
        r[i].gpu = mem.gpu;
        if (mem.on_gpu) *kind = GW_MEM_DEVICE;
    }
    return OMPI_SUCCESS;
}
