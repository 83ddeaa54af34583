/*
 * Accumulates whose target datatype is derived from derived types: osc
 * gpuwire finds the one predefined element type by walking the type's
 * contents (MPI_Type_get_contents) and frees the handles that hands out.
 * A contiguous type (one inner type) of a struct (two inner types) once made
 * that walk read past the inner-type array; a struct of two vectors once
 * ended the walk early. Every rank accumulates (SUM) into every other rank's
 * window and fetches (Get_accumulate) the values before; data and return
 * codes are checked, and that no MPI call inside them raised an error on
 * MPI_COMM_WORLD (where a failing PMPI_ call of the component reports).
 * Last, a Get into a vector whose type is freed right after the call (MPI
 * lets it be; the reply is unpacked later) and another type made at once,
 * which would take the freed one's memory were it not held.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpitest.h"

#define N 8

static int world_errors;

static void count_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(*code, text, &len);
    fprintf(stderr, "rank %d: an MPI error was raised on MPI_COMM_WORLD: %s\n", mt_rank, text);
    world_errors++;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    const int r = mt_rank, size = mt_size;
    static int64_t mem[N];
    for (int i = 0; i < N; i++) mem[i] = 1000 * (int64_t)r + i;

    /* pair: a struct of two int64 (two inner types); quad: a contiguous of
     * two pairs (one inner type, itself derived). */
    MPI_Datatype pair, quad, vec, twovec;
    const int lens[2] = {1, 1};
    const MPI_Aint disps[2] = {0, sizeof(int64_t)};
    const MPI_Datatype types[2] = {MPI_INT64_T, MPI_INT64_T};
    MT_CHECK_MPI(MPI_Type_create_struct(2, lens, disps, types, &pair));
    MT_CHECK_MPI(MPI_Type_contiguous(2, pair, &quad));
    MT_CHECK_MPI(MPI_Type_commit(&quad));
    /* twovec: a struct of two derived types (elements 4 and 6, then 5 and 7). */
    MT_CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT64_T, &vec));
    const MPI_Aint vdisps[2] = {0, sizeof(int64_t)};
    const MPI_Datatype vtypes[2] = {vec, vec};
    MT_CHECK_MPI(MPI_Type_create_struct(2, lens, vdisps, vtypes, &twovec));
    MT_CHECK_MPI(MPI_Type_commit(&twovec));

    MPI_Errhandler counting;
    MT_CHECK_MPI(MPI_Comm_create_errhandler(count_error, &counting));
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_create(mem, sizeof(mem), sizeof(int64_t), MPI_INFO_NULL,
                                MPI_COMM_WORLD, &win));
    const int64_t one[4] = {1, 1, 1, 1};
    const int64_t ten[4] = {10, 10, 10, 10};
    int64_t before[4] = {-1, -1, -1, -1};
    const int next = (r + 1) % size;
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    MT_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, counting));
    for (int t = 0; t < size; t++) {
        if (t == r) continue;
        MT_CHECK_MPI(MPI_Accumulate(one, 4, MPI_INT64_T, t, 0, 1, quad, MPI_SUM, win));
        MT_CHECK_MPI(MPI_Accumulate(ten, 4, MPI_INT64_T, t, 4, 1, twovec, MPI_SUM, win));
    }
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    /* Fetch-and-add through the nested type too. */
    MT_CHECK_MPI(MPI_Get_accumulate(one, 4, MPI_INT64_T, before, 4, MPI_INT64_T, next, 0, 1,
                                    quad, MPI_SUM, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    MT_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MT_CHECK_EQ(world_errors, 0);

    const int64_t others = size - 1;
    for (int i = 0; i < 4; i++) {
        MT_CHECK_EQ(before[i], 1000 * (int64_t)next + i + others);
        MT_CHECK_EQ(mem[i], 1000 * (int64_t)r + i + others + 1);
        MT_CHECK_EQ(mem[4 + i], 1000 * (int64_t)r + 4 + i + 10 * others);
    }

    /* The Get's result type freed before the epoch ends. */
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int64_t got[7];
    for (int i = 0; i < 7; i++) got[i] = -7;
    MPI_Datatype every_other, dense;
    MT_CHECK_MPI(MPI_Type_vector(4, 1, 2, MPI_INT64_T, &every_other));
    MT_CHECK_MPI(MPI_Type_commit(&every_other));
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    MT_CHECK_MPI(MPI_Get(got, 1, every_other, next, 0, 4, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Type_free(&every_other));
    MT_CHECK_MPI(MPI_Type_contiguous(4, MPI_INT64_T, &dense));
    MT_CHECK_MPI(MPI_Type_commit(&dense));
    MT_CHECK_MPI(MPI_Win_unlock(next, win));
    MT_CHECK_MPI(MPI_Type_free(&dense));
    for (int i = 0; i < 4; i++) {
        MT_CHECK_EQ(got[2 * i], 1000 * (int64_t)next + i + others + 1);
        if (i < 3) MT_CHECK_EQ(got[2 * i + 1], -7);
    }
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    MT_CHECK_MPI(MPI_Win_free(&win));
    MPI_Errhandler_free(&counting);
    MPI_Type_free(&pair);
    MPI_Type_free(&quad);
    MPI_Type_free(&vec);
    MPI_Type_free(&twovec);
    return mt_finish();
}
