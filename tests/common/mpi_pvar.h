/* The index of the MPI_T performance variable named `want`, or -1 (MPI_T
 * initialised by the caller). */
#ifndef GPUWIRE_TEST_MPI_PVAR_H
#define GPUWIRE_TEST_MPI_PVAR_H

#include <mpi.h>
#include <string.h>

static inline int find_pvar(const char *want)
{
    int n = 0;
    if (MPI_T_pvar_get_num(&n) != MPI_SUCCESS) return -1;
    for (int i = 0; i < n; ++i) {
        char name[256], desc[256];
        int name_len = sizeof(name), desc_len = sizeof(desc);
        int verbosity, var_class, bind, readonly, continuous, atomic;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &type, &enumtype,
                                desc, &desc_len, &bind, &readonly, &continuous,
                                &atomic) != MPI_SUCCESS)
            continue;
        if (strcmp(name, want) == 0) return i;
    }
    return -1;
}

#endif
