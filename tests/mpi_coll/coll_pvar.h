/*
 * MPI_T performance variables in the collective tests: a handle by name in
 * the caller's session (a failure names the variable), and a read that
 * tolerates the null handle such a failure leaves.
 */
#ifndef GPUWIRE_TESTS_COLL_PVAR_H
#define GPUWIRE_TESTS_COLL_PVAR_H

#include <mpi.h>

#include "mpitest.h"

static inline MPI_T_pvar_handle coll_pvar_open(MPI_T_pvar_session session, const char *name,
                                               int var_class)
{
    int idx = -1, count = 0;
    MPI_T_pvar_handle h = MPI_T_PVAR_HANDLE_NULL;
    if (MPI_T_pvar_get_index(name, var_class, &idx) != MPI_SUCCESS) {
        mt_fail(__FILE__, __LINE__, "no MPI_T variable %s: is its coll component loaded?", name);
        return h;
    }
    MT_CHECK_MPI(MPI_T_pvar_handle_alloc(session, idx, NULL, &h, &count));
    MT_CHECK_EQ(count, 1);
    return h;
}

static inline unsigned long long coll_pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle h)
{
    unsigned long long v = 0;
    if (h != MPI_T_PVAR_HANDLE_NULL) MT_CHECK_MPI(MPI_T_pvar_read(session, h, &v));
    return v;
}

#endif
