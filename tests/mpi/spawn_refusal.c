/* pml gpuwire refuses messages to processes of another job (MPI_Comm_spawn):
 * the send fails with an error and one line names the rank and the
 * communicator -- the spawn's intercommunicator has no name, and the line
 * must still say which one (ctest matches it). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent, inter;
    MPI_Comm_get_parent(&parent);
    if (MPI_COMM_NULL != parent) { /* the child: nothing to do */
        MPI_Finalize();
        return 0;
    }
    int err = 0;
    int rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter, &err);
    if (MPI_SUCCESS != rc) {
        printf("spawn_refusal: MPI_Comm_spawn failed (%d)\n", rc);
        MPI_Finalize();
        return 1;
    }
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int x = 1;
    rc = MPI_Send(&x, 1, MPI_INT, 0, 0, inter);
    printf(MPI_SUCCESS == rc ? "spawn_refusal: send accepted\n" : "spawn_refusal: send refused\n");
    fflush(stdout);
    MPI_Finalize();
    return MPI_SUCCESS == rc;
}
