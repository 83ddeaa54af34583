/*
 * The collective engine's C API (ucx_glue/coll): collective algorithms in
 * plain terms -- ranks, byte buffers with memory kinds, counts, an op and a
 * type id of gpuwire/cuda/reduce.h -- over a transport the caller provides.
 *
 * The engine never sees a communicator, a datatype or an MPI request. coll
 * gpuwire (plugin/coll) translates a call into these terms and gives the
 * engine a transport over the selected pml; the unit tests give it one over
 * memory (tests/unit/coll). Device memory is reached only through
 * gpuwire/gpu_device.h, the process's one GPU context.
 *
 * Contract of a transport:
 * - isend/irecv post one message of bytes to/from rank peer with tag; they
 *   never block, and return 0 with *req set, or an error code (not 0) with
 *   *req untouched. Messages between two ranks with one tag are matched in
 *   posting order, as MPI's are.
 * - test never blocks: *done is set when the request has completed, and
 *   then the request is released and *req set to NULL; its return code is
 *   the message's status (0: it arrived whole).
 * - wait_all blocks until the n requests have completed (progressing
 *   everything meanwhile), releases each, sets it to NULL, and returns the
 *   first failure's code or 0. NULL entries are skipped.
 * - cancel releases a request that will not be waited for (an error path):
 *   it may complete it first.
 * - progress moves everything in flight on (MPI's progress); the engine
 *   calls it while it waits for the GPU.
 * Every function is called from the thread that called the engine.
 */
#ifndef GPUWIRE_COLL_ENGINE_H
#define GPUWIRE_COLL_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuwire/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gw_ce_transport {
    void *ctx; /* the caller's: passed back to every function */
    int rank, size;
    int (*isend)(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req);
    int (*irecv)(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req);
    int (*test)(void *ctx, void **req, bool *done);
    int (*wait_all)(void *ctx, void **reqs, size_t n);
    void (*cancel)(void *ctx, void **req);
    void (*progress)(void *ctx);
} gw_ce_transport_t;

/* Return codes of the engine's functions. On failure, the function also
 * writes one line naming the cause into the why buffer its caller gave. */
enum {
    GW_CE_OK = 0,
    GW_CE_ERR = -1,        /* a transport or device call failed */
    GW_CE_ERR_NOMEM = -2,  /* out of host memory */
    GW_CE_ERR_ARG = -3,    /* the call's description is inconsistent */
};

#ifdef __cplusplus
}
#endif

#endif
