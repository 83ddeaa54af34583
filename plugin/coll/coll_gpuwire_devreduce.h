/*
 * What the device reduction's blocking forms (coll_gpuwire_devreduce.c) and
 * non-blocking forms (coll_gpuwire_devreduce_nb.c) share: one call's context,
 * the ring's description and the steps every form is made of. Separate so
 * that each of the two files holds one way of driving the same ring.
 */
#ifndef COLL_GPUWIRE_DEVREDUCE_H
#define COLL_GPUWIRE_DEVREDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll_gpuwire_dispatch.h"

typedef struct {
    const gw_coll_args_t *a;
    struct ompi_communicator_t *comm;
    int op, type;
    size_t es;        /* bytes per element */
    size_t seg_elems; /* elements per message */
    int gpu, me, n, tag;
    ompi_request_t **reqs; /* room for a step's requests */
    size_t nreqs, cap;
    char why[256];
} gw_coll_ring_ctx_t;

/* A ring reduce-scatter over n chunks (element offsets off[], counts cnt[]).
 * At step k this rank sends chunk (me - k + shift) and receives chunk
 * (me - k - 1 + shift) from its left neighbour, combining it with its own
 * input (src + off) into:
 *   acc + off[chunk]                     when acc is set (allreduce, reduce)
 *   slot[k & 1], or last at the end      otherwise (reduce_scatter)
 * What a step wrote is what the next step sends. At the end this rank holds
 * chunk (me + shift) mod n, completely reduced. */
typedef struct {
    const size_t *off, *cnt;
    int shift;
    const char *src;
    char *acc;
    char *slot[2], *last;
    char *rbuf; /* receive scratch: the largest chunk */
} gw_coll_ring_t;

/* Prints one line naming the call, what failed and c->why; OMPI_ERROR. */
int gw_coll_ring_fail(gw_coll_ring_ctx_t *c, const char *what);
/* Posts one message per segment of count elements at p; the requests go to
 * c->reqs from c->nreqs on. */
int gw_coll_ring_post(gw_coll_ring_ctx_t *c, bool send, void *p, size_t count, int peer);
/* out = x op y on the copies' stream; *ticket is the kernel's. */
int gw_coll_ring_reduce_start(gw_coll_ring_ctx_t *c, const void *x, const void *y, void *out,
                              size_t count, uint64_t *ticket);
int gw_coll_ring_copy_start(gw_coll_ring_ctx_t *c, void *dst, const void *src, size_t count,
                            uint64_t *ticket);
/* A copy of count elements, waited for (progressing messages meanwhile). */
int gw_coll_ring_copy_sync(gw_coll_ring_ctx_t *c, void *dst, const void *src, size_t count);
static inline int gw_coll_ring_mod(int x, int n) { return ((x % n) + n) % n; }
/* Where step k of the ring writes chunk. */
char *gw_coll_ring_out(const gw_coll_ring_ctx_t *c, const gw_coll_ring_t *g, int k, int chunk);
/* Element offsets and counts of n chunks of count: the first count % n
 * chunks one element longer. */
void gw_coll_ring_even_chunks(size_t count, int n, size_t *off, size_t *cnt);
size_t gw_coll_ring_max_of(const size_t *v, int n);
/* Device scratch of bytes on c's GPU (zeroed descriptor for 0 bytes). */
int gw_coll_ring_scratch(gw_coll_ring_ctx_t *c, size_t bytes, gw_coll_dev_buf_t *b);
/* Points eff's buffers at device temporaries where the ring cannot use the
 * application's, copied in and waited for. */
int gw_coll_ring_temps_in(gw_coll_ring_ctx_t *c, const gw_coll_region_t r[GW_REGION_COUNT],
                          gw_coll_args_t *eff, gw_coll_temps_t *t);
/* A call's context (c->a points at its eff); fails on a dispatch error. */
int gw_coll_ring_ctx_init(gw_coll_ring_ctx_t *c, const gw_coll_args_t *a, gw_coll_args_t *eff,
                          const gw_coll_region_t r[GW_REGION_COUNT], int tag);
/* A non-blocking form's request (coll_gpuwire_devreduce_nb.c). */
int gw_coll_ring_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request);

#endif
