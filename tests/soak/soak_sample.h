/* What the soak watches for growth: the process's resident memory and open
 * file descriptors, and gpuwire's own counters (the MPI_T performance
 * variables pml_gpuwire_* and coll_gpuwire_*), where the running library
 * has them. */
#ifndef GPUWIRE_SOAK_SAMPLE_H
#define GPUWIRE_SOAK_SAMPLE_H

#include <mpi.h>

#define SOAK_MAX_PVARS 64

typedef struct {
    int n;
    int index[SOAK_MAX_PVARS];
    char name[SOAK_MAX_PVARS][64];
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle[SOAK_MAX_PVARS];
    int started; /* the session exists */
} soak_pvars_t;

typedef struct {
    long rss_kib;  /* VmRSS of /proc/self/status; -1 if unknown */
    long hwm_kib;  /* VmHWM */
    int fds;       /* entries of /proc/self/fd; -1 if unknown */
    unsigned long long value[SOAK_MAX_PVARS];
} soak_sample_t;

/* Call after MPI_T_init_thread and MPI_Init: finds the counters (unsigned
 * long long, no binding) whose names start with pml_gpuwire_ or
 * coll_gpuwire_ and opens a session for them. */
void soak_pvars_open(soak_pvars_t *p);
void soak_pvars_close(soak_pvars_t *p);
/* Index of the counter called name, or -1. */
int soak_pvar_find(const soak_pvars_t *p, const char *name);

void soak_take_sample(const soak_pvars_t *p, soak_sample_t *s);

#endif
