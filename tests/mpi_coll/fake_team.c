/*
 * The simulated GPU's NVLink teams (gpuwire/gpu_device.h, gw_coll_team_*),
 * beside fake_device.c, whose header comment describes the simulated GPU;
 * copies into and out of its device memory go through fake_dev_copy there.
 */
#define _GNU_SOURCE
#include <fcntl.h>
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
        fake_dev_copy(c->out, acc, c->bytes);
        free(acc);
    } else if (GW_COLL_TEAM_BCAST == c->coll) {
        if (t->rank != c->root) fake_dev_copy(c->out, team_slot(t, c->root, slot), c->bytes);
    } else {
        for (int r = 0; r < t->nranks; ++r) {
            fake_dev_copy((char *)c->out + (size_t)r * c->bytes, team_slot(t, r, slot), c->bytes);
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
                fake_dev_copy(team_slot(t, me, slot), k->c.in, k->c.bytes);
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

