/*
 * Every predefined op on every predefined C type it applies to (MPI's rules),
 * through Allreduce, Reduce, Reduce_scatter_block, Reduce_scatter, Scan and
 * Exscan, in place and not, counts 0 / 1 / odd / large, checked against a
 * reference folded on the host in rank order. Written independently of the
 * kernels' table: a type the component cannot reduce on the GPU must still
 * come out right (staged).
 *
 *   coll_reduce_matrix [host|device|fakedevrw] [ompi-host-ops]
 *
 * ompi-host-ops: the results come from Open MPI 4.1.4's host functions,
 * whose MPI_MIN/MPI_MAX on MPI_UNSIGNED_LONG compare as signed (MAX of 1 and
 * 2^63 gives 1); that pair is left out.
 *
 * Buffers carry guard bytes after the last element; they must come back
 * unchanged. The result of reduce_scatter in place and of exscan on rank 0
 * is checked only where MPI defines it. A final check: an op that does not
 * apply to a type (MPI_BAND on MPI_FLOAT) must fail with MPI_ERR_OP on
 * device buffers as on host ones, and crash nothing. (MPI_WCHAR is not
 * here: Open MPI 4.1 refuses every op on it, as MPI's rules say.)
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"

enum vkind { K_INT, K_FLOAT, K_DOUBLE, K_BOOL, K_BYTE, K_PAIR };

typedef struct {
    const char *name;
    MPI_Datatype dt;
    enum vkind kind;
    int size;        /* bytes of the value (K_INT: width; K_PAIR: the value field) */
    bool is_signed;  /* K_INT */
    enum vkind pval; /* K_PAIR: K_INT, K_FLOAT or K_DOUBLE */
    size_t stride;   /* bytes per element (C struct size for pairs) */
    size_t koff;     /* K_PAIR: offset of the int index */
} mtype_t;

#define PAIR(name, dt, ctype, vk, vsize)                                                    \
    {name, dt, K_PAIR, vsize, true, vk, sizeof(struct { ctype v; int k; }),               \
     offsetof(struct { ctype v; int k; }, k)}

static const char *const op_names[] = {"SUM", "PROD", "MIN", "MAX", "LAND", "LOR",
                                       "LXOR", "BAND", "BOR", "BXOR", "MINLOC", "MAXLOC"};
enum { O_SUM, O_PROD, O_MIN, O_MAX, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR, O_MINLOC,
       O_MAXLOC, O_COUNT };

static MPI_Op mpi_op(int o)
{
    const MPI_Op list[O_COUNT] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR,
                                  MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC};
    return list[o];
}

/* MPI's rules: which ops apply to which kind of type. */
static bool applies(int o, enum vkind k)
{
    switch (o) {
    case O_SUM: case O_PROD: case O_MIN: case O_MAX:
        return k == K_INT || k == K_FLOAT || k == K_DOUBLE;
    case O_LAND: case O_LOR: case O_LXOR: return k == K_INT || k == K_BOOL;
    case O_BAND: case O_BOR: case O_BXOR: return k == K_INT || k == K_BYTE;
    default: return k == K_PAIR;
    }
}

static mtype_t types[40];
static int ntypes;
static bool ompi_host_ops;

static void add_int(const char *name, MPI_Datatype dt, int size, bool is_signed)
{
    types[ntypes++] = (mtype_t){name, dt, K_INT, size, is_signed, K_INT, (size_t)size, 0};
}

