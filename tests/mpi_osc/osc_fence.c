/*
 * Fence epochs read by a third rank (docs/osc.md, "Fence"): in each round
 * every rank Puts and Accumulates into the next rank's window, fences, and
 * then Gets from the rank after next the slots the rank before it wrote --
 * data a third rank put there in the epoch just closed. A fence that let a
 * rank start the next epoch before a target had applied every operation of
 * the last would show here as a stale value. One rank sleeps before some
 * fences, so that the others reach the fence first. 3 ranks or more; run
 * with the direct path (shared memory, copies) and without it (messages).
 * Every rank on one node: the fences close by counts in shared memory
 * (osc_gpuwire_shm_fences counts them) unless osc_gpuwire_shm_fence is 0
 * (a barrier of messages).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_pvar.h"
#include "mpitest.h"

#define ROUNDS 200
/* int64 per writer: half written by Put, half by Accumulate (SUM); 64 KiB
 * each, past the eager size, so that a message-path Put may still be moving
 * its data when the small messages of the fence have gone. */
#define SLOT 16384

static int64_t value(int round, int writer, int i) { return 1000000LL * round + 1000LL * writer + i; }

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (mt_size < 3) return mt_skip("needs 3 or more ranks");
    int provided = 0;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    static const char *const pv_name[1] = {"osc_gpuwire_shm_fences"};
    pvar_counters_t counters;
    if (pvar_counters_open(&counters, pv_name, 1) >= 0)
        mt_fail(__FILE__, __LINE__, "no performance variable %s", pv_name[0]);
    const int r = mt_rank, n = mt_size;
    const int next = (r + 1) % n, prev = (r + n - 1) % n, far = (r + 2) % n;
    /* Far's slots written in the last epoch: by the rank just before it. */
    const int writer = (far + n - 1) % n;
    int64_t *base = NULL;
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_allocate((MPI_Aint)(n * SLOT * sizeof(int64_t)), sizeof(int64_t),
                                  MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    static int64_t put[SLOT / 2], acc[SLOT / 2], got[SLOT];
    int stale = 0;
    for (int round = 1; round <= ROUNDS && stale == 0; round++) {
        /* The accumulated half of the slot prev writes here starts at 0 each
         * round (a local store into this rank's own window). */
        for (int i = 0; i < SLOT / 2; i++) base[(size_t)prev * SLOT + SLOT / 2 + i] = 0;
        MT_CHECK_MPI(MPI_Win_fence(0, win));
        for (int i = 0; i < SLOT / 2; i++) {
            put[i] = value(round, r, i);
            acc[i] = value(round, r, SLOT / 2 + i);
        }
        /* Into the next rank's window, at this rank's slot. */
        MT_CHECK_MPI(MPI_Put(put, SLOT / 2, MPI_INT64_T, next, (MPI_Aint)r * SLOT, SLOT / 2,
                             MPI_INT64_T, win));
        MT_CHECK_MPI(MPI_Accumulate(acc, SLOT / 2, MPI_INT64_T, next,
                                    (MPI_Aint)r * SLOT + SLOT / 2, SLOT / 2, MPI_INT64_T,
                                    MPI_SUM, win));
        if (r == round % n && round % 3 == 0) usleep(2000);
        MT_CHECK_MPI(MPI_Win_fence(0, win));
        /* The next epoch: a third rank's data in far's window. */
        MT_CHECK_MPI(MPI_Get(got, SLOT, MPI_INT64_T, far, (MPI_Aint)writer * SLOT, SLOT,
                             MPI_INT64_T, win));
        MT_CHECK_MPI(MPI_Win_fence(0, win));
        for (int i = 0; i < SLOT; i++) {
            if (got[i] != value(round, writer, i)) {
                mt_fail(__FILE__, __LINE__,
                        "round %d: rank %d read %lld at rank %d's slot %d of rank %d, not %lld",
                        round, r, (long long)got[i], far, i, writer,
                        (long long)value(round, writer, i));
                stale = 1;
                break;
            }
        }
    }
    MT_CHECK_MPI(MPI_Win_free(&win));
    const unsigned long long fences = pvar_counters_read(&counters, 0);
    pvar_counters_close(&counters);
    MPI_T_finalize();
    const char *env = getenv("OMPI_MCA_osc_gpuwire_shm_fence");
    if (env != NULL && strcmp(env, "0") == 0) {
        MT_CHECK_EQ(fences, 0ULL);
    } else {
        MT_CHECK_EQ(fences, (unsigned long long)(1 + 3 * ROUNDS));
    }
    return mt_finish();
}
