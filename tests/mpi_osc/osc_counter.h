/*
 * The exclusive counter of the one-sided tests: every rank adds rounds to
 * the int64 at displacement 0 of rank 0's window, each a Get, a flush and a
 * Put under an exclusive lock. The sum is exact only when the lock excludes
 * and the Put lands before the lock is released.
 */
#ifndef GPUWIRE_OSC_COUNTER_H
#define GPUWIRE_OSC_COUNTER_H

#include <stdint.h>

#include "mpitest.h"

static inline void osc_counter_rounds(MPI_Win win, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        int64_t v = -1;
        MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MT_CHECK_MPI(MPI_Get(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
        MT_CHECK_MPI(MPI_Win_flush(0, win));
        v++;
        MT_CHECK_MPI(MPI_Put(&v, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
        MT_CHECK_MPI(MPI_Win_unlock(0, win));
    }
}

#endif
