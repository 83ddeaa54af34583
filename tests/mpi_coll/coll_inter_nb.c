/*
 * Non-blocking reductions on an inter-communicator (coll_gpuwire_inter.c):
 * libnbc reduces them with the CPU, so on device buffers coll gpuwire stages
 * Iallreduce and Ireduce, and refuses Ireduce_scatter(_block) with
 * MPI_ERR_BUFFER; host buffers go to libnbc unchanged.
 *
 * Groups: even and odd world ranks. Iallreduce: every rank gets the sum of
 * the other group's vectors. Ireduce: rank 0 of each group in turn is the
 * root (MPI_ROOT), the rest of its group passes MPI_PROC_NULL, the other
 * group sends. Counts 1, odd and large; several calls in flight at once.
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
    MT_CHECK_MPI(MPI_Iallreduce(s.mem, r1.mem, (int)n, MPI_INT, MPI_SUM, inter, &req[0]));
    MT_CHECK_MPI(MPI_Iallreduce(s.mem, r2.mem, (int)n, MPI_INT, MPI_SUM, inter, &req[1]));
    /* Ireduce to rank 0 of the even group, then of the odd one. */
    for (int g = 0; g < 2; ++g) {
        const int root = wrank % 2 == g ? (0 == lrank ? MPI_ROOT : MPI_PROC_NULL) : 0;
        MT_CHECK_MPI(MPI_Ireduce(s.mem, MPI_ROOT == root ? r3.mem : NULL, (int)n, MPI_INT,
                                 MPI_SUM, root, inter, &req[2 + g]));
    }
    MT_CHECK_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
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

/* Device buffers: refused in one line, the communicator still usable. */
static void reduce_scatter_refused(MPI_Comm inter)
{
    int lsize;
    MPI_Comm_size(inter, &lsize);
    int *counts = malloc(lsize * sizeof(int));
    for (int q = 0; q < lsize; ++q) counts[q] = 2;
    buf_t s = buf_new(2L * lsize, NULL), r = buf_new(2, NULL);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce_scatter_block(s.mem, r.mem, 2, MPI_INT, MPI_SUM, inter, &req);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    MT_CHECK_EQ(cls, MPI_ERR_BUFFER);
    rc = MPI_Ireduce_scatter(s.mem, r.mem, counts, MPI_INT, MPI_SUM, inter, &req);
    MPI_Error_class(rc, &cls);
    MT_CHECK_EQ(cls, MPI_ERR_BUFFER);
    buf_free(&s);
    buf_free(&r);
    free(counts);
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
    const long counts[] = {1, 4097, 1 << 18};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
        allreduce_and_reduce(inter, counts[k]);
    }
    if (MEM_HOST != mem_send) reduce_scatter_refused(inter);
    /* Still usable afterwards. */
    allreduce_and_reduce(inter, 33);
    MT_CHECK_MPI(MPI_Comm_free(&inter));
    MT_CHECK_MPI(MPI_Comm_free(&local));
    harness_fini();
    return mt_finish();
}