static void make_types(void)
{
    add_int("char", MPI_CHAR, 1, (char)-1 < 0);
    add_int("signed char", MPI_SIGNED_CHAR, 1, true);
    add_int("unsigned char", MPI_UNSIGNED_CHAR, 1, false);
    add_int("short", MPI_SHORT, sizeof(short), true);
    add_int("unsigned short", MPI_UNSIGNED_SHORT, sizeof(short), false);
    add_int("int", MPI_INT, sizeof(int), true);
    add_int("unsigned", MPI_UNSIGNED, sizeof(int), false);
    add_int("long", MPI_LONG, sizeof(long), true);
    add_int("unsigned long", MPI_UNSIGNED_LONG, sizeof(long), false);
    add_int("long long", MPI_LONG_LONG, sizeof(long long), true);
    add_int("unsigned long long", MPI_UNSIGNED_LONG_LONG, sizeof(long long), false);
    add_int("int8_t", MPI_INT8_T, 1, true);
    add_int("uint8_t", MPI_UINT8_T, 1, false);
    add_int("int16_t", MPI_INT16_T, 2, true);
    add_int("uint16_t", MPI_UINT16_T, 2, false);
    add_int("int32_t", MPI_INT32_T, 4, true);
    add_int("uint32_t", MPI_UINT32_T, 4, false);
    add_int("int64_t", MPI_INT64_T, 8, true);
    add_int("uint64_t", MPI_UINT64_T, 8, false);
    types[ntypes++] = (mtype_t){"float", MPI_FLOAT, K_FLOAT, 4, true, K_FLOAT, 4, 0};
    types[ntypes++] = (mtype_t){"double", MPI_DOUBLE, K_DOUBLE, 8, true, K_DOUBLE, 8, 0};
    types[ntypes++] = (mtype_t){"C bool", MPI_C_BOOL, K_BOOL, 1, false, K_BOOL, 1, 0};
    types[ntypes++] = (mtype_t){"byte", MPI_BYTE, K_BYTE, 1, false, K_BYTE, 1, 0};
    types[ntypes++] = (mtype_t)PAIR("float+int", MPI_FLOAT_INT, float, K_FLOAT, 4);
    types[ntypes++] = (mtype_t)PAIR("double+int", MPI_DOUBLE_INT, double, K_DOUBLE, 8);
    types[ntypes++] = (mtype_t)PAIR("long+int", MPI_LONG_INT, long, K_INT, sizeof(long));
    types[ntypes++] = (mtype_t)PAIR("2int", MPI_2INT, int, K_INT, sizeof(int));
    types[ntypes++] = (mtype_t)PAIR("short+int", MPI_SHORT_INT, short, K_INT, sizeof(short));
}

/* ------------------------------------------------------------------------
 * Values and the reference
 * ------------------------------------------------------------------------ */

typedef struct {
    uint64_t u;  /* integer value, two's complement, low `size` bytes significant */
    double d;    /* floating value */
    int32_t k;   /* pair index */
} val_t;

static uint32_t hash(unsigned s, int r, long e, int salt)
{
    uint32_t h = (uint32_t)s * 2654435761u ^ (uint32_t)(r + 1) * 40503u ^
                 (uint32_t)e * 2246822519u ^ (uint32_t)(salt + 7) * 3266489917u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return h;
}

static uint64_t truncate_to(uint64_t v, int size, bool is_signed)
{
    if (size >= 8) return v;
    const uint64_t mask = ((uint64_t)1 << (8 * size)) - 1;
    v &= mask;
    if (is_signed && (v >> (8 * size - 1))) v |= ~mask;
    return v;
}

/* Rank r's value of element e. Integers span their whole range (wrapping
 * sums and products are part of the contract), with zeros for the logical
 * ops; floating values are small integers, exact in any order; pair values
 * repeat often, so that ties test the lowest index. */
static val_t value(const mtype_t *t, int o, unsigned s, int r, long e)
{
    val_t v = {0, 0, 0};
    const uint32_t h = hash(s, r, e, 0), h2 = hash(s, r, e, 1);
    enum vkind k = t->kind == K_PAIR ? t->pval : t->kind;
    switch (k) {
    case K_INT:
        v.u = truncate_to(((uint64_t)h << 32) | h2, t->size, t->is_signed);
        if (o >= O_LAND && o <= O_LXOR && h % 3 == 0) v.u = 0;
        if (t->kind == K_PAIR) v.u = truncate_to(h % 4, t->size, true);
        break;
    case K_FLOAT:
    case K_DOUBLE:
        v.d = o == O_PROD ? (double)((int)(h % 5) - 2) : (double)((int)(h % 41) - 20);
        if (t->kind == K_PAIR) v.d = (double)(h % 4);
        break;
    case K_BOOL: v.u = h % 3 == 0 ? 0 : 1; break;
    case K_BYTE: v.u = h & 0xff; break;
    default: break;
    }
    v.k = (int32_t)(h2 % 1000);
    return v;
}

