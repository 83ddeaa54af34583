/*
 * Every call libgpuwire_mpi.so wraps, with checked data and status, under
 * mpirun -x LD_PRELOAD=libgpuwire_mpi.so on 2 or more ranks.
 *
 * Built twice (tests/tools/CMakeLists.txt): with host buffers (CI: the
 * wrappers pass host buffers straight to Open MPI and break nothing), and with
 * GW_TEST_DEVICE, where the buffers the calls see are cudaMalloc-ed (the
 * staging path; skipped without a GPU). With GW_TEST_EXPECT_PRELOAD=1 the
 * test first checks that MPI_Pack resolves to the preloaded library (=2: that
 * the program's own reference does, pml gpuwire having put the library in at
 * MPI_Init; =3: that it does not), so that a run without the wrappers cannot pass for one with them. With
 * GPUWIRE_MPI_STAGE_ALL=1 the library stages host buffers as it would device
 * ones (memcpy for the copies): the staging code runs in CI too.
 *
 * argv[1]: a folder for the file (the build folder's tmp).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GW_TEST_DEVICE
#include "device_test.h"
#else
#include "mpitest.h"
#endif

#define N 65553 /* ints: 262212 bytes, past the pinned-temporary limit (256 KiB) */

/* ---- buffers the calls see: device or host ---- */
static void *buf_new(size_t bytes)
{
    void *p = NULL;
#ifdef GW_TEST_DEVICE
    CUDA_OK(cudaMalloc(&p, bytes));
#else
    p = malloc(bytes);
#endif
    if (!p) mt_fail(__FILE__, __LINE__, "out of memory");
    return p;
}
static void buf_free(void *p)
{
#ifdef GW_TEST_DEVICE
    CUDA_OK(cudaFree(p));
#else
    free(p);
#endif
}
static void buf_put(void *dst, const void *src, size_t bytes)
{
#ifdef GW_TEST_DEVICE
    CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
#else
    memcpy(dst, src, bytes);
#endif
}
static void buf_get(void *dst, const void *src, size_t bytes)
{
#ifdef GW_TEST_DEVICE
    CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
#else
    memcpy(dst, src, bytes);
#endif
}

/* Fills a buffer the calls see with value(i) = seed * 1000003 + i. */
static void ints_fill(int *d, int n, int seed)
{
    int *h = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; ++i) h[i] = seed < 0 ? -1 : seed * 1000003 + i;
    buf_put(d, h, (size_t)n * sizeof(int));
    free(h);
}
static int *ints_new(int n, int seed)
{
    int *d = buf_new((size_t)n * sizeof(int));
    ints_fill(d, n, seed);
    return d;
}
/* Number of ints of d[0..n) that differ from seed's pattern (-1: all -1). */
static int ints_bad(const int *d, int n, int seed, const char *what)
{
    int *h = malloc((size_t)n * sizeof(int)), bad = 0, first = -1;
    buf_get(h, d, (size_t)n * sizeof(int));
    for (int i = 0; i < n; ++i) {
        int want = seed < 0 ? -1 : seed * 1000003 + i;
        if (h[i] != want && bad++ == 0) first = i;
    }
    if (bad) mt_fail(__FILE__, __LINE__, "%s: %d wrong ints, first at %d", what, bad, first);
    free(h);
    return bad;
}

