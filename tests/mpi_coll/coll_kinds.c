/*
 * Reductions whose ranks pass different memory kinds, under the default
 * reduction algorithm, checked against a host reference:
 *
 * - MPI_Reduce, every root: device send buffers on every rank, a host
 *   receive buffer at the root. Every rank has device memory, so every rank
 *   must run the GPU ring (the root through a temporary on its GPU): the
 *   component's device_calls counter rises by one per call on every rank.
 * - MPI_Allreduce where one rank (each in turn) passes a host send buffer or
 *   a host receive buffer and the others device memory only: GPU ring on
 *   every rank.
 * - MPI_Allreduce with a user-defined op where one rank (each in turn)
 *   describes its elements with a vector type with gaps (non-dense) and the
 *   others with a dense pair of ints (the same type signature), in device
 *   and in host memory on that rank: no GPU ring anywhere (a user op), gap
 *   bytes unchanged.
 * - Every reduction (and Iallreduce) just below and at the small-call
 *   limit, coll_<component>_reduce_device_min_bytes x (ranks - 1) bytes in
 *   the whole call (read through MPI_T): staged below it, the GPU ring from
 *   it, on every rank.
 * - Allreduce and Iallreduce below that limit where one rank (each in turn)
 *   passes host buffers only: staged on the others, passed through there,
 *   results right everywhere.
 *
 * In the first two, calls below that limit must be staged and the others
 * run on the GPU (the default limit splits the harness's counts: 1 and 7
 * elements are staged, 40000 are not).
 *
 *   coll_kinds fakedevrw | device
 *
 * fakedevrw: the simulated GPU of coll "gpuwirefake" whose memory the pml
 * carries; device: cudaMalloc (exits 77 without a usable GPU).
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"
#include "coll_pvar.h"

static MPI_T_pvar_session session;
static MPI_T_pvar_handle device_h = MPI_T_PVAR_HANDLE_NULL, device_nb_h = MPI_T_PVAR_HANDLE_NULL,
                         staged_h = MPI_T_PVAR_HANDLE_NULL;
/* Calls of fewer bytes than this are staged (0: none). */
static unsigned long long small_limit;

static void open_counters(const char *component)
{
    char name[128];
    int provided;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
    snprintf(name, sizeof(name), "coll_%s_device_calls", component);
    device_h = coll_pvar_open(session, name, MPI_T_PVAR_CLASS_COUNTER);
    snprintf(name, sizeof(name), "coll_%s_device_nb_calls", component);
    device_nb_h = coll_pvar_open(session, name, MPI_T_PVAR_CLASS_COUNTER);
    snprintf(name, sizeof(name), "coll_%s_staged_calls", component);
    staged_h = coll_pvar_open(session, name, MPI_T_PVAR_CLASS_COUNTER);

    /* The limit's parameter, a size_t (8 bytes). */
    snprintf(name, sizeof(name), "coll_%s_reduce_device_min_bytes", component);
    int idx = -1, count = 0, size = 0;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS) {
        mt_fail(__FILE__, __LINE__, "no MPI_T control variable %s", name);
        return;
    }
    MPI_Datatype dt;
    MT_CHECK_MPI(MPI_T_cvar_get_info(idx, NULL, NULL, NULL, &dt, NULL, NULL, NULL, NULL, NULL));
    MT_CHECK_MPI(MPI_Type_size(dt, &size));
    MT_CHECK_EQ(size, 8);
    MT_CHECK_MPI(MPI_T_cvar_handle_alloc(idx, NULL, &h, &count));
    uint64_t min = 0;
    MT_CHECK_MPI(MPI_T_cvar_read(h, &min));
    MT_CHECK_MPI(MPI_T_cvar_handle_free(&h));
    small_limit = (unsigned long long)min * (unsigned long long)(mt_size - 1);
    if (mt_rank == 0) printf("reductions staged below %llu bytes\n", small_limit);
}

typedef struct {
    unsigned long long device, device_nb, staged;
} counts_t;

static counts_t counts(void)
{
    counts_t c = {coll_pvar_read(session, device_h), coll_pvar_read(session, device_nb_h),
                  coll_pvar_read(session, staged_h)};
    return c;
}

static void close_counters(void)
{
    MPI_T_pvar_handle *hs[] = {&device_h, &device_nb_h, &staged_h};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); ++i) {
        if (*hs[i] != MPI_T_PVAR_HANDLE_NULL) MPI_T_pvar_handle_free(session, hs[i]);
    }
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
}