static bool ilt(const mtype_t *t, uint64_t a, uint64_t b)
{
    return t->is_signed ? (int64_t)a < (int64_t)b : a < b;
}

/* acc = acc op v, acc holding the lower ranks. */
static void fold(const mtype_t *t, int o, val_t *acc, val_t v)
{
    if (t->kind == K_PAIR) {
        bool is_int = t->pval == K_INT;
        bool v_better, equal;
        if (is_int) {
            equal = acc->u == v.u;
            v_better = o == O_MAXLOC ? ilt(t, acc->u, v.u) : ilt(t, v.u, acc->u);
        } else {
            equal = acc->d == v.d;
            v_better = o == O_MAXLOC ? v.d > acc->d : v.d < acc->d;
        }
        if (v_better) {
            *acc = v;
        } else if (equal && v.k < acc->k) {
            acc->k = v.k;
        }
        return;
    }
    if (t->kind == K_FLOAT || t->kind == K_DOUBLE) {
        switch (o) {
        case O_SUM: acc->d += v.d; break;
        case O_PROD: acc->d *= v.d; break;
        case O_MIN: acc->d = v.d < acc->d ? v.d : acc->d; break;
        case O_MAX: acc->d = v.d > acc->d ? v.d : acc->d; break;
        default: break;
        }
        return;
    }
    uint64_t a = acc->u, b = v.u, r = 0;
    switch (o) {
    case O_SUM: r = a + b; break;
    case O_PROD: r = a * b; break;
    case O_MIN: r = ilt(t, b, a) ? b : a; break;
    case O_MAX: r = ilt(t, a, b) ? b : a; break;
    case O_LAND: r = (a != 0) && (b != 0); break;
    case O_LOR: r = (a != 0) || (b != 0); break;
    case O_LXOR: r = (a != 0) != (b != 0); break;
    case O_BAND: r = a & b; break;
    case O_BOR: r = a | b; break;
    case O_BXOR: r = a ^ b; break;
    default: break;
    }
    acc->u = truncate_to(r, t->size, t->kind == K_INT && t->is_signed);
}

static void put(const mtype_t *t, unsigned char *img, long e, val_t v)
{
    unsigned char *p = img + (size_t)e * t->stride;
    enum vkind k = t->kind == K_PAIR ? t->pval : t->kind;
    if (k == K_FLOAT) {
        float f = (float)v.d;
        memcpy(p, &f, 4);
    } else if (k == K_DOUBLE) {
        memcpy(p, &v.d, 8);
    } else {
        memcpy(p, &v.u, (size_t)t->size); /* little-endian */
    }
    if (t->kind == K_PAIR) memcpy(p + t->koff, &v.k, 4);
}

