/*
 * A simulated GPU behind gpuwire/gpu_device.h, for a test build of the
 * component (coll "gpuwirefake") on machines without a GPU.
 *
 * "Device memory" is any mapping the process has made inaccessible
 * (PROT_NONE): the CPU cannot touch it, exactly as with real device memory,
 * so a host module reading or writing a device buffer crashes the test.
 * Copies make the pages accessible only for the copy itself, and they are
 * asynchronous for real: copy_start only queues; the bytes move when a ticket
 * completes, which copy_done grants only after several polls, so reading
 * staging before waiting, or completing a request before its copy back, shows
 * up as wrong data.
 *
 * It has two GPUs. GPU 1 is slow: its memory is a PROT_NONE mapping of a
 * memfd named "gwfake-slow" (the harness's MEM_FAKEDEV_SLOW), and its copies
 * move on every eighth unfinished poll instead of every second, so that a
 * later copy on GPU 0 finishes before an earlier one on GPU 1. Each GPU has
 * its own queue and tickets.
 *
 * Every staging and scratch buffer lent must have come back when the device
 * closes (MPI_Finalize); otherwise the process aborts. A copy to device
 * memory of exactly GWFAKE_FAIL_COPY_TO_DEVICE_BYTES bytes (environment, read
 * at each copy) fails as a CUDA stream does: its ticket is never reached,
 * copy_done reports the error when asked to query errors, copy_wait at once;
 * the bytes do not move.
 *
 * Scratch (gw_coll_scratch_get) is that second kind too, as scratch is GPU
 * memory on a real one.
 *
 * A second kind of "device memory" lets the device algorithms (reductions
 * over point-to-point, coll_gpuwire_devreduce.c) run here: a shared mapping
 * of a memfd named "gwfake-device" (see the harness's MEM_FAKEDEV_RW). The
 * CPU may touch it, so the pml carries it like host memory, but the
 * component classifies it as device memory and reduces it only through
 * reduce_start, whose "kernels" are queued with the copies and run late,
 * exactly like them: an algorithm that sends a result before waiting for its
 * ticket sends stale bytes.
 *
 * Its NVLink teams: fake_team.c.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuwire/gpu_device.h"
#include "gpuwire/cuda/reduce.h"
#include "fake_device.h"

#define fail fake_fail

typedef struct {
    void *dst;
    const void *src;
    size_t len;
    uint64_t ticket;
    /* A reduction when reduce is set: dst = src op src2, len elements. A
     * compare-and-swap when res is set: *res = *dst, *dst = *src where it
     * equalled *src2, len bytes. */
    bool reduce;
    int op, type;
    const void *src2;
    void *res;
    bool fail; /* an injected failure: nothing moves */
} pending_copy_t;

enum { FAKE_GPUS = 2 };

static struct fake_gpu {
    pending_copy_t *queue;
    size_t queued, queue_cap;
    uint64_t issued, completed;
    uint64_t failed; /* the ticket of a failed copy not reported yet; 0: none */
    unsigned long polls;
    unsigned period; /* copies move on every period-th unfinished poll */
} gpus[FAKE_GPUS] = {{.period = 2}, {.period = 8}};
static bool open_;
/* The copy queues: the collective engine's unit tests (tests/unit/coll) run
 * one thread per rank, each copying on the simulated GPU. */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
/* Buffers lent and not yet given back; counted atomically, as those
 * threads take scratch and staging too (the ring's scratch). */
static long staging_lent, scratch_lent;

int fake_fail(char *why, size_t why_len, const char *msg)
{
    snprintf(why, why_len, "%s", msg);
    return -1;
}

enum fake_kind { FAKE_HOST, FAKE_DEVICE_NONE, FAKE_DEVICE_RW };

/* What the mapping holding p is: PROT_NONE (device memory the CPU cannot
 * touch; GPU 1's when it maps the "gwfake-slow" memfd), the "gwfake-device"
 * memfd (device memory the CPU may touch), or host memory. */
static enum fake_kind kind_gpu_of(const void *p, int *gpu)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return FAKE_HOST;
    char line[512];
    enum fake_kind k = FAKE_HOST;
    uintptr_t a = (uintptr_t)p;
    *gpu = -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && a >= lo && a < hi) {
            if (perms[0] == '-' && perms[1] == '-' && perms[2] == '-') {
                k = FAKE_DEVICE_NONE;
                *gpu = strstr(line, "memfd:gwfake-slow") ? 1 : 0;
            } else if (strstr(line, "memfd:gwfake-device")) {
                *gpu = 0;
                k = FAKE_DEVICE_RW;
            }
            break;
        }
    }
    fclose(f);
    return k;
}