static unsigned long long type_bytes(enum ttype_id t)
{
    int size = 0;
    MT_CHECK_MPI(MPI_Type_size(tt[t].dt, &size));
    return (unsigned long long)size;
}

static void fill_inputs(tbuf_t *b, enum top_id o, unsigned s, int r)
{
    for (long e = 0; e < b->nelem; ++e) {
        int64_t v[2];
        tval(o, b->t - tt, s, r, e, v);
        tbuf_set(b, e, v);
    }
}

static void check_unchanged(tbuf_t *b, const char *what)
{
    unsigned char *before = tbuf_snapshot(b);
    tbuf_pull(b);
    tbuf_matches(b, before, 0, 0, what);
    free(before);
}

/* Fills sb with rank me's inputs for op o and seed s, pushes both buffers,
 * and returns rb's image, on which the caller sets the expected result. */
static unsigned char *push_pair(tbuf_t *sb, tbuf_t *rb, enum top_id o, unsigned s, int me)
{
    fill_inputs(sb, o, s, me);
    tbuf_push(sb);
    tbuf_push(rb);
    return tbuf_snapshot(rb);
}

/* An MPI_SUM Allreduce's buffers of c elements of type t, both in memory
 * kind k, inputs pushed; returns the expected image of rb. */
static unsigned char *sum_pair(tbuf_t *sb, tbuf_t *rb, enum ttype_id t, long c, enum mem_kind k,
                               unsigned s, int me, int n)
{
    tbuf_alloc(sb, t, c, k);
    tbuf_alloc(rb, t, c, k);
    unsigned char *expect = push_pair(sb, rb, OP_SUM, s, me);
    for (long e = 0; e < c; ++e) {
        int64_t acc[2];
        tfold(OP_SUM, t, s, 0, n, e, acc);
        img_set(rb, expect, e, acc);
    }
    return expect;
}

/* The send buffer must be unchanged; frees both buffers and the image. */
static void drop_pair(tbuf_t *sb, tbuf_t *rb, unsigned char *expect)
{
    check_unchanged(sb, "send buffer");
    free(expect);
    tbuf_free(sb);
    tbuf_free(rb);
}

/* A call of count elements and bytes in all (every rank has device memory,
 * a kernel applies) since before: on the GPU on this rank, blocking (nb
 * false) or not, or staged where it is below the small-call limit; count 0
 * (nothing significant) passes through. */
static void check_path(counts_t before, long count, unsigned long long bytes, bool nb)
{
    const counts_t now = counts();
    const bool small = bytes < small_limit;
    const unsigned long long ring = (nb ? now.device_nb - before.device_nb
                                        : now.device - before.device),
                             staged = now.staged - before.staged;
    const unsigned long long want_ring = count > 0 && !small, want_staged = count > 0 && small;
    if (ring != want_ring || staged != want_staged) {
        mt_fail(__FILE__, __LINE__,
                "%s [%s]: %llu GPU reductions and %llu staged on rank %d for %llu bytes, "
                "expected %llu and %llu (staged below %llu bytes)",
                tctx, mode_name, ring, staged, mt_rank, bytes, want_ring, want_staged,
                small_limit);
    }
}

/* No call on the GPU over point-to-point since before. */
static void check_no_ring(counts_t before)
{
    const counts_t now = counts();
    if (now.device != before.device || now.device_nb != before.device_nb) {
        mt_fail(__FILE__, __LINE__, "%s [%s]: %llu GPU reductions on rank %d, expected none",
                tctx, mode_name, now.device + now.device_nb - before.device - before.device_nb,
                mt_rank);
    }
}

static const struct {
    const char *name;
    enum top_id id;
    enum ttype_id type;
    MPI_Op op;
} ops[] = {
    {"int sum", OP_SUM, T_INT, MPI_SUM},
    {"double sum", OP_SUM, T_DOUBLE, MPI_SUM},
    {"int max", OP_MAX, T_INT, MPI_MAX},
    {"int bxor", OP_BXOR, T_INT, MPI_BXOR},
};
enum { NOPS = sizeof(ops) / sizeof(ops[0]) };

