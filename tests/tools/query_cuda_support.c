/*
 * Calls MPIX_Query_cuda_support() before MPI_Init and after it, and checks
 * both answers against the expected ones.
 *
 *   query_cuda_support <expected before MPI_Init> <expected after MPI_Init>
 *
 * "-" skips a check. Run under mpirun with and without
 * -x LD_PRELOAD=libgpuwire_mpi.so (tests/tools/CMakeLists.txt).
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(const char *when, const char *expected, int got, int rank)
{
    if (strcmp(expected, "-") == 0) return 0;
    if (atoi(expected) == got) return 0;
    fprintf(stderr, "rank %d: MPIX_Query_cuda_support() %s MPI_Init returned %d, expected %s\n",
            rank, when, got, expected);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <before|-> <after|->\n", argv[0]);
        return 2;
    }
    int before = MPIX_Query_cuda_support();
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int after = MPIX_Query_cuda_support();
    int again = MPIX_Query_cuda_support();
    int bad = check("before", argv[1], before, rank) + check("after", argv[2], after, rank);
    if (again != after) {
        fprintf(stderr, "rank %d: a second call answered %d, the first %d\n", rank, again, after);
        bad = 1;
    }
    /* Point-to-point still works with the PML that answered. */
    int token = rank, size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) {
        int peer = rank ^ 1;
        if (peer < size) {
            MPI_Sendrecv_replace(&token, 1, MPI_INT, peer, 7, peer, 7, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
            if (token != peer) bad = 1;
        }
    }
    int all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("MPIX_Query_cuda_support(): %d before MPI_Init, %d after; %s\n", before, after,
               all_bad ? "FAILED" : "as expected");
    }
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
