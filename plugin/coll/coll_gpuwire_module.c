/*
 * The module: selection on a communicator and the saved previous functions
 * (coll_gpuwire_previous.c calls them).
 */
#include "coll_gpuwire.h"

#include <string.h>

#include "coll_gpuwire_dispatch.h"
#include "coll_gpuwire_entry.h"

/* Saves what the communicator would run for <name> without this module, and
 * keeps that module alive while this one uses it. Open MPI enables modules in
 * increasing priority and installs each one's functions after its enable, so
 * comm->c_coll holds exactly the lower-priority choice here. With nothing
 * below, this module does not provide <name> either. */
#define GW_SAVE_PREVIOUS(m, comm, name)                                           \
    do {                                                                          \
        (m)->previous_##name = (comm)->c_coll->coll_##name;                      \
        (m)->previous_##name##_module = (comm)->c_coll->coll_##name##_module;    \
        if (NULL != (m)->previous_##name && NULL != (m)->previous_##name##_module) { \
            OBJ_RETAIN((m)->previous_##name##_module);                           \
        } else {                                                                  \
            (m)->previous_##name = NULL;                                          \
            (m)->previous_##name##_module = NULL;                                 \
            (m)->super.coll_##name = NULL;                                        \
        }                                                                         \
    } while (0)

/* Whether every, some or no process of comm has the GPU layer open
 * (m->peers): MPI_COMM_WORLD asks, once, in MPI_Init, where every process
 * enables it (one host allreduce); a communicator of its processes takes
 * the answer from there, every member alike, without a message. Where only
 * some processes of the job have, a communicator of them starts staged
 * (safe whoever they are) and asks at its first blocking collective; one
 * with processes of another job (MPI_Comm_spawn, MPI_Comm_connect) asks
 * there too, and its non-blocking calls before that go by the memory each
 * rank passes. Not a message at the enable of any other communicator: Open
 * MPI may enable one where no collective can run. */
static int peers_at_enable(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm)
{
    if (OMPI_COMM_IS_INTER(comm) || ompi_comm_size(comm) < 2) {
        m->peers = GW_PEERS_UNASKED;
        return OMPI_SUCCESS;
    }
    if (comm == &ompi_mpi_comm_world.comm) {
        const int rc = gw_coll_learn_peers(m, comm);
        mca_coll_gpuwire.world_peers = m->peers;
        return rc;
    }
    /* Open MPI marks an intra-communicator with processes of more than one
     * job (of which this process's is one) dynamic before enabling it. */
    const int world = mca_coll_gpuwire.world_peers;
    m->peers = OMPI_COMM_IS_DYNAMIC(comm) ? GW_PEERS_UNKNOWN
               : GW_PEERS_SOME == world   ? GW_PEERS_SOME_UNTIL_ASKED
                                          : world;
    return OMPI_SUCCESS;
}

static int module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_gpuwire_module_t *m = (mca_coll_gpuwire_module_t *)module;
#define GW_SAVE(name) GW_SAVE_PREVIOUS(m, comm, name);
    GW_COLL_PREVIOUS(GW_SAVE)
#undef GW_SAVE
    gw_coll_nvlink_init(m, comm);
    const int rc = peers_at_enable(m, comm);
    if (OMPI_SUCCESS != rc) return rc;
    COLL_GPUWIRE_VERBOSE(10, "enabled on %s (cid %u, %d ranks): allreduce over %p",
                         comm->c_name, (unsigned)gw_comm_cid(comm), ompi_comm_size(comm),
                         (void *)m->previous_allreduce_module);
    return OMPI_SUCCESS;
}

/* An inter-communicator's module: the entry points of intra-communicators,
 * the non-blocking reductions and their persistent forms only
 * (gw_coll_dispatch sends an inter-communicator's calls to
 * coll_gpuwire_inter.c). */
static void inter_install(mca_coll_base_module_t *m)
{
    mca_coll_base_module_t all;
    memset(&all, 0, sizeof(all));
    gw_coll_entry_install(&all);
    m->coll_iallreduce = all.coll_iallreduce;
    m->coll_ireduce = all.coll_ireduce;
    m->coll_ireduce_scatter = all.coll_ireduce_scatter;
    m->coll_ireduce_scatter_block = all.coll_ireduce_scatter_block;
    m->coll_allreduce_init = all.coll_allreduce_init;
    m->coll_reduce_init = all.coll_reduce_init;
    m->coll_reduce_scatter_init = all.coll_reduce_scatter_init;
    m->coll_reduce_scatter_block_init = all.coll_reduce_scatter_block_init;
}

mca_coll_base_module_t *mca_coll_gpuwire_comm_query(struct ompi_communicator_t *comm,
                                                    int *priority)
{
    if (mca_coll_gpuwire.priority < 0) return NULL;
    gw_coll_op_wrap_install();

    mca_coll_gpuwire_module_t *m = OBJ_NEW(mca_coll_gpuwire_module_t);
    if (NULL == m) return NULL;
    m->super.coll_module_enable = module_enable;
    /* On inter-communicators coll/inter composes the blocking forms of
     * intra-communicator calls; only libnbc's reductions need this module
     * (coll_gpuwire_inter.c). */
    if (OMPI_COMM_IS_INTER(comm)) {
        inter_install(&m->super);
    } else {
        gw_coll_entry_install(&m->super);
    }
    *priority = mca_coll_gpuwire.priority;
    return &m->super;
}