/* Device send buffers everywhere, a host receive buffer at the root. */
static void reduce_host_root(MPI_Comm comm, enum mem_kind dev)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int root = 0; root < n; ++root) {
        for (int oi = 0; oi < NOPS; ++oi) {
            for (int ci = 0; ci < ntcounts; ++ci) {
                const long c = tcounts[ci];
                const unsigned s = (unsigned)(root * 7919 + oi * 131 + ci);
                tctx_set("reduce %s count %ld root %d, host receive buffer", ops[oi].name, c,
                         root);
                tbuf_t sb, rb = {0};
                tbuf_alloc(&sb, ops[oi].type, c, dev);
                fill_inputs(&sb, ops[oi].id, s, me);
                tbuf_push(&sb);
                unsigned char *expect = NULL;
                if (me == root) {
                    tbuf_alloc(&rb, ops[oi].type, c, MEM_HOST);
                    tbuf_push(&rb);
                    expect = tbuf_snapshot(&rb);
                    for (long e = 0; e < c; ++e) {
                        int64_t acc[2];
                        tfold(ops[oi].id, ops[oi].type, s, 0, n, e, acc);
                        img_set(&rb, expect, e, acc);
                    }
                }
                const counts_t before = counts();
                MT_CHECK_MPI(MPI_Reduce(sb.mpi, me == root ? rb.mpi : NULL, (int)c,
                                        tt[ops[oi].type].dt, ops[oi].op, root, comm));
                check_path(before, c, (unsigned long long)c * (unsigned long long)type_bytes(ops[oi].type),
                           false);
                if (me == root) {
                    tbuf_pull(&rb);
                    tbuf_matches(&rb, expect, 0, c, "result");
                    free(expect);
                    tbuf_free(&rb);
                }
                check_unchanged(&sb, "send buffer");
                tbuf_free(&sb);
            }
        }
    }
}

/* Rank odd passes one host buffer (send or receive), the rest device. */
static void allreduce_one_host_buffer(MPI_Comm comm, enum mem_kind dev)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int odd = 0; odd < n; ++odd) {
        for (int host_recv = 0; host_recv < 2; ++host_recv) {
            for (int oi = 0; oi < NOPS; ++oi) {
                for (int ci = 0; ci < ntcounts; ++ci) {
                    const long c = tcounts[ci];
                    const unsigned s = (unsigned)(odd * 7919 + host_recv * 977 + oi * 131 + ci);
                    tctx_set("allreduce %s count %ld, rank %d's %s buffer in host memory",
                             ops[oi].name, c, odd, host_recv ? "receive" : "send");
                    const bool mine = me == odd;
                    tbuf_t sb, rb;
                    tbuf_alloc(&sb, ops[oi].type, c, mine && !host_recv ? MEM_HOST : dev);
                    tbuf_alloc(&rb, ops[oi].type, c, mine && host_recv ? MEM_HOST : dev);
                    unsigned char *expect = push_pair(&sb, &rb, ops[oi].id, s, me);
                    for (long e = 0; e < c; ++e) {
                        int64_t acc[2];
                        tfold(ops[oi].id, ops[oi].type, s, 0, n, e, acc);
                        img_set(&rb, expect, e, acc);
                    }
                    const counts_t before = counts();
                    MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, (int)c, tt[ops[oi].type].dt,
                                               ops[oi].op, comm));
                    check_path(before, c, (unsigned long long)c * type_bytes(ops[oi].type),
                               false);
                    tbuf_pull(&rb);
                    tbuf_matches(&rb, expect, 0, c, "result");
                    drop_pair(&sb, &rb, expect);
                }
            }
        }
    }
}

/* Sums the two ints of each element: 16 bytes apart at 0 and 12 in the
 * vector type, adjacent in the pair. Each rank's op sees its own type. */
static void pair_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const bool vec = *dt == tt[T_VEC].dt;
    const ptrdiff_t stride = vec ? 16 : 8, second = vec ? 12 : 4;
    for (int i = 0; i < *len; ++i) {
        const char *a = (const char *)in + i * stride;
        char *b = (char *)inout + i * stride;
        int x, y;
        memcpy(&x, a, sizeof(int));
        memcpy(&y, b, sizeof(int));
        y += x;
        memcpy(b, &y, sizeof(int));
        memcpy(&x, a + second, sizeof(int));
        memcpy(&y, b + second, sizeof(int));
        y += x;
        memcpy(b + second, &y, sizeof(int));
    }
}

/* Rank odd's elements have gaps (vector(2,1,3)), the others' are dense
 * pairs of ints; the odd rank's buffers are device memory, then host. */
