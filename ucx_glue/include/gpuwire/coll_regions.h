/*
 * The regions of a collective call (ucx_glue/coll/regions): which bytes of
 * which buffer argument a collective may read or write on this rank, from
 * MPI's rules on significant arguments and MPI_IN_PLACE, written down once.
 * Everything that stages or classifies a call's buffers (host staging,
 * device temporaries, the algorithms' accepts) follows them.
 *
 * A region (gw_ce_region_t, gpuwire/coll_stage.h) spans the datatype's true
 * extent stepped by count * extent, and shifted by the displacements of the
 * v/w forms; the bytes in the gaps of a derived datatype are inside the
 * span. A region is dense when the described elements cover the span with
 * no gap; a receive region that is not dense has its gaps copied in before
 * the call as well (gw_ce_stage_in_start), so that writing the span back
 * after the call leaves the gap bytes as they were.
 *
 *   collective              send side                 receive side
 *   allreduce, scan         in; none in place         out; in+out in place
 *   exscan                  as allreduce              as allreduce but on rank 0 (undefined
 *                                                     result): scratch, in when in place
 *   reduce                  in; none at an in-place   root only: out, in+out in place
 *                           root
 *   reduce, inter           the other group: in       MPI_ROOT (GW_CE_ROOT_SELF): out
 *   bcast                   -                         in at the root, out elsewhere
 *   reduce_scatter(_block)  in, all blocks            my block: out; in place: all
 *                                                     blocks, in+out
 *   allgather(v),           in; none in place         out; in+out in place
 *   alltoall(v,w)
 *   gather(v)               in; none at an in-place   root only: out (in+out in place)
 *                           root
 *   scatter(v)              root only: in             out; none where rbuf is in place
 *   reduce_local            in                        in+out
 *   barrier                 -                         -
 *
 * The engine never sees a datatype: the caller names each one by a handle
 * and answers its layout (gw_ce_type_layout_t) through a function. A count
 * of 0 or a type of size 0 adds nothing; a region that stays empty
 * (hi == lo) is all zero and never classified or staged.
 *
 * Threads: any; nothing is kept between calls. No error: the call is
 * assumed valid as MPI defines it (counts, displacements, types).
 */
#ifndef GPUWIRE_COLL_REGIONS_H
#define GPUWIRE_COLL_REGIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuwire/coll_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The collectives a call may be; coll gpuwire's gw_coll_id_t takes these
 * values. */
typedef enum {
    GW_CE_COLL_ALLGATHER,
    GW_CE_COLL_ALLGATHERV,
    GW_CE_COLL_ALLREDUCE,
    GW_CE_COLL_ALLTOALL,
    GW_CE_COLL_ALLTOALLV,
    GW_CE_COLL_ALLTOALLW,
    GW_CE_COLL_BCAST,
    GW_CE_COLL_EXSCAN,
    GW_CE_COLL_GATHER,
    GW_CE_COLL_GATHERV,
    GW_CE_COLL_REDUCE,
    GW_CE_COLL_REDUCE_SCATTER,
    GW_CE_COLL_REDUCE_SCATTER_BLOCK,
    GW_CE_COLL_SCAN,
    GW_CE_COLL_SCATTER,
    GW_CE_COLL_SCATTERV,
    GW_CE_COLL_BARRIER,      /* no buffer */
    GW_CE_COLL_REDUCE_LOCAL, /* MPI_Reduce_local: rbuf = sbuf op rbuf, one process */
    GW_CE_COLL_COUNT
} gw_ce_coll_t;

/* The collective's name in lower case ("reduce_scatter_block"); "?" for a
 * value out of range. Static storage. */
GW_CORE_API const char *gw_ce_coll_name(gw_ce_coll_t id);

/* One datatype's layout, in bytes (MPI_Type_size, MPI_Type_get_extent,
 * MPI_Type_get_true_extent). */
typedef struct {
    size_t size;                    /* data bytes of one element; 0: moves nothing */
    ptrdiff_t lb, extent;           /* extent may be negative (a resized type) */
    ptrdiff_t true_lb, true_extent; /* the bytes one element touches */
    bool contiguous;                /* one element has no gap */
    bool contiguous_run;            /* two and more elements back to back have no gap */
} gw_ce_type_layout_t;

/* Answers the layout of the type a handle names; called only for types a
 * call uses with a count above 0 (v forms: once per call, whatever the
 * counts). */
typedef void (*gw_ce_type_layout_fn)(const void *type, gw_ce_type_layout_t *out);

/* The root of a reduce on an inter-communicator, on the receiving group:
 * the root itself (MPI_ROOT) and the rest of its group (MPI_PROC_NULL).
 * On the sending group root is the root's rank in the other group. */
enum { GW_CE_ROOT_SELF = -4, GW_CE_ROOT_NONE = -2 };

/* A call's arguments as the application passed them, in plain terms. Fields
 * the collective does not have stay zero. Bcast's buffer is rbuf; the
 * reductions and bcast use count and type. Counts and displacements of the
 * v/w forms have size entries; displacements are in extents of the type (v)
 * or in bytes (w). */
typedef struct {
    gw_ce_coll_t id;
    const void *sbuf, *rbuf; /* the regions' user pointers, as passed */
    bool send_in_place;      /* sbuf is MPI_IN_PLACE */
    bool recv_in_place;      /* rbuf is MPI_IN_PLACE (scatter(v) at the root) */
    int count;
    const void *type;
    int scount, rcount;
    const int *scounts, *sdispls, *rcounts, *rdispls;
    const void *stype, *rtype;
    const void *const *stypes, *const *rtypes; /* alltoallw */
    int rank, size; /* this rank and the communicator's (local group's) size */
    int root;       /* rooted collectives; GW_CE_ROOT_* on an inter-communicator */
    bool inter;     /* an inter-communicator */
    gw_ce_type_layout_fn layout;
} gw_ce_regions_call_t;

/* Fills r[GW_CE_REGION_SEND] and r[GW_CE_REGION_RECV] (user, lo, hi,
 * flags, dense; the classification's fields zero) from MPI's rules for
 * c->id. */
GW_CORE_API void gw_ce_regions(const gw_ce_regions_call_t *c, gw_ce_region_t r[GW_CE_REGION_COUNT]);

/* The GPU whose stream and scratch a call on this rank uses: the receive
 * region's when it is non-empty device memory, else the send region's; -1
 * when neither is. */
GW_CORE_API int gw_ce_regions_gpu(const gw_ce_region_t r[GW_CE_REGION_COUNT]);

#ifdef __cplusplus
}
#endif

#endif
