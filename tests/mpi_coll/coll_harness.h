/*
 * Test harness for the collective tests: element types with known layouts
 * (gaps, a negative lower bound), buffers whose memory kind the run chooses
 * (host, device, managed), values that depend on (rank, element, component),
 * and a host reference for every op, computed without MPI.
 *
 * A buffer keeps a host image of all its bytes. Tests write logical values
 * into the image, push it to the buffer's memory, run the collective, pull
 * it back, and compare with an expected image: the image before the call
 * with the result elements set. Gap bytes are set to a sentinel beforehand,
 * so a staged path that writes gap bytes back wrongly fails the comparison.
 */
#ifndef COLL_HARNESS_H
#define COLL_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mpitest.h"

enum ttype_id { T_INT, T_DOUBLE, T_VEC, T_NEGLB, T_AFFINE, T_NTYPES };

typedef struct {
    const char *name;
    MPI_Datatype dt;
    int ncomp;          /* logical values per element */
    bool is_double;     /* components are doubles (else int) */
    ptrdiff_t extent;   /* stride between elements */
    ptrdiff_t off[2];   /* component offsets from the element's MPI position */
    ptrdiff_t pad;      /* bytes before the MPI pointer (negative true lower bound) */
} ttype_t;

extern ttype_t tt[T_NTYPES];

/* The ops the reductions are tested with; OP_NONE for data movement. */
enum top_id { OP_NONE, OP_SUM, OP_MAX, OP_PROD, OP_BXOR, OP_ADDMOD, OP_AFFINE, OP_NOPS };

typedef struct {
    const char *name;
    enum top_id id;
    enum ttype_id type;
    MPI_Op op;
    bool commutative;
} tcase_op_t;

extern tcase_op_t tops[];
extern int ntops;

/* Where buffers live. MEM_FAKEDEV: pages the CPU cannot touch (PROT_NONE),
 * the GPU memory of the simulated device of coll "gpuwirefake"
 * (fake_device.c). MEM_FAKEDEV_RW: the simulated device's memory that the
 * CPU, and so the pml, may touch (a memfd named "gwfake-device"): the
 * device algorithms run on it. MEM_FAKEDEV_SLOW: PROT_NONE pages of the
 * simulated second GPU (a memfd named "gwfake-slow"), whose copies finish
 * later than GPU 0's. */
enum mem_kind { MEM_HOST, MEM_DEVICE, MEM_MANAGED, MEM_FAKEDEV, MEM_FAKEDEV_RW, MEM_FAKEDEV_SLOW };
extern enum mem_kind mem_send, mem_recv; /* set by the run mode */
extern const char *mode_name;

typedef struct {
    const ttype_t *t;
    long nelem;
    enum mem_kind kind;
    void *mem;           /* allocation in its memory kind */
    char *mpi;           /* the pointer MPI gets: mem + pad */
    size_t bytes;
    unsigned char *img;  /* host image of all bytes */
} tbuf_t;

void harness_init(int *argc, char ***argv);  /* mt_init + types, ops, memory mode */
void harness_fini(void);
/* Returns a skip reason when the mode cannot run here (no GPU), else NULL. */
const char *harness_skip_reason(void);
/* harness_init for a test that runs on device memory only (fakedevrw or
 * device): false when main must return *exit_code now (skipped: no GPU;
 * failed: another mode). */
bool harness_init_device(int *argc, char ***argv, int *exit_code);

/* The memory kind for k when the buffer is its rank's only significant
 * buffer of a reduction or a Bcast, blocking or not. A rank whose
 * significant buffers are all host memory passes through to the host module;
 * under the default algorithm ranks with device memory run the GPU ring, and
 * the call hangs (docs/coll.md). In the mixed modes such a rank gets the
 * mode's device kind for that buffer, in the non-blocking forms too (the
 * device ring and an NVLink team's kernels run them and wait for every
 * rank). The modes ending in "staged" run under
 * coll_gpuwire_reduce_algorithm and coll_gpuwire_move_algorithm staged,
 * where every rank uses the host algorithm, and keep host memory, except in
 * the persistent form, so that its calls run the device algorithms: where
 * the ranks' memory kinds differ they agree at initialization to run every
 * start staged (case_persistent_restart covers that). */
