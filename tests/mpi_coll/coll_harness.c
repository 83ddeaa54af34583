#define _GNU_SOURCE
#include "coll_harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef GW_COLL_DEVICE
#include <cuda_runtime_api.h>
#endif

#define SENTINEL 0xA5
#define AFFINE_P 10007
#define ADDMOD_M 1000003

ttype_t tt[T_NTYPES];
tcase_op_t tops[8];
int ntops = 0;
enum mem_kind mem_send = MEM_HOST, mem_recv = MEM_HOST;
const char *mode_name = "host";
const long tcounts[] = {0, 1, 7, 40000};
int ntcounts = sizeof(tcounts) / sizeof(tcounts[0]);
char tctx[256] = "";
static const char *skip_reason = NULL;
/* Whether a rank may pass only host buffers to a reduction whose other
 * ranks pass device memory (lone_buffer_kind). */
static bool lone_host_allowed = true;

void tctx_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tctx, sizeof(tctx), fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------
 * Ops
 * ------------------------------------------------------------------------ */

static int64_t mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

static void user_addmod(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *a = in;
    int *b = inout;
    for (int i = 0; i < *len; ++i) b[i] = (int)mod((int64_t)a[i] + b[i], ADDMOD_M);
}

/* Affine maps x -> m x + c mod P; "a op b" applies a, then b: associative,
 * not commutative, so the result shows the order MPI must keep. */
static void user_affine(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *a = in;
    int *b = inout;
    for (int i = 0; i < *len; ++i) {
        int64_t m = (int64_t)a[2 * i] * b[2 * i] % AFFINE_P;
        int64_t c = ((int64_t)a[2 * i + 1] * b[2 * i] + b[2 * i + 1]) % AFFINE_P;
        b[2 * i] = (int)m;
        b[2 * i + 1] = (int)c;
    }
}

/* Open MPI accepts predefined ops on predefined datatypes only; derived
 * datatypes are reduced with user ops, which see each element in the
 * datatype's layout (gaps included). Reductions use no datatype with a
 * non-zero true lower bound: Open MPI 4.1's ring allreduce receives such
 * data outside its temporary buffers (heap corruption without gpuwire too). */
static void user_vector_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    for (int i = 0; i < *len; ++i) {
        const int *a = (const int *)((const char *)in + 16 * i);
        int *b = (int *)((char *)inout + 16 * i);
        b[0] += a[0];
        b[3] += a[3];
    }
}

void tapply(enum top_id o, enum ttype_id t, int64_t *acc, const int64_t *v)
{
    for (int k = 0; k < tt[t].ncomp && o != OP_AFFINE; ++k) {
        switch (o) {
        case OP_SUM: acc[k] += v[k]; break;
        case OP_MAX: acc[k] = v[k] > acc[k] ? v[k] : acc[k]; break;
        case OP_PROD: acc[k] *= v[k]; break;
        case OP_BXOR: acc[k] = (int32_t)((int32_t)acc[k] ^ (int32_t)v[k]); break;
        case OP_ADDMOD: acc[k] = mod(acc[k] + v[k], ADDMOD_M); break;
        default: break;
        }
    }
    if (o == OP_AFFINE) {
        int64_t m = acc[0] * v[0] % AFFINE_P;
        int64_t c = (acc[1] * v[0] + v[1]) % AFFINE_P;
        acc[0] = m;
        acc[1] = c;
    }
}

void tval(enum top_id o, enum ttype_id t, unsigned s, int r, long e, int64_t *vals)
{
    for (int k = 0; k < tt[t].ncomp; ++k) {
        uint32_t h = (uint32_t)s * 2654435761u ^ (uint32_t)(r + 1) * 40503u ^
                     (uint32_t)e * 2246822519u ^ (uint32_t)(k + 1) * 3266489917u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        switch (o) {
        case OP_PROD: vals[k] = 1 + h % 3; break;
        case OP_AFFINE: vals[k] = k == 0 ? 1 + h % (AFFINE_P - 1) : h % AFFINE_P; break;
        default: vals[k] = (int64_t)(h % 2001) - 1000; break;
        }
    }
}

void tfold(enum top_id o, enum ttype_id t, unsigned s, int r0, int r1, long e, int64_t *acc)
{
    tval(o, t, s, r0, e, acc);
    for (int r = r0 + 1; r < r1; ++r) {
        int64_t v[2];
        tval(o, t, s, r, e, v);
        tapply(o, t, acc, v);
    }
}

int64_t fval(unsigned s, int r, long flat)
{
    int64_t v[2];
    tval(OP_NONE, T_INT, s, r, flat, v);
    return v[0];
}

/* ------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------ */

