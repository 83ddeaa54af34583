/*
 * The accumulate family on MPI_Win_allocate host windows in shared memory,
 * on MPI_Win_create host windows that the peers reach by cross-memory attach
 * (OSC_TEST_HOST_CREATE), or (OSC_TEST_DEVICE, OSC_TEST_FAKEDEV_IPC) on
 * MPI_Win_create windows in device memory that the peers map (docs/osc.md):
 * a same-node origin applies
 * Accumulate, Get_accumulate, Fetch_and_op and Compare_and_swap itself (in
 * the mapping; by the GPU's kernels on a device window), under the
 * target's accumulate word, while the target applies those that come as
 * messages (a derived target type keeps the message path) under the same
 * word. Checked, from every rank at once, on one element of rank 0's window:
 * - every Fetch_and_op sees a different value, and the sum is exact, with
 *   the odd ranks' increments going as messages among the even ranks'
 *   direct ones (atomic across both paths); likewise every element of a
 *   32 KiB Accumulate done by all ranks at once;
 * - a counter raised by Compare_and_swap loops is exact;
 * - one origin's order: an Accumulate sent as a message, then a
 *   Fetch_and_op of the same element with no flush between, sees it;
 * - REPLACE, MAX, MINLOC (MPI_2INT), NO_OP, Rget_accumulate's data;
 * - outside the window: MPI_ERR_RMA_RANGE, nothing written;
 * - osc_gpuwire_direct_accs grows (with osc_gpuwire_acc_word_busy, the
 *   ones contention sent as messages; both stay 0 with osc_gpuwire_direct 0).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_pvar.h"
#include "mpitest.h"
#include "osc_test_mem.h"

#ifndef OSC_TEST_HOST_CREATE
#define OSC_TEST_HOST_CREATE 0
#endif

#define ROUNDS 400
#define SLOTS 64
#define BIG 4096 /* int64 after the slots: long accumulates that overlap */
#define BIG_ROUNDS 2000
#define WIN_BYTES ((SLOTS + BIG) * sizeof(int64_t))

#ifdef OSC_TEST_FAKEDEV_IPC
#define PVAR_PREFIX "osc_gpuwirefake_"
#else
#define PVAR_PREFIX "osc_gpuwire_"
#endif

static const char *const pv_name[2] = {PVAR_PREFIX "direct_accs", PVAR_PREFIX "acc_word_busy"};
static pvar_counters_t counters;

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Element 0: every rank's increments at once, the odd ranks' as messages.
 * Element 1: a counter raised by Compare_and_swap loops. */
static void counters_at_once(MPI_Win win, int64_t *mem, MPI_Datatype one_msg,
                             MPI_Datatype big_msg)
{
    const int r = mt_rank, size = mt_size;
    int64_t one = 1, *seen = calloc(ROUNDS, sizeof(int64_t));
    int64_t *ones = malloc(BIG * sizeof(int64_t));
    MT_CHECK(seen != NULL && ones != NULL);
    for (int k = 0; k < BIG; k++) ones[k] = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < BIG_ROUNDS; i++) {
        if (r % 2 == 0) {
            MT_CHECK_MPI(MPI_Accumulate(ones, BIG, MPI_INT64_T, 0, SLOTS, BIG, MPI_INT64_T,
                                        MPI_SUM, win));
        } else {
            MT_CHECK_MPI(MPI_Accumulate(ones, BIG, MPI_INT64_T, 0, SLOTS, 1, big_msg, MPI_SUM,
                                        win));
        }
        if (i % 16 == 15) MT_CHECK_MPI(MPI_Win_flush(0, win));
    }
    for (int i = 0; i < ROUNDS; i++) {
        if (r % 2 == 0) {
            MT_CHECK_MPI(MPI_Fetch_and_op(&one, &seen[i], MPI_INT64_T, 0, 0, MPI_SUM, win));
        } else {
            MT_CHECK_MPI(MPI_Get_accumulate(&one, 1, MPI_INT64_T, &seen[i], 1, MPI_INT64_T, 0,
                                            0, 1, one_msg, MPI_SUM, win));
        }
        /* (The message path's result is there after a flush.) */
        MT_CHECK_MPI(MPI_Win_flush(0, win));
        int64_t old = 0, got = -1;
        MT_CHECK_MPI(MPI_Fetch_and_op(NULL, &old, MPI_INT64_T, 0, 1, MPI_NO_OP, win));
        MT_CHECK_MPI(MPI_Win_flush(0, win));
        for (;;) {
            int64_t want = old + 1;
            MT_CHECK_MPI(MPI_Compare_and_swap(&want, &old, &got, MPI_INT64_T, 0, 1, win));
            MT_CHECK_MPI(MPI_Win_flush(0, win));
            if (got == old) break;
            old = got;
        }
    }
    MT_CHECK_MPI(MPI_Win_unlock_all(win));
    int64_t *all = r == 0 ? malloc((size_t)size * ROUNDS * sizeof(int64_t)) : NULL;
    MT_CHECK(r != 0 || all != NULL);
    MT_CHECK_MPI(MPI_Gather(seen, ROUNDS, MPI_INT64_T, all, ROUNDS, MPI_INT64_T, 0,
                            MPI_COMM_WORLD));
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0) {
        qsort(all, (size_t)size * ROUNDS, sizeof(int64_t), cmp64);
        for (int64_t k = 0; k < (int64_t)size * ROUNDS; k++) MT_CHECK_EQ(all[k], k);
        MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        int64_t *wmem = mem;
        mem = malloc(WIN_BYTES);
        MT_CHECK(mem != NULL);
        osc_test_from(mem, wmem, WIN_BYTES);
        MT_CHECK_EQ(mem[0], (int64_t)size * ROUNDS);
        MT_CHECK_EQ(mem[1], (int64_t)size * ROUNDS);
        for (int k = 0; k < BIG; k++) {
            if (mem[SLOTS + k] != (int64_t)size * BIG_ROUNDS) {
                MT_CHECK_EQ(mem[SLOTS + k], (int64_t)size * BIG_ROUNDS);
                break;
            }
        }
        free(mem);
        MT_CHECK_MPI(MPI_Win_unlock(0, win));
    }
    free(all);
    free(seen);
    free(ones);
}