enum mem_kind lone_buffer_kind(enum mem_kind k);

/* Raw memory of a kind; copies with cudaMemcpy, memcpy, or through the
 * fake device's protection as the kind needs. */
void *mem_alloc(size_t bytes, enum mem_kind kind);
void mem_free(void *p, size_t bytes, enum mem_kind kind);
void mem_copy(void *dst, const void *src, size_t bytes, void *fake, enum mem_kind kind);

void tbuf_alloc(tbuf_t *b, enum ttype_id t, long nelem, enum mem_kind kind);
void tbuf_free(tbuf_t *b);
/* Sets every byte of the image to the sentinel and every element to a poison value. */
void tbuf_poison(tbuf_t *b);
void tbuf_set(tbuf_t *b, long elem, const int64_t *vals);
void tbuf_get(const tbuf_t *b, long elem, int64_t *vals);
void tbuf_push(tbuf_t *b);
void tbuf_pull(tbuf_t *b);
/* Copies the image (for an expected image of the same shape). */
unsigned char *tbuf_snapshot(const tbuf_t *b);
/* Writes vals into an image (a snapshot) at elem. */
void img_set(const tbuf_t *b, unsigned char *img, long elem, const int64_t *vals);
/* Compares the image with expect over elements [from, to), gaps included;
 * reports the first difference with what. Returns true when equal. */
bool tbuf_matches(const tbuf_t *b, const unsigned char *expect, long from, long to,
                  const char *what);

/* Input value of component k of element e on rank r, for op o and seed s. */
void tval(enum top_id o, enum ttype_id t, unsigned s, int r, long e, int64_t *vals);
/* acc = acc op v (acc from lower ranks: MPI's order for non-commutative ops). */
void tapply(enum top_id o, enum ttype_id t, int64_t *acc, const int64_t *v);

/* Data movement uses flat values: component k of element e is flat index
 * e * ncomp + k of the buffer, so a block of 2c ints and one of c int pairs
 * or c two-int vectors carry the same values. */
int64_t fval(unsigned s, int r, long flat);
/* Sets elements [elem0, elem0 + n) of img (b's shape) to rank r's flat values
 * from flat index flat0. */
void img_set_flat(const tbuf_t *b, unsigned char *img, long elem0, long n, unsigned s, int r,
                  long flat0);
/* Folds rank values r0..r1-1 of element e (tval) with op o into acc. */
void tfold(enum top_id o, enum ttype_id t, unsigned s, int r0, int r1, long e, int64_t *acc);

/* The form run_all runs the non-blocking cases in: with t_persistent, the
 * persistent one (MPI_<op>_init, MPIX_<op>_init in Open MPI 4.1, then
 * MPI_Start), where this MPI has it (t_persistent_available). */
extern bool t_persistent;
bool t_persistent_available(void);

/* The non-blocking collectives in t_persistent's form (coll_forms.c). */
int T_Iallreduce(const void *s, void *r, int c, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                 MPI_Request *req);
int T_Ireduce(const void *s, void *r, int c, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
              MPI_Request *req);
int T_Iscan(const void *s, void *r, int c, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
            MPI_Request *req);
int T_Iexscan(const void *s, void *r, int c, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
              MPI_Request *req);
int T_Ireduce_scatter(const void *s, void *r, const int *rc, MPI_Datatype dt, MPI_Op op,
                      MPI_Comm comm, MPI_Request *req);
int T_Ireduce_scatter_block(const void *s, void *r, int rc, MPI_Datatype dt, MPI_Op op,
                            MPI_Comm comm, MPI_Request *req);