static void allreduce_one_rank_with_gaps(MPI_Comm comm, enum mem_kind dev)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    MPI_Op sum;
    MT_CHECK_MPI(MPI_Op_create(pair_sum, 1, &sum));
    for (int odd = 0; odd < n; ++odd) {
        for (int odd_host = 0; odd_host < 2; ++odd_host) {
            for (int ci = 0; ci < ntcounts; ++ci) {
                const long c = tcounts[ci];
                const unsigned s = (unsigned)(odd * 7919 + odd_host * 977 + ci);
                tctx_set("allreduce user sum count %ld, rank %d's vector type with gaps in %s "
                         "memory",
                         c, odd, odd_host ? "host" : "device");
                const bool mine = me == odd;
                const enum ttype_id t = mine ? T_VEC : T_AFFINE;
                const enum mem_kind k = mine && odd_host ? MEM_HOST : dev;
                tbuf_t sb, rb;
                unsigned char *expect = sum_pair(&sb, &rb, t, c, k, s, me, n);
                const counts_t before = counts();
                MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, (int)c, tt[t].dt, sum, comm));
                /* A user-defined op: no rank runs the GPU ring. */
                check_no_ring(before);
                tbuf_pull(&rb);
                /* Every byte, gaps included. */
                tbuf_matches(&rb, expect, 0, 0, "result");
                drop_pair(&sb, &rb, expect);
            }
        }
    }
    MT_CHECK_MPI(MPI_Op_free(&sum));
}

/* Each reduction with ints just below and at the small-call limit (the
 * whole call's bytes): expected results and the path on every rank. */
enum edge_call { E_ALLREDUCE, E_IALLREDUCE, E_REDUCE, E_SCAN, E_EXSCAN, E_RS_BLOCK, E_RS, E_N };
static const char *const edge_names[E_N] = {"allreduce", "iallreduce", "reduce", "scan",
                                            "exscan", "reduce_scatter_block", "reduce_scatter"};

static void edge_call(MPI_Comm comm, enum mem_kind dev, enum edge_call k, long want_total,
                      unsigned s)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    /* Reduce_scatter_block: n equal blocks (the total rounded up);
     * Reduce_scatter: the first total % n blocks one element longer. */
    int *rcounts = calloc((size_t)n, sizeof(int));
    long total = want_total, lo = 0, mine = want_total;
    if (E_RS_BLOCK == k) {
        mine = (want_total + n - 1) / n;
        total = mine * n;
    } else if (E_RS == k) {
        for (int q = 0; q < n; ++q) rcounts[q] = (int)(want_total / n + (q < want_total % n));
        for (int q = 0; q < me; ++q) lo += rcounts[q];
        mine = rcounts[me];
    }
    const unsigned long long bytes = (unsigned long long)total * type_bytes(T_INT);
    tctx_set("%s of %ld ints (%llu bytes, staged below %llu)", edge_names[k], total, bytes,
             small_limit);
    tbuf_t sb, rb;
    tbuf_alloc(&sb, T_INT, total, dev);
    tbuf_alloc(&rb, T_INT, mine, dev);
    unsigned char *expect = push_pair(&sb, &rb, OP_SUM, s, me);
    /* Whose values each result element folds, and where it sits in the input. */
    const int r1 = E_SCAN == k ? me + 1 : E_EXSCAN == k ? me : n;
    const long first = E_RS_BLOCK == k ? (long)me * mine : E_RS == k ? lo : 0;
    const bool has_result = (E_REDUCE != k || me == 0) && (E_EXSCAN != k || me > 0);
    for (long e = 0; e < mine && has_result; ++e) {
        int64_t acc[2];
        tfold(OP_SUM, T_INT, s, 0, r1, first + e, acc);
        img_set(&rb, expect, e, acc);
    }
    const counts_t before = counts();
    MPI_Request req = MPI_REQUEST_NULL;
    switch (k) {
    case E_ALLREDUCE:
        MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, (int)total, MPI_INT, MPI_SUM, comm));
        break;
    case E_IALLREDUCE:
        MT_CHECK_MPI(MPI_Iallreduce(sb.mpi, rb.mpi, (int)total, MPI_INT, MPI_SUM, comm, &req));
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        break;
    case E_REDUCE:
        MT_CHECK_MPI(MPI_Reduce(sb.mpi, rb.mpi, (int)total, MPI_INT, MPI_SUM, 0, comm));
        break;
    case E_SCAN:
        MT_CHECK_MPI(MPI_Scan(sb.mpi, rb.mpi, (int)total, MPI_INT, MPI_SUM, comm));
        break;
    case E_EXSCAN:
        MT_CHECK_MPI(MPI_Exscan(sb.mpi, rb.mpi, (int)total, MPI_INT, MPI_SUM, comm));
        break;
    case E_RS_BLOCK:
        MT_CHECK_MPI(MPI_Reduce_scatter_block(sb.mpi, rb.mpi, (int)mine, MPI_INT, MPI_SUM, comm));
        break;
    case E_RS:
        MT_CHECK_MPI(MPI_Reduce_scatter(sb.mpi, rb.mpi, rcounts, MPI_INT, MPI_SUM, comm));
        break;
    default:
        break;
    }
    check_path(before, total, bytes, E_IALLREDUCE == k);
    tbuf_pull(&rb);
    if (E_EXSCAN != k || me > 0) tbuf_matches(&rb, expect, 0, mine, "result");
    drop_pair(&sb, &rb, expect);
    free(rcounts);
}

