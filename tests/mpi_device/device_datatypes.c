/*
 * Non-contiguous datatypes on device buffers under pml gpuwire (packed and
 * unpacked by the cuda module's kernel): vector, indexed, struct with gaps
 * and a negative lower bound, subarray, a vector of long blocks and a large
 * vector, each device->device, device->host, host->device, managed->device
 * and host->host, blocking and non-blocking (several in flight). Then short
 * messages (fewer elements, and a byte count that ends inside an element),
 * a message too long (MPI_ERR_TRUNCATE), and a buffered send from device
 * memory (refused).
 *
 * Every check is on the host, byte for byte over the whole region the
 * datatype spans plus guard bytes either side: the bytes the datatype
 * covers hold the sender's, every other byte (gaps, guards, elements past a
 * short message) still holds the receiver's own pattern. The reference is
 * MPI_Pack/MPI_Unpack on host copies. Exits 77 (skipped) without a GPU.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "device_test.h"
#include "mpitest.h"

#include <mpi-ext.h> /* MPIX_Query_cuda_support */

enum kind { K_HOST, K_DEVICE, K_MANAGED };
static const char *kind_name[] = {"host", "device", "managed"};


#define GUARD 64

/* A datatype, the count a message carries, and the region it spans. */
typedef struct {
    const char *name;
    MPI_Datatype type;
    int count;
    MPI_Aint true_lb; /* of count elements */
    size_t span;      /* bytes from the first to past the last, of count + 1 elements */
    int size;         /* packed bytes of one element */
} layout_t;

/* A region of span + 2 GUARD bytes of a memory kind; buf is where the
 * datatype's buffer pointer goes. */
typedef struct {
    enum kind kind;
    char *region;
    size_t len;
    char *buf;
} region_t;

static void region_alloc(region_t *r, enum kind k, const layout_t *l)
{
    r->kind = k;
    r->len = l->span + 2 * GUARD;
    switch (k) {
    case K_HOST: r->region = malloc(r->len); break;
    case K_DEVICE: CUDA_OK(cudaMalloc((void **)&r->region, r->len)); break;
    case K_MANAGED: CUDA_OK(cudaMallocManaged((void **)&r->region, r->len, cudaMemAttachGlobal)); break;
    }
    MT_CHECK(r->region != NULL);
    r->buf = r->region + GUARD - l->true_lb;
}

static void region_free(region_t *r)
{
    if (r->kind == K_HOST) {
        free(r->region);
    } else {
        CUDA_OK(cudaFree(r->region));
    }
}

/* Host copy of a region (malloc'ed). */
static char *region_read(const region_t *r)
{
    char *h = malloc(r->len);
    CUDA_OK(cudaMemcpy(h, r->region, r->len, cudaMemcpyDefault));
    return h;
}

static char *region_fill(region_t *r, unsigned seed)
{
    char *h = malloc(r->len);
    mt_fill(h, r->len, seed);
    CUDA_OK(cudaMemcpy(r->region, h, r->len, cudaMemcpyDefault));
    return h;
}

static void layout_init(layout_t *l, const char *name, MPI_Datatype t, int count)
{
    MPI_Aint lb, extent, tlb, textent;
    MT_CHECK_MPI(MPI_Type_commit(&t));
    MT_CHECK_MPI(MPI_Type_get_extent(t, &lb, &extent));
    MT_CHECK_MPI(MPI_Type_get_true_extent(t, &tlb, &textent));
    MT_CHECK(extent > 0);
    l->name = name;
    l->type = t;
    l->count = count;
    l->true_lb = tlb;
    l->span = (size_t)(textent + (MPI_Aint)count * extent); /* room for count + 1 */
    MT_CHECK_MPI(MPI_Type_size(t, &l->size));
}

/* The expected receiver region: its own bytes (host copy `mine`) with the
 * first `bytes` packed bytes of the sender's host copy unpacked over them. */
static char *expected(const layout_t *l, const char *sender, int send_count, const char *mine,
                      size_t region_len, size_t bytes)
{
    const char *sbuf = sender + GUARD - l->true_lb;
    char *want = malloc(region_len);
    memcpy(want, mine, region_len);
    char *wbuf = want + GUARD - l->true_lb;
    int cap = l->size * (l->count + 1);
    char *packed = malloc((size_t)cap), *packed_mine = malloc((size_t)cap);
    int pos = 0;
    MT_CHECK_MPI(MPI_Pack(sbuf, send_count, l->type, packed, cap, &pos, MPI_COMM_SELF));
    pos = 0;
    MT_CHECK_MPI(MPI_Pack(wbuf, l->count, l->type, packed_mine, cap, &pos, MPI_COMM_SELF));
    memcpy(packed_mine, packed, bytes);
    pos = 0;
    MT_CHECK_MPI(MPI_Unpack(packed_mine, cap, &pos, wbuf, l->count, l->type, MPI_COMM_SELF));
    free(packed);
    free(packed_mine);
    return want;
}

