/*
 * The simulated GPU's delegated NVLink form (gpuwire/gpu_device.h: the
 * board of a team on one GPU), beside fake_team.c (the team itself) and
 * fake_device.c, whose header comment describes the rest of the simulated
 * device.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuwire/gpu_device.h"
#include "gpuwire/cuda/reduce.h"
#include "fake_device.h"

#define fail fake_fail

/* The delegated form (GW_FAKE_NVLINK=1 and GW_FAKE_NVLINK_DELEGATE=1: the
 * simulated team is "on one GPU"). The board is a POSIX shared-memory
 * segment as on a real GPU; a buffer's description names its process and
 * address, and the rank that posts last does the whole call at once on the
 * CPU, reading and writing every rank's simulated device memory through
 * /proc/<pid>/mem (which reaches PROT_NONE pages, as a kernel reaches device
 * memory the CPU cannot), then marks the entry done. Without
 * GW_FAKE_NVLINK_DELEGATE buffers export nothing and the form is never
 * chosen. */
enum { FAKE_BOARD_ENTRIES = 256 };

/* A buffer's description. */
typedef struct {
    uint32_t magic;
    int32_t pid;
    uint64_t addr, len;
} fake_buf_desc_t;
#define FAKE_BUF_MAGIC 0x47574642u /* "GWFB" */

typedef struct {
    uint64_t arrived, done;
    fake_buf_desc_t in[FAKE_TEAM_MAX], out[FAKE_TEAM_MAX];
} fake_entry_t;

bool fake_delegate(void)
{
    const char *on = getenv("GW_FAKE_NVLINK"), *dl = getenv("GW_FAKE_NVLINK_DELEGATE");
    return on && 1 == atoi(on) && dl && 1 == atoi(dl);
}

static fake_entry_t *fake_boards[64]; /* by team: the simulated team has one field less */
static gw_coll_team_t *fake_board_teams[64];

static fake_entry_t **board_of(const gw_coll_team_t *t)
{
    for (int i = 0; i < 64; ++i) {
        if (fake_board_teams[i] == t) return &fake_boards[i];
    }
    return NULL;
}

bool gw_coll_team_one_gpu(const gw_coll_team_t *t) { return fake_team_open(t) && fake_delegate(); }

int gw_coll_team_board_open(gw_coll_team_t *t, const char *name, bool create, char *why,
                            size_t why_len)
{
    if (!fake_delegate()) return fail(why, why_len, "the simulated GPU has no board");
    int slot = -1;
    for (int i = 0; i < 64 && slot < 0; ++i) {
        if (NULL == fake_board_teams[i]) slot = i;
    }
    if (slot < 0) return fail(why, why_len, "fake board: too many teams");
    const size_t bytes = FAKE_BOARD_ENTRIES * sizeof(fake_entry_t);
    int fd = create ? shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600) : shm_open(name, O_RDWR, 0);
    if (fd < 0) return fail(why, why_len, "fake board: shm_open");
    if (create && 0 != ftruncate(fd, (off_t)bytes)) {
        close(fd);
        return fail(why, why_len, "fake board: ftruncate");
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (MAP_FAILED == p) return fail(why, why_len, "fake board: mmap");
    fake_board_teams[slot] = t;
    fake_boards[slot] = p;
    return 0;
}

/* The board goes with its team (gw_coll_team_close calls this first). */
void fake_board_close(gw_coll_team_t *t)
{
    fake_entry_t **b = board_of(t);
    if (NULL == b) return;
    munmap(*b, FAKE_BOARD_ENTRIES * sizeof(fake_entry_t));
    *b = NULL;
    fake_board_teams[b - fake_boards] = NULL;
}

void gw_coll_team_board_unlink(const char *name) { (void)shm_unlink(name); }

void gw_coll_team_board_close(gw_coll_team_t *t) { fake_board_close(t); }

/* The simulated launch is the posting rank's own copy: nothing to hand off. */
void gw_coll_team_launcher_mode(int mode) { (void)mode; }

/* len bytes at addr of process pid, read into buf or written from it. */
static int fake_pmem(int pid, uint64_t addr, void *buf, size_t len, bool write)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", pid);
    int fd = open(path, write ? O_WRONLY : O_RDONLY);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t k = write ? pwrite(fd, (const char *)buf + done, len - done, (off_t)(addr + done))
                          : pread(fd, (char *)buf + done, len - done, (off_t)(addr + done));
        if (k <= 0) break;
        done += (size_t)k;
    }
    close(fd);
    return done == len ? 0 : -1;
}

