/*
 * Staging of a collective call's regions (ucx_glue/coll/stage): the bytes a
 * call may touch in each buffer argument, and two ways of moving them where
 * an algorithm can work on them.
 *
 * - Host staging (gw_ce_staging_t): device regions copied into host memory
 *   for an algorithm that runs on the CPU (under coll gpuwire: the previous
 *   module), and the regions it wrote copied back. The copies are queued on
 *   the region's GPU and polled by ticket; CUDA is asked only now and then
 *   (query) whether a stream failed, since a failed one never reaches its
 *   ticket.
 * - Device temporaries (gw_ce_temps_t): regions that are host memory or
 *   another GPU's memory get a temporary on the call's GPU, one scratch
 *   allocation for all; copies are waited for.
 *
 * The GPU is reached only through gpuwire/gpu_device.h. The CPU never
 * touches device memory. Errors: GW_CE_ERR with one line in why.
 */
#ifndef GPUWIRE_COLL_STAGE_H
#define GPUWIRE_COLL_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/coll_engine.h"
#include "gpuwire/gpu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GW_CE_STAGE_IN = 1u << 0,  /* the call reads the bytes: copied in before */
    GW_CE_STAGE_OUT = 1u << 1, /* the call writes the bytes: copied back after */
};

enum { GW_CE_REGION_SEND, GW_CE_REGION_RECV, GW_CE_REGION_COUNT };

/* The bytes one buffer argument lets the call touch, relative to the pointer
 * the application passed: [lo, hi). An empty region is not significant and
 * never staged. A non-empty region with neither flag is scratch: it gets
 * host memory, nothing is copied. */
typedef struct {
    const void *user;
    ptrdiff_t lo, hi;
    unsigned flags;
    bool dense;     /* the described elements cover [lo, hi) with no gap */
    bool on_gpu;    /* set by classification */
    int gpu;        /* device ordinal when on_gpu */
    bool unordered; /* classification: a cudaMemcpy into it may still be landing */
} gw_ce_region_t;

static inline size_t gw_ce_region_bytes(const gw_ce_region_t *r) { return (size_t)(r->hi - r->lo); }

typedef struct {
    gw_ce_region_t region;
    gw_coll_host_buf_t host; /* host.ptr NULL: not staged */
    uint64_t ticket;         /* the copy queued last for this region (in, then back) */
    bool queued;             /* that copy has not been seen finished yet */
} gw_ce_stage_t;

typedef struct {
    gw_ce_stage_t s[GW_CE_REGION_COUNT];
} gw_ce_staging_t;

/* Takes host memory for every device region and queues the copies in of
 * what the call reads (and of the gaps of receive regions that have them);
 * device_sync: waits for the application's default stream first. Returns
 * before the copies have finished; on failure, after what was queued has
 * finished (the caller releases the staging). */
GW_CORE_API int gw_ce_stage_in_start(const gw_ce_region_t r[GW_CE_REGION_COUNT],
                                     bool device_sync, gw_ce_staging_t *st, char *why,
                                     size_t why_len);
/* Queues the copies back of the regions the call wrote; those queued before
 * a failure stay queued (waited for before the staging goes back). */
GW_CORE_API int gw_ce_stage_out_start(gw_ce_staging_t *st, char *why, size_t why_len);
/* Polls the copies queued for st; *done when none is left. A copy found
 * failed is no longer waited for; the others are. what names the copies in
 * why ("copy to host"). */
GW_CORE_API int gw_ce_stage_poll(gw_ce_staging_t *st, bool query, bool *done, const char *what,
                                 char *why, size_t why_len);
/* Waits for every copy queued for st; the first error. */
GW_CORE_API int gw_ce_stage_wait(gw_ce_staging_t *st, const char *what, char *why,
                                 size_t why_len);
/* Whether a copy queued for st has not been seen finished yet. */
GW_CORE_API bool gw_ce_stage_queued(const gw_ce_staging_t *st);
/* The pointer a host algorithm gets for region i: the staging buffer moved
 * back by lo, so that the datatype's displacements land inside it; user
 * where region i is not staged. */
GW_CORE_API void *gw_ce_stage_host_view(const gw_ce_staging_t *st, int i, const void *user);
/* Bytes of host staging st holds. */
GW_CORE_API size_t gw_ce_stage_bytes(const gw_ce_staging_t *st);
/* Gives back the host memory of every staged region (no copy may run). */
GW_CORE_API void gw_ce_stage_release(gw_ce_staging_t *st);

typedef struct {
    gw_coll_dev_buf_t buf;
    char *tmp[GW_CE_REGION_COUNT]; /* region i's temporary (its byte lo); NULL: used where it is */
} gw_ce_temps_t;

/* Sets the temporaries up on gpu, copies in the regions the call reads
 * (GW_CE_STAGE_IN) and waits for the copies. 0, or -1 with why (nothing
 * held then). Each span is copied whole. */
GW_CORE_API int gw_ce_temps_in(const gw_ce_region_t r[GW_CE_REGION_COUNT], int gpu,
                               gw_ce_temps_t *t, char *why, size_t why_len);
/* Copies the temporaries of the regions the call wrote (GW_CE_STAGE_OUT)
 * back and waits. 0, or -1 with why. */
GW_CORE_API int gw_ce_temps_out(const gw_ce_region_t r[GW_CE_REGION_COUNT], int gpu,
                                gw_ce_temps_t *t, char *why, size_t why_len);
/* Gives the temporaries back (after temps_out, or instead of it). */
GW_CORE_API void gw_ce_temps_release(gw_ce_temps_t *t);

/* Waits for the legacy default stream of every GPU whose memory a
 * significant region is: with device_sync every such GPU, else only those
 * of regions a cudaMemcpy may still be writing (unordered). 0, or -1 with
 * why. */
GW_CORE_API int gw_ce_wait_user_regions(const gw_ce_region_t r[GW_CE_REGION_COUNT],
                                        bool device_sync, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
