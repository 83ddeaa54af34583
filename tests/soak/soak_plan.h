/* The soak's traffic plan: a sequence of rounds, each a list of messages
 * that every rank computes identically from the seed, so that each rank
 * knows what it sends and what it receives without asking anyone.
 *
 * A round runs in four phases (soak.c), which make it free of deadlock:
 *   A  post the early non-blocking receives; MPI_Barrier (after it every
 *      early receive is posted: ready-mode sends target only those, and no
 *      message of the previous round is left to be matched by a wildcard)
 *   B  start every non-blocking send
 *   C  blocking sends and blocking receives, in increasing message id on
 *      every rank: the lowest unfinished one always finds its peer there, or
 *      its peer's side already posted (early receive, phase-B send)
 *   D  post the late receives, wait for everything
 * The constraints that make this hold are enforced in soak_plan_round():
 * a blocking send never goes to a late receive, nor to itself unless the
 * receive is early; messages on the wildcard communicators are always sent
 * non-blocking, so a wildcard receive, blocking or not, always has a
 * message to take. */
#ifndef GPUWIRE_SOAK_PLAN_H
#define GPUWIRE_SOAK_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

/* Communicators. The first three carry receives that name source and tag;
 * on the last three the receives use wildcards, and each of them carries
 * only contiguous byte messages. */
enum soak_comm {
    SC_WORLD,   /* MPI_COMM_WORLD */
    SC_DUP,     /* MPI_Comm_dup of it */
    SC_SPLIT,   /* MPI_Comm_split with the ranks in reverse order */
    SC_ANYANY,  /* receives with MPI_ANY_SOURCE and MPI_ANY_TAG */
    SC_ANYSRC,  /* MPI_ANY_SOURCE, the message's tag */
    SC_ANYTAG,  /* the sender's rank, MPI_ANY_TAG */
    SC_NCOMMS
};
enum soak_mode { SM_STANDARD, SM_SYNC, SM_BUFFERED, SM_READY, SM_NMODES };
enum soak_dtype { SD_BYTES, SD_VECTOR, SD_INDEXED, SD_STRUCT, SD_NDTYPES };
enum soak_recv { SR_EARLY, SR_BLOCKING, SR_PROBE, SR_LATE, SR_NRECVS };
enum soak_kind { SK_HOST, SK_DEVICE, SK_MANAGED, SK_NKINDS };

typedef struct {
    int id;            /* index in its round, and its tag */
    int src, dst;      /* ranks in MPI_COMM_WORLD */
    uint64_t seq;      /* the sender's message number since the start */
    size_t size;       /* payload (packed) bytes */
    uint32_t shape;    /* derives a derived datatype's shape */
    uint16_t recv_extra; /* contiguous receives: capacity beyond size */
    unsigned char comm, mode, dtype, recv, send_kind, recv_kind;
    bool send_blocking;
    bool recv_alt;     /* derived: receive with another type of the same signature */
} soak_msg_t;

/* Where the payload's bytes lie in a buffer: count repetitions, extent bytes
 * apart, each of nblocks blocks in type-map order (the packed order). */
#define SOAK_MAX_BLOCKS 16
typedef struct {
    int count;
    size_t extent;
    int nblocks;
    size_t off[SOAK_MAX_BLOCKS], len[SOAK_MAX_BLOCKS];
} soak_layout_t;

typedef struct {
    uint64_t seed;
    uint64_t messages;     /* in the whole job */
    size_t max_size;
    /* With large_share < 1, a message is log-uniform up to max_size with
     * that probability and up to small_size otherwise (traffic of many small
     * messages with a tail of large ones); 1 (or more): every message up to
     * max_size. */
    double large_share;
    size_t small_size;
    int per_round;         /* mean messages a rank sends per round */
    int nranks;
    bool device;           /* device and managed buffers too */
} soak_config_t;

typedef struct {
    soak_msg_t *msgs;
    int n;
    uint64_t *next_seq;    /* per sender, carried from round to round */
    uint64_t planned;      /* messages planned so far, in the job */
} soak_plan_t;

bool soak_is_wildcard(int comm);

/* Fills plan->msgs with the next round; returns false once all messages of
 * the job are planned. plan->msgs must hold nranks * (per_round * 3 / 2 + 1). */
bool soak_plan_round(const soak_config_t *cfg, uint64_t round, soak_plan_t *plan);
int soak_plan_capacity(const soak_config_t *cfg);

/* The layout of a message in the sender's buffer (receiver = false) or the
 * receiver's (true), and the MPI datatype and count to use there. The type
 * is committed; the caller frees it unless it is predefined. */
void soak_layout(const soak_msg_t *m, bool receiver, soak_layout_t *l);
int soak_make_type(const soak_msg_t *m, bool receiver, MPI_Datatype *type, int *count);
/* Bytes a buffer with this layout spans. */
size_t soak_span(const soak_layout_t *l);

const char *soak_mode_name(int mode);
const char *soak_dtype_name(int dtype);
const char *soak_comm_name(int comm);
const char *soak_kind_name(int kind);

#endif