/* The whole call on every rank's buffers (the "kernel"). */
static int fake_all_compute(const gw_coll_team_t *t, const fake_entry_t *e,
                            const gw_coll_team_call_t *c, char *why, size_t why_len)
{
    const int n = fake_team_nranks(t);
    const size_t b = c->bytes;
    for (int r = 0; r < n; ++r) {
        const size_t out_len = GW_COLL_TEAM_ALLGATHER == c->coll ? (size_t)n * b : b;
        if (e->out[r].magic != FAKE_BUF_MAGIC || e->out[r].len < out_len ||
            (GW_COLL_TEAM_BCAST != c->coll && (e->in[r].magic != FAKE_BUF_MAGIC || e->in[r].len < b))) {
            return fail(why, why_len, "fake board: a rank could not take part");
        }
    }
    char *acc = malloc(b ? b : 1), *tmp = malloc(b ? b : 1);
    int rc = NULL == acc || NULL == tmp ? -1 : 0;
    if (0 == rc && GW_COLL_TEAM_ALLREDUCE == c->coll) {
        const size_t es = gw_reduce_type_size(c->type), count = es ? b / es : 0;
        rc = fake_pmem(e->in[0].pid, e->in[0].addr, acc, b, false);
        for (int r = 1; r < n && 0 == rc; ++r) {
            rc = fake_pmem(e->in[r].pid, e->in[r].addr, tmp, b, false);
            if (0 == rc) rc = gw_host_reduce3(c->op, c->type, acc, tmp, acc, count, why, why_len);
        }
        for (int r = 0; r < n && 0 == rc; ++r) rc = fake_pmem(e->out[r].pid, e->out[r].addr, acc, b, true);
    } else if (0 == rc && GW_COLL_TEAM_BCAST == c->coll) {
        rc = fake_pmem(e->out[c->root].pid, e->out[c->root].addr, acc, b, false);
        for (int r = 0; r < n && 0 == rc; ++r) {
            if (r != c->root) rc = fake_pmem(e->out[r].pid, e->out[r].addr, acc, b, true);
        }
    } else if (0 == rc) {
        for (int r = 0; r < n && 0 == rc; ++r) {
            rc = fake_pmem(e->in[r].pid, e->in[r].addr, acc, b, false);
            for (int d = 0; d < n && 0 == rc; ++d) {
                const uint64_t to = e->out[d].addr + (uint64_t)r * b;
                if (e->out[d].pid == e->in[r].pid && to == e->in[r].addr) continue;
                rc = fake_pmem(e->out[d].pid, to, acc, b, true);
            }
        }
    }
    free(acc);
    free(tmp);
    if (0 != rc && (NULL == why || '\0' == why[0])) fail(why, why_len, "fake board: /proc/<pid>/mem");
    return rc;
}

int gw_coll_team_post(gw_coll_team_t *t, uint64_t seq, const gw_coll_team_call_t *c,
                      const void *in_desc, const void *out_desc, bool *launched, char *why,
                      size_t why_len)
{
    *launched = false;
    fake_entry_t **b = board_of(t);
    if (NULL == b) return fail(why, why_len, "fake team: no board");
    fake_entry_t *e = &(*b)[seq % FAKE_BOARD_ENTRIES];
    const int n = fake_team_nranks(t), me = fake_team_rank(t);
    if (seq > FAKE_BOARD_ENTRIES &&
        (__atomic_load_n(&e->done, __ATOMIC_ACQUIRE) >> 1) < seq - FAKE_BOARD_ENTRIES) {
        return 1;
    }
    memset(&e->in[me], 0, sizeof(e->in[me]));
    memset(&e->out[me], 0, sizeof(e->out[me]));
    if (in_desc) memcpy(&e->in[me], in_desc, sizeof(e->in[me]));
    if (out_desc) memcpy(&e->out[me], out_desc, sizeof(e->out[me]));
    const uint64_t before = __atomic_fetch_add(&e->arrived, 1, __ATOMIC_ACQ_REL);
    if (before != ((seq - 1) / FAKE_BOARD_ENTRIES) * (uint64_t)n + (uint64_t)n - 1) return 0;
    *launched = true;
    why[0] = '\0';
    const int rc = fake_all_compute(t, e, c, why, why_len);
    __atomic_store_n(&e->done, (seq << 1) | (0 != rc), __ATOMIC_RELEASE);
    return rc;
}

int gw_coll_team_posted_done(gw_coll_team_t *t, uint64_t seq, bool query, bool *done, char *why,
                             size_t why_len)
{
    (void)query;
    fake_entry_t **b = board_of(t);
    if (NULL == b) return fail(why, why_len, "fake team: no board");
    const uint64_t d = __atomic_load_n(&(*b)[seq % FAKE_BOARD_ENTRIES].done, __ATOMIC_ACQUIRE);
    *done = false;
    if ((d >> 1) < seq) return 0;
    if ((d >> 1) == seq && (d & 1)) return fail(why, why_len, "fake board: the launching rank failed");
    *done = true;
    return 0;
}

int fake_board_describe(const void *ptr, size_t len, void *desc)
{
    /* GW_FAKE_BOARD_REFUSE=1: this rank's buffers cannot be exported (the
     * failure path of coll_nvlink_delegate_fail). */
    const char *refuse = getenv("GW_FAKE_BOARD_REFUSE");
    if (!fake_delegate() || (refuse && 1 == atoi(refuse))) return -1;
    const fake_buf_desc_t d = {FAKE_BUF_MAGIC, (int32_t)getpid(), (uint64_t)(uintptr_t)ptr, len};
    memcpy(desc, &d, sizeof(d));
    return 0;
}
