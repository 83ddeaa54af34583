/*
 * osc gpuwire's same-node direct path (osc_gpuwire_direct.c): contiguous Put
 * and Get into the mapped device windows of the other ranks, with messages
 * for the rest in the same epochs: a vector Put, an Accumulate from every
 * rank into rank 0, Rput/Rget, a Put to this rank's own window, a Put then
 * flush then Get of the same bytes (passive epochs), origin buffers in host
 * and device memory. Data is checked at the target after fence, PSCW,
 * unlock, and flush + unlock_all; the counter osc_<component>_direct_ops
 * must grow exactly when the rank could take the direct path. Accumulates
 * from device buffers to mapped windows go by reference (the target reduces
 * from the origin buffer): the origin buffer is overwritten as soon as it is
 * locally complete (flush_local, complete), and the counter
 * osc_<component>_acc_by_ref must grow exactly where that path applies.
 *
 * argv[1] "mapped": every window is exportable device memory. "mixed": rank
 * r's window is exportable device memory (r % 3 == 0), device memory that
 * cannot be exported (1: every origin falls back to messages for it), or
 * host memory (2). "unmapped": no window can be exported; nothing is direct.
 *
 * Built for the simulated GPU (OSC_TEST_FAKEDEV: exportable memory is a
 * "gwfake-ipc" memfd, see tests/mpi_coll/fake_ipc.c; the other kind an
 * anonymous PROT_NONE page) or a real one (OSC_TEST_DEVICE: cudaMalloc, and
 * cudaMallocAsync pool memory, which CUDA IPC cannot export).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_pvar.h"
#include "mpitest.h"

#define N 256        /* int64 elements of a window */
#define REGION 8192  /* bytes of a device allocation */
#define SKEW 64      /* the window starts this far into its allocation */
enum { K_IPC, K_OPAQUE, K_HOST };

#ifdef OSC_TEST_DEVICE
#include "device_test.h"
#define PVAR_PREFIX "osc_gpuwire_"
static int mem_setup(void) { return device_test_select_gpu() < 0 ? -1 : 0; }
static char *mem_alloc(int kind)
{
    void *p = NULL;
    if (kind == K_HOST) return malloc(REGION);
    if (kind == K_IPC) {
        CUDA_OK(cudaMalloc(&p, REGION));
    } else {
        CUDA_OK(cudaMallocAsync(&p, REGION, 0));
        CUDA_OK(cudaStreamSynchronize(0));
    }
    return p;
}
static void mem_free(int kind, char *p)
{
    if (kind == K_HOST) {
        free(p);
    } else if (kind == K_IPC) {
        CUDA_OK(cudaFree(p));
    } else {
        CUDA_OK(cudaFreeAsync(p, 0));
        CUDA_OK(cudaStreamSynchronize(0));
    }
}
static void mem_to(int kind, void *dst, const void *src, size_t len)
{
    if (kind == K_HOST) memcpy(dst, src, len);
    else CUDA_OK(cudaMemcpy(dst, src, len, cudaMemcpyHostToDevice));
}
static void mem_from(int kind, void *dst, const void *src, size_t len)
{
    if (kind == K_HOST) memcpy(dst, src, len);
    else CUDA_OK(cudaMemcpy(dst, src, len, cudaMemcpyDeviceToHost));
}
#else
/* The simulated GPU's memory: pages the CPU cannot touch, opened only to fill
 * and read them. Exportable memory keeps its memfd open (fake_ipc.c maps it
 * through /proc/<pid>/fd). */