/* ---- Pack/Unpack (native and external32) with a vector type ---- */
static void test_pack(void)
{
    /* 2 elements of (3 blocks of 2 ints, stride 4): 12 ints used out of 2 * 10 */
    MPI_Datatype vec, vec2;
    MT_CHECK_MPI(MPI_Type_vector(3, 2, 4, MPI_INT, &vec));
    MT_CHECK_MPI(MPI_Type_create_resized(vec, 0, 10 * sizeof(int), &vec2));
    MT_CHECK_MPI(MPI_Type_commit(&vec2));
    int *src = ints_new(20, 7), *dst = ints_new(20, -1);
    int size = 0;
    MT_CHECK_MPI(MPI_Pack_size(2, vec2, MPI_COMM_WORLD, &size));
    MT_CHECK_EQ(size, 12 * (int)sizeof(int));
    char *packed = buf_new(64 + (size_t)size);
    int pos = 8; /* not at the start: the offset is kept */
    MT_CHECK_MPI(MPI_Pack(src, 2, vec2, packed, 64 + size, &pos, MPI_COMM_WORLD));
    MT_CHECK_EQ(pos, 8 + size);
    int h[12];
    buf_get(h, packed + 8, sizeof(h));
    for (int k = 0; k < 12; ++k) { /* element e, block b, int j */
        int e = k / 6, b = (k % 6) / 2, j = k % 2;
        MT_CHECK_EQ(h[k], 7 * 1000003 + e * 10 + b * 4 + j);
    }
    pos = 8;
    MT_CHECK_MPI(MPI_Unpack(packed, 64 + size, &pos, dst, 2, vec2, MPI_COMM_WORLD));
    MT_CHECK_EQ(pos, 8 + size);
    int back[20];
    buf_get(back, dst, sizeof(back));
    for (int i = 0; i < 20; ++i) {
        int in_type = ((i % 10) % 4) < 2 && (i % 10) / 4 < 3; /* ints 0,1,4,5,8,9 of 10 */
        MT_CHECK_EQ(back[i], in_type ? 7 * 1000003 + i : -1);
    }

    MPI_Aint xsize = 0, xpos = 0;
    MT_CHECK_MPI(MPI_Pack_external_size("external32", 2, vec2, &xsize));
    MT_CHECK_EQ(xsize, 12 * 4);
    int *dst2 = ints_new(20, -1);
    MT_CHECK_MPI(MPI_Pack_external("external32", src, 2, vec2, packed, 64 + size, &xpos));
    MT_CHECK_EQ(xpos, xsize);
    xpos = 0;
    MT_CHECK_MPI(MPI_Unpack_external("external32", packed, 64 + size, &xpos, dst2, 2, vec2));
    MT_CHECK_EQ(xpos, xsize);
    buf_get(back, dst2, sizeof(back));
    for (int i = 0; i < 20; ++i) {
        int in_type = ((i % 10) % 4) < 2 && (i % 10) / 4 < 3;
        MT_CHECK_EQ(back[i], in_type ? 7 * 1000003 + i : -1);
    }
    buf_free(src);
    buf_free(dst);
    buf_free(dst2);
    buf_free(packed);
    MPI_Type_free(&vec2);
    MPI_Type_free(&vec);
}

/* ---- Sendrecv_replace around the ring, Reduce_local ---- */
static void test_replace_and_reduce(void)
{
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    int *buf = ints_new(N, 100 + mt_rank);
    MPI_Status st;
    MT_CHECK_MPI(MPI_Sendrecv_replace(buf, N, MPI_INT, right, 5, left, 5, MPI_COMM_WORLD, &st));
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    MT_CHECK_EQ(count, N);
    MT_CHECK_EQ(st.MPI_SOURCE, left);
    ints_bad(buf, N, 100 + left, "Sendrecv_replace");
    buf_free(buf);

    int *in = ints_new(N, 1), *io = ints_new(N, 2);
    MT_CHECK_MPI(MPI_Reduce_local(in, io, N, MPI_INT, MPI_SUM));
    int *h = malloc(N * sizeof(int)), bad = 0;
    buf_get(h, io, N * sizeof(int));
    for (int i = 0; i < N; ++i) bad += h[i] != 3 * 1000003 + 2 * i;
    MT_CHECK_EQ(bad, 0);
    ints_bad(in, N, 1, "Reduce_local input");
    /* one side in host memory, the other where the test puts its buffers */
    int *host_in = malloc(N * sizeof(int));
    for (int i = 0; i < N; ++i) host_in[i] = 4 * 1000003 + i;
    MT_CHECK_MPI(MPI_Reduce_local(host_in, io, N, MPI_INT, MPI_MAX));
    ints_bad(io, N, 4, "Reduce_local max"); /* 4K + i > 3K + 2i for i < N */
    free(host_in);
    free(h);
    buf_free(in);
    buf_free(io);
}

/* ---- Bsend, Ibsend, Bsend_init ---- */
/* Whether the wrappers stage: device buffers, or GPUWIRE_MPI_STAGE_ALL=1 */
static int staged;

