/* Helpers shared by the point-to-point tests: status and error-class checks
 * that report the caller's line, and receive buffers with guard bytes. */
#ifndef GPUWIRE_TESTS_P2P_H
#define GPUWIRE_TESTS_P2P_H
#include "mpitest.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* Bytes written after (and before) a receive buffer, which no receive may touch. */
#define P2P_GUARD 64
#define P2P_GUARD_BYTE 0xA5

static inline int p2p_next(void) { return (mt_rank + 1) % mt_size; }
static inline int p2p_prev(void) { return (mt_rank + mt_size - 1) % mt_size; }

static inline void *p2p_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "[rank %d] out of memory (%zu bytes)\n", mt_rank, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* A buffer of n usable bytes with P2P_GUARD guard bytes on both sides;
 * the usable bytes are set to fill_byte. */
static inline unsigned char *p2p_guarded_alloc(size_t n, int fill_byte)
{
    unsigned char *p = (unsigned char *)p2p_malloc(n + 2 * P2P_GUARD);
    memset(p, P2P_GUARD_BYTE, P2P_GUARD);
    memset(p + P2P_GUARD, fill_byte, n);
    memset(p + P2P_GUARD + n, P2P_GUARD_BYTE, P2P_GUARD);
    return p + P2P_GUARD;
}

static inline void p2p_guarded_free(unsigned char *p) { free(p - P2P_GUARD); }

/* Index of the first byte of [p, p+n) that differs from byte, or -1. */
static inline long p2p_find_not(const unsigned char *p, size_t n, int byte)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)byte) return (long)i;
    return -1;
}

#define P2P_CHECK_GUARDS(p, n) p2p_check_guards_at(__FILE__, __LINE__, (p), (n))
static inline void p2p_check_guards_at(const char *file, int line, const unsigned char *p,
                                       size_t n)
{
    long lo = p2p_find_not(p - P2P_GUARD, P2P_GUARD, P2P_GUARD_BYTE);
    long hi = p2p_find_not(p + n, P2P_GUARD, P2P_GUARD_BYTE);
    if (lo >= 0) mt_fail(file, line, "guard byte %ld before a %zu-byte buffer overwritten",
                         (long)P2P_GUARD - lo, n);
    if (hi >= 0) mt_fail(file, line, "guard byte %ld past a %zu-byte buffer overwritten", hi, n);
}

/* Checks the pattern mt_fill(seed) in a received buffer. */
#define P2P_CHECK_DATA(p, n, seed) p2p_check_data_at(__FILE__, __LINE__, (p), (n), (seed))
static inline void p2p_check_data_at(const char *file, int line, const void *p, size_t n,
                                     unsigned seed)
{
    long bad = mt_check_fill(p, n, seed);
    if (bad >= 0) mt_fail(file, line, "data of %zu bytes (seed %u) wrong at byte %ld", n, seed, bad);
}

/* Checks source, tag and element count of a completed receive's status;
 * count is in units of dtype. */
#define P2P_CHECK_STATUS(st, src, tag, dtype, count) \
    p2p_check_status_at(__FILE__, __LINE__, (st), (src), (tag), (dtype), (count))
static inline void p2p_check_status_at(const char *file, int line, const MPI_Status *st, int src,
                                       int tag, MPI_Datatype dtype, int count)
{
    int n = -12345;
    if (st->MPI_SOURCE != src)
        mt_fail(file, line, "status MPI_SOURCE %d, expected %d", st->MPI_SOURCE, src);
    if (st->MPI_TAG != tag) mt_fail(file, line, "status MPI_TAG %d, expected %d", st->MPI_TAG, tag);
    int rc = MPI_Get_count(st, dtype, &n);
    if (rc != MPI_SUCCESS) mt_fail(file, line, "MPI_Get_count returned %d", rc);
    if (n != count) mt_fail(file, line, "MPI_Get_count %d, expected %d", n, count);
}

/* The status MPI defines for a receive from MPI_PROC_NULL and for the
 * completion of an inactive request. */
#define P2P_CHECK_PROC_NULL_STATUS(st) \
    p2p_check_status_at(__FILE__, __LINE__, (st), MPI_PROC_NULL, MPI_ANY_TAG, MPI_BYTE, 0)
#define P2P_CHECK_EMPTY_STATUS(st) \
    p2p_check_status_at(__FILE__, __LINE__, (st), MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_BYTE, 0)

/* Checks that an MPI return code belongs to the error class expected. */
#define P2P_CHECK_ERRCLASS(rc, cls) p2p_check_errclass_at(__FILE__, __LINE__, (rc), (cls), #rc)
static inline void p2p_check_errclass_at(const char *file, int line, int rc, int cls,
                                         const char *what)
{
    int got = -1;
    if (rc == MPI_SUCCESS) {
        got = MPI_SUCCESS;
    } else if (MPI_Error_class(rc, &got) != MPI_SUCCESS) {
        mt_fail(file, line, "%s: %d is not an error code", what, rc);
        return;
    }
    if (got != cls) {
        char s[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, s, &len);
        mt_fail(file, line, "%s: error class %d (%s), expected class %d", what, got, s, cls);
    }
}

static inline void p2p_sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

#endif
