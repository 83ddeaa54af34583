/*
 * Collectives from several threads at once (MPI_THREAD_MULTIPLE), each
 * thread on a communicator of its own, as MPI allows: blocking and
 * non-blocking Allreduce, Bcast and Allgather on the mode's memory, sizes
 * changing every round so that the component's paths (small, staged, GPU
 * algorithms) interleave between threads. Every result is checked.
 *
 *   coll_threads fakedevrw | device   (GW_TEST_THREAD_MULTIPLE=1)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"

enum { THREADS = 3, ROUNDS = 40 };

static int me, n;
static enum mem_kind kind;

typedef struct {
    int id;
    MPI_Comm comm;
    int failures;
} worker_t;

static long size_of(int id, int round)
{
    static const long sizes[] = {1, 7, 64, 1000, 4096, 65536};
    return sizes[(id + round) % (int)(sizeof(sizes) / sizeof(sizes[0]))];
}

/* Value of element e on rank r in round k of thread id. */
static int64_t val(int id, int k, int r, long e)
{
    return (int64_t)((id + 1) * 1000003L + k * 7919L + r * 31L + e) % 1000000L;
}

/* (The harness's context line is one for the process: each thread names
 * itself in what instead.) */
static void check(worker_t *w, int k, tbuf_t *b, const unsigned char *expect, const char *what)
{
    char text[96];
    snprintf(text, sizeof(text), "%s, thread %d, round %d (%ld ints)", what, w->id, k,
             size_of(w->id, k));
    tbuf_pull(b);
    if (!tbuf_matches(b, expect, 0, 0, text)) w->failures++;
}

static void one_round(worker_t *w, int k)
{
    const long c = size_of(w->id, k);
    const int form = k % 3; /* 0 blocking, 1 non-blocking waited, 2 non-blocking tested */
    tbuf_t sb, rb;
    int64_t v[2] = {0, 0};

    /* Allreduce (sum of ints). */
    tbuf_alloc(&sb, T_INT, c, kind);
    tbuf_alloc(&rb, T_INT, c, kind);
    for (long e = 0; e < c; ++e) {
        v[0] = val(w->id, k, me, e);
        tbuf_set(&sb, e, v);
    }
    tbuf_push(&sb);
    tbuf_push(&rb);
    unsigned char *expect = tbuf_snapshot(&rb);
    for (long e = 0; e < c; ++e) {
        v[0] = 0;
        for (int r = 0; r < n; ++r) v[0] += val(w->id, k, r, e);
        img_set(&rb, expect, e, v);
    }
    MPI_Request q = MPI_REQUEST_NULL;
    if (0 == form) {
        MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, w->comm));
    } else {
        MT_CHECK_MPI(MPI_Iallreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, w->comm, &q));
    }
    if (1 == form) MT_CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (2 == form) {
        int done = 0;
        while (!done) MT_CHECK_MPI(MPI_Test(&q, &done, MPI_STATUS_IGNORE));
    }
    check(w, k, &rb, expect, "allreduce");
    free(expect);
    tbuf_free(&sb);
    tbuf_free(&rb);

    /* Bcast from a root that moves with the round. */
    const int root = (k + w->id) % n;
    tbuf_alloc(&rb, T_INT, c, kind);
    for (long e = 0; e < c; ++e) {
        v[0] = me == root ? val(w->id, k, root, e) : -1;
        tbuf_set(&rb, e, v);
    }
    tbuf_push(&rb);
    expect = tbuf_snapshot(&rb);
    for (long e = 0; e < c; ++e) {
        v[0] = val(w->id, k, root, e);
        img_set(&rb, expect, e, v);
    }
    if (0 == form) {
        MT_CHECK_MPI(MPI_Bcast(rb.mpi, (int)c, MPI_INT, root, w->comm));
    } else {
        MT_CHECK_MPI(MPI_Ibcast(rb.mpi, (int)c, MPI_INT, root, w->comm, &q));
        MT_CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    }
    check(w, k, &rb, expect, "bcast");
    free(expect);
    tbuf_free(&rb);

    /* Allgather of c ints per rank. */
    tbuf_alloc(&sb, T_INT, c, kind);
    tbuf_alloc(&rb, T_INT, c * n, kind);
    for (long e = 0; e < c; ++e) {
        v[0] = val(w->id, k, me, e);
        tbuf_set(&sb, e, v);
    }
    tbuf_push(&sb);
    tbuf_push(&rb);
    expect = tbuf_snapshot(&rb);
    for (int r = 0; r < n; ++r) {
        for (long e = 0; e < c; ++e) {
            v[0] = val(w->id, k, r, e);
            img_set(&rb, expect, r * c + e, v);
        }
    }
    if (0 == form) {
        MT_CHECK_MPI(MPI_Allgather(sb.mpi, (int)c, MPI_INT, rb.mpi, (int)c, MPI_INT, w->comm));
    } else {
        MT_CHECK_MPI(MPI_Iallgather(sb.mpi, (int)c, MPI_INT, rb.mpi, (int)c, MPI_INT, w->comm,
                                    &q));
        MT_CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    }
    check(w, k, &rb, expect, "allgather");
    free(expect);
    tbuf_free(&sb);
    tbuf_free(&rb);
}

static void *worker(void *p)
{
    worker_t *w = p;
    for (int k = 0; k < ROUNDS; ++k) one_round(w, k);
    return NULL;
}

int main(int argc, char **argv)
{
    int exit_code;
    if (!harness_init_device(&argc, &argv, &exit_code)) return exit_code;
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        mt_fail(__FILE__, __LINE__, "MPI_THREAD_MULTIPLE not provided (GW_TEST_THREAD_MULTIPLE=1)");
        harness_fini();
        return mt_finish();
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    kind = mem_send;
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; ++i) {
        w[i].id = i;
        w[i].failures = 0;
        MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm));
    }
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; ++i) {
        if (0 != pthread_create(&th[i], NULL, worker, &w[i])) abort();
    }
    int failures = 0;
    for (int i = 0; i < THREADS; ++i) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
        MT_CHECK_MPI(MPI_Comm_free(&w[i].comm));
    }
    MT_CHECK_EQ(failures, 0);
    harness_fini();
    return mt_finish();
}
