/*
 * The selection table in coll gpuwire: which algorithm a blocking collective
 * on device buffers runs, from the table measured for the communicator's
 * topology (the core's gpuwire/coll_select.h; docs/coll.md, "Selection
 * table").
 *
 *   the shipped table         ucx_glue/coll/select/select_table.txt, compiled in
 *   coll_gpuwire_select_file  a table measured by the user (ci/gpu_coll_select.sh),
 *                             read instead; a malformed one: one line naming
 *                             file:line, and the shipped table stays
 *   coll_gpuwire_select_table read-only: the active table (ompi_info)
 *
 * Precedence: an algorithm parameter the user set (nvlink, nvlink_direct,
 * nvlink_oneshot_bytes, reduce_algorithm, reduce_device_min_bytes,
 * move_algorithm, bcast_chain_*) takes the collectives it governs out of the
 * table's hands; then the table's first matching row; then, where no row
 * matches (an unmeasured topology or size), the built-in rules.
 *
 * The topology key comes from what every rank knows alike: the ranks, the
 * nodes they are on (host names), and whether the NVLink team is usable (its
 * set-up's outcome, agreed). The GPUs a rank sees are assumed the same on
 * every rank of a node (a homogeneous launch).
 */
#include "coll_gpuwire.h"

#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire_dispatch.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/proc/proc.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/proc.h"

static gw_sel_table_t table;
static unsigned user_mask; /* collectives whose algorithm the user set */
static char *select_file;  /* coll_gpuwire_select_file */
static char *table_line;   /* coll_gpuwire_select_table's value */

const gw_sel_table_t *gw_coll_select_table(void) { return &table; }

/* Whether the user set parameter name (any source but the default). */
static bool user_set(const mca_base_component_t *c, const char *name)
{
    const int idx = mca_base_var_find("ompi", c->mca_type_name, c->mca_component_name, name);
    mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
    if (idx < 0 || OPAL_SUCCESS != mca_base_var_get_value(idx, NULL, &source, NULL)) return false;
    return MCA_BASE_VAR_SOURCE_DEFAULT != source;
}

void gw_coll_select_register(const mca_base_component_t *c)
{
    static const char *const governing[] = {
        "nvlink",           "nvlink_oneshot_bytes",    "nvlink_direct",     "reduce_algorithm",
        "reduce_device_min_bytes", "move_algorithm", "bcast_chain_ranks", "bcast_chain_bytes",
    };
    user_mask = 0;
    for (size_t i = 0; i < sizeof(governing) / sizeof(governing[0]); ++i) {
        if (user_set(c, governing[i])) user_mask |= gw_sel_user_mask(governing[i]);
    }

    select_file = NULL;
    (void)mca_base_component_var_register(
        c, "select_file",
        "A selection table to use instead of the shipped one (written by "
        "ci/gpu_coll_select.sh; format in docs/coll.md); empty: the shipped table",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &select_file);

    char err[512];
    gw_sel_free(&table);
    if (0 != gw_sel_load_shipped(&table, err, sizeof(err))) {
        /* The build checks the shipped table (gpuwire_unit_select): never here. */
        opal_output(0, "coll:gpuwire: selection table %s; the built-in rules apply", err);
    }
    if (NULL != select_file && '\0' != select_file[0] &&
        0 != gw_sel_load_file(select_file, &table, err, sizeof(err))) {
        opal_output(0, "coll:gpuwire: coll_gpuwire_select_file %s (the shipped table applies)",
                    err);
    }

    free(table_line);
    table_line = gw_sel_format_line(&table);
    static char *shown; /* Open MPI's copy of the value lives here */
    shown = table_line;
    char help[512];
    snprintf(help, sizeof(help),
             "Read-only: the active selection table (%s, %zu rows; fields: collective ranks "
             "nodes ppn gpn rpg nvlink min max algorithm); gpuwire-info shows the rows that "
             "apply here",
             table.source, table.n);
    (void)mca_base_component_var_register(
        c, "select_table", help, MCA_BASE_VAR_TYPE_STRING, NULL, 0,
        MCA_BASE_VAR_FLAG_DEFAULT_ONLY, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_CONSTANT, &shown);
}

void gw_coll_select_close(void)
{
    gw_sel_free(&table);
    free(table_line);
    table_line = NULL;
}