static enum fake_kind kind_of(const void *p)
{
    int gpu;
    return kind_gpu_of(p, &gpu);
}

static bool inaccessible(const void *p) { return kind_of(p) == FAKE_DEVICE_NONE; }

static void protect(const void *p, size_t len, int prot)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p & ~(page - 1);
    uintptr_t hi = ((uintptr_t)p + len + page - 1) & ~(page - 1);
    if (mprotect((void *)lo, hi - lo, prot) != 0) {
        perror("fake device: mprotect");
        abort();
    }
}

static void do_reduce(const pending_copy_t *c)
{
    const size_t bytes = c->len * gw_reduce_type_size(c->type);
    bool d = inaccessible(c->dst), a = inaccessible(c->src), b = inaccessible(c->src2);
    if (d) protect(c->dst, bytes, PROT_READ | PROT_WRITE);
    if (a) protect(c->src, bytes, PROT_READ | PROT_WRITE);
    if (b) protect(c->src2, bytes, PROT_READ | PROT_WRITE);
    char why[200];
    if (gw_host_reduce3(c->op, c->type, c->src, c->src2, c->dst, c->len, why, sizeof(why)) != 0) {
        fprintf(stderr, "fake device: %s\n", why);
        abort();
    }
    if (d) protect(c->dst, bytes, PROT_NONE);
    if (a) protect(c->src, bytes, PROT_NONE);
    if (b) protect(c->src2, bytes, PROT_NONE);
}

/* Any of the bytes may be the simulated GPU's: opened for the moment. */
static void do_cas(const pending_copy_t *c)
{
    void *const ptrs[4] = {c->dst, (void *)c->src, (void *)c->src2, c->res};
    bool shut[4];
    for (int i = 0; i < 4; i++) {
        shut[i] = inaccessible(ptrs[i]);
        if (shut[i]) protect(ptrs[i], c->len, PROT_READ | PROT_WRITE);
    }
    unsigned char old[16];
    memcpy(old, c->dst, c->len);
    memcpy(c->res, old, c->len);
    if (memcmp(old, c->src2, c->len) == 0) memcpy(c->dst, c->src, c->len);
    for (int i = 0; i < 4; i++) {
        if (shut[i]) protect(ptrs[i], c->len, PROT_NONE);
    }
}

static void do_copy(const pending_copy_t *c)
{
    if (c->len == 0 || c->fail) return;
    if (c->reduce) {
        do_reduce(c);
        return;
    }
    if (c->res != NULL) {
        do_cas(c);
        return;
    }
    bool dst_dev = inaccessible(c->dst), src_dev = inaccessible(c->src);
    if (dst_dev) protect(c->dst, c->len, PROT_READ | PROT_WRITE);
    if (src_dev) protect(c->src, c->len, PROT_READ | PROT_WRITE);
    memcpy(c->dst, c->src, c->len);
    if (dst_dev) protect(c->dst, c->len, PROT_NONE);
    if (src_dev) protect(c->src, c->len, PROT_NONE);
}

/* Completes every queued copy of g up to ticket, in order. */
static void complete_until(struct fake_gpu *g, uint64_t ticket)
{
    size_t i = 0;
    for (; i < g->queued && g->queue[i].ticket <= ticket; ++i) do_copy(&g->queue[i]);
    memmove(g->queue, g->queue + i, (g->queued - i) * sizeof(*g->queue));
    g->queued -= i;
    if (ticket > g->completed) g->completed = ticket;
}

int gw_coll_device_open(const gw_coll_device_params_t *params, char *why, size_t why_len)
{
    /* GW_TEST_NO_GPU_RANK=r: the process of rank r in MPI_COMM_WORLD has no
     * GPU (a job where some processes see none). */
    const char *none = getenv("GW_TEST_NO_GPU_RANK"), *me = getenv("OMPI_COMM_WORLD_RANK");
    if (NULL != none && NULL != me && atoi(none) == atoi(me)) {
        snprintf(why, why_len, "no GPU: GW_TEST_NO_GPU_RANK");
        return 0;
    }
    open_ = true;
    return FAKE_GPUS;
}

void gw_coll_device_close(void)
{
    for (int i = 0; i < FAKE_GPUS; ++i) {
        struct fake_gpu *g = &gpus[i];
        complete_until(g, g->issued);
        free(g->queue);
        g->queue = NULL;
        g->queued = g->queue_cap = 0;
        g->failed = 0;
    }
    open_ = false;
    if (staging_lent != 0 || scratch_lent != 0) {
        fprintf(stderr, "fake device: %ld staging and %ld scratch buffers not returned\n",
                staging_lent, scratch_lent);
        abort();
    }
}