int T_Ibcast(void *b, int c, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *req);
int T_Iallgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                 MPI_Comm comm, MPI_Request *req);
int T_Iallgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd,
                  MPI_Datatype rt, MPI_Comm comm, MPI_Request *req);
int T_Ialltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                MPI_Comm comm, MPI_Request *req);
int T_Ialltoallv(const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r,
                 const int *rc, const int *rd, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req);
int T_Ialltoallw(const void *s, const int *sc, const int *sd, const MPI_Datatype *st, void *r,
                 const int *rc, const int *rd, const MPI_Datatype *rt, MPI_Comm comm,
                 MPI_Request *req);
int T_Igather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root,
              MPI_Comm comm, MPI_Request *req);
int T_Igatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *rd,
               MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req);
int T_Iscatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root,
               MPI_Comm comm, MPI_Request *req);
int T_Iscatterv(const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, int rc,
                MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req);
int T_Ibarrier(MPI_Comm comm, MPI_Request *req);

/* Runs a blocking or non-blocking collective: for non-blocking, waits; a
 * persistent request (T_I* with t_persistent) must still be there after
 * the wait, inactive, and is freed. */
#define TRUN(nb, blocking_call, nonblocking_call)                                 \
    do {                                                                         \
        if (nb) {                                                                \
            MPI_Request _req = MPI_REQUEST_NULL;                                 \
            MT_CHECK_MPI(nonblocking_call);                                      \
            MT_CHECK_MPI(MPI_Wait(&_req, MPI_STATUS_IGNORE));                    \
            if (t_persistent && MPI_REQUEST_NULL == _req) {                      \
                mt_fail(__FILE__, __LINE__, "%s: MPI_Wait freed a persistent "   \
                        "request", tctx);                                        \
            } else if (t_persistent) {                                           \
                MT_CHECK_MPI(MPI_Request_free(&_req));                           \
            }                                                                    \
        } else {                                                                 \
            MT_CHECK_MPI(blocking_call);                                         \
        }                                                                        \
    } while (0)

/* The counts every case is run with: 0, 1, odd, large. */
extern const long tcounts[];
extern int ntcounts;

/* Cases (coll_cases_reduce.c, coll_cases_move.c). */
void case_allreduce(MPI_Comm comm, bool nb);
void case_reduce(MPI_Comm comm, bool nb);
void case_scan(MPI_Comm comm, bool nb);
void case_exscan(MPI_Comm comm, bool nb);
void case_reduce_scatter(MPI_Comm comm, bool nb);
void case_reduce_scatter_block(MPI_Comm comm, bool nb);
void case_bcast(MPI_Comm comm, bool nb);
void case_allgather(MPI_Comm comm, bool nb);
void case_allgatherv(MPI_Comm comm, bool nb);
void case_alltoall(MPI_Comm comm, bool nb);
void case_alltoallv(MPI_Comm comm, bool nb);
void case_alltoallw(MPI_Comm comm, bool nb);
void case_gather(MPI_Comm comm, bool nb);
void case_gatherv(MPI_Comm comm, bool nb);
void case_scatter(MPI_Comm comm, bool nb);
void case_scatterv(MPI_Comm comm, bool nb);
void case_barrier(MPI_Comm comm, bool nb);
void case_reduce_local(MPI_Comm comm, bool nb);
void case_many_in_flight(MPI_Comm comm);
void case_initiation_does_not_wait(MPI_Comm comm);
void case_team_outcome_seen_late(MPI_Comm comm);
void case_nonblocking_only(MPI_Comm comm, int calls);
void case_blocking_after_nonblocking(MPI_Comm comm);
void case_crossing_reduce_scatters(MPI_Comm comm);
void case_persistent_restart(MPI_Comm comm, int host_rank);

/* Whether a buffer of kind k is the simulated GPU's memory the CPU cannot touch. */
static inline bool mem_protected(enum mem_kind k)
{
    return k == MEM_FAKEDEV || k == MEM_FAKEDEV_SLOW;
}

/* Context of the current check, printed with a failure. */
extern char tctx[256];
void tctx_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
