/*
 * Non-blocking reductions on an inter-communicator (coll_gpuwire_inter.c):
 * libnbc reduces them with the CPU, so on device buffers coll gpuwire stages
 * Iallreduce, Ireduce, Ireduce_scatter and Ireduce_scatter_block; host
 * buffers go to libnbc unchanged.
 *
 * Groups: even and odd world ranks. Iallreduce: every rank gets the sum of
 * the other group's vectors. Ireduce: rank 0 of each group in turn is the
 * root (MPI_ROOT), the rest of its group passes MPI_PROC_NULL, the other
 * group sends. Counts 1, odd and large; several calls in flight at once.
 * Ireduce_scatter(_block): my group's part of the other group's sum. The
 * reductions run twice: MPI_I<op>, then the persistent form where this MPI
 * has it (MPIX_<op>_init in Open MPI 4.1). Ibcast,
 * Iallgather and Ialltoall: libnbc's point-to-point schedules.
 *
 *   coll_inter_nb host | fakedev | device
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"

static int wrank, wsize;

static int value(int wr, long i) { return (int)((wr + 1) * 1000 + i % 977); }

typedef struct {
    enum mem_kind kind;
    size_t bytes;
    void *mem;
} buf_t;

static buf_t buf_new(long n, const int *init)
{
    buf_t b = {mem_send, (size_t)n * sizeof(int), NULL};
    b.mem = mem_alloc(b.bytes, b.kind);
    if (init) mem_copy(b.mem, init, b.bytes, b.mem, b.kind);
    return b;
}

static void buf_get(const buf_t *b, int *out) { mem_copy(out, b->mem, b->bytes, b->mem, b->kind); }
static void buf_free(buf_t *b) { mem_free(b->mem, b->bytes, b->kind); }

/* Sum over the world ranks of the group other than mine, element i. */
static int other_sum(long i)
{
    int s = 0;
    for (int q = 0; q < wsize; ++q) {
        if (q % 2 != wrank % 2) s += value(q, i);
    }
    return s;
}

static void check(const int *got, long n, const char *what)
{
    for (long i = 0; i < n; ++i) {
        if (got[i] != other_sum(i)) {
            mt_fail(__FILE__, __LINE__, "%s of %ld ints on world rank %d: element %ld is %d, not %d",
                    what, n, wrank, i, got[i], other_sum(i));
            return;
        }
    }
}

/* Waits for the requests; persistent ones (t_persistent) stay, inactive, and
 * are freed. */
static void waitall(int n, MPI_Request *req)
{
    MT_CHECK_MPI(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n && t_persistent; ++i) {
        if (MPI_REQUEST_NULL == req[i]) {
            mt_fail(__FILE__, __LINE__, "MPI_Waitall freed persistent request %d", i);
        } else {
            MT_CHECK_MPI(MPI_Request_free(&req[i]));
        }
    }
}

static void allreduce_and_reduce(MPI_Comm inter, long n)
{
    int lrank;
    MPI_Comm_rank(inter, &lrank);
    int *mine = malloc(n * sizeof(int)), *got = malloc(n * sizeof(int));
    for (long i = 0; i < n; ++i) mine[i] = value(wrank, i);
    memset(got, 0xee, n * sizeof(int));
    /* Two Iallreduces and an Ireduce in flight. */
    buf_t s = buf_new(n, mine), r1 = buf_new(n, got), r2 = buf_new(n, got), r3 = buf_new(n, got);
    MPI_Request req[4];
    MT_CHECK_MPI(T_Iallreduce(s.mem, r1.mem, (int)n, MPI_INT, MPI_SUM, inter, &req[0]));
    MT_CHECK_MPI(T_Iallreduce(s.mem, r2.mem, (int)n, MPI_INT, MPI_SUM, inter, &req[1]));
    /* Ireduce to rank 0 of the even group, then of the odd one. */
    for (int g = 0; g < 2; ++g) {
        const int root = wrank % 2 == g ? (0 == lrank ? MPI_ROOT : MPI_PROC_NULL) : 0;
        MT_CHECK_MPI(T_Ireduce(s.mem, MPI_ROOT == root ? r3.mem : NULL, (int)n, MPI_INT, MPI_SUM,
                               root, inter, &req[2 + g]));
    }
    waitall(4, req);
    buf_get(&r1, got);
    check(got, n, "MPI_Iallreduce (first)");
    buf_get(&r2, got);
    check(got, n, "MPI_Iallreduce (second)");
    if (0 == lrank) {
        buf_get(&r3, got);
        check(got, n, "MPI_Ireduce at MPI_ROOT");
    }
    buf_free(&s);
    buf_free(&r1);
    buf_free(&r2);
    buf_free(&r3);
    free(mine);
    free(got);
}