int gw_coll_device_classify(const void *ptr, size_t len, gw_coll_mem_t *out, char *why,
                            size_t why_len)
{
    if (!open_) return fail(why, why_len, "fake device: not open");
    int gpu = -1;
    out->on_gpu = ptr != NULL && kind_gpu_of(ptr, &gpu) != FAKE_HOST;
    out->gpu = out->on_gpu ? gpu : -1;
    return 0;
}

int gw_coll_staging_get(size_t len, int gpu, gw_coll_host_buf_t *out, char *why, size_t why_len)
{
    void *p = malloc(len ? len : 1);
    if (!p) return fail(why, why_len, "fake device: malloc failed");
    /* Garbage, so that a region copied in wrongly cannot pass by luck. */
    memset(p, 0x5A, len);
    *out = (gw_coll_host_buf_t){p, len, NULL};
    __atomic_fetch_add(&staging_lent, 1, __ATOMIC_RELAXED);
    return 0;
}

void gw_coll_staging_put(gw_coll_host_buf_t *buf)
{
    if (buf->ptr) {
        memset(buf->ptr, 0xEE, buf->len);
        free(buf->ptr);
        __atomic_fetch_sub(&staging_lent, 1, __ATOMIC_RELAXED);
    }
    *buf = (gw_coll_host_buf_t){NULL, 0, NULL};
}

int gw_coll_device_wait_user(int gpu, char *why, size_t why_len) { return 0; }

static uint64_t enqueue(struct fake_gpu *g, pending_copy_t c)
{
    if (g->queued == g->queue_cap) {
        g->queue_cap = g->queue_cap ? 2 * g->queue_cap : 16;
        g->queue = realloc(g->queue, g->queue_cap * sizeof(*g->queue));
        if (!g->queue) abort();
    }
    c.ticket = ++g->issued;
    g->queue[g->queued++] = c;
    return g->issued;
}

static bool fail_injected(const void *dst, size_t len)
{
    const char *e = getenv("GWFAKE_FAIL_COPY_TO_DEVICE_BYTES");
    return e && *e && strtoull(e, NULL, 10) == len && kind_of(dst) != FAKE_HOST;
}

int gw_coll_copy_start(void *dst, const void *src, size_t len, int gpu, uint64_t *ticket,
                       char *why, size_t why_len)
{
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
    struct fake_gpu *g = &gpus[gpu];
    const bool f = fail_injected(dst, len);
    pthread_mutex_lock(&queue_lock);
    *ticket = enqueue(g, (pending_copy_t){.dst = dst, .src = src, .len = len, .fail = f});
    if (f && !g->failed) g->failed = *ticket;
    pthread_mutex_unlock(&queue_lock);
    return 0;
}

/* Any two kinds of memory, as copy_start: the simulated GPU has no kernel. */
int gw_coll_copy_device_start(void *dst, const void *src, size_t len, int gpu, bool both_device,
                              uint64_t *ticket, char *why, size_t why_len)
{
    (void)both_device;
    return gw_coll_copy_start(dst, src, len, gpu, ticket, why, why_len);
}

/* A batch: its copies queued in order; the last one's ticket covers them all. */
int gw_coll_copy_device_batch(const gw_coll_copy_item_t *items, int n, int gpu, uint64_t *ticket,
                              char *why, size_t why_len)
{
    if (n < 1 || n > GW_COLL_COPY_BATCH_MAX) return fail(why, why_len, "fake device: batch size");
    for (int i = 0; i < n; i++) {
        if (gw_coll_copy_start(items[i].dst, items[i].src, items[i].len, gpu, ticket, why,
                               why_len) != 0) {
            return -1;
        }
    }
    return 0;
}

bool gw_coll_reduce_supported(int op, int type) { return gw_reduce_supported(op, type) != 0; }

int gw_coll_reduce_start(int op, int type, const void *a, const void *b, void *out, size_t count,
                         int gpu, uint64_t *ticket, char *why, size_t why_len)
{
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
    if (!gw_reduce_supported(op, type)) return fail(why, why_len, "fake device: no such kernel");
    pthread_mutex_lock(&queue_lock);
    *ticket = enqueue(&gpus[gpu], (pending_copy_t){.dst = out, .src = a, .src2 = b, .len = count,
                                                   .reduce = true, .op = op, .type = type});
    pthread_mutex_unlock(&queue_lock);
    return 0;
}