static void test_bsend(void)
{
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    /* Room for every buffered message of the test: a message's space comes
     * back only once the sender has seen it delivered, which may be after
     * the receiver has it. */
    int attach_bytes = 8 * (N * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
    /* The attached buffer is device memory too: Open MPI writes it with the
     * CPU, so the library attaches host memory in its place. */
    void *attach = buf_new((size_t)attach_bytes);
    MT_CHECK_MPI(MPI_Buffer_attach(attach, attach_bytes));
    if (staged) {
        void *p = NULL;
        int sz = 0;
        MT_CHECK_MPI(PMPI_Buffer_detach(&p, &sz));
        MT_CHECK(p != attach && p != NULL);
        MT_CHECK_EQ(sz, attach_bytes);
        MT_CHECK_MPI(PMPI_Buffer_attach(p, sz));
    }
    int *a = ints_new(N, 200 + mt_rank), *b = ints_new(N, 300 + mt_rank);
    /* received into host memory: what is tested is the sending side */
    int *ra = malloc(N * sizeof(int)), *rb = malloc(N * sizeof(int));
    MPI_Request req;
    MT_CHECK_MPI(MPI_Bsend(a, N, MPI_INT, right, 6, MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Ibsend(b, N, MPI_INT, right, 7, MPI_COMM_WORLD, &req));
    /* the data is in the attached buffer: the send buffer may change now */
    int *junk = malloc(N * sizeof(int));
    memset(junk, 0xff, N * sizeof(int));
    buf_put(b, junk, N * sizeof(int));
    free(junk);
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Recv(ra, N, MPI_INT, left, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Recv(rb, N, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    ints_bad(ra, N, 200 + left, "Bsend");
    ints_bad(rb, N, 300 + left, "Ibsend");
    /* Persistent: each start sends what the buffer holds at that start (on
     * device memory the library refreshes its host stand-in then); one
     * request through MPI_Start, then both through MPI_Startall. */
    MPI_Request pr[2];
    MT_CHECK_MPI(MPI_Bsend_init(a, N, MPI_INT, right, 8, MPI_COMM_WORLD, &pr[0]));
    MT_CHECK_MPI(MPI_Bsend_init(b, N, MPI_INT, right, 9, MPI_COMM_WORLD, &pr[1]));
    for (int round = 0; round < 3; ++round) {
        ints_fill(a, N, 10 * round + 40 + mt_rank);
        ints_fill(b, N, 10 * round + 45 + mt_rank);
        if (0 == round) {
            MT_CHECK_MPI(MPI_Start(&pr[0]));
            MT_CHECK_MPI(MPI_Wait(&pr[0], MPI_STATUS_IGNORE));
        } else {
            MT_CHECK_MPI(MPI_Startall(2, pr));
            MT_CHECK_MPI(MPI_Waitall(2, pr, MPI_STATUSES_IGNORE));
        }
        MT_CHECK_MPI(MPI_Recv(ra, N, MPI_INT, left, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        ints_bad(ra, N, 10 * round + 40 + left, "Bsend_init + Start(all)");
        if (0 != round) {
            MT_CHECK_MPI(MPI_Recv(rb, N, MPI_INT, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            ints_bad(rb, N, 10 * round + 45 + left, "Bsend_init + Startall");
        }
    }
    MT_CHECK_MPI(MPI_Request_free(&pr[0]));
    MT_CHECK_MPI(MPI_Request_free(&pr[1]));
    MT_CHECK(pr[0] == MPI_REQUEST_NULL && pr[1] == MPI_REQUEST_NULL);
    void *detached = NULL;
    int detached_bytes = 0;
    MT_CHECK_MPI(MPI_Buffer_detach(&detached, &detached_bytes));
    MT_CHECK(detached == attach);
    MT_CHECK_EQ(detached_bytes, attach_bytes);
    buf_free(attach);
    buf_free(a);
    buf_free(b);
    free(ra);
    free(rb);
}

/* ---- MPI_File_: each form writes this rank's block, reads it back ---- */
enum form { F_PLAIN, F_ALL, F_AT, F_AT_ALL, F_I, F_I_ALL, F_I_AT, F_I_AT_ALL, F_ALL_SPLIT,
            F_AT_ALL_SPLIT, F_SHARED, F_I_SHARED, F_ORDERED, F_ORDERED_SPLIT, F_COUNT };
static const char *const form_name[F_COUNT] = {
    "write/read", "_all", "_at", "_at_all", "iwrite/iread", "i_all", "i_at", "i_at_all",
    "_all_begin/end", "_at_all_begin/end", "_shared", "i_shared", "_ordered",
    "_ordered_begin/end"};

/* One write (is_read 0) or read of N ints at this rank's block, by form. */
static void file_op(MPI_File fh, enum form f, int is_read, int *buf)
{
    MPI_Offset off = (MPI_Offset)mt_rank * N * sizeof(int);
    MPI_Status st;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS, count = -1;
    memset(&st, 0, sizeof(st));
    if (f == F_PLAIN || f == F_ALL || f == F_I || f == F_I_ALL || f == F_ALL_SPLIT)
        MT_CHECK_MPI(MPI_File_seek(fh, off, MPI_SEEK_SET));
    if (f == F_ORDERED || f == F_ORDERED_SPLIT) MT_CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
#define RW(r, w) rc = is_read ? (r) : (w)
    switch (f) {
    case F_PLAIN: RW(MPI_File_read(fh, buf, N, MPI_INT, &st), MPI_File_write(fh, buf, N, MPI_INT, &st)); break;
    case F_ALL: RW(MPI_File_read_all(fh, buf, N, MPI_INT, &st), MPI_File_write_all(fh, buf, N, MPI_INT, &st)); break;
    case F_AT: RW(MPI_File_read_at(fh, off, buf, N, MPI_INT, &st), MPI_File_write_at(fh, off, buf, N, MPI_INT, &st)); break;
    case F_AT_ALL: RW(MPI_File_read_at_all(fh, off, buf, N, MPI_INT, &st), MPI_File_write_at_all(fh, off, buf, N, MPI_INT, &st)); break;
    case F_I: RW(MPI_File_iread(fh, buf, N, MPI_INT, &req), MPI_File_iwrite(fh, buf, N, MPI_INT, &req)); break;
    case F_I_ALL: RW(MPI_File_iread_all(fh, buf, N, MPI_INT, &req), MPI_File_iwrite_all(fh, buf, N, MPI_INT, &req)); break;
    case F_I_AT: RW(MPI_File_iread_at(fh, off, buf, N, MPI_INT, &req), MPI_File_iwrite_at(fh, off, buf, N, MPI_INT, &req)); break;
    case F_I_AT_ALL: RW(MPI_File_iread_at_all(fh, off, buf, N, MPI_INT, &req), MPI_File_iwrite_at_all(fh, off, buf, N, MPI_INT, &req)); break;
    case F_ALL_SPLIT:
        RW(MPI_File_read_all_begin(fh, buf, N, MPI_INT), MPI_File_write_all_begin(fh, buf, N, MPI_INT));
        MT_CHECK_MPI(rc);
        RW(MPI_File_read_all_end(fh, buf, &st), MPI_File_write_all_end(fh, buf, &st));
        break;
    case F_AT_ALL_SPLIT:
        RW(MPI_File_read_at_all_begin(fh, off, buf, N, MPI_INT), MPI_File_write_at_all_begin(fh, off, buf, N, MPI_INT));
        MT_CHECK_MPI(rc);
        RW(MPI_File_read_at_all_end(fh, buf, &st), MPI_File_write_at_all_end(fh, buf, &st));
        break;
    case F_SHARED:
    case F_I_SHARED:
        /* the shared pointer's order is the ranks' order: one rank at a time */
        MT_CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
        for (int r = 0; r < mt_size; ++r) {
            if (r == mt_rank && f == F_SHARED)
                RW(MPI_File_read_shared(fh, buf, N, MPI_INT, &st), MPI_File_write_shared(fh, buf, N, MPI_INT, &st));
            if (r == mt_rank && f == F_I_SHARED)
                RW(MPI_File_iread_shared(fh, buf, N, MPI_INT, &req), MPI_File_iwrite_shared(fh, buf, N, MPI_INT, &req));
            if (r == mt_rank && req != MPI_REQUEST_NULL) MT_CHECK_MPI(MPI_Wait(&req, &st));
            MPI_Barrier(MPI_COMM_WORLD);
        }
        break;
    case F_ORDERED: RW(MPI_File_read_ordered(fh, buf, N, MPI_INT, &st), MPI_File_write_ordered(fh, buf, N, MPI_INT, &st)); break;
    case F_ORDERED_SPLIT:
        RW(MPI_File_read_ordered_begin(fh, buf, N, MPI_INT), MPI_File_write_ordered_begin(fh, buf, N, MPI_INT));
        MT_CHECK_MPI(rc);
        RW(MPI_File_read_ordered_end(fh, buf, &st), MPI_File_write_ordered_end(fh, buf, &st));
        break;
    default: break;
    }
#undef RW
    if (rc != MPI_SUCCESS) mt_fail(__FILE__, __LINE__, "%s %s returned %d", form_name[f], is_read ? "read" : "write", rc);
    if (req != MPI_REQUEST_NULL) MT_CHECK_MPI(MPI_Wait(&req, &st));
    MPI_Get_count(&st, MPI_INT, &count);
    if (count != N) mt_fail(__FILE__, __LINE__, "%s %s: status count %d, not %d", form_name[f], is_read ? "read" : "write", count, N);
}

static void test_file(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/mpi_layer_%s.bin", dir,
#ifdef GW_TEST_DEVICE
             "device"
#else
             "host"
#endif
    );
    MPI_File fh;
    if (mt_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    MT_CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    for (int f = 0; f < F_COUNT; ++f) {
        int seed = 1000 + f * 16 + mt_rank;
        int *w = ints_new(N, seed), *r = ints_new(N, -1);
        file_op(fh, (enum form)f, 0, w);
        /* MPI's consistency rule for data another call reads: sync, barrier, sync */
        MT_CHECK_MPI(MPI_File_sync(fh));
        MPI_Barrier(MPI_COMM_WORLD);
        MT_CHECK_MPI(MPI_File_sync(fh));
        file_op(fh, (enum form)f, 1, r);
        char what[64];
        snprintf(what, sizeof(what), "file %s read back", form_name[f]);
        ints_bad(r, N, seed, what);
        ints_bad(w, N, seed, "file write's buffer unchanged");
        buf_free(w);
        buf_free(r);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MT_CHECK_MPI(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
#ifdef GW_TEST_DEVICE
    if (device_test_select_gpu() < 0) return mt_skip("no GPU on this machine");
#endif
    if (mt_size < 2) return mt_skip("needs 2 or more ranks");
#ifdef GW_TEST_DEVICE
    staged = 1;
#else
    const char *all = getenv("GPUWIRE_MPI_STAGE_ALL");
    staged = all && all[0] == '1';
#endif
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *expect = getenv("GW_TEST_EXPECT_PRELOAD");
    const int want = expect ? atoi(expect) : 0;
    if (want >= 1 && want <= 3) {
        /* 1: preloaded, the process's MPI_Pack is the library's. 2: put in by
         * pml gpuwire at MPI_Init (pml_gpuwire_mpi_layer): this program's
         * reference to MPI_Pack (its GOT slot) is the library's. 3: that
         * reference is still Open MPI's (the parameter at 0). */
        Dl_info info;
        void *fn = want == 1 ? dlsym(RTLD_DEFAULT, "MPI_Pack") : (void *)&MPI_Pack;
        const int ours = fn && dladdr(fn, &info) && info.dli_fname &&
                         strstr(info.dli_fname, "libgpuwire_") != NULL;
        if (ours != (want != 3)) {
            mt_fail(__FILE__, __LINE__, "MPI_Pack is %s (%s)",
                    want == 3 ? "libgpuwire_mpi.so's, not Open MPI's" : "not libgpuwire_mpi.so's: preload it",
                    fn && info.dli_fname ? info.dli_fname : "?");
            return mt_finish();
        }
    }
    test_pack();
    test_replace_and_reduce();
    test_bsend();
    test_file(argc > 1 ? argv[1] : ".");
    return mt_finish();
}
