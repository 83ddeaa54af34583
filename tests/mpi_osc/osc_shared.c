/*
 * MPI_Win_allocate_shared (docs/osc.md, "Shared windows"). Every rank's part
 * of the window, of a different size (rank 1's empty), in one segment:
 * - MPI_Win_shared_query gives every part's size, unit and address here;
 *   the parts follow one another (or, with the info alloc_shared_noncontig,
 *   argument "noncontig", start on pages); MPI_PROC_NULL: the first part
 *   with bytes;
 * - loads and stores through those addresses, ordered by MPI_Win_sync and a
 *   barrier, as MPI's shared-memory model has them;
 * - Put, Get, Accumulate, Fetch_and_op from origin buffers in host memory or
 *   (OSC_TEST_DEVICE, OSC_TEST_FAKEDEV) in GPU memory, which osc/sm would
 *   read with the CPU: under fence, then every rank at once into rank 0's
 *   first element under lock_all;
 * - osc_gpuwire_shared_targets tells whose window it is: argument "sm"
 *   expects osc/sm's (a process without a GPU, --mca osc gpuwire,sm), else
 *   osc gpuwire's.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_pvar.h"
#include "mpitest.h"
#include "osc_test_mem.h"

#ifdef OSC_TEST_FAKEDEV
#define PVAR_PREFIX "osc_gpuwirefake_"
#else
#define PVAR_PREFIX "osc_gpuwire_"
#endif

#define N 64 /* int64 moved per operation (the simulated GPU's buffers: one page) */

/* Rank r's part: (r + 1) * 1000 int64, rank 1's empty. */
static MPI_Aint part_of(int r) { return r == 1 ? 0 : (MPI_Aint)(r + 1) * 1000; }

