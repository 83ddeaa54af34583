/* MPI_T performance variables by name (MPI_T initialised by the caller). */
#ifndef GPUWIRE_TEST_MPI_PVAR_H
#define GPUWIRE_TEST_MPI_PVAR_H

#include <mpi.h>
#include <string.h>

/* Name, datatype and binding of performance variable i; nonzero on success. */
static inline int pvar_describe(int i, char *name, int name_size, MPI_Datatype *type, int *bind)
{
    char desc[256];
    int name_len = name_size, desc_len = sizeof(desc);
    int verbosity, var_class, readonly, continuous, atomic;
    MPI_T_enum enumtype;
    return MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, type, &enumtype, desc,
                               &desc_len, bind, &readonly, &continuous, &atomic) == MPI_SUCCESS;
}

static inline int find_pvar(const char *want)
{
    int n = 0;
    if (MPI_T_pvar_get_num(&n) != MPI_SUCCESS) return -1;
    for (int i = 0; i < n; ++i) {
        char name[256];
        MPI_Datatype type;
        int bind;
        if (pvar_describe(i, name, sizeof(name), &type, &bind) && strcmp(name, want) == 0) return i;
    }
    return -1;
}

#endif