static void compare(const char *what, const layout_t *l, const char *got, const char *want,
                    size_t len)
{
    for (size_t i = 0; i < len; ++i) {
        if (got[i] != want[i]) {
            mt_fail(__FILE__, __LINE__, "%s %s: byte %zd from the datatype's first wrong", what,
                    l->name, (ssize_t)i - GUARD);
            return;
        }
    }
}

/* One message of send_count elements, received as l->count elements. */
static void exchange(const layout_t *l, enum kind sk, enum kind rk, int send_count, int nonblocking)
{
    int peer = mt_size - 1, tag = 40 + sk * 3 + rk;
    char what[96];
    snprintf(what, sizeof(what), "%s->%s %d of %d%s", kind_name[sk], kind_name[rk], send_count,
             l->count, nonblocking ? " (non-blocking)" : "");
    if (mt_rank == 0) {
        region_t s;
        region_alloc(&s, sk, l);
        free(region_fill(&s, 1000 + (unsigned)l->count));
        if (nonblocking) {
            MPI_Request r;
            MT_CHECK_MPI(MPI_Isend(s.buf, send_count, l->type, peer, tag, MPI_COMM_WORLD, &r));
            MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else {
            MT_CHECK_MPI(MPI_Send(s.buf, send_count, l->type, peer, tag, MPI_COMM_WORLD));
        }
        /* The send buffer is left as it was. */
        char *after = region_read(&s);
        char *before = malloc(s.len);
        mt_fill(before, s.len, 1000 + (unsigned)l->count);
        compare(what, l, after, before, s.len);
        free(after);
        free(before);
        region_free(&s);
    } else if (mt_rank == peer) {
        region_t r;
        region_alloc(&r, rk, l);
        char *mine = region_fill(&r, 2000 + (unsigned)l->count);
        MPI_Status st;
        if (nonblocking) {
            MPI_Request q;
            MT_CHECK_MPI(MPI_Irecv(r.buf, l->count, l->type, 0, tag, MPI_COMM_WORLD, &q));
            MT_CHECK_MPI(MPI_Wait(&q, &st));
        } else {
            MT_CHECK_MPI(MPI_Recv(r.buf, l->count, l->type, 0, tag, MPI_COMM_WORLD, &st));
        }
        int n = -1;
        MT_CHECK_MPI(MPI_Get_count(&st, l->type, &n));
        MT_CHECK_EQ(n, send_count);
        char *sender = malloc(r.len);
        mt_fill(sender, r.len, 1000 + (unsigned)l->count);
        char *want = expected(l, sender, send_count, mine, r.len, (size_t)send_count * l->size);
        char *got = region_read(&r);
        compare(what, l, got, want, r.len);
        free(got);
        free(want);
        free(sender);
        free(mine);
        region_free(&r);
    }
}

/* Four messages in flight each way on device buffers (more device
 * temporaries at once than the cache keeps). */
static void in_flight(const layout_t *l)
{
    enum { N = 4 };
    int peer = mt_size - 1;
    region_t b[N];
    MPI_Request q[N];
    char *mine[N];
    for (int i = 0; i < N; ++i) {
        region_alloc(&b[i], K_DEVICE, l);
        mine[i] = region_fill(&b[i], (mt_rank == 0 ? 3000u : 4000u) + (unsigned)i);
    }
    if (mt_rank == 0) {
        for (int i = 0; i < N; ++i)
            MT_CHECK_MPI(MPI_Isend(b[i].buf, l->count, l->type, peer, 90 + i, MPI_COMM_WORLD, &q[i]));
        MT_CHECK_MPI(MPI_Waitall(N, q, MPI_STATUSES_IGNORE));
    } else if (mt_rank == peer) {
        for (int i = N - 1; i >= 0; --i)
            MT_CHECK_MPI(MPI_Irecv(b[i].buf, l->count, l->type, 0, 90 + i, MPI_COMM_WORLD, &q[i]));
        MT_CHECK_MPI(MPI_Waitall(N, q, MPI_STATUSES_IGNORE));
        for (int i = 0; i < N; ++i) {
            char *sender = malloc(b[i].len);
            mt_fill(sender, b[i].len, 3000u + (unsigned)i);
            char *want = expected(l, sender, l->count, mine[i], b[i].len,
                                  (size_t)l->count * l->size);
            char *got = region_read(&b[i]);
            compare("in flight", l, got, want, b[i].len);
            free(got);
            free(want);
            free(sender);
        }
    }
    for (int i = 0; i < N; ++i) {
        free(mine[i]);
        region_free(&b[i]);
    }
}

/* A byte count that ends inside an element: only those bytes are unpacked;
 * MPI_Get_count says MPI_UNDEFINED. */
static void partial_element(const layout_t *l)
{
    int peer = mt_size - 1;
    size_t bytes = (size_t)l->size + (size_t)l->size / 2 + 1;
    if (bytes >= (size_t)l->size * l->count) return;
    if (mt_rank == 0) {
        char *h = malloc(bytes), *d = NULL;
        mt_fill(h, bytes, 5000);
        CUDA_OK(cudaMalloc((void **)&d, bytes));
        CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
        MT_CHECK_MPI(MPI_Send(d, (int)bytes, MPI_BYTE, peer, 70, MPI_COMM_WORLD));
        CUDA_OK(cudaFree(d));
        free(h);
    } else if (mt_rank == peer) {
        region_t r;
        region_alloc(&r, K_DEVICE, l);
        char *mine = region_fill(&r, 6000);
        MPI_Status st;
        MT_CHECK_MPI(MPI_Recv(r.buf, l->count, l->type, 0, 70, MPI_COMM_WORLD, &st));
        int n = 0;
        MT_CHECK_MPI(MPI_Get_count(&st, l->type, &n));
        MT_CHECK_EQ(n, MPI_UNDEFINED);
        MT_CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
        MT_CHECK_EQ(n, bytes);
        /* Reference: the receiver's packed bytes with the first `bytes` replaced. */
        int cap = l->size * l->count, pos = 0;
        char *packed = malloc((size_t)cap), *want = malloc(r.len);
        memcpy(want, mine, r.len);
        char *wbuf = want + GUARD - l->true_lb;
        MT_CHECK_MPI(MPI_Pack(wbuf, l->count, l->type, packed, cap, &pos, MPI_COMM_SELF));
        mt_fill(packed, bytes, 5000);
        pos = 0;
        MT_CHECK_MPI(MPI_Unpack(packed, cap, &pos, wbuf, l->count, l->type, MPI_COMM_SELF));
        char *got = region_read(&r);
        compare("partial element", l, got, want, r.len);
        free(got);
        free(want);
        free(packed);
        free(mine);
        region_free(&r);
    }
}

/* count + 1 elements into a receive of count: MPI_ERR_TRUNCATE. */
static void too_long(const layout_t *l)
{
    int peer = mt_size - 1;
    if (mt_rank == 0) {
        region_t s;
        region_alloc(&s, K_DEVICE, l);
        free(region_fill(&s, 7000));
        MT_CHECK_MPI(MPI_Send(s.buf, l->count + 1, l->type, peer, 71, MPI_COMM_WORLD));
        region_free(&s);
    } else if (mt_rank == peer) {
        region_t r;
        region_alloc(&r, K_DEVICE, l);
        free(region_fill(&r, 7001));
        MPI_Status st;
        int rc = MPI_Recv(r.buf, l->count, l->type, 0, 71, MPI_COMM_WORLD, &st);
        int cls = MPI_SUCCESS;
        MPI_Error_class(rc, &cls);
        MT_CHECK_EQ(cls, MPI_ERR_TRUNCATE);
        region_free(&r);
    }
}

/* MPI_Bsend from device memory: the pml alone refuses it (the attached
 * buffer is host memory, filled by the CPU); with libgpuwire_mpi.so in the
 * process (put in at MPI_Init on a machine with a GPU, pml_gpuwire_mpi_layer
 * 1, and then MPIX_Query_cuda_support() answers 1) it is staged and arrives. */
static void bsend_device(void)
{
    const int layer = MPIX_Query_cuda_support();
    const int to = mt_size - 1;
    char want[64], got[64];
    for (int i = 0; i < 64; i++) want[i] = (char)(i * 7 + 3);
    if (mt_rank == to && mt_rank != 0 && layer) {
        memset(got, 0, sizeof(got));
        MT_CHECK_MPI(MPI_Recv(got, 64, MPI_BYTE, 0, 72, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MT_CHECK(memcmp(got, want, 64) == 0);
    }
    if (mt_rank != 0) return;
    int size = 1 << 16;
    char *attach = malloc((size_t)size), *d = NULL;
    MT_CHECK_MPI(MPI_Buffer_attach(attach, size));
    CUDA_OK(cudaMalloc((void **)&d, 64));
    CUDA_OK(cudaMemcpy(d, want, 64, cudaMemcpyHostToDevice));
    int rc = MPI_Bsend(d, 64, MPI_BYTE, to, 72, MPI_COMM_WORLD);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    MT_CHECK_EQ(cls, layer ? MPI_SUCCESS : MPI_ERR_UNSUPPORTED_OPERATION);
    void *back = NULL;
    int back_size = 0;
    MT_CHECK_MPI(MPI_Buffer_detach(&back, &back_size));
    CUDA_OK(cudaFree(d));
    free(attach);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (device_test_select_gpu() < 0) return mt_skip("no GPU (CUDA driver or device absent)");

    enum { NL = 7 };
    layout_t l[NL];
    MPI_Datatype t;

    /* vector: 3 of every 7 ints, 20 blocks; 5 of them */
    MT_CHECK_MPI(MPI_Type_vector(20, 3, 7, MPI_INT, &t));
    layout_init(&l[0], "vector", t, 5);

    /* indexed doubles, uneven blocks */
    int ilen[] = {1, 4, 2, 7}, idisp[] = {0, 3, 11, 20};
    MT_CHECK_MPI(MPI_Type_indexed(4, ilen, idisp, MPI_DOUBLE, &t));
    layout_init(&l[1], "indexed", t, 3);

    /* struct {char; double; int[3]} with gaps, a negative displacement and
     * a resized extent: 1000 of them */
    int slen[] = {1, 1, 3};
    MPI_Aint sdisp[] = {-8, 8, 16};
    MPI_Datatype stypes[] = {MPI_CHAR, MPI_DOUBLE, MPI_INT}, s0;
    MT_CHECK_MPI(MPI_Type_create_struct(3, slen, sdisp, stypes, &s0));
    MT_CHECK_MPI(MPI_Type_create_resized(s0, -8, 40, &t));
    MT_CHECK_MPI(MPI_Type_free(&s0));
    layout_init(&l[2], "struct", t, 1000);

    /* subarray 4x5x6 of an 8x10x12 float array */
    int sizes[] = {8, 10, 12}, subs[] = {4, 5, 6}, starts[] = {1, 2, 3};
    MT_CHECK_MPI(MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_C, MPI_FLOAT, &t));
    layout_init(&l[3], "subarray", t, 2);

    /* vector of long blocks (longer than the kernel's chunk), odd length */
    MT_CHECK_MPI(MPI_Type_vector(6, 50001, 50007, MPI_BYTE, &t));
    layout_init(&l[4], "vector of long blocks", t, 2);

    /* large vector: 2 of every 3 doubles, 1 MiB packed per element */
    MT_CHECK_MPI(MPI_Type_vector(65536, 2, 3, MPI_DOUBLE, &t));
    layout_init(&l[5], "large vector", t, 3);

    /* bytes at odd offsets: 3 of every 5 */
    MT_CHECK_MPI(MPI_Type_vector(333, 3, 5, MPI_BYTE, &t));
    layout_init(&l[6], "byte vector", t, 7);

    static const enum kind pairs[][2] = {{K_DEVICE, K_DEVICE}, {K_DEVICE, K_HOST},
                                         {K_HOST, K_DEVICE},   {K_MANAGED, K_DEVICE},
                                         {K_HOST, K_HOST}};
    for (int i = 0; i < NL; ++i) {
        for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); ++p) {
            exchange(&l[i], pairs[p][0], pairs[p][1], l[i].count, 0);
            exchange(&l[i], pairs[p][0], pairs[p][1], l[i].count, 1);
        }
        /* short: fewer elements than posted */
        exchange(&l[i], K_DEVICE, K_DEVICE, l[i].count - 1, 0);
        exchange(&l[i], K_HOST, K_DEVICE, 1, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        in_flight(&l[i]);
        partial_element(&l[i]);
        too_long(&l[i]);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    bsend_device();
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < NL; ++i) MT_CHECK_MPI(MPI_Type_free(&l[i].type));
    return mt_finish();
}
