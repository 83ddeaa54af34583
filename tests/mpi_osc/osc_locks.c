/*
 * osc gpuwire beyond osc_rma: exclusive locks queue (every rank increments
 * one counter with Get, flush, Put under an exclusive lock: only mutual
 * exclusion makes the total exact), MPI_MODE_NOCHECK, MPI_Win_test,
 * synchronisation calls out of place (MPI_ERR_RMA_SYNC), and transfers of
 * 4 MiB (above every pml's eager limit) with fence and lock, through vector
 * types too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_pvar.h"
#include "mpitest.h"
#include "osc_counter.h"

#define ROUNDS 25
#define BIG (512 * 1024) /* int64 elements: 4 MiB */

static void exclusive_counter(void)
{
    /* Created, not allocated: without --mca osc, osc/sm would take an
     * allocated window on one node. */
    static int64_t mem[1];
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_create(mem, sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
                                MPI_COMM_WORLD, &win));
    *mem = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    osc_counter_rounds(win, ROUNDS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) MT_CHECK_EQ(*mem, (int64_t)ROUNDS * mt_size);
    MPI_Barrier(MPI_COMM_WORLD); /* read before anyone adds more */
    /* Shared locks held by every rank at once, NOCHECK beside them. */
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    int64_t one = 1, got = -1;
    MT_CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win));
    MPI_Barrier(MPI_COMM_WORLD); /* every rank holds the shared lock here */
    MT_CHECK_MPI(MPI_Win_unlock(0, win));
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win));
    MT_CHECK_MPI(MPI_Get(&got, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_unlock(0, win));
    MT_CHECK_EQ(got, (int64_t)ROUNDS * mt_size + mt_size);
    /* Synchronisation out of place: an error, not a hang or a crash. */
    int cls = 0;
    MT_CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Error_class(MPI_Win_unlock(0, win), &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_SYNC);
    MPI_Error_class(MPI_Win_complete(win), &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_SYNC);
    MPI_Error_class(MPI_Win_flush(0, win), &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_SYNC);
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    MPI_Error_class(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_SYNC);
    MT_CHECK_MPI(MPI_Win_unlock(0, win));
    MT_CHECK_MPI(MPI_Win_free(&win));
}

static void big_transfers(void)
{
    int64_t *mem, *buf = malloc(BIG * sizeof(int64_t));
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_allocate(BIG * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
                                  MPI_COMM_WORLD, &mem, &win));
    const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
    for (int i = 0; i < BIG; i++) {
        buf[i] = (int64_t)mt_rank << 32 | i;
        mem[i] = -1;
    }
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    MT_CHECK_MPI(MPI_Put(buf, BIG, MPI_INT64_T, next, 0, BIG, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    int bad = 0;
    for (int i = 0; i < BIG && !bad; i++) bad = mem[i] != ((int64_t)prev << 32 | i);
    MT_CHECK(!bad);

    /* Get it back from the next rank under a lock: its window holds ours. */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < BIG; i++) buf[i] = 0;
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    MT_CHECK_MPI(MPI_Get(buf, BIG, MPI_INT64_T, next, 0, BIG, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_unlock(next, win));
    bad = 0;
    for (int i = 0; i < BIG && !bad; i++) bad = buf[i] != ((int64_t)mt_rank << 32 | i);
    MT_CHECK(!bad);

    /* Every other element, accumulated into every third. */
    MPI_Datatype every2, every3;
    int n = BIG / 4;
    MPI_Type_vector(n, 1, 2, MPI_INT64_T, &every2);
    MPI_Type_vector(n, 1, 3, MPI_INT64_T, &every3);
    MPI_Type_commit(&every2);
    MPI_Type_commit(&every3);
    for (int i = 0; i < BIG; i++) buf[i] = i;
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    MT_CHECK_MPI(MPI_Accumulate(buf, 1, every2, next, 0, 1, every3, MPI_SUM, win));
    MT_CHECK_MPI(MPI_Win_unlock(next, win));
    MPI_Barrier(MPI_COMM_WORLD);
    bad = 0;
    for (int i = 0; i < 3 * n && !bad; i++) {
        int64_t want = ((int64_t)prev << 32 | i) + (i % 3 == 0 ? 2 * (i / 3) : 0);
        bad = mem[i] != want;
    }
    MT_CHECK(!bad);
    MPI_Type_free(&every2);
    MPI_Type_free(&every3);
    MT_CHECK_MPI(MPI_Win_free(&win));
    free(buf);
}

/* PSCW with the target polling MPI_Win_test. */
static void pscw_test(void)
{
    int64_t mem[4] = {0}, v = mt_rank + 1;
    MPI_Win win;
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MT_CHECK_MPI(MPI_Win_create(mem, sizeof(mem), sizeof(int64_t), MPI_INFO_NULL,
                                MPI_COMM_WORLD, &win));
    MT_CHECK_MPI(MPI_Win_post(world, 0, win));
    MT_CHECK_MPI(MPI_Win_start(world, 0, win));
    for (int t = 0; t < mt_size; t++) {
        MT_CHECK_MPI(MPI_Accumulate(&v, 1, MPI_INT64_T, t, 0, 1, MPI_INT64_T, MPI_SUM, win));
    }
    MT_CHECK_MPI(MPI_Win_complete(win));
    int flag = 0, polls = 0;
    while (!flag) {
        MT_CHECK_MPI(MPI_Win_test(win, &flag));
        polls++;
    }
    MT_CHECK_EQ(mem[0], (int64_t)mt_size * (mt_size + 1) / 2);
    MT_CHECK(polls >= 1);
    MT_CHECK_MPI(MPI_Win_free(&win));
    MPI_Group_free(&world);
}

/* osc_gpuwire_word_locks: locks taken in a same-node target's lock word.
 * Every rank of these tests shares one node, so they grow unless this rank
 * sends its locks as messages (osc_gpuwire_lock_word 0, which a test may
 * give one rank only: the others then take the word of a target that also
 * grants requests by message). */
static const char *const pv_words[1] = {"osc_gpuwire_word_locks"};
static pvar_counters_t counters;

static void words_open(void)
{
    int provided = 0;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    if (pvar_counters_open(&counters, pv_words, 1) >= 0)
        mt_fail(__FILE__, __LINE__, "no performance variable %s", pv_words[0]);
}

static void words_check(void)
{
    const unsigned long long v = pvar_counters_read(&counters, 0);
    pvar_counters_close(&counters);
    MPI_T_finalize();
    const char *env = getenv("OMPI_MCA_osc_gpuwire_lock_word");
    const int words = env == NULL || strcmp(env, "0") != 0;
    if (words) {
        MT_CHECK(v >= ROUNDS);
    } else {
        MT_CHECK_EQ(v, 0ULL);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    words_open();
    exclusive_counter();
    big_transfers();
    pscw_test();
    words_check();
    return mt_finish();
}
