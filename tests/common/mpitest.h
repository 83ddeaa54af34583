/* A small harness for the MPI tests: each failed check prints one line naming
 * the rank, file, line and condition; mt_finish() agrees on a verdict across
 * all ranks and returns the process exit code (0 pass, 1 fail, 77 skip). */
#ifndef GPUWIRE_MPITEST_H
#define GPUWIRE_MPITEST_H
#include <mpi.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

extern int mt_failures;
extern int mt_rank;
extern int mt_size;

/* MPI_Init_thread with the level asked; errors on MPI_COMM_WORLD return. */
void mt_init(int *argc, char ***argv, int required_thread_level);
int mt_finish(void);
void mt_fail(const char *file, int line, const char *fmt, ...);
/* Ends the test as skipped (exit 77 on every rank) with a reason. */
int mt_skip(const char *reason);
/* Fills buf with a pattern that depends on seed and position. */
void mt_fill(void *buf, size_t len, unsigned seed);
/* Returns the index of the first byte that differs from the pattern, or -1. */
long mt_check_fill(const void *buf, size_t len, unsigned seed);

#define MT_CHECK(cond)                                                       \
    do {                                                                     \
        if (!(cond)) mt_fail(__FILE__, __LINE__, "check failed: %s", #cond); \
    } while (0)
#define MT_CHECK_EQ(a, b)                                                    \
    do {                                                                     \
        long long _a = (long long)(a), _b = (long long)(b);                  \
        if (_a != _b)                                                        \
            mt_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b,    \
                    _a, _b);                                                 \
    } while (0)
#define MT_CHECK_MPI(call)                                                   \
    do {                                                                     \
        int _rc = (call);                                                    \
        if (_rc != MPI_SUCCESS) {                                            \
            char _s[MPI_MAX_ERROR_STRING]; int _l = 0;                       \
            MPI_Error_string(_rc, _s, &_l);                                  \
            mt_fail(__FILE__, __LINE__, "%s returned %d (%s)", #call, _rc,   \
                    _s);                                                     \
        }                                                                    \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