#include <sys/mman.h>
#include <unistd.h>
#define PVAR_PREFIX "osc_gpuwirefake_"
static int mem_setup(void) { return 0; }
static char *mem_alloc(int kind)
{
    if (kind == K_HOST) return malloc(REGION);
    int fd = -1, flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (kind == K_IPC) {
        fd = memfd_create("gwfake-ipc", 0);
        if (fd < 0 || ftruncate(fd, REGION) != 0) abort();
        flags = MAP_SHARED;
    }
    char *p = mmap(NULL, REGION, PROT_NONE, flags, fd, 0);
    if (p == MAP_FAILED) abort();
    return p; /* the memfd stays open until the process ends */
}
static void mem_free(int kind, char *p)
{
    if (kind == K_HOST) free(p);
    else munmap(p, REGION);
}
static char *page_of(const void *p) { return (char *)((uintptr_t)p & ~(uintptr_t)4095); }
static void mem_to(int kind, void *dst, const void *src, size_t len)
{
    if (kind != K_HOST) mprotect(page_of(dst), REGION, PROT_READ | PROT_WRITE);
    memcpy(dst, src, len);
    if (kind != K_HOST) mprotect(page_of(dst), REGION, PROT_NONE);
}
static void mem_from(int kind, void *dst, const void *src, size_t len)
{
    if (kind != K_HOST) mprotect(page_of(src), REGION, PROT_READ);
    memcpy(dst, src, len);
    if (kind != K_HOST) mprotect(page_of(src), REGION, PROT_NONE);
}
#endif

enum { S_FENCE, S_PSCW, S_LOCK, S_LOCKALL, NSYNCS };
static const char *sync_name[] = {"fence", "pscw", "lock", "lockall+flush"};
static int mixed, unmapped;

/* The counter PVARs, read as their growth since the start: 0 Put and Get
 * done directly, 1 accumulates sent by reference, 2 accumulates done by the
 * origin in the mapped window, 3 those sent as messages instead because the
 * target's accumulate word stayed held (ranks on few cores). */
static const char *const pv_name[4] = {PVAR_PREFIX "direct_ops", PVAR_PREFIX "acc_by_ref",
                                       PVAR_PREFIX "direct_accs", PVAR_PREFIX "acc_word_busy"};
static pvar_counters_t counters;
#define counter(i) pvar_counters_read(&counters, (i))
static void counters_open(void)
{
    int provided = 0;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    int missing = pvar_counters_open(&counters, pv_name, 4);
    if (missing >= 0) mt_fail(__FILE__, __LINE__, "no performance variable %s", pv_name[missing]);
}
static void counters_close(void)
{
    pvar_counters_close(&counters);
    MPI_T_finalize();
}

static int kind_of_rank(int r) { return unmapped ? K_OPAQUE : mixed ? r % 3 : K_IPC; }
static int64_t init_value(int rank, int i) { return 1000000 * (int64_t)(rank + 1) + i; }
static int64_t origin_value(int rank, int sync) { return 500000 * (int64_t)(rank + 1) + 1000 * sync; }

static void access_begin(int sync, int target, MPI_Win win)
{
    if (sync == S_LOCK) MT_CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
}
static void access_end(int sync, int target, MPI_Win win)
{
    if (sync == S_LOCK) MT_CHECK_MPI(MPI_Win_unlock(target, win));
}

static void epoch_begin(int sync, MPI_Group group, MPI_Win win)
{
    switch (sync) {
    case S_FENCE: MT_CHECK_MPI(MPI_Win_fence(0, win)); break;
    case S_PSCW:
        MT_CHECK_MPI(MPI_Win_post(group, 0, win));
        MT_CHECK_MPI(MPI_Win_start(group, 0, win));
        break;
    case S_LOCKALL: MT_CHECK_MPI(MPI_Win_lock_all(0, win)); break;
    default: break;
    }
}

/* Overwrites origin elements once they are locally complete: a target that
 * still reads them (an accumulate by reference) would get these. */
static void scribble(int okind, int64_t *at)
{
    int64_t junk[4] = {-1, -2, -3, -4};
    if (at != NULL) mem_to(okind, at, junk, sizeof(junk));
}

static void epoch_end(int sync, MPI_Win win, int okind, int64_t *scribble_at)
{
    switch (sync) {
    case S_FENCE: MT_CHECK_MPI(MPI_Win_fence(0, win)); break;
    case S_PSCW:
        MT_CHECK_MPI(MPI_Win_complete(win));
        scribble(okind, scribble_at);
        MT_CHECK_MPI(MPI_Win_wait(win));
        break;
    case S_LOCKALL:
        MT_CHECK_MPI(MPI_Win_flush_all(win));
        MT_CHECK_MPI(MPI_Win_unlock_all(win));
        break;
    default: break;
    }
}