/* Ireduce_scatter and Ireduce_scatter_block: the sum of the other group's
 * vectors of total elements (Open MPI's reading: total is the sum of the
 * local group's counts, the same in both groups), scattered over my group by
 * my group's counts. Two calls in flight. */
static void reduce_scatter(MPI_Comm inter, long total)
{
    int lrank, lsize;
    MPI_Comm_rank(inter, &lrank);
    MPI_Comm_size(inter, &lsize);
    /* Uneven counts for the v form; equal blocks (total / lsize) for the other. */
    int *counts = malloc(lsize * sizeof(int));
    long given = 0;
    for (int q = 0; q < lsize; ++q) {
        counts[q] = q + 1 < lsize ? (int)(total / lsize) + (q % 2 ? -1 : 1) : (int)(total - given);
        given += counts[q];
    }
    long before = 0;
    for (int q = 0; q < lrank; ++q) before += counts[q];
    const int block = (int)(total / lsize);
    int *mine = malloc(total * sizeof(int)), *got = malloc(total * sizeof(int));
    for (long i = 0; i < total; ++i) mine[i] = value(wrank, i);
    memset(got, 0xee, total * sizeof(int));
    buf_t s = buf_new(total, mine), rv = buf_new(counts[lrank], got), rb = buf_new(block, got);
    MPI_Request req[2];
    MT_CHECK_MPI(T_Ireduce_scatter(s.mem, rv.mem, counts, MPI_INT, MPI_SUM, inter, &req[0]));
    MT_CHECK_MPI(T_Ireduce_scatter_block(s.mem, rb.mem, block, MPI_INT, MPI_SUM, inter, &req[1]));
    waitall(2, req);
    buf_get(&rv, got);
    for (long j = 0; j < counts[lrank]; ++j) {
        if (got[j] != other_sum(before + j)) {
            mt_fail(__FILE__, __LINE__, "MPI_Ireduce_scatter of %ld ints on world rank %d: element %ld is %d, not %d",
                    total, wrank, j, got[j], other_sum(before + j));
            break;
        }
    }
    buf_get(&rb, got);
    for (long j = 0; j < block; ++j) {
        if (got[j] != other_sum((long)lrank * block + j)) {
            mt_fail(__FILE__, __LINE__, "MPI_Ireduce_scatter_block of %ld ints on world rank %d: element %ld is %d, not %d",
                    total, wrank, j, got[j], other_sum((long)lrank * block + j));
            break;
        }
    }
    buf_free(&s);
    buf_free(&rv);
    buf_free(&rb);
    free(mine);
    free(got);
    free(counts);
}

/* The moves (libnbc's point-to-point schedules, pml gpuwire on device
 * buffers): Ibcast from rank 0 of each group in turn, Iallgather and
 * Ialltoall of n ints a rank, all in flight together. */
