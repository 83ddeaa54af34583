/*
 * Collectives by kernels that read and write the other GPUs of the node
 * directly (CUDA IPC mappings over NVLink), with GPU-side signalling: no host
 * round trip between the ranks once the kernels run. A C header (the coll
 * component's C++ device part fills it in); it names no CUDA type.
 *
 * A team is the ranks of one communicator, each on its own GPU, every pair
 * able to access each other's memory. Each rank owns a workspace: a flag
 * array and two slots of slot_bytes, mapped by every other rank. Every rank
 * launches the same kernel for the same call with the same arguments (bytes,
 * seq, slot); a kernel's blocks pair up across ranks by block index.
 *
 *   barrier(v): block b of rank r stores v into flags[p][b][r] of every rank
 *               p, then waits until flags[r][b][q] >= v for every rank q.
 *               Values only grow (seq is the team's count of barriers).
 *
 * Two forms per collective:
 *   one-shot  the data goes through the slots: each rank copies its input
 *             into its slot, one barrier, each rank reads what it needs from
 *             every slot. Consecutive calls alternate the slot (slot = call
 *             parity): a rank can write slot s again only after the next
 *             call's barrier, which every rank reaches only after its kernel
 *             of the previous call (the one that read slot s) finished.
 *   direct    the kernels read and write the application's buffers of every
 *             rank (peer_in / peer_out, mapped by the caller): barrier (all
 *             inputs ready, all outputs free), the work, barrier (no rank
 *             returns while another still reads its input or writes its
 *             output). Allreduce is reduce-scatter + all-gather in one pass:
 *             rank r reduces the r-th part from every input and writes it
 *             into every output.
 *
 * Ordering with the application: the kernels run on a stream that waits for
 * the legacy default stream (a blocking stream), so work the application
 * queued there before the call comes first on each GPU.
 *
 * A barrier that waits longer than timeout_ns (a peer died or never called)
 * gives up: it sets *error and the kernel finishes without waiting; the data
 * is then undefined and the caller reports the error.
 */
#ifndef GPUWIRE_CUDA_NVLINK_COLL_H
#define GPUWIRE_CUDA_NVLINK_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GW_NVL_MAX_RANKS 8
#define GW_NVL_MAX_BLOCKS 128

typedef struct {
    int nranks, rank;
    /* Every rank's flag array ([GW_NVL_MAX_BLOCKS][GW_NVL_MAX_RANKS] uint64)
     * and slots (2 * slot_bytes), as this process addresses them. */
    uint64_t *flags[GW_NVL_MAX_RANKS];
    char *slots[GW_NVL_MAX_RANKS];
    size_t slot_bytes;
    unsigned *error; /* device address of a host-mapped word */
    uint64_t timeout_ns;
} gw_nvl_team_t;

typedef enum { GW_NVL_ALLREDUCE, GW_NVL_BCAST, GW_NVL_ALLGATHER } gw_nvl_coll_t;

typedef struct {
    gw_nvl_coll_t coll;
    int op, type;    /* allreduce: ids of gpuwire/cuda/reduce.h (no pair types) */
    const void *in;  /* allreduce and allgather: this rank's input */
    void *out;       /* this rank's output; bcast: the buffer */
    size_t bytes;    /* allreduce: count * type size; bcast: all; allgather: per rank */
    int root;        /* bcast */
    bool direct;     /* the direct form: peer_in / peer_out are set */
    const void *peer_in[GW_NVL_MAX_RANKS]; /* allreduce: every rank's input */
    void *peer_out[GW_NVL_MAX_RANKS];      /* every rank's output (bcast: buffer) */
    uint64_t seq;    /* the call's barriers use seq + 1 (and seq + 2) */
    int slot;        /* one-shot: 0 or 1 */
} gw_nvl_call_t;

/* The delegated form (ranks that all share one GPU): one kernel, launched
 * by whichever rank initiates the call last, does the whole call on every
 * rank's buffers (in[r] / out[r]: rank r's, as the launching process
 * addresses them). It waits for nothing: every rank's buffers are ready
 * before it is launched. Allreduce: each thread reduces its elements of
 * every input and writes them into every output (reads n x bytes, writes
 * n x bytes). Bcast: out[root] into every other out. Allgather: in[r] into
 * out[d] + r x bytes for every d (skipped where that is in[r] itself). */
typedef struct {
    gw_nvl_coll_t coll;
    int op, type;
    size_t bytes; /* as gw_nvl_call_t */
    int root;
    int nranks;
    const void *in[GW_NVL_MAX_RANKS];
    void *out[GW_NVL_MAX_RANKS];
} gw_nvl_all_call_t;

/* Bytes of one rank's flag array. */
size_t gw_nvl_flags_bytes(void);
/* Barriers a call uses: 1 for one-shot, 2 for direct. */
int gw_nvl_barriers(const gw_nvl_call_t *call);
/* Whether a one-shot call fits the slots (allgather: the whole result). */
bool gw_nvl_fits_slot(const gw_nvl_team_t *team, const gw_nvl_call_t *call);
/* Whether allreduce can run op on type (the table's pairs minus pair types). */
bool gw_nvl_reduce_supported(int op, int type);

/* Enqueues the call's kernel on stream (a cudaStream_t of the current device,
 * as void *). 0, or -1 with one line in why (bad arguments, launch failure,
 * built without CUDA). */
int gw_nvl_launch(const gw_nvl_team_t *team, const gw_nvl_call_t *call, void *stream, char *why,
                  size_t why_len);

/* Enqueues a delegated call's kernel on stream; as gw_nvl_launch. */
int gw_nvl_launch_all(const gw_nvl_all_call_t *call, void *stream, char *why, size_t why_len);
#ifdef __cplusplus
}
#endif

#endif
