/*
 * osc gpuwire under MPI_THREAD_MULTIPLE: four threads per rank inside one
 * lock_all epoch, each doing Fetch_and_op, Accumulate, flush and Get on
 * rank 0's window at once. The counter must be exact, every fetched value
 * distinct, and each thread's own slot read back as written.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "mpitest.h"

#define THREADS 4
#define ROUNDS 40

static MPI_Win win;
static int64_t fetched[THREADS][ROUNDS];

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    int slot = 1 + mt_rank * THREADS + t;
    int64_t one = 1;
    for (int i = 0; i < ROUNDS; i++) {
        MT_CHECK_MPI(MPI_Fetch_and_op(&one, &fetched[t][i], MPI_INT64_T, 0, 0, MPI_SUM, win));
        MT_CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT64_T, 0, slot, 1, MPI_INT64_T, MPI_SUM, win));
        MT_CHECK_MPI(MPI_Win_flush(0, win));
        int64_t mine = -1;
        MT_CHECK_MPI(MPI_Get(&mine, 1, MPI_INT64_T, 0, slot, 1, MPI_INT64_T, win));
        MT_CHECK_MPI(MPI_Win_flush_local(0, win));
        MT_CHECK_EQ(mine, i + 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) return mt_skip("MPI_THREAD_MULTIPLE not provided");
    int n = 1 + mt_size * THREADS;
    int64_t *mem;
    MT_CHECK_MPI(MPI_Win_allocate(n * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
                                  MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < n; i++) mem[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_Win_lock_all(0, win));
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    MT_CHECK_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    int total = mt_size * THREADS * ROUNDS;
    if (mt_rank == 0) {
        MT_CHECK_EQ(mem[0], total);
        for (int i = 1; i < n; i++) MT_CHECK_EQ(mem[i], ROUNDS);
    }
    int64_t *all = malloc(total * sizeof(int64_t));
    char *seen = calloc(total, 1);
    MPI_Gather(fetched, THREADS * ROUNDS, MPI_INT64_T, all, THREADS * ROUNDS, MPI_INT64_T, 0,
               MPI_COMM_WORLD);
    if (mt_rank == 0) {
        for (int i = 0; i < total; i++) {
            MT_CHECK(all[i] >= 0 && all[i] < total);
            if (all[i] >= 0 && all[i] < total) {
                MT_CHECK(!seen[all[i]]);
                seen[all[i]] = 1;
            }
        }
    }
    free(all);
    free(seen);
    MT_CHECK_MPI(MPI_Win_free(&win));
    return mt_finish();
}
