/*
 * MPI_Win_allocate host windows in shared memory (docs/osc.md): each rank's
 * window lives in its segment, which the ranks on its node map; a Put or Get
 * there is a memory copy. Checked: data after flush, unlock_all, fence and
 * an exclusive read-modify-write counter (the lock and the copies together);
 * a rank whose window has no bytes; a window that ends mid-page, written to
 * its last byte; accesses outside a window refused at the origin
 * (MPI_ERR_RMA_RANGE); nothing left in /dev/shm after MPI_Win_free. The counter
 * osc_gpuwire_shared_targets grows by the ranks whose windows have bytes,
 * unless the direct path is off (osc_gpuwire_direct 0: the windows are
 * private memory, every test the same).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_pvar.h"
#include "mpitest.h"
#include "osc_counter.h"

#define N 1000 /* int64 elements: 8,000 bytes, the window ends mid-page */
#define ROUNDS 50

static const char *const pv_name[1] = {"osc_gpuwire_shared_targets"};
static pvar_counters_t counters;

static int64_t tag(int rank, int i) { return 1000000 * (int64_t)(rank + 1) + i; }

/* Whether this process left a segment of its own in /dev/shm. */
static int leftovers(void)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "gwosc.%u.", (unsigned)getpid());
    DIR *d = opendir("/dev/shm");
    if (d == NULL) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* Put into the next rank's window, Get from the previous one's; flush, fence. */
static void put_get(void)
{
    const int r = mt_rank, size = mt_size, next = (r + 1) % size, prev = (r + size - 1) % size;
    int64_t *mem = NULL;
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_allocate(N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
                                  MPI_COMM_WORLD, &mem, &win));
    MT_CHECK(mem != NULL);
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, r, 0, win));
    for (int i = 0; i < N; i++) mem[i] = tag(r, i);
    MT_CHECK_MPI(MPI_Win_unlock(r, win));
    MPI_Barrier(MPI_COMM_WORLD);

    int64_t src[16], got[16] = {0};
    for (int k = 0; k < 16; k++) src[k] = -tag(r, k);
    MT_CHECK_MPI(MPI_Win_lock_all(0, win));
    MT_CHECK_MPI(MPI_Put(src, 16, MPI_INT64_T, next, 100, 16, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Put(src, 1, MPI_INT64_T, next, N - 1, 1, MPI_INT64_T, win)); /* last byte */
    MT_CHECK_MPI(MPI_Win_flush(next, win));
    MT_CHECK_MPI(MPI_Get(got, 16, MPI_INT64_T, prev, 500, 16, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_flush(prev, win));
    for (int k = 0; k < 16; k++) MT_CHECK_EQ(got[k], tag(prev, 500 + k));
    /* The Put just flushed, read back by this rank. */
    MT_CHECK_MPI(MPI_Get(got, 16, MPI_INT64_T, next, 100, 16, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_unlock_all(win));
    for (int k = 0; k < 16; k++) MT_CHECK_EQ(got[k], src[k]);
    MPI_Barrier(MPI_COMM_WORLD);
    /* The target sees it in its own memory (MPI_WIN_UNIFIED). */
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, r, 0, win));
    for (int k = 0; k < 16; k++) MT_CHECK_EQ(mem[100 + k], -tag(prev, k));
    MT_CHECK_EQ(mem[N - 1], -tag(prev, 0));
    MT_CHECK_EQ(mem[99], tag(r, 99));
    MT_CHECK_EQ(mem[116], tag(r, 116));
    MT_CHECK_MPI(MPI_Win_unlock(r, win));

    /* Fence epochs: every rank writes its slot of rank 0's window. */
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    int64_t mine = tag(r, 7);
    MT_CHECK_MPI(MPI_Put(&mine, 1, MPI_INT64_T, 0, 200 + r, 1, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    if (r == 0) {
        for (int q = 0; q < size; q++) MT_CHECK_EQ(mem[200 + q], tag(q, 7));
    }
    MT_CHECK_MPI(MPI_Win_free(&win));
}

/* A counter in rank 0's window, read and written back under an exclusive
 * lock by every rank: exact only when the lock excludes and the copies land
 * before it is released. Rank 1's window has no bytes. */
static void counter(void)
{
    int64_t *mem = NULL;
    MPI_Win win;
    const MPI_Aint bytes = mt_rank == 1 ? 0 : 64;
    MT_CHECK_MPI(MPI_Win_allocate(bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    if (mt_rank == 0) mem[0] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    osc_counter_rounds(win, ROUNDS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) MT_CHECK_EQ(mem[0], (int64_t)ROUNDS * mt_size);
    /* Outside a window (rank 1's has no bytes, rank 0's 64): refused at
     * the origin with MPI_ERR_RMA_RANGE, nothing written. */
    int64_t one = 1;
    int cls = MPI_SUCCESS;
    MT_CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MT_CHECK_MPI(MPI_Win_lock_all(0, win));
    MPI_Error_class(MPI_Put(&one, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win), &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_RANGE);
    MPI_Error_class(MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 8, 1, MPI_INT64_T, MPI_SUM, win),
                    &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_RANGE);
    MPI_Error_class(MPI_Get(&one, 2, MPI_INT64_T, 0, 7, 2, MPI_INT64_T, win), &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_RANGE);
    MT_CHECK_MPI(MPI_Get(&one, 1, MPI_INT64_T, 0, 7, 1, MPI_INT64_T, win)); /* its last */
    MT_CHECK_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) MT_CHECK_EQ(mem[0], (int64_t)ROUNDS * mt_size);
    MT_CHECK_MPI(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int provided = 0;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    if (pvar_counters_open(&counters, pv_name, 1) >= 0)
        mt_fail(__FILE__, __LINE__, "no performance variable %s", pv_name[0]);
    put_get();
    counter();
    const unsigned long long v = pvar_counters_read(&counters, 0);
    pvar_counters_close(&counters);
    MPI_T_finalize();
    const char *env = getenv("OMPI_MCA_osc_gpuwire_direct");
    const int direct = env == NULL || strcmp(env, "0") != 0;
    /* put_get: every rank's window; counter: all but rank 1's. */
    MT_CHECK_EQ(v, direct ? (unsigned long long)(2 * mt_size - 1) : 0ULL);
    MT_CHECK_EQ(leftovers(), 0);
    return mt_finish();
}
