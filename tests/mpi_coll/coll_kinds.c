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
 *
 *   coll_kinds fakedevrw | device
 *
 * fakedevrw: the simulated GPU of coll "gpuwirefake" whose memory the pml
 * carries; device: cudaMalloc (exits 77 without a usable GPU).
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"

static MPI_T_pvar_session session;
static MPI_T_pvar_handle device_calls_h = MPI_T_PVAR_HANDLE_NULL;

static void open_counter(const char *component)
{
    char name[128];
    snprintf(name, sizeof(name), "coll_%s_device_calls", component);
    int provided, idx = -1, count = 0;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx) != MPI_SUCCESS) {
        mt_fail(__FILE__, __LINE__, "no MPI_T variable %s: is coll %s loaded?", name, component);
        return;
    }
    MT_CHECK_MPI(MPI_T_pvar_handle_alloc(session, idx, NULL, &device_calls_h, &count));
    MT_CHECK_EQ(count, 1);
}

static unsigned long long device_calls(void)
{
    unsigned long long v = 0;
    if (device_calls_h != MPI_T_PVAR_HANDLE_NULL) {
        MT_CHECK_MPI(MPI_T_pvar_read(session, device_calls_h, &v));
    }
    return v;
}

static void close_counter(void)
{
    if (device_calls_h != MPI_T_PVAR_HANDLE_NULL) {
        MPI_T_pvar_handle_free(session, &device_calls_h);
    }
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
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

/* The calls on count elements must have run on the GPU on this rank (every
 * rank has device memory and a kernel applies), or not at all (count 0:
 * nothing significant, the call passes through). */
static void check_ring(unsigned long long before, long count, int calls)
{
    const unsigned long long ran = device_calls() - before;
    if (ran != (count > 0 ? (unsigned long long)calls : 0)) {
        mt_fail(__FILE__, __LINE__, "%s [%s]: %llu GPU reductions on rank %d, expected %d", tctx,
                mode_name, ran, mt_rank, count > 0 ? calls : 0);
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
                const unsigned long long before = device_calls();
                MT_CHECK_MPI(MPI_Reduce(sb.mpi, me == root ? rb.mpi : NULL, (int)c,
                                        tt[ops[oi].type].dt, ops[oi].op, root, comm));
                check_ring(before, c, 1);
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
                    fill_inputs(&sb, ops[oi].id, s, me);
                    tbuf_push(&sb);
                    tbuf_push(&rb);
                    unsigned char *expect = tbuf_snapshot(&rb);
                    for (long e = 0; e < c; ++e) {
                        int64_t acc[2];
                        tfold(ops[oi].id, ops[oi].type, s, 0, n, e, acc);
                        img_set(&rb, expect, e, acc);
                    }
                    const unsigned long long before = device_calls();
                    MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, (int)c, tt[ops[oi].type].dt,
                                               ops[oi].op, comm));
                    check_ring(before, c, 1);
                    tbuf_pull(&rb);
                    tbuf_matches(&rb, expect, 0, c, "result");
                    check_unchanged(&sb, "send buffer");
                    free(expect);
                    tbuf_free(&sb);
                    tbuf_free(&rb);
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
                tbuf_alloc(&sb, t, c, k);
                tbuf_alloc(&rb, t, c, k);
                fill_inputs(&sb, OP_SUM, s, me);
                tbuf_push(&sb);
                tbuf_push(&rb);
                unsigned char *expect = tbuf_snapshot(&rb);
                for (long e = 0; e < c; ++e) {
                    int64_t acc[2];
                    tfold(OP_SUM, t, s, 0, n, e, acc);
                    img_set(&rb, expect, e, acc);
                }
                const unsigned long long before = device_calls();
                MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, (int)c, tt[t].dt, sum, comm));
                /* A user-defined op: no rank runs the GPU ring. */
                check_ring(before, 0, 0);
                tbuf_pull(&rb);
                /* Every byte, gaps included. */
                tbuf_matches(&rb, expect, 0, 0, "result");
                check_unchanged(&sb, "send buffer");
                free(expect);
                tbuf_free(&sb);
                tbuf_free(&rb);
            }
        }
    }
    MT_CHECK_MPI(MPI_Op_free(&sum));
}

int main(int argc, char **argv)
{
    harness_init(&argc, &argv);
    if (harness_skip_reason()) return mt_skip(harness_skip_reason());
    if (mem_send != mem_recv || mem_send == MEM_HOST) {
        mt_fail(__FILE__, __LINE__, "mode %s: give fakedevrw or device", mode_name);
        return mt_finish();
    }
    const enum mem_kind dev = mem_send;
    open_counter(dev == MEM_FAKEDEV_RW ? "gpuwirefake" : "gpuwire");

    const struct {
        const char *name;
        void (*fn)(MPI_Comm, enum mem_kind);
    } cases[] = {
        {"reduce to a host buffer", reduce_host_root},
        {"allreduce with one host buffer", allreduce_one_host_buffer},
        {"allreduce with one rank's type with gaps", allreduce_one_rank_with_gaps},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        const int before = mt_failures;
        cases[i].fn(MPI_COMM_WORLD, dev);
        if (mt_failures != before) {
            fprintf(stderr, "[rank %d] %s: %d failure(s)\n", mt_rank, cases[i].name,
                    mt_failures - before);
        }
    }
    close_counter();
    harness_fini();
    return mt_finish();
}
