/*
 * The collective engine's data movement (ucx_glue/coll/move): Bcast,
 * Allgather(v) and Alltoall(v) over point-to-point on the application's
 * buffers, described in plain terms -- per-peer blocks of bytes at offsets
 * from a buffer's pointer -- over a transport of gpuwire/coll_engine.h.
 *
 * The engine never touches the bytes: every block is one message (the
 * transport moves device memory itself), and a rank's own block of
 * Allgather(v)/Alltoall(v) is either one copy on the GPU's stream
 * (gpuwire/gpu_device.h, with a ticket), or a message to itself, as the
 * caller says (it knows whether both sides are contiguous).
 *
 * Posting order, which peers rely on to match (messages between two ranks
 * with one tag meet in posting order):
 *   bcast      non-root: one receive from the root; root: one send to each
 *              rank root+1, root+2, ... (mod size). Chained (segment_elems
 *              set, blocking only): root -> root+1 -> ... -> root-1, each
 *              segment received from the previous rank and sent on to the
 *              next as soon as it is there.
 *   allgather  receives from me+1, me+2, ... then the send block to
 *   alltoall   me+1, me+2, ... (block j to rank j), then the own block.
 * Blocks of no bytes are not posted, on either side (a pair's type
 * signatures match, so both see zero).
 *
 * Blocks of bytes: each block's bytes are a whole number of the caller's
 * elements, and the transport is free to carry them in the caller's
 * datatype (coll gpuwire does: a block is then "bytes / type size" elements
 * at the pointer, so non-contiguous datatypes go on the wire as Open MPI's
 * own algorithms send them). The own-block copy adds copy_*_shift to both
 * pointers (a datatype's true lower bound).
 *
 * Ownership: the description and its block arrays are read during the call
 * that takes them (run, start) only. A job holds the transport's address:
 * the transport outlives the job. The buffers belong to the application
 * until the call returns (run) or the job is done or freed.
 *
 * Every function returns GW_CE_OK, or a code of coll_engine.h (a
 * transport's own code passes through unchanged) with one line in why.
 */
#ifndef GPUWIRE_COLL_MOVE_H
#define GPUWIRE_COLL_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/coll_engine.h"
#include "gpuwire/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes at offset from a buffer's pointer. */
typedef struct {
    ptrdiff_t offset;
    size_t bytes;
} gw_ce_block_t;

enum { GW_CE_MOVE_BCAST, GW_CE_MOVE_ALLGATHER, GW_CE_MOVE_ALLTOALL };

/* What becomes of a rank's own block (allgather, alltoall). */
enum {
    GW_CE_LOCAL_NONE,    /* already in place (allgather with MPI_IN_PLACE) */
    GW_CE_LOCAL_COPY,    /* one copy on gpu's stream (rblocks[rank].bytes) */
    GW_CE_LOCAL_MESSAGE, /* a receive from itself, then a send to itself */
};

typedef struct {
    int kind; /* GW_CE_MOVE_* */
    int tag;  /* of every message of the call */
    /* bcast: buf, elems elements of elem_bytes each, elem_stride bytes
     * apart; chained in segments of segment_elems elements when it is
     * neither 0 nor elems or more (blocking only; at least 3 ranks). */
    int root;
    void *buf;
    size_t elems, elem_bytes;
    ptrdiff_t elem_stride;
    size_t segment_elems;
    /* allgather: sblocks[0] of sbuf to every peer, rblocks[j] of rbuf from
     * rank j; alltoall: sblocks[j] to rank j. size blocks each (one send
     * block for allgather). */
    const void *sbuf;
    void *rbuf;
    const gw_ce_block_t *sblocks, *rblocks;
    int local;                 /* GW_CE_LOCAL_* */
    int gpu;                   /* the own-block copy's stream */
    ptrdiff_t copy_src_shift;  /* added to the own block's pointers for the copy */
    ptrdiff_t copy_dst_shift;
} gw_ce_move_t;

/* Runs the call and waits for it (messages and copy). After a failed post
 * it still waits for what was posted: no request is left behind. */
GW_CORE_API int gw_ce_move_run(const gw_ce_transport_t *t, const gw_ce_move_t *m, char *why,
                               size_t why_len);

/* The non-blocking form: start posts every message and the own-block copy
 * now (the order above) and returns the job in *out; poll moves it on
 * without blocking and sets *done (only on success) once every message has
 * completed and the copy has landed (query: also ask the GPU whether its
 * stream failed; now and then, not on every poll); free releases it, done
 * or not (what is still posted is cancelled through the transport). A
 * chained bcast is refused (GW_CE_ERR_ARG): its sends wait for receives. */
typedef struct gw_ce_move_job gw_ce_move_job_t;
GW_CORE_API int gw_ce_move_start(const gw_ce_transport_t *t, const gw_ce_move_t *m,
                                 gw_ce_move_job_t **out, char *why, size_t why_len);
GW_CORE_API int gw_ce_move_poll(gw_ce_move_job_t *j, bool query, bool *done, char *why,
                                size_t why_len);
GW_CORE_API void gw_ce_move_free(gw_ce_move_job_t *j);

#ifdef __cplusplus
}
#endif

#endif