/* Compares the value fields of elements [0, n); padding is not compared. */
static bool same(const mtype_t *t, const unsigned char *got, const unsigned char *want, long n,
                 long *where)
{
    const size_t vbytes = t->kind == K_PAIR ? (size_t)t->size : t->stride;
    for (long e = 0; e < n; ++e) {
        const unsigned char *g = got + (size_t)e * t->stride, *w = want + (size_t)e * t->stride;
        if (memcmp(g, w, vbytes) != 0 ||
            (t->kind == K_PAIR && memcmp(g + t->koff, w + t->koff, 4) != 0)) {
            *where = e;
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------ */

#define GUARD 64
#define GUARD_BYTE 0xC3

typedef struct {
    void *mem;
    size_t bytes; /* elements + guard */
    size_t data;  /* element bytes */
    enum mem_kind kind;
    unsigned char *img;
} mbuf_t;

static void mb_alloc(mbuf_t *b, const mtype_t *t, long n, enum mem_kind kind)
{
    b->data = (size_t)n * t->stride;
    b->bytes = b->data + GUARD;
    b->kind = kind;
    b->mem = mem_alloc(b->bytes, kind);
    b->img = malloc(b->bytes);
    memset(b->img, GUARD_BYTE, b->bytes);
}

static void mb_push(mbuf_t *b) { mem_copy(b->mem, b->img, b->bytes, b->mem, b->kind); }
static void mb_pull(mbuf_t *b) { mem_copy(b->img, b->mem, b->bytes, b->mem, b->kind); }

static void mb_free(mbuf_t *b)
{
    if (b->mem) mem_free(b->mem, b->bytes, b->kind);
    free(b->img);
    memset(b, 0, sizeof(*b));
}

static void fill(const mtype_t *t, mbuf_t *b, int o, unsigned s, int r, long first, long n)
{
    for (long e = 0; e < n; ++e) put(t, b->img, e, value(t, o, s, r, first + e));
}

static bool guard_intact(const mbuf_t *b, size_t from)
{
    for (size_t i = from; i < b->bytes; ++i) {
        if (b->img[i] != GUARD_BYTE) return false;
    }
    return true;
}

/* ------------------------------------------------------------------------
 * The cases
 * ------------------------------------------------------------------------ */

enum { C_ALLREDUCE, C_REDUCE, C_RSB, C_RS, C_SCAN, C_EXSCAN, C_COUNT };
static const char *const coll_names[C_COUNT] = {"allreduce", "reduce", "reduce_scatter_block",
                                                "reduce_scatter", "scan", "exscan"};
static const long counts[] = {0, 1, 7, 20011};

static void run_case(MPI_Comm comm, const mtype_t *t, int o, int coll, long c, bool ip)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const unsigned s = (unsigned)(o * 131 + coll * 17 + c + ip * 5 + (t - types) * 1009);
    const int root = n - 1;
    tctx_set("%s %s on %s count %ld%s comm size %d", coll_names[coll], op_names[o], t->name, c,
             ip ? " in place" : "", n);

    /* Per rank: input length, result offset and length in the input's
     * numbering, result buffer length. */
    int *rcounts = malloc(sizeof(int) * (size_t)n);
    long total = c, first = 0, mine = c;
    if (coll == C_RSB || coll == C_RS) {
        total = 0;
        for (int i = 0; i < n; ++i) {
            rcounts[i] = coll == C_RSB ? (int)c : (c == 0 ? 0 : (int)(c + (i % 3) - 1));
            if (i < me) first += rcounts[i];
            total += rcounts[i];
        }
        mine = rcounts[me];
    }
    const bool in_place = ip && (coll != C_REDUCE || me == root);
    const bool has_result = coll != C_REDUCE || me == root;
    mbuf_t sb = {0}, rb = {0};
    if (!in_place) {
        mb_alloc(&sb, t, total, mem_send);
        fill(t, &sb, o, s, me, 0, total);
        mb_push(&sb);
    }
    long rlen = in_place && (coll == C_RSB || coll == C_RS) ? total : mine;
    if (has_result) {
        mb_alloc(&rb, t, rlen, mem_recv);
        if (in_place) fill(t, &rb, o, s, me, 0, total);
        mb_push(&rb);
    }
    /* The expected image: the pushed one with the defined results set. */
    unsigned char *expect = NULL;
    bool check = has_result && !(coll == C_EXSCAN && me == 0);
    if (has_result) {
        expect = malloc(rb.bytes);
        memcpy(expect, rb.img, rb.bytes);
        int upto = coll == C_SCAN ? me + 1 : coll == C_EXSCAN ? me : n;
        for (long e = 0; e < mine && check; ++e) {
            val_t acc = value(t, o, s, 0, first + e);
            for (int r = 1; r < upto; ++r) fold(t, o, &acc, value(t, o, s, r, first + e));
            put(t, expect, e, acc);
        }
    }
    const void *sp = in_place ? MPI_IN_PLACE : sb.mem;
    void *rp = has_result ? rb.mem : NULL;
    const MPI_Op op = mpi_op(o);
    int rc = MPI_SUCCESS;
    switch (coll) {
    case C_ALLREDUCE: rc = MPI_Allreduce(sp, rp, (int)c, t->dt, op, comm); break;
    case C_REDUCE: rc = MPI_Reduce(sp, rp, (int)c, t->dt, op, root, comm); break;
    case C_RSB: rc = MPI_Reduce_scatter_block(sp, rp, (int)c, t->dt, op, comm); break;
    case C_RS: rc = MPI_Reduce_scatter(sp, rp, rcounts, t->dt, op, comm); break;
    case C_SCAN: rc = MPI_Scan(sp, rp, (int)c, t->dt, op, comm); break;
    case C_EXSCAN: rc = MPI_Exscan(sp, rp, (int)c, t->dt, op, comm); break;
    }
    if (rc != MPI_SUCCESS) mt_fail(__FILE__, __LINE__, "%s [%s]: error %d", tctx, mode_name, rc);
    if (has_result) {
        mb_pull(&rb);
        long where = -1;
        if (check && !same(t, rb.img, expect, mine, &where)) {
            mt_fail(__FILE__, __LINE__, "%s [%s]: result differs at element %ld", tctx,
                    mode_name, where);
        }
        /* Past the result: the rest of an in-place input is undefined, the
         * guard is not. */
        if (!guard_intact(&rb, rb.data)) {
            mt_fail(__FILE__, __LINE__, "%s [%s]: bytes after the buffer written", tctx,
                    mode_name);
        }
    }
    if (!in_place) {
        unsigned char *before = malloc(sb.bytes);
        memcpy(before, sb.img, sb.bytes);
        mb_pull(&sb);
        if (memcmp(before, sb.img, sb.bytes) != 0) {
            mt_fail(__FILE__, __LINE__, "%s [%s]: send buffer changed", tctx, mode_name);
        }
        free(before);
    }
    free(expect);
    mb_free(&sb);
    mb_free(&rb);
    free(rcounts);
}

static void run_all(MPI_Comm comm, const char *comm_name)
{
    for (int ti = 0; ti < ntypes; ++ti) {
        for (int o = 0; o < O_COUNT; ++o) {
            if (!applies(o, types[ti].kind)) continue;
            if (ompi_host_ops && types[ti].dt == MPI_UNSIGNED_LONG && (o == O_MIN || o == O_MAX)) {
                continue;
            }
            const int before = mt_failures;
            for (int coll = 0; coll < C_COUNT; ++coll) {
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ++ci) {
                    for (int ip = 0; ip < 2; ++ip) run_case(comm, &types[ti], o, coll, counts[ci], ip);
                }
            }
            if (mt_failures != before) {
                fprintf(stderr, "[rank %d] %s on %s, %s: %d failure(s)\n", mt_rank, op_names[o],
                        types[ti].name, comm_name, mt_failures - before);
            }
        }
    }
}

/* An op that does not apply to the type: the error Open MPI raises on host
 * buffers, on these buffers too. */
static void invalid_pair(MPI_Comm comm)
{
    const mtype_t f = {"float", MPI_FLOAT, K_FLOAT, 4, true, K_FLOAT, 4, 0};
    mbuf_t sb, rb;
    mb_alloc(&sb, &f, 8, mem_send);
    mb_alloc(&rb, &f, 8, mem_recv);
    mb_push(&sb);
    mb_push(&rb);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rc = MPI_Allreduce(sb.mem, rb.mem, 8, MPI_FLOAT, MPI_BAND, comm);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    tctx_set("allreduce BAND on float");
    if (cls != MPI_ERR_OP) {
        mt_fail(__FILE__, __LINE__, "%s [%s]: error class %d, MPI_ERR_OP expected", tctx,
                mode_name, cls);
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
    mb_free(&sb);
    mb_free(&rb);
}

int main(int argc, char **argv)
{
    harness_init(&argc, &argv);
    if (harness_skip_reason()) return mt_skip(harness_skip_reason());
    for (int i = 1; i < argc; ++i) ompi_host_ops |= strcmp(argv[i], "ompi-host-ops") == 0;
    make_types();
    run_all(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    invalid_pair(MPI_COMM_WORLD);
    harness_fini();
    return mt_finish();
}