/* One origin's order, and the other ops, each on this rank's own slots of
 * the next rank's window. */
static void order_and_ops(MPI_Win win, MPI_Datatype one_msg)
{
    const int r = mt_rank, next = (r + 1) % mt_size;
    const int base = 8 + 4 * r; /* this rank's slots there */
    int64_t v = 5, got = -1;
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    MT_CHECK_MPI(MPI_Accumulate(&v, 1, MPI_INT64_T, next, base, 1, MPI_INT64_T, MPI_REPLACE,
                                win));
    /* As a message (derived type), then direct with no flush between. */
    v = 7;
    MT_CHECK_MPI(MPI_Accumulate(&v, 1, MPI_INT64_T, next, base, 1, one_msg, MPI_SUM, win));
    v = 100;
    MT_CHECK_MPI(MPI_Fetch_and_op(&v, &got, MPI_INT64_T, next, base, MPI_SUM, win));
    MT_CHECK_MPI(MPI_Win_flush(next, win));
    MT_CHECK_EQ(got, 12);
    MT_CHECK_MPI(MPI_Fetch_and_op(NULL, &got, MPI_INT64_T, next, base, MPI_NO_OP, win));
    MT_CHECK_MPI(MPI_Win_flush(next, win));
    MT_CHECK_EQ(got, 112);
    /* MAX, then Rget_accumulate of two elements. */
    int64_t two[2] = {50, 200}, res[2] = {-1, -1};
    MT_CHECK_MPI(MPI_Accumulate(two, 2, MPI_INT64_T, next, base + 1, 2, MPI_INT64_T, MPI_REPLACE,
                                win));
    int64_t more[2] = {60, 150};
    MT_CHECK_MPI(MPI_Accumulate(more, 2, MPI_INT64_T, next, base + 1, 2, MPI_INT64_T, MPI_MAX,
                                win));
    MPI_Request req;
    int64_t add[2] = {1, 2};
    MT_CHECK_MPI(MPI_Rget_accumulate(add, 2, MPI_INT64_T, res, 2, MPI_INT64_T, next, base + 1,
                                     2, MPI_INT64_T, MPI_SUM, win, &req));
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    MT_CHECK_EQ(res[0], 60);
    MT_CHECK_EQ(res[1], 200);
    MT_CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_INT64_T, res, 2, MPI_INT64_T, next, base + 1, 2,
                                    MPI_INT64_T, MPI_NO_OP, win));
    MT_CHECK_MPI(MPI_Win_flush(next, win));
    MT_CHECK_EQ(res[0], 61);
    MT_CHECK_EQ(res[1], 202);
    /* MINLOC on an MPI_2INT pair in slot base + 3. */
    int pair[2] = {9, r}, pres[2] = {-1, -1};
    MT_CHECK_MPI(MPI_Accumulate(pair, 1, MPI_2INT, next, base + 3, 1, MPI_2INT, MPI_REPLACE, win));
    int lower[2] = {4, 77};
    MT_CHECK_MPI(MPI_Get_accumulate(lower, 1, MPI_2INT, pres, 1, MPI_2INT, next, base + 3, 1,
                                    MPI_2INT, MPI_MINLOC, win));
    MT_CHECK_MPI(MPI_Win_flush(next, win));
    MT_CHECK_EQ(pres[0], 9);
    MT_CHECK_EQ(pres[1], r);
    MT_CHECK_MPI(MPI_Fetch_and_op(NULL, pres, MPI_2INT, next, base + 3, MPI_NO_OP, win));
    MT_CHECK_MPI(MPI_Win_flush(next, win));
    MT_CHECK_EQ(pres[0], 4);
    MT_CHECK_EQ(pres[1], 77);
    /* Outside the window: refused, nothing written (its last element). */
    const int last = SLOTS + BIG - 1;
    int64_t before = -1;
    MT_CHECK_MPI(MPI_Fetch_and_op(NULL, &before, MPI_INT64_T, next, last, MPI_NO_OP, win));
    MT_CHECK_MPI(MPI_Win_flush(next, win));
    int cls = MPI_SUCCESS;
    MT_CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Error_class(MPI_Fetch_and_op(&v, &got, MPI_INT64_T, next, last + 1, MPI_SUM, win), &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_RANGE);
    MPI_Error_class(MPI_Accumulate(two, 2, MPI_INT64_T, next, last, 2, MPI_INT64_T, MPI_SUM, win),
                    &cls);
    MT_CHECK_EQ(cls, MPI_ERR_RMA_RANGE);
    MT_CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_ARE_FATAL));
    MT_CHECK_MPI(MPI_Fetch_and_op(NULL, &got, MPI_INT64_T, next, last, MPI_NO_OP, win));
    MT_CHECK_MPI(MPI_Win_unlock(next, win));
    MT_CHECK_EQ(got, before);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (osc_test_setup() != 0) return mt_skip("no GPU on this machine");
    if (mt_size > 14) mt_fail(__FILE__, __LINE__, "at most 14 ranks (slots)");
    int provided = 0;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    const int missing = pvar_counters_open(&counters, pv_name, 2);
    if (missing >= 0) mt_fail(__FILE__, __LINE__, "no performance variable %s", pv_name[missing]);
    /* One int64, as a derived type: the target keeps the message path. */
    MPI_Datatype one_msg;
    MT_CHECK_MPI(MPI_Type_contiguous(1, MPI_INT64_T, &one_msg));
    MT_CHECK_MPI(MPI_Type_commit(&one_msg));
    MPI_Datatype big_msg;
    MT_CHECK_MPI(MPI_Type_contiguous(BIG, MPI_INT64_T, &big_msg));
    MT_CHECK_MPI(MPI_Type_commit(&big_msg));
    int64_t *mem = NULL;
    MPI_Win win;
    if (osc_test_device || OSC_TEST_HOST_CREATE) {
        mem = osc_test_alloc(WIN_BYTES);
        MT_CHECK_MPI(MPI_Win_create(mem, WIN_BYTES, sizeof(int64_t), MPI_INFO_NULL,
                                    MPI_COMM_WORLD, &win));
    } else {
        MT_CHECK_MPI(MPI_Win_allocate(WIN_BYTES, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD,
                                      &mem, &win));
    }
    void *zero = calloc(1, WIN_BYTES);
    MT_CHECK(zero != NULL);
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win));
    osc_test_to(mem, zero, WIN_BYTES);
    MT_CHECK_MPI(MPI_Win_unlock(mt_rank, win));
    free(zero);
    MPI_Barrier(MPI_COMM_WORLD);
    counters_at_once(win, mem, one_msg, big_msg);
    order_and_ops(win, one_msg);
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_Win_free(&win));
    if (osc_test_device || OSC_TEST_HOST_CREATE) osc_test_free(mem);
    MT_CHECK_MPI(MPI_Type_free(&one_msg));
    MT_CHECK_MPI(MPI_Type_free(&big_msg));
    const unsigned long long n = pvar_counters_read(&counters, 0),
                             busy = pvar_counters_read(&counters, 1);
    pvar_counters_close(&counters);
    MPI_T_finalize();
    const char *env = getenv("OMPI_MCA_osc_gpuwire_direct");
    if (env != NULL && strcmp(env, "0") == 0) {
        MT_CHECK_EQ(n + busy, 0ULL);
    } else {
        /* Every rank's CAS at least, done by the origin or sent as a message
         * because the word stayed held (ranks on few cores). */
        if (n == 0 || n + busy < ROUNDS) {
            fprintf(stderr, "[rank %d] %s %llu, %s %llu\n", mt_rank, pv_name[0], n, pv_name[1],
                    busy);
        }
        MT_CHECK(n > 0);
        MT_CHECK(n + busy >= ROUNDS);
    }
    return mt_finish();
}
