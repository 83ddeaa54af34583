/*
 * Accumulate and Get_accumulate of predefined types and ops, each rank into
 * the next rank's MPI_Win_create window (device memory under OSC_TEST_DEVICE,
 * simulated device memory under OSC_TEST_FAKEDEV and OSC_TEST_FAKEDEV_IPC,
 * host memory otherwise), from origin buffers in the same kind of memory:
 * the window ends as MPI_Reduce_local leaves a host copy of the same bytes,
 * and Get_accumulate returns the bytes before. Among the pairs: types Open
 * MPI's host functions treat as another width or sign (MPI_OFFSET is
 * uint64_t to them, MPI_AINT int64_t, MPI_BYTE uint8_t), pairs with padding
 * (MPI_DOUBLE_INT, MPI_LONG_INT, MPI_LONG_DOUBLE_INT after their data;
 * MPI_SHORT_INT between its parts, reduced by whole elements at the target),
 * and pairs a kernel reduces (MPI_FLOAT_INT, MPI_2INT, MPI_C_BOOL,
 * MPI_DOUBLE, ...).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "osc_test_mem.h"

#define SLOT 64 /* bytes of window per case and form */

typedef struct {
    const char *name;
    MPI_Datatype type;
    MPI_Op op;
    int count;
    unsigned char target[SLOT]; /* the window's bytes before */
    unsigned char origin[SLOT];
} acc_case_t;

typedef struct {
    float v;
    int i;
} float_int_t;
typedef struct {
    double v;
    int i;
} double_int_t;
typedef struct {
    short v;
    int i;
} short_int_t;
typedef struct {
    long v;
    int i;
} long_int_t;
typedef struct {
    long double v;
    int i;
} long_double_int_t;

#define FILL(field, T, ...)                                                                        \
    do {                                                                                           \
        T vals_[] = {__VA_ARGS__};                                                                 \
        memcpy((field), vals_, sizeof(vals_));                                                     \
    } while (0)

