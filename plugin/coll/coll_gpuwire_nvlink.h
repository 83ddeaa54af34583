/*
 * What the NVLink kernels' blocking calls (coll_gpuwire_nvlink.c), the
 * team's set-up (coll_gpuwire_nvlink_team.c) and the non-blocking calls
 * (coll_gpuwire_nvlink_nb.c) share. Separate so that each file holds one
 * concern: running a call, setting a team up, ordering calls that MPI's
 * progress moves on.
 */
#ifndef COLL_GPUWIRE_NVLINK_H
#define COLL_GPUWIRE_NVLINK_H

#include <stddef.h>

#include "coll_gpuwire_dispatch.h"

#define GW_NVL_MAX_TEAM 8

/* Where the call's bytes are on this rank. */
typedef struct {
    const void *in;
    void *out;
    size_t bytes;
} gw_coll_nvl_place_t;

/* Where the call's bytes are on this rank (coll_gpuwire_nvlink.c). */
void gw_coll_nvl_place_of(const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT],
                          gw_coll_nvl_place_t *p);
/* Re-points what lies in a region with a temporary on the team's GPU. */
void gw_coll_nvl_relocate(gw_coll_nvl_place_t *p, const gw_coll_region_t r[GW_REGION_COUNT],
                          const gw_coll_temps_t *t);
/* The kernels' description of the call on this rank's place. */
gw_coll_team_call_t gw_coll_nvl_team_call_of(const gw_coll_args_t *a,
                                             const gw_coll_nvl_place_t *p);

/* The team's set-up (coll_gpuwire_nvlink_team.c): started without waiting,
 * moved on by the progress step, or driven to its end (blocking calls). */
int gw_coll_nvl_setup_start(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm,
                            int gpu);
void gw_coll_nvl_setup_progress(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm);
int gw_coll_nvl_team_setup(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm,
                           int gpu);

/* A non-blocking call's request (coll_gpuwire_nvlink_nb.c). */
int gw_coll_nvl_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                      gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request);

/* The delegated form on a team whose ranks share one GPU
 * (coll_gpuwire_nvlink_delegate.c): a blocking call, and a non-blocking
 * call's request. */
int gw_coll_nvl_dl_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       gw_coll_region_t r[GW_REGION_COUNT]);
int gw_coll_nvl_dl_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request);

#endif
