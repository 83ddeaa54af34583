/*
 * What the hierarchical algorithm (coll_gpuwire_hier.c) and its steps
 * (coll_gpuwire_hier_steps.c) share: one call's state and the step
 * interface. Separate so that the steps of each collective stand apart from
 * the decisions and the blocking and non-blocking drivers around them.
 */
#ifndef COLL_GPUWIRE_HIER_H
#define COLL_GPUWIRE_HIER_H

#include <stdbool.h>
#include <stdint.h>

#include "coll_gpuwire_dispatch.h"

enum {
    HIER_COMM_STEPS = 3, /* steps 0..2 start collectives or messages */
    HIER_END = 2,        /* no step left (not an OMPI code, nor GW_COLL_DECLINED) */
};

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t a;
    int step; /* the next one to start */
    int gpu;  /* the GPU of the temporaries and copies */
    gw_coll_dev_buf_t tmp;
    void *acc; /* Reduce: where the node's partial result lands */
    /* Allgather(v): rank q's block is counts[q] elements at displs[q] of the
     * receive buffer, and at[q] of the node-by-node layout t (the receive
     * buffer itself where in_place_layout, else tmp); node l's run is
     * run_len[l] elements at run_at[l]. */
    int *cd; /* Allgather's counts and displacements */
    const int *counts, *displs;
    int64_t *at, *run_at, *run_len, total;
    int *ncounts; /* the counts and displacements a step passes (2 * size) */
    bool in_place_layout;
    char *t;
    ptrdiff_t extent;
    size_t tsize;
    /* The non-blocking form. */
    ompi_request_t *sub; /* the step in flight */
    uint64_t ticket;     /* step 3's last copy */
    bool copying;
    bool finished;
    uint64_t seq;        /* 1 + how many non-blocking calls the module had before */
    bool passed;         /* hier_nb_passed counts this call */
} gw_coll_hier_call_t;

/* Starts the call's next step: OMPI_SUCCESS (with *req set when req is not
 * NULL and the step is a collective or message on this rank), HIER_END when
 * none is left, or an error. */
int gw_coll_hier_step(gw_coll_hier_call_t *c, ompi_request_t **req);
/* Gives back what the call holds. */
void gw_coll_hier_call_fini(gw_coll_hier_call_t *c);
/* OMPI_SUCCESS, GW_COLL_DECLINED (every rank alike) or an error; c is
 * finished with gw_coll_hier_call_fini in every case. */
int gw_coll_hier_call_init(gw_coll_hier_call_t *c, mca_coll_gpuwire_module_t *m,
                           const gw_coll_args_t *a, const gw_coll_region_t r[GW_REGION_COUNT]);

#endif