static int make_cases(acc_case_t *c)
{
    int n = 0;
    memset(c, 0, 20 * sizeof(*c));
#define CASE(nm, ty, o, cnt) (c[n].name = (nm), c[n].type = (ty), c[n].op = (o), c[n].count = (cnt))
    CASE("MPI_OFFSET MAX", MPI_OFFSET, MPI_MAX, 4);
    FILL(c[n].target, MPI_Offset, -5, 7, -1, 100);
    FILL(c[n].origin, MPI_Offset, 3, -8, -2, 50);
    n++;
    CASE("MPI_OFFSET MIN", MPI_OFFSET, MPI_MIN, 4);
    FILL(c[n].target, MPI_Offset, -5, 7, -1, 100);
    FILL(c[n].origin, MPI_Offset, 3, -8, -2, 50);
    n++;
    CASE("MPI_AINT MIN", MPI_AINT, MPI_MIN, 2);
    FILL(c[n].target, MPI_Aint, -5, 7);
    FILL(c[n].origin, MPI_Aint, 3, -8);
    n++;
    CASE("MPI_LONG PROD", MPI_LONG, MPI_PROD, 2);
    FILL(c[n].target, long, 3, -2);
    FILL(c[n].origin, long, -4, 5);
    n++;
    CASE("MPI_BYTE BXOR", MPI_BYTE, MPI_BXOR, 3);
    FILL(c[n].target, unsigned char, 0xF0, 0x0F, 0xAA);
    FILL(c[n].origin, unsigned char, 0xFF, 0x01, 0x55);
    n++;
    CASE("MPI_C_BOOL LOR", MPI_C_BOOL, MPI_LOR, 3);
    FILL(c[n].target, unsigned char, 0, 1, 0);
    FILL(c[n].origin, unsigned char, 0, 0, 1);
    n++;
    CASE("MPI_SIGNED_CHAR MAX", MPI_SIGNED_CHAR, MPI_MAX, 2);
    FILL(c[n].target, signed char, -100, 50);
    FILL(c[n].origin, signed char, 20, -120);
    n++;
    CASE("MPI_UNSIGNED_SHORT SUM", MPI_UNSIGNED_SHORT, MPI_SUM, 2);
    FILL(c[n].target, unsigned short, 65535, 3);
    FILL(c[n].origin, unsigned short, 2, 4);
    n++;
    CASE("MPI_UNSIGNED_LONG_LONG BAND", MPI_UNSIGNED_LONG_LONG, MPI_BAND, 2);
    FILL(c[n].target, unsigned long long, 0xFF00FF00FF00FF00ULL, 0x0123456789ABCDEFULL);
    FILL(c[n].origin, unsigned long long, 0x0FF00FF00FF00FF0ULL, 0xFFFFFFFF00000000ULL);
    n++;
    CASE("MPI_DOUBLE SUM", MPI_DOUBLE, MPI_SUM, 2);
    FILL(c[n].target, double, 0.5, -1.25);
    FILL(c[n].origin, double, 0.25, 2.0);
    n++;
    CASE("MPI_FLOAT_INT MAXLOC", MPI_FLOAT_INT, MPI_MAXLOC, 2);
    FILL(c[n].target, float_int_t, {1.5f, 3}, {2.0f, 1});
    FILL(c[n].origin, float_int_t, {1.5f, 1}, {1.0f, 9});
    n++;
    CASE("MPI_2INT MINLOC", MPI_2INT, MPI_MINLOC, 2);
    FILL(c[n].target, int, 4, 7, 9, 2);
    FILL(c[n].origin, int, 4, 3, 10, 0);
    n++;
    CASE("MPI_DOUBLE_INT MINLOC", MPI_DOUBLE_INT, MPI_MINLOC, 2);
    FILL(c[n].target, double_int_t, {1.0, 2}, {5.0, 4});
    FILL(c[n].origin, double_int_t, {1.0, 1}, {6.0, 0});
    n++;
    CASE("MPI_SHORT_INT MAXLOC", MPI_SHORT_INT, MPI_MAXLOC, 2);
    FILL(c[n].target, short_int_t, {7, 5}, {-3, 1});
    FILL(c[n].origin, short_int_t, {7, 2}, {-2, 8});
    n++;
    CASE("MPI_LONG_INT MINLOC", MPI_LONG_INT, MPI_MINLOC, 2);
    FILL(c[n].target, long_int_t, {-7, 5}, {3, 1});
    FILL(c[n].origin, long_int_t, {-7, 2}, {2, 8});
    n++;
    CASE("MPI_LONG_DOUBLE_INT MAXLOC", MPI_LONG_DOUBLE_INT, MPI_MAXLOC, 1);
    FILL(c[n].target, long_double_int_t, {2.5L, 4});
    FILL(c[n].origin, long_double_int_t, {3.5L, 9});
    n++;
#undef CASE
    return n;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (osc_test_setup() != 0) return mt_skip("no GPU on this machine");
    acc_case_t cases[20];
    const int n = make_cases(cases);
    const size_t bytes = (size_t)n * 2 * SLOT; /* an Accumulate slot, a Get_accumulate slot */
    unsigned char *before = calloc(1, bytes), *origins = calloc(1, bytes), *got = calloc(1, bytes);
    MT_CHECK(before != NULL && origins != NULL && got != NULL);
    for (int k = 0; k < n; k++) {
        for (int form = 0; form < 2; form++) {
            memcpy(before + (2 * k + form) * SLOT, cases[k].target, SLOT);
            memcpy(origins + (2 * k + form) * SLOT, cases[k].origin, SLOT);
        }
    }
    unsigned char *win_mem = osc_test_alloc(bytes), *org = osc_test_alloc(bytes),
                  *res = osc_test_alloc(bytes);
    osc_test_to(win_mem, before, bytes);
    osc_test_to(org, origins, bytes);
    osc_test_to(res, got, bytes); /* zeros */
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_create(win_mem, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    const int next = (mt_rank + 1) % mt_size;
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, next, 0, win));
    for (int k = 0; k < n; k++) {
        const MPI_Aint acc_at = (MPI_Aint)(2 * k) * SLOT, gacc_at = acc_at + SLOT;
        MT_CHECK_MPI(MPI_Accumulate(org + acc_at, cases[k].count, cases[k].type, next, acc_at,
                                    cases[k].count, cases[k].type, cases[k].op, win));
        MT_CHECK_MPI(MPI_Get_accumulate(org + gacc_at, cases[k].count, cases[k].type,
                                        res + gacc_at, cases[k].count, cases[k].type, next,
                                        gacc_at, cases[k].count, cases[k].type, cases[k].op,
                                        win));
    }
    MT_CHECK_MPI(MPI_Win_unlock(next, win));
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* Every rank's window took one origin's operations, all origins alike. */
    MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, mt_rank, 0, win));
    osc_test_from(got, win_mem, bytes);
    MT_CHECK_MPI(MPI_Win_unlock(mt_rank, win));
    unsigned char *fetched = calloc(1, bytes);
    MT_CHECK(fetched != NULL);
    osc_test_from(fetched, res, bytes);
    for (int k = 0; k < n; k++) {
        unsigned char want[SLOT];
        memcpy(want, cases[k].target, SLOT);
        MT_CHECK_MPI(MPI_Reduce_local(cases[k].origin, want, cases[k].count, cases[k].type,
                                      cases[k].op));
        for (int form = 0; form < 2; form++) {
            if (memcmp(got + (2 * k + form) * SLOT, want, SLOT) != 0) {
                mt_fail(__FILE__, __LINE__, "%s by %s: the window differs from MPI_Reduce_local's",
                        cases[k].name, form ? "Get_accumulate" : "Accumulate");
            }
        }
        MPI_Aint lb, extent;
        MT_CHECK_MPI(MPI_Type_get_extent(cases[k].type, &lb, &extent));
        int size = 0;
        MT_CHECK_MPI(MPI_Type_size(cases[k].type, &size));
        /* Get_accumulate's result: the bytes before, each element's data
         * (a padded pair's value, then its int at the next 4-byte boundary;
         * the gaps are not data). */
        const size_t value = size == extent ? (size_t)size : (size_t)size - sizeof(int);
        const size_t int_at = (value + 3) / 4 * 4;
        for (int e = 0; e < cases[k].count; e++) {
            const unsigned char *r = fetched + (2 * k + 1) * SLOT + e * extent;
            const unsigned char *b = cases[k].target + e * extent;
            if (memcmp(r, b, value) != 0 ||
                (size != extent && memcmp(r + int_at, b + int_at, sizeof(int)) != 0)) {
                mt_fail(__FILE__, __LINE__, "%s: Get_accumulate's element %d is not the one before",
                        cases[k].name, e);
            }
        }
    }
    MT_CHECK_MPI(MPI_Win_free(&win));
    osc_test_free(win_mem);
    osc_test_free(org);
    osc_test_free(res);
    free(before);
    free(origins);
    free(got);
    free(fetched);
    return mt_finish();
}