static int64_t value(int writer, int i) { return 1000000LL * (writer + 1) + i; }

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (osc_test_setup() != 0) return mt_skip("no GPU on this machine");
    if (mt_size < 3) return mt_skip("needs 3 or more ranks");
    const int noncontig = argc > 1 && strcmp(argv[1], "noncontig") == 0;
    const int expect_sm = argc > 1 && strcmp(argv[1], "sm") == 0;
    const int r = mt_rank, n = mt_size;
    int provided = 0;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    static const char *const pv_name[1] = {PVAR_PREFIX "shared_targets"};
    pvar_counters_t counters;
    if (pvar_counters_open(&counters, pv_name, 1) >= 0)
        mt_fail(__FILE__, __LINE__, "no performance variable %s", pv_name[0]);

    MPI_Info info = MPI_INFO_NULL;
    if (noncontig) {
        MT_CHECK_MPI(MPI_Info_create(&info));
        MT_CHECK_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    }
    int64_t *mine = NULL;
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_allocate_shared(part_of(r) * (MPI_Aint)sizeof(int64_t), sizeof(int64_t),
                                         info, MPI_COMM_WORLD, &mine, &win));
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    int flavor_set = 0, *flavor = NULL;
    MT_CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flavor_set));
    MT_CHECK(flavor_set && *flavor == MPI_WIN_FLAVOR_SHARED);

    /* Every part as mapped here. */
    int64_t **part = calloc((size_t)n, sizeof(*part));
    MT_CHECK(part != NULL);
    const long page = sysconf(_SC_PAGESIZE);
    for (int t = 0; t < n; t++) {
        MPI_Aint size = -1;
        int du = 0;
        MT_CHECK_MPI(MPI_Win_shared_query(win, t, &size, &du, &part[t]));
        MT_CHECK_EQ(size, part_of(t) * (MPI_Aint)sizeof(int64_t));
        MT_CHECK_EQ(du, (int)sizeof(int64_t));
        if (t == r && part_of(t) > 0) MT_CHECK(part[t] == mine);
        if (noncontig && part_of(t) > 0) MT_CHECK((uintptr_t)part[t] % (uintptr_t)page == 0);
        if (!noncontig && t > 0) MT_CHECK(part[t] == part[t - 1] + part_of(t - 1));
    }
    MPI_Aint size0 = -1;
    int du0 = 0;
    int64_t *first = NULL;
    MT_CHECK_MPI(MPI_Win_shared_query(win, MPI_PROC_NULL, &size0, &du0, &first));
    MT_CHECK(first == part[0]);
    MT_CHECK_EQ(size0, part_of(0) * (MPI_Aint)sizeof(int64_t));

    /* Stores into this rank's part, loads of every part. */
    MT_CHECK_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (MPI_Aint i = 0; i < part_of(r); i++) mine[i] = value(r, (int)i);
    MT_CHECK_MPI(MPI_Win_sync(win));
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_Win_sync(win));
    int wrong = 0;
    for (int t = 0; t < n; t++) {
        for (MPI_Aint i = 0; i < part_of(t); i++) wrong += part[t][i] != value(t, (int)i);
    }
    MT_CHECK_EQ(wrong, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_Win_unlock_all(win));

    /* Put, Get, Accumulate from origin buffers in the test's memory kind. */
    const size_t bytes = N * sizeof(int64_t);
    int64_t host[N], back[N];
    int64_t *origin = osc_test_alloc(bytes), *result = osc_test_alloc(bytes);
    MT_CHECK(origin != NULL && result != NULL);
    for (int i = 0; i < N; i++) host[i] = -value(r, i);
    osc_test_to(origin, host, bytes);
    const int next = (r + 1) % n == 1 ? 2 % n : (r + 1) % n; /* a rank with bytes */
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    MT_CHECK_MPI(MPI_Put(origin, N, MPI_INT64_T, next, (MPI_Aint)r * N, N, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    /* What each writer put here, read with loads. */
    for (int w = 0; w < n; w++) {
        const int to = (w + 1) % n == 1 ? 2 % n : (w + 1) % n;
        if (to != r) continue;
        for (int i = 0; i < N; i++) wrong += mine[w * N + i] != -value(w, i);
    }
    MT_CHECK_EQ(wrong, 0);
    /* Get it back into the origin's kind of memory; then Accumulate onto it. */
    MT_CHECK_MPI(MPI_Get(result, N, MPI_INT64_T, next, (MPI_Aint)r * N, N, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    osc_test_from(back, result, bytes);
    for (int i = 0; i < N; i++) wrong += back[i] != -value(r, i);
    MT_CHECK_EQ(wrong, 0);
    MT_CHECK_MPI(MPI_Accumulate(origin, N, MPI_INT64_T, next, (MPI_Aint)r * N, N, MPI_INT64_T,
                                MPI_SUM, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    MT_CHECK_MPI(MPI_Get(result, N, MPI_INT64_T, next, (MPI_Aint)r * N, N, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    osc_test_from(back, result, bytes);
    for (int i = 0; i < N; i++) wrong += back[i] != -2 * value(r, i);
    MT_CHECK_EQ(wrong, 0);

    /* Every rank at once into rank 0's first element. */
    if (r == 0) mine[0] = 0;
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    MT_CHECK_MPI(MPI_Win_lock_all(0, win));
    host[0] = 1;
    osc_test_to(origin, host, sizeof(int64_t));
    for (int k = 0; k < 100; k++) {
        MT_CHECK_MPI(MPI_Accumulate(origin, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win));
        MT_CHECK_MPI(MPI_Fetch_and_op(origin, result, MPI_INT64_T, 0, 0, MPI_SUM, win));
        MT_CHECK_MPI(MPI_Win_flush(0, win));
    }
    MT_CHECK_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_Win_sync(win));
    MT_CHECK_EQ(part[0][0], (int64_t)(200 * n));

    osc_test_free(origin);
    osc_test_free(result);
    MT_CHECK_MPI(MPI_Win_free(&win));
    free(part);

    /* One rank (MPI_COMM_SELF), and a window of no bytes at all. */
    char *self = NULL;
    MT_CHECK_MPI(MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, MPI_COMM_SELF, &self, &win));
    MT_CHECK(self != NULL);
    memset(self, r + 1, 64);
    MPI_Aint sz = 0;
    int du = 0;
    char *again = NULL;
    MT_CHECK_MPI(MPI_Win_shared_query(win, 0, &sz, &du, &again));
    MT_CHECK(again == self && sz == 64 && du == 1);
    MT_CHECK_MPI(MPI_Win_free(&win));
    char *none = NULL;
    MT_CHECK_MPI(MPI_Win_allocate_shared(0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &none, &win));
    MT_CHECK_MPI(MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &again));
    MT_CHECK_EQ(sz, (MPI_Aint)0);
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    MT_CHECK_MPI(MPI_Win_free(&win));
    const unsigned long long shared = pvar_counters_read(&counters, 0);
    pvar_counters_close(&counters);
    MPI_T_finalize();
    if (expect_sm) {
        MT_CHECK_EQ(shared, 0ULL);
    } else {
        MT_CHECK(shared > 0);
    }
    return mt_finish();
}
