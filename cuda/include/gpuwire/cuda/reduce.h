/*
 * Elementwise reductions on the GPU (and the same functors on the CPU), for
 * MPI's predefined ops and types. A C header: coll/gpuwire's C glue and C++
 * code include it alike; it names no CUDA type.
 *
 * The one table. GW_REDUCE_OPS and GW_REDUCE_TYPES below, with the class
 * rule in gw_reduce_supported(), decide every kernel that is compiled
 * (cuda/src/reduce.cu instantiates one per supported pair), the CPU loops
 * (cuda/src/reduce_host.cpp), the dispatch tables of both, and what the unit
 * tests check. Adding a type is one line here.
 *
 *   class   types                                ops
 *   INT     int8..uint64 (char, short, int,      SUM PROD MIN MAX LAND LOR LXOR
 *           long, long long and their unsigned   BAND BOR BXOR
 *           forms map here by size)
 *   FLOAT   float, double                        SUM PROD MIN MAX
 *   BOOL    C bool (one byte, 0 or not 0)        LAND LOR LXOR
 *   BYTE    MPI_BYTE                             BAND BOR BXOR
 *   PAIR    float/double/long/int/short + int    MINLOC MAXLOC
 *
 * Not in the table: long double and long double + int (CUDA has no long
 * double on the device), complex types, half and bfloat16 (Open MPI 4.1 has
 * no MPI datatype for them). Those reductions stay on the host.
 *
 * Semantics, those of Open MPI's host functions (ompi/mca/op/base):
 *   out = a op b elementwise, a the operand of the lower ranks (MPI's "in"),
 *   b the later one ("inout"). Integer SUM and PROD wrap modulo 2^bits.
 *   MIN/MAX: b < a ? b : a and b > a ? b : a (with a NaN, a).
 *   Logical ops give 0 or 1 of the type. MINLOC/MAXLOC: the pair with the
 *   smaller/larger value; on equal values, that value with the smaller
 *   index. Pair types are written field by field: padding bytes of out are
 *   never written.
 *
 * Contract of gw_dev_reduce3 / gw_dev_reduce:
 * - enqueue only: the kernel runs on `stream` (a cudaStream_t of the current
 *   device, passed as void *) and the call returns at once; completion is
 *   the caller's to track (TrackedStream::mark()).
 * - out may equal a or b (in place); other overlap is undefined.
 * - count 0 launches nothing and succeeds.
 * - 0 on success; -1 with one line naming the cause in why otherwise
 *   (unsupported pair, launch failure, built without CUDA).
 * - thread-safe (no state besides CUDA's).
 */
#ifndef GPUWIRE_CUDA_REDUCE_H
#define GPUWIRE_CUDA_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pair types of MINLOC/MAXLOC, laid out as MPI's C pair datatypes. */
typedef struct { float v; int32_t k; } gw_float_int_t;
typedef struct { double v; int32_t k; } gw_double_int_t;
typedef struct { int64_t v; int32_t k; } gw_long_int_t;
typedef struct { int32_t v; int32_t k; } gw_int_int_t;
typedef struct { int16_t v; int32_t k; } gw_short_int_t;

/* X(name) */
#define GW_REDUCE_OPS(X) \
    X(SUM) X(PROD) X(MIN) X(MAX) X(LAND) X(LOR) X(LXOR) X(BAND) X(BOR) X(BXOR) X(MINLOC) X(MAXLOC)

/* X(name, C storage type, class) */
#define GW_REDUCE_TYPES(X)                                  \
    X(INT8, int8_t, INT)                                    \
    X(UINT8, uint8_t, INT)                                  \
    X(INT16, int16_t, INT)                                  \
    X(UINT16, uint16_t, INT)                                \
    X(INT32, int32_t, INT)                                  \
    X(UINT32, uint32_t, INT)                                \
    X(INT64, int64_t, INT)                                  \
    X(UINT64, uint64_t, INT)                                \
    X(FLOAT, float, FLOAT)                                  \
    X(DOUBLE, double, FLOAT)                                \
    X(BOOL, uint8_t, BOOL)                                  \
    X(BYTE, uint8_t, BYTE)                                  \
    X(FLOAT_INT, gw_float_int_t, PAIR)                      \
    X(DOUBLE_INT, gw_double_int_t, PAIR)                    \
    X(LONG_INT, gw_long_int_t, PAIR)                        \
    X(2INT, gw_int_int_t, PAIR)                             \
    X(SHORT_INT, gw_short_int_t, PAIR)

typedef enum {
#define GW_X_OP(name) GW_OP_##name,
    GW_REDUCE_OPS(GW_X_OP)
#undef GW_X_OP
    GW_OP_COUNT
} gw_reduce_op_t;

typedef enum {
#define GW_X_TYPE(name, ctype, cls) GW_TYPE_##name,
    GW_REDUCE_TYPES(GW_X_TYPE)
#undef GW_X_TYPE
    GW_TYPE_COUNT
} gw_reduce_type_t;

/* 1 when op applies to type (MPI's rules, the class table above), else 0;
 * 0 for ids out of range. */
int gw_reduce_supported(int op, int type);
/* Bytes per element (the C struct's size for pairs); 0 out of range. */
size_t gw_reduce_type_size(int type);
const char *gw_reduce_op_name(int op);     /* "SUM", "?" out of range */
const char *gw_reduce_type_name(int type); /* "INT32", "?" out of range */

/* out[i] = a[i] op b[i] for i < count, on the GPU (contract above). */
int gw_dev_reduce3(int op, int type, const void *a, const void *b, void *out, size_t count,
                   void *stream, char *why, size_t why_len);
/* A compare-and-swap of one element of len bytes (1 <= len <= 16) on the
 * GPU, one thread: result = *dst; where *dst equals *compare, *dst =
 * *origin. Every pointer is memory the stream's GPU reaches. */
int gw_dev_cas(void *dst, const void *origin, const void *compare, void *result, size_t len,
               void *stream, char *why, size_t why_len);
/* inout[i] = in[i] op inout[i]: MPI's user-function convention. */
int gw_dev_reduce(int op, int type, const void *in, void *inout, size_t count, void *stream,
                  char *why, size_t why_len);

/* The same functors on the CPU, synchronously; same return convention. */
int gw_host_reduce3(int op, int type, const void *a, const void *b, void *out, size_t count,
                    char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
