/* libgpuwire_mpi.so loaded into a process without Open MPI: a wrapped call
 * whose PMPI function cannot be found answers MPI_ERR_INTERN (after one line
 * on stderr) instead of ending the process, and MPIX_Query_cuda_support
 * answers from the environment.
 *
 * The program links no MPI: mpi.h gives the prototypes and error codes only;
 * the library is dlopen-ed from argv[1]. Handles are never looked at on the
 * host path before the PMPI look-up, so NULL ones do. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                   \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
            return 1;                                                 \
        }                                                             \
    } while (0)

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    unsetenv("GPUWIRE_MPI_STAGE_ALL");
    unsetenv("OMPI_MCA_pml");
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) fprintf(stderr, "%s\n", dlerror());
    CHECK(lib != NULL);
    CHECK(dlsym(RTLD_DEFAULT, "PMPI_Pack") == NULL); /* really no MPI here */

    __typeof__(&MPI_Pack) pack = (__typeof__(&MPI_Pack))dlsym(lib, "MPI_Pack");
    __typeof__(&MPI_Bsend) bsend = (__typeof__(&MPI_Bsend))dlsym(lib, "MPI_Bsend");
    int (*query)(void) = (int (*)(void))dlsym(lib, "MPIX_Query_cuda_support");
    CHECK(pack && bsend && query);

    char in[8] = {0}, out[8];
    int position = 0;
    CHECK(pack(in, 8, NULL, out, 8, &position, NULL) == MPI_ERR_INTERN);
    CHECK(position == 0);
    /* Asked again: the look-up is retried, not remembered as a crash. */
    CHECK(pack(in, 8, NULL, out, 8, &position, NULL) == MPI_ERR_INTERN);
    CHECK(bsend(in, 8, NULL, 0, 0, NULL) == MPI_ERR_INTERN);
    CHECK(query() == 0);
    dlclose(lib);
    printf("ok\n");
    return 0;
}
