/*
 * A simulated GPU behind coll_gpuwire_device.h, for a test build of the
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
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll_gpuwire_device.h"

typedef struct {
    void *dst;
    const void *src;
    size_t len;
    uint64_t ticket;
} pending_copy_t;

static pending_copy_t *queue;
static size_t queued, queue_cap;
static uint64_t issued, completed;
static bool open_;

static int fail(char *why, size_t why_len, const char *msg)
{
    snprintf(why, why_len, "%s", msg);
    return -1;
}

/* Whether [p, p + 1) lies in a PROT_NONE mapping of this process. */
static bool inaccessible(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    uintptr_t a = (uintptr_t)p;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && a >= lo && a < hi) {
            found = true;
            fclose(f);
            return perms[0] == '-' && perms[1] == '-' && perms[2] == '-';
        }
    }
    fclose(f);
    return false;
}

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

static void do_copy(const pending_copy_t *c)
{
    if (c->len == 0) return;
    bool dst_dev = inaccessible(c->dst), src_dev = inaccessible(c->src);
    if (dst_dev) protect(c->dst, c->len, PROT_READ | PROT_WRITE);
    if (src_dev) protect(c->src, c->len, PROT_READ | PROT_WRITE);
    memcpy(c->dst, c->src, c->len);
    if (dst_dev) protect(c->dst, c->len, PROT_NONE);
    if (src_dev) protect(c->src, c->len, PROT_NONE);
}

/* Completes every queued copy up to ticket, in order. */
static void complete_until(uint64_t ticket)
{
    size_t i = 0;
    for (; i < queued && queue[i].ticket <= ticket; ++i) do_copy(&queue[i]);
    memmove(queue, queue + i, (queued - i) * sizeof(*queue));
    queued -= i;
    if (ticket > completed) completed = ticket;
}

int gw_coll_device_open(const gw_coll_device_params_t *params, char *why, size_t why_len)
{
    open_ = true;
    return 1;
}

void gw_coll_device_close(void)
{
    complete_until(issued);
    free(queue);
    queue = NULL;
    queued = queue_cap = 0;
    open_ = false;
}

int gw_coll_device_classify(const void *ptr, size_t len, gw_coll_mem_t *out, char *why,
                            size_t why_len)
{
    if (!open_) return fail(why, why_len, "fake device: not open");
    out->on_gpu = ptr != NULL && inaccessible(ptr);
    out->gpu = out->on_gpu ? 0 : -1;
    return 0;
}

int gw_coll_staging_get(size_t len, int gpu, gw_coll_host_buf_t *out, char *why, size_t why_len)
{
    void *p = malloc(len ? len : 1);
    if (!p) return fail(why, why_len, "fake device: malloc failed");
    /* Garbage, so that a region copied in wrongly cannot pass by luck. */
    memset(p, 0x5A, len);
    *out = (gw_coll_host_buf_t){p, len, NULL};
    return 0;
}

void gw_coll_staging_put(gw_coll_host_buf_t *buf)
{
    if (buf->ptr) {
        memset(buf->ptr, 0xEE, buf->len);
        free(buf->ptr);
    }
    *buf = (gw_coll_host_buf_t){NULL, 0, NULL};
}

int gw_coll_device_wait_user(int gpu, char *why, size_t why_len) { return 0; }

int gw_coll_copy_start(void *dst, const void *src, size_t len, int gpu, uint64_t *ticket,
                       char *why, size_t why_len)
{
    if (gpu != 0) return fail(why, why_len, "fake device: no such GPU");
    if (queued == queue_cap) {
        queue_cap = queue_cap ? 2 * queue_cap : 16;
        queue = realloc(queue, queue_cap * sizeof(*queue));
    }
    queue[queued++] = (pending_copy_t){dst, src, len, ++issued};
    *ticket = issued;
    return 0;
}

int gw_coll_copy_wait(int gpu, uint64_t ticket, char *why, size_t why_len)
{
    complete_until(ticket);
    return 0;
}

int gw_coll_copy_done(int gpu, uint64_t ticket, bool query_errors, bool *done, char *why,
                      size_t why_len)
{
    static unsigned long polls;
    *done = completed >= ticket;
    /* The bytes move on every second poll that finds the copy unfinished,
     * and the poll that moves them still answers "not done": a caller that
     * stops polling early finds stale device memory. */
    if (!*done && ++polls % 2 == 0) complete_until(ticket);
    return 0;
}

void gw_coll_device_stats(gw_coll_device_stats_t *out) { memset(out, 0, sizeof(*out)); }