static void reductions_at_the_limit(MPI_Comm comm, enum mem_kind dev)
{
    if (0 == small_limit) return; /* nothing is staged: the other cases show it */
    const long at = (long)((small_limit + 3) / 4); /* the fewest ints that reach it */
    for (int k = 0; k < E_N; ++k) {
        for (long c = at - 1; c <= at + 1; ++c) {
            edge_call(comm, dev, (enum edge_call)k, c, (unsigned)(k * 131 + c));
        }
    }
}

/* Rank odd passes host memory only, the others device memory, to small
 * Allreduce and Iallreduce calls: below the limit every rank with device
 * memory stages the call and the host rank passes it through, so all of
 * them run Open MPI's host algorithm (at or above it the ring would wait for
 * the host rank: "The case that stays inconsistent" in docs/coll.md). */
static void small_allreduce_one_host_rank(MPI_Comm comm, enum mem_kind dev)
{
    if (small_limit < 8) return; /* no call small enough */
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const long largest = (long)((small_limit - 1) / 4); /* ints below the limit */
    const long cs[] = {1, 7, largest};
    for (int odd = 0; odd < n; ++odd) {
        for (int nb = 0; nb < 2; ++nb) {
            for (size_t ci = 0; ci < sizeof(cs) / sizeof(cs[0]); ++ci) {
                const long c = cs[ci];
                const unsigned s = (unsigned)(odd * 7919 + nb * 977 + (unsigned)ci);
                tctx_set("%sallreduce of %ld ints, rank %d with host buffers only", nb ? "i" : "",
                         c, odd);
                const enum mem_kind k = me == odd ? MEM_HOST : dev;
                tbuf_t sb, rb;
                unsigned char *expect = sum_pair(&sb, &rb, T_INT, c, k, s, me, n);
                const counts_t before = counts();
                MPI_Request req = MPI_REQUEST_NULL;
                if (nb) {
                    MT_CHECK_MPI(MPI_Iallreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, comm,
                                                &req));
                    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
                } else {
                    MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, comm));
                }
                if (me == odd) {
                    const counts_t now = counts();
                    if (now.staged != before.staged) {
                        mt_fail(__FILE__, __LINE__, "%s [%s]: the host rank staged the call", tctx,
                                mode_name);
                    }
                    check_no_ring(before);
                } else {
                    check_path(before, c, (unsigned long long)c * type_bytes(T_INT), nb);
                }
                tbuf_pull(&rb);
                tbuf_matches(&rb, expect, 0, c, "result");
                drop_pair(&sb, &rb, expect);
            }
        }
    }
}

int main(int argc, char **argv)
{
    int exit_code;
    if (!harness_init_device(&argc, &argv, &exit_code)) return exit_code;
    const enum mem_kind dev = mem_send;
    open_counters(dev == MEM_FAKEDEV_RW ? "gpuwirefake" : "gpuwire");

    const struct {
        const char *name;
        void (*fn)(MPI_Comm, enum mem_kind);
    } cases[] = {
        {"reduce to a host buffer", reduce_host_root},
        {"allreduce with one host buffer", allreduce_one_host_buffer},
        {"allreduce with one rank's type with gaps", allreduce_one_rank_with_gaps},
        {"reductions at the small-call limit", reductions_at_the_limit},
        {"small allreduce with one rank's buffers in host memory", small_allreduce_one_host_rank},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        const int before = mt_failures;
        cases[i].fn(MPI_COMM_WORLD, dev);
        if (mt_failures != before) {
            fprintf(stderr, "[rank %d] %s: %d failure(s)\n", mt_rank, cases[i].name,
                    mt_failures - before);
        }
    }
    close_counters();
    harness_fini();
    return mt_finish();
}