static void run(int sync)
{
    const int r = mt_rank, size = mt_size, next = (r + 1) % size, prev = (r + size - 1) % size;
    const int kind = kind_of_rank(r);
    char *region = mem_alloc(kind);
    int64_t *mem = (int64_t *)(region + SKEW);
    int64_t host[N];
    for (int i = 0; i < N; i++) host[i] = init_value(r, i);
    mem_to(kind, mem, host, sizeof(host));
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_create(mem, N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
                                MPI_COMM_WORLD, &win));
    /* Origin buffers: device memory of this rank's kind (host for K_HOST),
     * and host memory. */
    const int okind = kind == K_HOST ? K_HOST : K_IPC;
    char *oregion = mem_alloc(okind);
    int64_t *o = (int64_t *)oregion, *res = o + 64;
    int64_t o_host[128] = {0}, h_src[16], h_res[16] = {0};
    /* Values differ from one run to the next: a copy of an earlier run that
     * lands late cannot pass for one of this run. */
    for (int k = 0; k < 64; k++) o_host[k] = origin_value(r, sync) + k;
    mem_to(okind, o, o_host, sizeof(o_host));
    for (int k = 0; k < 16; k++) h_src[k] = -7000 * (int64_t)(r + 1) - k;
    MPI_Datatype vec;
    MPI_Type_vector(4, 1, 2, MPI_INT64_T, &vec);
    MPI_Type_commit(&vec);
    MPI_Group group;
    MPI_Comm_group(MPI_COMM_WORLD, &group);
    const unsigned long long before = counter(0), refs_before = counter(1),
                             accs_before = counter(2) + counter(3);

    epoch_begin(sync, group, win);
    access_begin(sync, next, win);
    MT_CHECK_MPI(MPI_Put(o, 16, MPI_INT64_T, next, 0, 16, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Put(h_src, 16, MPI_INT64_T, next, 16, 16, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Get(res, 16, MPI_INT64_T, next, 64, 16, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Get(h_res, 8, MPI_INT64_T, next, 80, 8, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Put(o + 16, 1, vec, next, 100, 4, MPI_INT64_T, win));
    MPI_Request rq[2];
    MT_CHECK_MPI(MPI_Rput(o + 32, 8, MPI_INT64_T, next, 32, 8, MPI_INT64_T, win, &rq[0]));
    MT_CHECK_MPI(MPI_Rget(res + 16, 8, MPI_INT64_T, next, 140, 8, MPI_INT64_T, win, &rq[1]));
    MT_CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    /* From a device buffer to a mapped window: by reference, or by the origin. */
    MT_CHECK_MPI(MPI_Accumulate(o + 50, 4, MPI_INT64_T, next, 160, 4, MPI_INT64_T, MPI_REPLACE,
                                win));
    if (sync == S_LOCK || sync == S_LOCKALL) {
        MT_CHECK_MPI(MPI_Win_flush_local(next, win));
        scribble(okind, o + 50);
    }
    if (sync == S_LOCK || sync == S_LOCKALL) {
        /* The flushed Put is at the target: a Get after it reads it back. */
        MT_CHECK_MPI(MPI_Put(o + 40, 8, MPI_INT64_T, next, 200, 8, MPI_INT64_T, win));
        MT_CHECK_MPI(MPI_Win_flush(next, win));
        MT_CHECK_MPI(MPI_Get(res + 32, 8, MPI_INT64_T, next, 200, 8, MPI_INT64_T, win));
        MT_CHECK_MPI(MPI_Win_flush_local(next, win));
    }
    access_end(sync, next, win);
    access_begin(sync, 0, win);
    MT_CHECK_MPI(MPI_Accumulate(o + 48, 1, MPI_INT64_T, 0, 120, 1, MPI_INT64_T, MPI_SUM, win));
    access_end(sync, 0, win);
    access_begin(sync, r, win);
    MT_CHECK_MPI(MPI_Put(h_src, 4, MPI_INT64_T, r, 220, 4, MPI_INT64_T, win));
    access_end(sync, r, win);
    epoch_end(sync, win, okind, sync == S_PSCW ? o + 50 : NULL);
    /* An epoch of Put and Get alone: nothing but the synchronisation's own
     * wait moves the (simulated) copies. */
    epoch_begin(sync, group, win);
    access_begin(sync, next, win);
    MT_CHECK_MPI(MPI_Put(o + 56, 8, MPI_INT64_T, next, 240, 8, MPI_INT64_T, win));
    MT_CHECK_MPI(MPI_Get(res + 48, 8, MPI_INT64_T, next, 248, 8, MPI_INT64_T, win));
    access_end(sync, next, win);
    epoch_end(sync, win, okind, NULL);
    const unsigned long long direct = counter(0) - before, refs = counter(1) - refs_before,
                             accs = counter(2) + counter(3) - accs_before;
    MPI_Barrier(MPI_COMM_WORLD);

    int bad = mt_failures;
    int64_t got[N], rh[64];
    mem_from(kind, got, mem, sizeof(got));
    mem_from(okind, rh, res, sizeof(rh));
    const int64_t pbase = origin_value(prev, sync);
    for (int k = 0; k < 16; k++) {
        MT_CHECK_EQ(got[k], pbase + k);
        MT_CHECK_EQ(got[16 + k], -7000 * (int64_t)(prev + 1) - k);
        MT_CHECK_EQ(rh[k], init_value(next, 64 + k));
    }
    for (int k = 0; k < 8; k++) {
        MT_CHECK_EQ(h_res[k], init_value(next, 80 + k));
        MT_CHECK_EQ(got[32 + k], pbase + 32 + k);
        MT_CHECK_EQ(rh[16 + k], init_value(next, 140 + k));
    }
    for (int k = 0; k < 4; k++) {
        MT_CHECK_EQ(got[100 + k], pbase + 16 + 2 * k);
        MT_CHECK_EQ(got[220 + k], -7000 * (int64_t)(r + 1) - k);
    }
    MT_CHECK_EQ(got[104], init_value(r, 104));
    for (int k = 0; k < 4; k++) MT_CHECK_EQ(got[160 + k], pbase + 50 + k);
    for (int k = 0; k < 8; k++) {
        MT_CHECK_EQ(got[240 + k], pbase + 56 + k);
        MT_CHECK_EQ(rh[48 + k], init_value(next, 248 + k));
    }
    if (sync == S_LOCK || sync == S_LOCKALL) {
        for (int k = 0; k < 8; k++) {
            MT_CHECK_EQ(got[200 + k], pbase + 40 + k);
            MT_CHECK_EQ(rh[32 + k], origin_value(r, sync) + 40 + k);
        }
    }
    int64_t sum = 0;
    for (int q = 0; q < size; q++) sum += origin_value(q, sync) + 48;
    MT_CHECK_EQ(got[120], r == 0 ? init_value(0, 120) + sum : init_value(r, 120));
    /* Direct wherever a device window could be mapped (the next rank's, or
     * this rank's own); host windows are reached directly where the system
     * lets one process read another's memory (process_vm_readv); never
     * where every window is device memory that cannot be exported. */
    const int must = kind_of_rank(next) == K_IPC || kind == K_IPC;
    const int may = must || kind_of_rank(next) == K_HOST || kind == K_HOST;
    if ((must && direct == 0) || (!may && direct > 0)) {
        mt_fail(__FILE__, __LINE__, "rank %d: %llu operations took the direct path (expected %s)",
                r, direct, must ? "some" : "none");
    }
    /* From a device buffer to a mapped device window (next's, and rank 0's
     * for the SUM): by reference, or done by the origin where nothing it sent
     * that target as a message is unacknowledged (this rank's own window
     * too; counted with those the word's contention sent as messages). From
     * a host buffer: never by reference. */
    const int dev_origin = okind != K_HOST;
    const int expect_dev = dev_origin && ((next != r && kind_of_rank(next) == K_IPC) ||
                                          kind_of_rank(0) == K_IPC);
    if ((dev_origin && (refs + accs > 0) != expect_dev) || (!dev_origin && refs > 0)) {
        mt_fail(__FILE__, __LINE__, "rank %d: %llu accumulates went by reference, %llu by the "
                "origin (expected %s)", r, refs, accs, expect_dev ? "some" : "none");
    }
    if (mt_failures != bad) {
        mt_fail(__FILE__, __LINE__, "failures above under %s, %s windows", sync_name[sync],
                unmapped ? "unmapped" : mixed ? "mixed" : "mapped");
    }
    MT_CHECK_MPI(MPI_Win_free(&win));
    MPI_Type_free(&vec);
    MPI_Group_free(&group);
    mem_free(okind, oregion);
    mem_free(kind, region);
}

/* MPI_CHAR reductions (OSU's default type) reduce as int8_t, as Open MPI's
 * own do: a SUM of negative and positive bytes, a MIN that compares signed;
 * from a device buffer to a mapped window by reference, like the other
 * integer types. (No SUM that overflows: Open MPI 4.1's op/avx saturates
 * int8 sums of 32 elements or more, where C, its scalar loop and the GPU's
 * kernel wrap.) */
static void char_accumulates(void)
{
    const int r = mt_rank, next = (r + 1) % mt_size;
    const int kind = kind_of_rank(r), okind = kind == K_HOST ? K_HOST : K_IPC;
    char *region = mem_alloc(kind), *oregion = mem_alloc(okind);
    signed char *mem = (signed char *)(region + SKEW), *o = (signed char *)oregion;
    signed char init[64], orig[64], got[64];
    for (int k = 0; k < 32; k++) {
        init[k] = (signed char)(-100 + k);
        orig[k] = (signed char)(30 + k % 2);
        init[32 + k] = (signed char)k;
        orig[32 + k] = (signed char)(-k - 1);
    }
    mem_to(kind, mem, init, sizeof(init));
    mem_to(okind, o, orig, sizeof(orig));
    MPI_Win win;
    MT_CHECK_MPI(MPI_Win_create(mem, 64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    const unsigned long long refs_before = counter(1), accs_before = counter(2) + counter(3);
    MT_CHECK_MPI(MPI_Win_lock_all(0, win));
    MT_CHECK_MPI(MPI_Accumulate(o, 32, MPI_CHAR, next, 0, 32, MPI_CHAR, MPI_SUM, win));
    MT_CHECK_MPI(MPI_Accumulate(o + 32, 32, MPI_CHAR, next, 32, 32, MPI_CHAR, MPI_MIN, win));
    MT_CHECK_MPI(MPI_Win_flush(next, win));
    MT_CHECK_MPI(MPI_Win_unlock_all(win));
    const unsigned long long refs = counter(1) - refs_before,
                             accs = counter(2) + counter(3) - accs_before;
    MPI_Barrier(MPI_COMM_WORLD);
    mem_from(kind, got, mem, sizeof(got));
    for (int k = 0; k < 32; k++) {
        MT_CHECK_EQ(got[k], (signed char)(-70 + k + k % 2));
        MT_CHECK_EQ(got[32 + k], (signed char)(-k - 1));
    }
    /* Nothing unacknowledged: both done by the origin in a mapped device
     * window, from a device or a host buffer. */
    const unsigned long long expect = next != r && kind_of_rank(next) == K_IPC ? 2 : 0;
    if (refs != 0 || accs != expect)
        mt_fail(__FILE__, __LINE__, "rank %d: %llu MPI_CHAR accumulates went by reference, %llu "
                "by the origin (expected 0, %llu)", r, refs, accs, expect);
    MT_CHECK_MPI(MPI_Win_free(&win));
    mem_free(okind, oregion);
    mem_free(kind, region);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (mem_setup() != 0) return mt_skip("no GPU on this machine");
    mixed = argc > 1 && strcmp(argv[1], "mixed") == 0;
    unmapped = argc > 1 && strcmp(argv[1], "unmapped") == 0;
    counters_open();
    for (int s = 0; s < NSYNCS; s++) run(s);
    char_accumulates();
    counters_close();
    return mt_finish();
}