void *mem_alloc(size_t bytes, enum mem_kind kind)
{
    void *p = NULL;
    switch (kind) {
    case MEM_HOST: p = malloc(bytes); break;
    case MEM_FAKEDEV:
        p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) p = NULL;
        break;
    case MEM_FAKEDEV_RW:
    case MEM_FAKEDEV_SLOW: {
        const bool slow = kind == MEM_FAKEDEV_SLOW;
        int fd = memfd_create(slow ? "gwfake-slow" : "gwfake-device", 0);
        if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
            if (fd >= 0) close(fd);
            break;
        }
        p = mmap(NULL, bytes, slow ? PROT_NONE : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED) p = NULL;
        break;
    }
#ifdef GW_COLL_DEVICE
    case MEM_DEVICE:
        if (cudaMalloc(&p, bytes) != cudaSuccess) p = NULL;
        break;
    case MEM_MANAGED:
        if (cudaMallocManaged(&p, bytes, cudaMemAttachGlobal) != cudaSuccess) p = NULL;
        break;
#endif
    default: break;
    }
    if (!p) {
        fprintf(stderr, "[rank %d] cannot allocate %zu bytes (kind %d)\n", mt_rank, bytes, kind);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

void mem_free(void *p, size_t bytes, enum mem_kind kind)
{
    if (kind == MEM_FAKEDEV || kind == MEM_FAKEDEV_RW || kind == MEM_FAKEDEV_SLOW) {
        munmap(p, bytes);
        return;
    }
#ifdef GW_COLL_DEVICE
    if (kind != MEM_HOST) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

void mem_copy(void *dst, const void *src, size_t bytes, void *fake, enum mem_kind kind)
{
    if (mem_protected(kind)) {
        mprotect(fake, bytes, PROT_READ | PROT_WRITE);
        memcpy(dst, src, bytes);
        mprotect(fake, bytes, PROT_NONE);
        return;
    }
    if (kind == MEM_FAKEDEV_RW || kind == MEM_HOST) {
        memcpy(dst, src, bytes);
        return;
    }
#ifdef GW_COLL_DEVICE
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (e != cudaSuccess) mt_fail(__FILE__, __LINE__, "cudaMemcpy: %s", cudaGetErrorString(e));
#else
    memcpy(dst, src, bytes);
#endif
}

void tbuf_alloc(tbuf_t *b, enum ttype_id t, long nelem, enum mem_kind kind)
{
    b->t = &tt[t];
    b->nelem = nelem;
    b->kind = kind;
    b->bytes = (size_t)(tt[t].pad + nelem * tt[t].extent + 64);
    b->mem = mem_alloc(b->bytes, kind);
    b->mpi = (char *)b->mem + tt[t].pad;
    b->img = malloc(b->bytes);
    tbuf_poison(b);
}

void tbuf_free(tbuf_t *b)
{
    mem_free(b->mem, b->bytes, b->kind);
    free(b->img);
    memset(b, 0, sizeof(*b));
}

static ptrdiff_t comp_offset(const tbuf_t *b, long elem, int k)
{
    return b->t->pad + (ptrdiff_t)elem * b->t->extent + b->t->off[k];
}

void img_set(const tbuf_t *b, unsigned char *img, long elem, const int64_t *vals)
{
    for (int k = 0; k < b->t->ncomp; ++k) {
        unsigned char *p = img + comp_offset(b, elem, k);
        if (b->t->is_double) {
            double d = (double)vals[k];
            memcpy(p, &d, sizeof(d));
        } else {
            int32_t v = (int32_t)vals[k];
            memcpy(p, &v, sizeof(v));
        }
    }
}

void img_set_flat(const tbuf_t *b, unsigned char *img, long elem0, long n, unsigned s, int r,
                  long flat0)
{
    const int nc = b->t->ncomp;
    for (long e = 0; e < n; ++e) {
        int64_t v[2] = {0, 0};
        for (int k = 0; k < nc; ++k) v[k] = fval(s, r, flat0 + e * nc + k);
        img_set(b, img, elem0 + e, v);
    }
}

void tbuf_set(tbuf_t *b, long elem, const int64_t *vals) { img_set(b, b->img, elem, vals); }

void tbuf_get(const tbuf_t *b, long elem, int64_t *vals)
{
    for (int k = 0; k < b->t->ncomp; ++k) {
        const unsigned char *p = b->img + comp_offset(b, elem, k);
        if (b->t->is_double) {
            double d;
            memcpy(&d, p, sizeof(d));
            vals[k] = (int64_t)d;
        } else {
            int32_t v;
            memcpy(&v, p, sizeof(v));
            vals[k] = v;
        }
    }
}

void tbuf_poison(tbuf_t *b)
{
    memset(b->img, SENTINEL, b->bytes);
    int64_t poison[2] = {-77777, -88888};
    for (long e = 0; e < b->nelem; ++e) tbuf_set(b, e, poison);
}

void tbuf_push(tbuf_t *b) { mem_copy(b->mem, b->img, b->bytes, b->mem, b->kind); }
void tbuf_pull(tbuf_t *b) { mem_copy(b->img, b->mem, b->bytes, b->mem, b->kind); }

unsigned char *tbuf_snapshot(const tbuf_t *b)
{
    unsigned char *s = malloc(b->bytes);
    memcpy(s, b->img, b->bytes);
    return s;
}

bool tbuf_matches(const tbuf_t *b, const unsigned char *expect, long from, long to,
                  const char *what)
{
    ptrdiff_t minoff = b->t->off[0];
    for (int k = 1; k < b->t->ncomp; ++k) minoff = b->t->off[k] < minoff ? b->t->off[k] : minoff;
    /* Bytes of elements [from, to) with their gaps; all bytes when that is
     * every element or none (then nothing may change). */
    size_t lo = 0, hi = b->bytes;
    if (to > from && !(from == 0 && to == b->nelem)) {
        lo = (size_t)(b->t->pad + from * b->t->extent + minoff);
        hi = (size_t)(b->t->pad + to * b->t->extent + minoff);
    }
    for (size_t i = lo; i < hi; ++i) {
        if (b->img[i] != expect[i]) {
            long elem = (long)(((ptrdiff_t)i - b->t->pad - minoff) / b->t->extent);
            int64_t got[2] = {0, 0};
            if (elem >= 0 && elem < b->nelem) tbuf_get(b, elem, got);
            mt_fail(__FILE__, __LINE__,
                    "%s [%s, %s]: %s differs at byte %zu (element %ld: got %lld,%lld; byte %02x "
                    "expected %02x)",
                    tctx, mode_name, b->t->name, what, i, elem, (long long)got[0],
                    (long long)got[1], b->img[i], expect[i]);
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Set-up
 * ------------------------------------------------------------------------ */

static void make_types(void)
{
    tt[T_INT] = (ttype_t){"int", MPI_INT, 1, false, 4, {0, 0}, 0};
    tt[T_DOUBLE] = (ttype_t){"double", MPI_DOUBLE, 1, true, 8, {0, 0}, 0};

    /* Two ints 12 bytes apart: 8 gap bytes inside each element. */
    MPI_Datatype vec;
    MPI_Type_vector(2, 1, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    tt[T_VEC] = (ttype_t){"vector(2,1,3)", vec, 2, false, 16, {0, 12}, 0};

    /* One int 8 bytes before the element's position, elements 12 bytes
     * apart: a negative (true) lower bound and 8 gap bytes per element. */
    MPI_Datatype h, neg;
    int blen = 1;
    MPI_Aint disp = -8;
    MPI_Type_create_hindexed(1, &blen, &disp, MPI_INT, &h);
    MPI_Type_create_resized(h, -8, 12, &neg);
    MPI_Type_free(&h);
    MPI_Type_commit(&neg);
    tt[T_NEGLB] = (ttype_t){"negative-lb", neg, 1, false, 12, {-8, 0}, 8};

    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    tt[T_AFFINE] = (ttype_t){"int pair", pair, 2, false, 8, {0, 4}, 0};

    MPI_Op addmod, affine, vsum;
    MPI_Op_create(user_addmod, 1, &addmod);
    MPI_Op_create(user_affine, 0, &affine);
    MPI_Op_create(user_vector_sum, 1, &vsum);
    tcase_op_t list[] = {
        {"int sum", OP_SUM, T_INT, MPI_SUM, true},
        {"int max", OP_MAX, T_INT, MPI_MAX, true},
        {"double sum", OP_SUM, T_DOUBLE, MPI_SUM, true},
        {"user vector sum", OP_SUM, T_VEC, vsum, true},
        {"int prod", OP_PROD, T_INT, MPI_PROD, true},
        {"int bxor", OP_BXOR, T_INT, MPI_BXOR, true},
        {"user addmod", OP_ADDMOD, T_INT, addmod, true},
        {"user affine (not commutative)", OP_AFFINE, T_AFFINE, affine, false},
    };
    ntops = sizeof(list) / sizeof(list[0]);
    memcpy(tops, list, sizeof(list));
}

void harness_init(int *argc, char ***argv)
{
    /* GW_TEST_THREAD_MULTIPLE=1: the locks of Open MPI and of the component
     * are real locks then (without threads they are none). */
    const char *threads = getenv("GW_TEST_THREAD_MULTIPLE");
    /* GW_TEST_NO_GPU_RANK=r: the process of rank r in MPI_COMM_WORLD sees no
     * GPU (CUDA_VISIBLE_DEVICES empty before MPI_Init, where the components
     * open theirs; the simulated GPU of fake_device.c reads it too), and
     * does not make the others skip. */
    const char *no_gpu = getenv("GW_TEST_NO_GPU_RANK"), *me = getenv("OMPI_COMM_WORLD_RANK");
    const bool hidden = NULL != no_gpu && NULL != me && atoi(no_gpu) == atoi(me);
    if (hidden) setenv("CUDA_VISIBLE_DEVICES", "", 1);
    mt_init(argc, argv,
            threads && 0 == strcmp(threads, "1") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE);
    const char *mode = *argc > 1 ? (*argv)[1] : "host";
    mode_name = mode;
    if (strcmp(mode, "host") == 0) {
        mem_send = mem_recv = MEM_HOST;
    } else if (strcmp(mode, "device") == 0) {
        mem_send = mem_recv = MEM_DEVICE;
    } else if (strcmp(mode, "managed") == 0) {
        mem_send = mem_recv = MEM_MANAGED;
    } else if (strcmp(mode, "mixed") == 0 || strcmp(mode, "mixedstaged") == 0) {
        mem_send = MEM_DEVICE;
        mem_recv = MEM_HOST;
    } else if (strcmp(mode, "fakedev") == 0) {
        mem_send = mem_recv = MEM_FAKEDEV;
    } else if (strcmp(mode, "fakedevrw") == 0) {
        mem_send = mem_recv = MEM_FAKEDEV_RW;
    } else if (strcmp(mode, "fakemixed") == 0) {
        /* Device memory the pml can carry: the GPU reductions run on it. */
        mem_send = MEM_FAKEDEV_RW;
        mem_recv = MEM_HOST;
    } else if (strcmp(mode, "fakemixedstaged") == 0) {
        mem_send = MEM_FAKEDEV;
        mem_recv = MEM_HOST;
    } else {
        mt_fail(__FILE__, __LINE__,
                "unknown mode %s (host, device, managed, mixed, mixedstaged, fakedev, fakedevrw, "
                "fakemixed, fakemixedstaged)",
                mode);
    }
    const size_t len = strlen(mode);
    lone_host_allowed = mem_send == mem_recv || (len > 6 && strcmp(mode + len - 6, "staged") == 0);
    const bool cuda_mode = mem_send == MEM_DEVICE || mem_send == MEM_MANAGED ||
                           mem_recv == MEM_DEVICE || mem_recv == MEM_MANAGED;
#ifdef GW_COLL_DEVICE
    if (cuda_mode) {
        /* The node's ranks pick GPUs in turn; the split is collective, so
         * every rank makes it, with a GPU or not. */
        MPI_Comm local;
        int lrank = 0, n = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &lrank);
        MPI_Comm_free(&local);
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n <= 0) {
            static char why[200];
            snprintf(why, sizeof(why), "no GPU (CUDA driver or device absent): %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "no device");
            skip_reason = why;
        } else {
            cudaSetDevice(lrank % n);
        }
    }
#else
    if (cuda_mode) skip_reason = "no CUDA (built without the CUDA toolkit)";
#endif
    /* Every rank must agree on skipping. */
    int skip = skip_reason != NULL && !hidden, any = 0;
    MPI_Allreduce(&skip, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && !skip_reason) skip_reason = "no GPU (CUDA driver or device absent) on another rank";
    if (hidden && !any) skip_reason = NULL;
    if (!skip_reason) make_types();
}

const char *harness_skip_reason(void) { return skip_reason; }

bool harness_init_device(int *argc, char ***argv, int *exit_code)
{
    harness_init(argc, argv);
    if (skip_reason) {
        *exit_code = mt_skip(skip_reason);
        return false;
    }
    if (mem_send != mem_recv || mem_send == MEM_HOST) {
        mt_fail(__FILE__, __LINE__, "mode %s: give fakedevrw or device", mode_name);
        *exit_code = mt_finish();
        return false;
    }
    return true;
}

enum mem_kind lone_buffer_kind(enum mem_kind k)
{
    if ((lone_host_allowed && !t_persistent) || k != MEM_HOST) return k;
    return mem_send != MEM_HOST ? mem_send : mem_recv;
}

void harness_fini(void)
{
    MPI_Type_free(&tt[T_VEC].dt);
    MPI_Type_free(&tt[T_NEGLB].dt);
    MPI_Type_free(&tt[T_AFFINE].dt);
    for (int i = 0; i < ntops; ++i) {
        if (tops[i].type != T_INT && tops[i].type != T_DOUBLE) MPI_Op_free(&tops[i].op);
        if (tops[i].id == OP_ADDMOD) MPI_Op_free(&tops[i].op);
    }
}