static void moves(MPI_Comm inter, long n)
{
    int lrank, rsize;
    MPI_Comm_rank(inter, &lrank);
    MPI_Comm_remote_size(inter, &rsize);
    const long all = n * rsize;
    int *mine = malloc(all * sizeof(int)), *got = malloc(all * sizeof(int));
    for (long i = 0; i < all; ++i) mine[i] = value(wrank, i);
    memset(got, 0xee, all * sizeof(int));
    buf_t s = buf_new(all, mine), bc = buf_new(n, NULL), ag = buf_new(all, got),
          at = buf_new(all, got);
    MPI_Request req[4];
    for (int g = 0; g < 2; ++g) {
        const int root = wrank % 2 == g ? (0 == lrank ? MPI_ROOT : MPI_PROC_NULL) : 0;
        void *b = MPI_ROOT == root ? s.mem : bc.mem; /* the root's first n ints */
        MT_CHECK_MPI(MPI_Ibcast(b, (int)n, MPI_INT, root, inter, &req[g]));
    }
    MT_CHECK_MPI(MPI_Iallgather(s.mem, (int)n, MPI_INT, ag.mem, (int)n, MPI_INT, inter, &req[2]));
    MT_CHECK_MPI(MPI_Ialltoall(s.mem, (int)n, MPI_INT, at.mem, (int)n, MPI_INT, inter, &req[3]));
    MT_CHECK_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
    /* World rank of the other group's local rank q: its parity, q-th. */
    const int other = 1 - wrank % 2;
    buf_get(&bc, got);
    for (long i = 0; i < n; ++i) {
        if (got[i] != value(other, i)) {
            mt_fail(__FILE__, __LINE__, "MPI_Ibcast of %ld ints on world rank %d: element %ld is %d, not %d",
                    n, wrank, i, got[i], value(other, i));
            break;
        }
    }
    buf_get(&ag, got);
    for (int q = 0; q < rsize; ++q) {
        const int wq = other + 2 * q;
        for (long i = 0; i < n; ++i) {
            if (got[q * n + i] != value(wq, i)) {
                mt_fail(__FILE__, __LINE__, "MPI_Iallgather on world rank %d: block %d element %ld is %d, not %d",
                        wrank, q, i, got[q * n + i], value(wq, i));
                q = rsize;
                break;
            }
        }
    }
    buf_get(&at, got);
    for (int q = 0; q < rsize; ++q) {
        const int wq = other + 2 * q;
        for (long i = 0; i < n; ++i) {
            const int want = value(wq, lrank * n + i);
            if (got[q * n + i] != want) {
                mt_fail(__FILE__, __LINE__, "MPI_Ialltoall on world rank %d: block %d element %ld is %d, not %d",
                        wrank, q, i, got[q * n + i], want);
                q = rsize;
                break;
            }
        }
    }
    buf_free(&s);
    buf_free(&bc);
    buf_free(&ag);
    buf_free(&at);
    free(mine);
    free(got);
}

int main(int argc, char **argv)
{
    harness_init(&argc, &argv);
    const char *skip = harness_skip_reason();
    if (skip) return mt_skip(skip);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm local, inter;
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &local));
    /* The other group's leader is world rank 1 (for the even group) or 0. */
    MT_CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, wrank % 2 ? 0 : 1, 77, &inter));
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    /* The reductions as MPI_I<op>, then in their persistent form. */
    for (int form = 0; form < (t_persistent_available() ? 2 : 1); ++form) {
        t_persistent = 1 == form;
        const long counts[] = {1, 4097, 1 << 18};
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
            allreduce_and_reduce(inter, counts[k]);
        }
        /* Totals every group size here divides (1, 2 or 3 ranks a group). */
        const long totals[] = {6, 6 * 4099, 6 << 16};
        for (size_t k = 0; k < sizeof(totals) / sizeof(totals[0]); ++k) {
            reduce_scatter(inter, totals[k]);
        }
    }
    t_persistent = false;
    /* (The simulated device's memory is protected from the CPU, and only
     * coll gpuwire knows it: point-to-point cannot send it.) */
    if (!mem_protected(mem_send)) {
        moves(inter, 1);
        moves(inter, 5000);
    }
    /* Still usable afterwards. */
    allreduce_and_reduce(inter, 33);
    MT_CHECK_MPI(MPI_Comm_free(&inter));
    MT_CHECK_MPI(MPI_Comm_free(&local));
    harness_fini();
    return mt_finish();
}
