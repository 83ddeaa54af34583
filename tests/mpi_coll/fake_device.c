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
 * The queues, tickets and counts are the process's, as a GPU's are: the
 * functions the collective engine calls take one lock (FAKE_LOCKED), so that
 * the engine's unit tests may run ranks as threads of one process.
 *
 * A second kind of "device memory" lets the device algorithms (reductions
 * over point-to-point, coll_gpuwire_devreduce.c) run here: a shared mapping
 * of a memfd named "gwfake-device" (see the harness's MEM_FAKEDEV_RW). The
 * CPU may touch it, so the pml carries it like host memory, but the
 * component classifies it as device memory and reduces it only through
 * reduce_start, whose "kernels" are queued with the copies and run late,
 * exactly like them: an algorithm that sends a result before waiting for its
 * ticket sends stale bytes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gpuwire/gpu_device.h"
#include "gpuwire/cuda/reduce.h"
#include "fake_device.h"

#define fail fake_fail

static pthread_mutex_t fake_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static void fake_unlock(int *unused)
{
    (void)unused;
    pthread_mutex_unlock(&fake_mu);
}
/* Holds fake_mu until the end of the enclosing block. */
#define FAKE_LOCKED                                                                          \
    pthread_mutex_lock(&fake_mu);                                                            \
    __attribute__((cleanup(fake_unlock))) int fake_locked_ = 0;                              \
    (void)fake_locked_

typedef struct {
    void *dst;
    const void *src;
    size_t len;
    uint64_t ticket;
    /* A reduction when reduce is set: dst = src op src2, len elements. */
    bool reduce;
    int op, type;
    const void *src2;
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

static void do_copy(const pending_copy_t *c)
{
    if (c->len == 0 || c->fail) return;
    if (c->reduce) {
        do_reduce(c);
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
    FAKE_LOCKED;
    void *p = malloc(len ? len : 1);
    if (!p) return fail(why, why_len, "fake device: malloc failed");
    /* Garbage, so that a region copied in wrongly cannot pass by luck. */
    memset(p, 0x5A, len);
    *out = (gw_coll_host_buf_t){p, len, NULL};
    ++staging_lent;
    return 0;
}

void gw_coll_staging_put(gw_coll_host_buf_t *buf)
{
    FAKE_LOCKED;
    if (buf->ptr) {
        memset(buf->ptr, 0xEE, buf->len);
        free(buf->ptr);
        --staging_lent;
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
    FAKE_LOCKED;
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
    struct fake_gpu *g = &gpus[gpu];
    const bool f = fail_injected(dst, len);
    *ticket = enqueue(g, (pending_copy_t){.dst = dst, .src = src, .len = len, .fail = f});
    if (f && !g->failed) g->failed = *ticket;
    return 0;
}

/* Any two kinds of memory, as copy_start: the simulated GPU has no kernel. */
int gw_coll_copy_device_start(void *dst, const void *src, size_t len, int gpu, bool both_device,
                              uint64_t *ticket, char *why, size_t why_len)
{
    (void)both_device;
    return gw_coll_copy_start(dst, src, len, gpu, ticket, why, why_len);
}

bool gw_coll_reduce_supported(int op, int type) { return gw_reduce_supported(op, type) != 0; }

int gw_coll_reduce_start(int op, int type, const void *a, const void *b, void *out, size_t count,
                         int gpu, uint64_t *ticket, char *why, size_t why_len)
{
    FAKE_LOCKED;
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
    if (!gw_reduce_supported(op, type)) return fail(why, why_len, "fake device: no such kernel");
    *ticket = enqueue(&gpus[gpu], (pending_copy_t){.dst = out, .src = a, .src2 = b, .len = count,
                                                   .reduce = true, .op = op, .type = type});
    return 0;
}

/* Scratch is device memory, as on a real GPU: a mapping of a "gwfake-device"
 * memfd, which the CPU (and so the pml) may touch but classify() calls
 * device memory of GPU 0. Filled with garbage, so that reading scratch
 * before it was written shows. */
int gw_coll_scratch_get(size_t len, int gpu, gw_coll_dev_buf_t *out, char *why, size_t why_len)
{
    FAKE_LOCKED;
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
    ++scratch_lent;
    return 0;
}

void gw_coll_scratch_put(gw_coll_dev_buf_t *buf)
{
    FAKE_LOCKED;
    if (buf->owner) {
        memset(buf->ptr, 0xDD, buf->len);
        munmap(buf->owner, buf->len ? buf->len : 1);
        --scratch_lent;
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

int gw_coll_copy_wait(int gpu, uint64_t ticket, char *why, size_t why_len)
{
    FAKE_LOCKED;
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
    struct fake_gpu *g = &gpus[gpu];
    if (g->failed && g->failed <= ticket) return report_failure(g, ticket, why, why_len);
    complete_until(g, ticket);
    return 0;
}

int gw_coll_copy_done(int gpu, uint64_t ticket, bool query_errors, bool *done, char *why,
                      size_t why_len)
{
    FAKE_LOCKED;
    if (gpu < 0 || gpu >= FAKE_GPUS) return fail(why, why_len, "fake device: no such GPU");
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

void gw_coll_device_stats(gw_coll_device_stats_t *out) { memset(out, 0, sizeof(*out)); }

/* NVLink teams. By default the simulated GPU has no peer GPU to map. With
 * GW_FAKE_NVLINK_PARTIAL set, even ranks open a team and odd ranks do not,
 * so that the ranks must agree to decline (the communicator's calls then go
 * to the algorithms over point-to-point on every rank).
 *
 * With GW_FAKE_NVLINK=1 every rank opens a simulated team: each rank's
 * "workspace" is a memfd the others map through /proc/<pid>/fd (two slots
 * of slot_bytes after two counters), and a started call is the one-shot
 * kernel done by the CPU, in steps, from team_done (as a GPU runs a stream's
 * kernels in order): copy this rank's input into its slot and announce
 * arrival; once every rank's has come, read the others' slots (reduce in
 * rank order, so every rank gets the same bits) and announce departure;
 * once every rank's has come, the call is done (a slot is reused two calls
 * later). team_run starts a call and polls it to the end. The direct form
 * maps nothing. */
enum { FAKE_TEAM_HEAD = 128 };

typedef struct {
    uint32_t magic, rank;
    int32_t pid, fd;
    uint64_t slot_bytes;
} fake_team_desc_t;
#define FAKE_TEAM_MAGIC 0x47574654u /* "GWFT" */

/* A started call, in the team's FIFO. */
typedef struct fake_team_call {
    gw_coll_team_call_t c;
    uint64_t seq;
    int step;               /* 0 not begun, 1 arrived, 2 departed */
    struct timespec since;  /* the current step's start, for the timeout */
    struct fake_team_call *next;
} fake_team_call_t;

struct gw_coll_team {
    int gpu, rank, nranks, fd;
    size_t slot, seg_bytes;
    double timeout_s;
    uint64_t calls, finished;
    bool failed;
    fake_team_call_t *first, *last; /* started, not finished */
    char *seg[FAKE_TEAM_MAX];       /* every rank's workspace, mine included */
};


static volatile uint64_t *team_counter(char *seg, int which) /* 0 arrived, 1 departed */
{
    return (volatile uint64_t *)(seg + 64 * which);
}
static char *team_slot(const gw_coll_team_t *t, int rank, int slot)
{
    return t->seg[rank] + FAKE_TEAM_HEAD + (size_t)slot * t->slot;
}

static void team_unmap_all(gw_coll_team_t *t)
{
    for (int r = 0; r < FAKE_TEAM_MAX; ++r) {
        if (t->seg[r]) munmap(t->seg[r], t->seg_bytes);
        t->seg[r] = NULL;
    }
}

int gw_coll_team_open(int gpu, int rank, int nranks, size_t slot_bytes, double timeout_s,
                      gw_coll_team_t **out, void *desc, char *why, size_t why_len)
{
    memset(desc, 0, GW_COLL_TEAM_DESC_BYTES);
    *out = NULL;
    if (NULL != getenv("GW_FAKE_NVLINK_PARTIAL")) {
        if (rank % 2 != 0) return fail(why, why_len, "the simulated GPU has no NVLink peers");
        *out = calloc(1, sizeof(**out));
        if (NULL == *out) return -1;
        (*out)->gpu = gpu;
        (*out)->fd = -1;
        return 0;
    }
    const char *on = getenv("GW_FAKE_NVLINK");
    if (NULL == on || 1 != atoi(on)) return fail(why, why_len, "the simulated GPU has no NVLink peers");
    if (nranks > FAKE_TEAM_MAX) return fail(why, why_len, "fake team: too many ranks");
    gw_coll_team_t *t = calloc(1, sizeof(*t));
    if (NULL == t) return fail(why, why_len, "fake team: out of memory");
    t->gpu = gpu;
    t->rank = rank;
    t->nranks = nranks;
    t->slot = slot_bytes;
    t->seg_bytes = FAKE_TEAM_HEAD + 2 * slot_bytes;
    t->timeout_s = timeout_s;
    t->fd = memfd_create("gwfake-team", 0);
    if (t->fd < 0 || ftruncate(t->fd, (off_t)t->seg_bytes) != 0) {
        if (t->fd >= 0) close(t->fd);
        free(t);
        return fail(why, why_len, "fake team: memfd");
    }
    t->seg[rank] = mmap(NULL, t->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
    if (MAP_FAILED == t->seg[rank]) {
        t->seg[rank] = NULL;
        close(t->fd);
        free(t);
        return fail(why, why_len, "fake team: mmap");
    }
    fake_team_desc_t d = {FAKE_TEAM_MAGIC, (uint32_t)rank, (int32_t)getpid(), t->fd, slot_bytes};
    memcpy(desc, &d, sizeof(d));
    *out = t;
    return 0;
}

int gw_coll_team_connect(gw_coll_team_t *t, const void *descs, const uint32_t *peer_ids,
                         bool shared_gpu, char *why, size_t why_len)
{
    (void)peer_ids;
    (void)shared_gpu;
    if (t->fd < 0) return 0; /* GW_FAKE_NVLINK_PARTIAL: never runs */
    for (int r = 0; r < t->nranks; ++r) {
        if (r == t->rank) continue;
        fake_team_desc_t d;
        memcpy(&d, (const char *)descs + (size_t)r * GW_COLL_TEAM_DESC_BYTES, sizeof(d));
        if (d.magic != FAKE_TEAM_MAGIC || d.rank != (uint32_t)r || d.slot_bytes != t->slot) {
            team_unmap_all(t);
            return fail(why, why_len, "fake team: a peer has no team");
        }
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", d.pid, d.fd);
        int fd = open(path, O_RDWR);
        if (fd < 0) {
            team_unmap_all(t);
            return fail(why, why_len, "fake team: cannot open a peer's workspace");
        }
        t->seg[r] = mmap(NULL, t->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (MAP_FAILED == t->seg[r]) {
            t->seg[r] = NULL;
            team_unmap_all(t);
            return fail(why, why_len, "fake team: cannot map a peer's workspace");
        }
    }
    return 0;
}

void gw_coll_team_close(gw_coll_team_t *t)
{
    if (NULL == t) return;
    fake_board_close(t);
    while (NULL != t->first) {
        fake_team_call_t *c = t->first;
        t->first = c->next;
        free(c);
    }
    team_unmap_all(t);
    if (t->fd >= 0) close(t->fd);
    free(t);
}

int gw_coll_team_gpu(const gw_coll_team_t *t) { return t->gpu; }
size_t gw_coll_team_slot_bytes(const gw_coll_team_t *t) { return t->slot; }

/* Whether counter `which` of every rank has reached seq. */
static bool team_all_reached(const gw_coll_team_t *t, int which, uint64_t seq)
{
    for (int r = 0; r < t->nranks; ++r) {
        if (__atomic_load_n(team_counter(t->seg[r], which), __ATOMIC_ACQUIRE) < seq) return false;
    }
    return true;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + 1e-9 * (double)(now.tv_nsec - t0->tv_nsec);
}

/* A synchronous copy to or from simulated device memory. */
static void dev_copy(void *dst, const void *src, size_t len)
{
    pending_copy_t c = {.dst = dst, .src = src, .len = len};
    do_copy(&c);
}

/* The "kernel" of one call after every rank's input is in its slot. */
static int team_compute(gw_coll_team_t *t, const gw_coll_team_call_t *c, int slot, char *why,
                        size_t why_len)
{
    if (GW_COLL_TEAM_ALLREDUCE == c->coll) {
        const size_t es = gw_reduce_type_size(c->type), count = es ? c->bytes / es : 0;
        char *acc = malloc(c->bytes ? c->bytes : 1);
        if (NULL == acc) return fail(why, why_len, "fake team: out of memory");
        memcpy(acc, team_slot(t, 0, slot), c->bytes);
        for (int r = 1; r < t->nranks; ++r) {
            if (0 != gw_host_reduce3(c->op, c->type, acc, team_slot(t, r, slot), acc, count, why,
                                     why_len)) {
                free(acc);
                return -1;
            }
        }
        dev_copy(c->out, acc, c->bytes);
        free(acc);
    } else if (GW_COLL_TEAM_BCAST == c->coll) {
        if (t->rank != c->root) dev_copy(c->out, team_slot(t, c->root, slot), c->bytes);
    } else {
        for (int r = 0; r < t->nranks; ++r) {
            dev_copy((char *)c->out + (size_t)r * c->bytes, team_slot(t, r, slot), c->bytes);
        }
    }
    return 0;
}

/* Runs the started calls in order as far as the peers allow, without
 * waiting. A call that waits longer than the timeout fails the team. */
static int team_advance(gw_coll_team_t *t, char *why, size_t why_len)
{
    while (!t->failed && NULL != t->first) {
        fake_team_call_t *k = t->first;
        const int slot = (int)(k->seq & 1), me = t->rank;
        if (0 == k->step) {
            if (GW_COLL_TEAM_BCAST != k->c.coll || me == k->c.root) {
                dev_copy(team_slot(t, me, slot), k->c.in, k->c.bytes);
            }
            __atomic_store_n(team_counter(t->seg[me], 0), k->seq, __ATOMIC_RELEASE);
            clock_gettime(CLOCK_MONOTONIC, &k->since);
            k->step = 1;
        }
        const int which = k->step - 1;
        if (!team_all_reached(t, which, k->seq)) {
            if (seconds_since(&k->since) > t->timeout_s) {
                t->failed = true;
                return fail(why, why_len, "fake team: a peer did not arrive in time");
            }
            return 0;
        }
        if (1 == k->step) {
            if (0 != team_compute(t, &k->c, slot, why, why_len)) {
                t->failed = true;
                return -1;
            }
            __atomic_store_n(team_counter(t->seg[me], 1), k->seq, __ATOMIC_RELEASE);
            clock_gettime(CLOCK_MONOTONIC, &k->since);
            k->step = 2;
            continue;
        }
        t->finished = k->seq;
        t->first = k->next;
        if (NULL == t->first) t->last = NULL;
        free(k);
    }
    return t->failed ? fail(why, why_len, "fake team: failed earlier") : 0;
}

int gw_coll_team_start(gw_coll_team_t *t, const gw_coll_team_call_t *c, uint64_t *ticket,
                       char *why, size_t why_len)
{
    if (t->fd < 0) return fail(why, why_len, "the simulated GPU runs no NVLink kernel");
    if (c->direct || c->bytes > t->slot) return fail(why, why_len, "fake team: one-shot only");
    if (t->failed) return fail(why, why_len, "fake team: failed earlier");
    fake_team_call_t *k = calloc(1, sizeof(*k));
    if (NULL == k) return fail(why, why_len, "fake team: out of memory");
    k->c = *c;
    k->seq = ++t->calls;
    if (NULL == t->last) {
        t->first = k;
    } else {
        t->last->next = k;
    }
    t->last = k;
    *ticket = k->seq;
    return 0;
}

int gw_coll_team_done(gw_coll_team_t *t, uint64_t ticket, bool query, bool *done, char *why,
                      size_t why_len)
{
    (void)query;
    if (0 != team_advance(t, why, why_len)) return -1;
    *done = t->finished >= ticket;
    return 0;
}

int gw_coll_team_run(gw_coll_team_t *t, const gw_coll_team_call_t *c, char *why, size_t why_len)
{
    uint64_t ticket = 0;
    bool done = false;
    if (0 != gw_coll_team_start(t, c, &ticket, why, why_len)) return -1;
    for (;;) {
        if (0 != gw_coll_team_done(t, ticket, false, &done, why, why_len)) return -1;
        if (done) return 0;
        sched_yield();
    }
}

/* As the real device part: one mapping cache per process, always. */
bool gw_coll_ipc_shared(void) { return true; }

/* Buffer descriptions and peer mappings: fake_ipc.c. */

bool fake_is_device(const void *p) { return FAKE_HOST != kind_of(p); }

bool gw_coll_team_reduce_supported(int op, int type) { return gw_reduce_supported(op, type) != 0; }

int gw_coll_team_map(gw_coll_team_t *t, const void *in_descs, const void *out_descs, char *why,
                     size_t why_len)
{
    (void)t;
    (void)in_descs;
    (void)out_descs;
    snprintf(why, why_len, "the simulated GPU maps nothing");
    return -1;
}

void gw_coll_team_unmap(gw_coll_team_t *t) { (void)t; }

bool fake_team_open(const gw_coll_team_t *t) { return t->fd >= 0; }
int fake_team_rank(const gw_coll_team_t *t) { return t->rank; }
int fake_team_nranks(const gw_coll_team_t *t) { return t->nranks; }
