/* The smallest MPI program: init, one message to self, finalize. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, v = 42, w = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Sendrecv(&v, 1, MPI_INT, rank, 0, &w, 1, MPI_INT, rank, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    printf("rank %d: %s\n", rank, w == 42 ? "ok" : "wrong");
    MPI_Finalize();
    return w == 42 ? 0 : 1;
}
