/*
 * Stand-in for Open MPI's ompi/mpi/fortran/base/fint_2_int.h, which
 * distributions' devel packages do not ship but ompi/op/op.h includes. op.h
 * needs one macro of it, in the inline path that calls Fortran user ops,
 * which coll/gpuwire never takes. Searched after Open MPI's own include
 * folders: where the real header exists, it wins.
 */
#ifndef GW_SHIM_FINT_2_INT_H
#define GW_SHIM_FINT_2_INT_H
#ifndef OMPI_INT_2_FINT
#define OMPI_INT_2_FINT(a) ((MPI_Fint)(a))
#endif
#endif
