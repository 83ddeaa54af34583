/*
 * Shared by the wrappers of libgpuwire_mpi.so.
 *
 * The library links no MPI: Open MPI's PMPI_ functions are looked up once, in
 * the libmpi.so.40 already loaded (an application may have loaded it without
 * RTLD_GLOBAL), and kept. GW_PMPI(name, args...) calls PMPI_name(args...),
 * or returns MPI_ERR_INTERN when the process has no such function.
 *
 * Staging (gw_stage_*): a device buffer is replaced for the call by a host
 * temporary covering every byte the datatype touches (true lower bound to
 * true upper bound over count elements), with the same offsets, so that the
 * PMPI function runs unchanged on it.
 */
#ifndef GPUWIRE_MPI_LAYER_GW_MPI_H
#define GPUWIRE_MPI_LAYER_GW_MPI_H

#include <mpi.h>
#include <stddef.h>

#include "device_ops.h"

#define GW_EXPORT __attribute__((visibility("default")))


#define GW_PMPI(name, ...)                                                    \
    ({                                                                        \
        static __typeof__(&PMPI_##name) _gw_fn;                               \
        __typeof__(&PMPI_##name) _f = __atomic_load_n(&_gw_fn, __ATOMIC_ACQUIRE); \
        if (!_f) {                                                            \
            _f = (__typeof__(&PMPI_##name))gw_pmpi_lookup("PMPI_" #name);     \
            __atomic_store_n(&_gw_fn, _f, __ATOMIC_RELEASE);                  \
        }                                                                     \
        _f ? _f(__VA_ARGS__) : MPI_ERR_INTERN;                                \
    })

/* A function or variable of the MPI library loaded in this process, NULL when
 * there is none (MPIX_Query_cuda_support asks before MPI is loaded, too). */
void *gw_mpi_symbol(const char *name);

/* gw_mpi_symbol for what the wrappers cannot do without: a missing one is
 * reported in one line and gives NULL, which the wrappers answer with
 * MPI_ERR_INTERN (a process that is not Open MPI 4.x's must not be killed
 * by a library it preloaded). */
void *gw_pmpi_lookup(const char *name);

/* MPI_BYTE is the address of a variable of libmpi (&ompi_mpi_byte): looked up
 * too, since the library links no MPI. NULL when missing. */
MPI_Datatype gw_mpi_byte(void);

/* 1 device, 0 host; MPI_IN_PLACE, MPI_BOTTOM and NULL are host. */
int gw_is_device(const void *buf);

typedef struct {
    void *user;       /* the caller's buffer */
    void *host;       /* what the PMPI call is given: same offsets as user */
    char *temp;       /* the temporary, NULL for a host buffer */
    MPI_Aint lo;      /* first byte touched, relative to the buffer */
    size_t bytes;     /* bytes touched */
} gw_stage_t;

/* Prepares st for buf/count/type; copies the device bytes in when copy_in.
 * A host buffer is left as it is (st->host == buf, no temporary). Returns an
 * MPI error code. */
int gw_stage_begin(gw_stage_t *st, const void *buf, int is_device, MPI_Count count,
                   MPI_Datatype type, int copy_in);
/* Copies the temporary back to the device when copy_out, frees it. Returns an
 * MPI error code (MPI_SUCCESS for a host buffer). */
int gw_stage_end(gw_stage_t *st, int copy_out);

/* Releases the stand-ins of persistent buffered sends never freed
 * (bsend_init.c; MPI_Finalize, finalize.c). */
void gw_pb_release_all(void);

/* Prints one line naming the call and why, returns code. */
int gw_error(int code, const char *call, const char *why);

#endif
