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

/* The value of a performance variable now (a level, or a counter since the
 * handle's allocation), 0 when it cannot be read. Initializes and finalizes
 * MPI_T itself (MPI_T counts its initializations). */
static inline unsigned long long pvar_value_now(const char *name)
{
    unsigned long long v = 0;
    int provided = 0, count = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
    MPI_T_pvar_session se;
    MPI_T_pvar_handle h;
    int idx = find_pvar(name);
    if (idx >= 0 && MPI_T_pvar_session_create(&se) == MPI_SUCCESS) {
        if (MPI_T_pvar_handle_alloc(se, idx, NULL, &h, &count) == MPI_SUCCESS) {
            if (MPI_T_pvar_read(se, h, &v) != MPI_SUCCESS) v = 0;
            MPI_T_pvar_handle_free(se, &h);
        }
        MPI_T_pvar_session_free(&se);
    }
    MPI_T_finalize();
    return v;
}

/* Counters read as their growth from the handles' allocation (a fresh
 * handle reads a counter as 0): one session, one handle per name, MPI_T
 * initialised by the caller. open returns the index of the first name that
 * is no performance variable (its handle stays null and reads 0), or -1. */
#define PVAR_COUNTERS_MAX 8
typedef struct {
    MPI_T_pvar_session session;
    int n;
    MPI_T_pvar_handle h[PVAR_COUNTERS_MAX];
} pvar_counters_t;

static inline int pvar_counters_open(pvar_counters_t *c, const char *const *names, int n)
{
    int missing = -1, count = 0;
    c->n = n < PVAR_COUNTERS_MAX ? n : PVAR_COUNTERS_MAX;
    for (int i = 0; i < c->n; ++i) c->h[i] = MPI_T_PVAR_HANDLE_NULL;
    if (MPI_T_pvar_session_create(&c->session) != MPI_SUCCESS) {
        c->n = 0;
        return 0;
    }
    for (int i = 0; i < c->n; ++i) {
        int idx = find_pvar(names[i]);
        if (idx < 0 ||
            MPI_T_pvar_handle_alloc(c->session, idx, NULL, &c->h[i], &count) != MPI_SUCCESS) {
            c->h[i] = MPI_T_PVAR_HANDLE_NULL;
            if (missing < 0) missing = i;
        }
    }
    return missing;
}

static inline unsigned long long pvar_counters_read(pvar_counters_t *c, int i)
{
    unsigned long long v = 0;
    if (i >= 0 && i < c->n && c->h[i] != MPI_T_PVAR_HANDLE_NULL &&
        MPI_T_pvar_read(c->session, c->h[i], &v) != MPI_SUCCESS)
        v = 0;
    return v;
}

static inline void pvar_counters_close(pvar_counters_t *c)
{
    for (int i = 0; i < c->n; ++i) {
        if (c->h[i] != MPI_T_PVAR_HANDLE_NULL) MPI_T_pvar_handle_free(c->session, &c->h[i]);
    }
    MPI_T_pvar_session_free(&c->session);
}

#endif