int gw_coll_cas_start(void *dst, const void *origin, const void *compare, void *result,
                      size_t len, int gpu, uint64_t *ticket, char *why, size_t why_len)
{
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
    if (len == 0 || len > 16) return fail(why, why_len, "fake device: compare-and-swap size");
    pthread_mutex_lock(&queue_lock);
    *ticket = enqueue(&gpus[gpu], (pending_copy_t){.dst = dst, .src = origin, .src2 = compare,
                                                   .res = result, .len = len});
    pthread_mutex_unlock(&queue_lock);
    return 0;
}

/* Scratch is device memory, as on a real GPU: a mapping of a "gwfake-device"
 * memfd, which the CPU (and so the pml) may touch but classify() calls
 * device memory of GPU 0. Filled with garbage, so that reading scratch
 * before it was written shows. */
int gw_coll_scratch_get(size_t len, int gpu, gw_coll_dev_buf_t *out, char *why, size_t why_len)
{
    (void)gpu;
    const size_t bytes = len ? len : 1;
    int fd = memfd_create("gwfake-device", 0);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        if (fd >= 0) close(fd);
        return fail(why, why_len, "fake device: memfd failed");
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (MAP_FAILED == p) return fail(why, why_len, "fake device: mmap failed");
    memset(p, 0x6B, len);
    *out = (gw_coll_dev_buf_t){p, len, p};
    __atomic_fetch_add(&scratch_lent, 1, __ATOMIC_RELAXED);
    return 0;
}

void gw_coll_scratch_put(gw_coll_dev_buf_t *buf)
{
    if (buf->owner) {
        memset(buf->ptr, 0xDD, buf->len);
        munmap(buf->owner, buf->len ? buf->len : 1);
        __atomic_fetch_sub(&scratch_lent, 1, __ATOMIC_RELAXED);
    }
    *buf = (gw_coll_dev_buf_t){NULL, 0, NULL};
}

/* A failed copy at or before ticket: reported once, then the GPU goes on
 * (a real stream stays failed; the tests run more after it). */
static int report_failure(struct fake_gpu *g, uint64_t ticket, char *why, size_t why_len)
{
    complete_until(g, ticket);
    g->failed = 0;
    for (size_t i = 0; i < g->queued; ++i) {
        if (g->queue[i].fail) {
            g->failed = g->queue[i].ticket;
            break;
        }
    }
    return fail(why, why_len, "fake device: copy failed (GWFAKE_FAIL_COPY_TO_DEVICE_BYTES)");
}

static int copy_wait_locked(int gpu, uint64_t ticket, char *why, size_t why_len)
{
    struct fake_gpu *g = &gpus[gpu];
    if (g->failed && g->failed <= ticket) return report_failure(g, ticket, why, why_len);
    complete_until(g, ticket);
    return 0;
}

static int copy_done_locked(int gpu, uint64_t ticket, bool query_errors, bool *done,
                            char *why, size_t why_len)
{
    struct fake_gpu *g = &gpus[gpu];
    if (g->failed && g->failed <= ticket) {
        /* Never reached; only a query finds out why. */
        if (query_errors) return report_failure(g, ticket, why, why_len);
        *done = false;
        return 0;
    }
    *done = g->completed >= ticket;
    /* The bytes move on every period-th poll that finds the copy unfinished,
     * and the poll that moves them still answers "not done": a caller that
     * stops polling early finds stale device memory. */
    if (!*done && ++g->polls % g->period == 0) complete_until(g, ticket);
    return 0;
}

int gw_coll_copy_wait(int gpu, uint64_t ticket, char *why, size_t why_len)
{
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
    pthread_mutex_lock(&queue_lock);
    const int rc = copy_wait_locked(gpu, ticket, why, why_len);
    pthread_mutex_unlock(&queue_lock);
    return rc;
}

int gw_coll_copy_done(int gpu, uint64_t ticket, bool query_errors, bool *done, char *why,
                      size_t why_len)
{
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
    pthread_mutex_lock(&queue_lock);
    const int rc = copy_done_locked(gpu, ticket, query_errors, done, why, why_len);
    pthread_mutex_unlock(&queue_lock);
    return rc;
}

void gw_coll_device_stats(gw_coll_device_stats_t *out) { memset(out, 0, sizeof(*out)); }

/* As the real device part: one mapping cache per process, always. */
bool gw_coll_ipc_shared(void) { return true; }

/* Buffer descriptions and peer mappings: fake_ipc.c. */

bool fake_is_device(const void *p) { return FAKE_HOST != kind_of(p); }

long fake_staging_lent(void) { return __atomic_load_n(&staging_lent, __ATOMIC_RELAXED); }

/* A synchronous copy to or from simulated device memory (fake_team.c). */
void fake_dev_copy(void *dst, const void *src, size_t len)
{
    pending_copy_t c = {.dst = dst, .src = src, .len = len};
    do_copy(&c);
}