static int cmp_names(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* nodes and ppn from the host names every rank sees alike. */
static void compute_key(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm)
{
    gw_sel_key_t *k = &m->sel_key;
    const int n = ompi_comm_size(comm);
    k->ranks = n;
    k->nodes = 1;
    k->ppn = n;
    const char **names = malloc((size_t)n * sizeof(*names));
    bool all_local = true;
    for (int r = 0; r < n; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        all_local = all_local && NULL != p && OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags);
        if (NULL != names) {
            /* Open MPI 4.1 and 5.0 fetch every host name at MPI_Init (below
             * ompi_hostname_cutoff ranks, unlimited by default). */
            const char *h = NULL == p ? NULL : opal_get_proc_hostname(&p->super);
            if (NULL == h || 0 == strcmp(h, "unknown")) {
                free(names);
                names = NULL;
            } else {
                names[r] = h;
            }
        }
    }
    if (!all_local && NULL != names) {
        qsort(names, (size_t)n, sizeof(*names), cmp_names);
        int nodes = 0, run = 0, most = 0;
        for (int r = 0; r < n; ++r) {
            if (0 == r || 0 != strcmp(names[r - 1], names[r])) {
                ++nodes;
                run = 0;
            }
            if (++run > most) most = run;
        }
        k->nodes = nodes;
        k->ppn = most;
    } else if (!all_local) {
        k->nodes = GW_SEL_ANY; /* names unknown: only '*' rows match */
        k->ppn = GW_SEL_ANY;
    }
    free(names);
    const int gpus = mca_coll_gpuwire.gpus > 0 ? (int)mca_coll_gpuwire.gpus : 1;
    k->gpn = gpus;
    k->rpg = GW_SEL_ANY == k->ppn ? GW_SEL_ANY : (k->ppn + gpus - 1) / gpus;
    m->sel_key_ready = true;
}

/* The call's bytes as the table counts them (OSU's message size). */
static uint64_t call_bytes(const gw_coll_args_t *a, gw_sel_coll_t *c)
{
    size_t size = 0;
    uint64_t elems = 0;
    const int n = ompi_comm_size(a->comm);
    switch (a->id) {
    case GW_COLL_ALLREDUCE: *c = GW_SEL_ALLREDUCE; break;
    case GW_COLL_REDUCE: *c = GW_SEL_REDUCE; break;
    case GW_COLL_BCAST: *c = GW_SEL_BCAST; break;
    case GW_COLL_ALLGATHER: *c = GW_SEL_ALLGATHER; break;
    case GW_COLL_ALLTOALL: *c = GW_SEL_ALLTOALL; break;
    case GW_COLL_REDUCE_SCATTER:
    case GW_COLL_REDUCE_SCATTER_BLOCK: *c = GW_SEL_REDUCE_SCATTER; break;
    default: *c = GW_SEL_COLLS; return 0;
    }
    switch (a->id) {
    case GW_COLL_ALLGATHER:
    case GW_COLL_ALLTOALL:
        ompi_datatype_type_size(a->rdtype, &size);
        elems = (uint64_t)(a->rcount > 0 ? a->rcount : 0);
        break;
    case GW_COLL_REDUCE_SCATTER:
        ompi_datatype_type_size(a->dtype, &size);
        for (int q = 0; q < n; ++q) elems += (uint64_t)(a->rcounts[q] > 0 ? a->rcounts[q] : 0);
        break;
    case GW_COLL_REDUCE_SCATTER_BLOCK:
        ompi_datatype_type_size(a->dtype, &size);
        elems = (uint64_t)(a->rcount > 0 ? a->rcount : 0) * (uint64_t)n;
        break;
    default:
        ompi_datatype_type_size(a->dtype, &size);
        elems = (uint64_t)(a->count > 0 ? a->count : 0);
        break;
    }
    return elems * size;
}

int gw_coll_select(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a)
{
    /* Blocking calls only: every rank looks up the same row at a place they
     * all pass (the team's outcome is agreed there); the non-blocking forms
     * keep the built-in rules. */
    if (a->nonblocking || 0 == table.n) return GW_SEL_AUTO;
    gw_sel_coll_t c;
    const uint64_t bytes = call_bytes(a, &c);
    if (GW_SEL_COLLS == c || (user_mask & (1u << c))) return GW_SEL_AUTO;
    if (!m->sel_key_ready) compute_key(m, a->comm);
    gw_sel_key_t k = m->sel_key;
    k.nvlink = mca_coll_gpuwire.nvlink && 1 == k.nodes && k.ranks >= 2 &&
               k.ranks <= GW_CE_NVL_MAX_TEAM && GW_CE_NVL_UNUSABLE != m->nvl.state;
    int row;
    const gw_sel_algo_t algo = gw_sel_lookup(&table, c, &k, bytes, &row);
    COLL_GPUWIRE_VERBOSE(20, "%s of %llu bytes, topology ranks %d nodes %d ppn %d gpn %d rpg %d "
                             "nvlink %d: %s (%s table, %s %d)",
                         gw_sel_coll_name(c), (unsigned long long)bytes, k.ranks, k.nodes, k.ppn,
                         k.gpn, k.rpg, k.nvlink, gw_sel_algo_name(algo), table.source,
                         row < 0 ? "no row: the built-in rules" : "row", row + 1);
    return algo;
}
