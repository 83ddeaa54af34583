/*
 * osc gpuwire declines shared windows: with "--mca osc gpuwire,sm" osc/sm
 * provides MPI_Win_allocate_shared (argument "ok"); with osc gpuwire alone
 * the call fails with an MPI error, no crash (argument "fail"), and the
 * other flavors still work.
 */
#include <string.h>

#include "mpitest.h"

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int expect_ok = argc > 1 && strcmp(argv[1], "ok") == 0;
    int *mem = NULL;
    MPI_Win win = MPI_WIN_NULL;
    int rc = MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                                     &mem, &win);
    if (expect_ok) {
        MT_CHECK_EQ(rc, MPI_SUCCESS);
        if (rc == MPI_SUCCESS) {
            MPI_Aint size = 0;
            int du = 0, *peer = NULL;
            MT_CHECK_MPI(MPI_Win_shared_query(win, 0, &size, &du, &peer));
            MT_CHECK_EQ(size, sizeof(int));
            MT_CHECK_MPI(MPI_Win_free(&win));
        }
    } else {
        MT_CHECK(rc != MPI_SUCCESS);
    }
    int host = 0;
    MT_CHECK_MPI(MPI_Win_create(&host, sizeof(host), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                                &win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    int one = 1;
    MT_CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win));
    MT_CHECK_MPI(MPI_Win_fence(0, win));
    if (mt_rank == 0) MT_CHECK_EQ(host, mt_size);
    MT_CHECK_MPI(MPI_Win_free(&win));
    return mt_finish();
}
