// Passive-target locks taken by same-node origins themselves (gpuwire/osc.h):
// each rank of a window keeps its lock in a word of POSIX shared memory that
// the ranks on its node map once, at the window's creation. An origin there
// takes and releases the lock with atomics on that word, without a message
// to the target and without waiting for the target to poll; an origin that
// cannot map it (another node, another IPC namespace) sends its request,
// and the target takes the same word for it (gw_osc_sync_lock_request).
//
// The word: 0 free, -1 held exclusively, n > 0 held shared by n origins.
//
// A window allocated by MPI_Win_allocate in host memory lives in the same
// segment, after the word's page: the ranks on the node map it with the word,
// and a Put or Get there is a memory copy (ucx_glue/osc/direct).
// Every segment's page also holds the rank's accumulate word (kAccWord bytes
// in, a cache line of its own): held by whoever changes the window's bytes
// with an accumulate-kind operation, an origin on the node (in the shared
// host window, or in a device window it maps) or the target applying a
// message, so that each is atomic against the others. And its fence count
// (kFenceCount bytes in): a window whose ranks all share one node closes a
// fence epoch by these counts rather than by a barrier of messages.
#include "gpuwire/osc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kAccWord = 64;
constexpr size_t kFenceCount = 128;
std::atomic<uint32_t> g_seq{0};

void name_of(uint64_t id, char *out, size_t len)
{
    std::snprintf(out, len, "/gwosc.%u.%u", static_cast<unsigned>(id >> 32),
                  static_cast<unsigned>(id & 0xffffffffu));
}

void say(char *why, size_t why_len, const char *what, const char *name)
{
    std::snprintf(why, why_len, "%s %s: %s", what, name, std::strerror(errno));
}

// The bytes of a segment whose window has bytes: the word's page first.
size_t segment_len(uint64_t bytes) { return kPage + (bytes + kPage - 1) / kPage * kPage; }

// Maps the segment of name (len bytes); nullptr with why. A new one with
// window bytes must fit in what /dev/shm has free now: one that does not
// refuses here rather than with a SIGBUS at the first touch of a page the
// file system cannot give. Its pages are taken as they are touched, as
// for private memory (no reservation: a large window used sparsely costs
// only what it uses).
void *map_segment(const char *name, bool create, size_t len, char *why, size_t why_len)
{
    int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0 && create && errno == EEXIST) {
        // Left by a process of an earlier job with this pid: ours is new.
        (void)shm_unlink(name);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    if (fd < 0) {
        say(why, why_len, "shm_open", name);
        return nullptr;
    }
    if (create && ftruncate(fd, static_cast<off_t>(len)) != 0) {
        say(why, why_len, "ftruncate", name);
        (void)close(fd);
        (void)shm_unlink(name);
        return nullptr;
    }
    if (create && len > kPage) {
        struct statvfs fs;
        const bool asked = fstatvfs(fd, &fs) == 0;
        const unsigned long long room =
            asked ? static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize : 0;
        if (!asked || room < len) {
            if (asked) {
                std::snprintf(why, why_len, "%zu bytes do not fit in the %llu bytes free in "
                              "/dev/shm", len, room);
            } else {
                say(why, why_len, "fstatvfs", name);
            }
            (void)close(fd);
            (void)shm_unlink(name);
            return nullptr;
        }
    }
    struct stat st;
    if (!create && (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < len)) {
        std::snprintf(why, why_len, "%s is smaller than its window", name);
        (void)close(fd);
        return nullptr;
    }
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    (void)close(fd);
    if (p == MAP_FAILED) {
        say(why, why_len, "mmap", name);
        if (create) (void)shm_unlink(name);
        return nullptr;
    }
    return p;
}

// One rank's segment as mapped here.
struct Segment {
    void *base = nullptr;
    size_t len = 0;
};

}  // namespace

struct gw_osc_lockwords {
    uint64_t id = 0;
    bool named = false;          // our name still exists (unlink removes it)
    std::vector<Segment> segs;   // per rank, mapped here
    std::vector<int *> words;    // per rank: its word where locks are taken in it,
                                 // nullptr: by message

    ~gw_osc_lockwords()
    {
        if (named) {
            char name[64];
            name_of(id, name, sizeof(name));
            (void)shm_unlink(name);
        }
        for (const Segment &g : segs) {
            if (g.base != nullptr) (void)munmap(g.base, g.len);
        }
    }

    // Keeps rank t's mapping; its word is a lock word when word.
    void keep(int t, void *base, size_t len, bool word)
    {
        segs[static_cast<size_t>(t)] = Segment{base, len};
        if (word) words[static_cast<size_t>(t)] = static_cast<int *>(base);
    }
};

extern "C" {

bool gw_osc_lock_try(int *word, int type)
{
    int v = __atomic_load_n(word, __ATOMIC_RELAXED);
    for (;;) {
        int next;
        if (type == GW_OSC_LOCK_EXCLUSIVE) {
            if (v != 0) return false;
            next = -1;
        } else {
            if (v < 0) return false;
            next = v + 1;
        }
        if (__atomic_compare_exchange_n(word, &v, next, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            return true;
        }
    }
}

void gw_osc_lock_release(int *word)
{
    // The holder's own view decides: nobody else changes an exclusive word.
    if (__atomic_load_n(word, __ATOMIC_RELAXED) < 0) {
        __atomic_store_n(word, 0, __ATOMIC_RELEASE);
    } else {
        (void)__atomic_fetch_sub(word, 1, __ATOMIC_RELEASE);
    }
}

int gw_osc_lockwords_create(int nranks, int rank, uint64_t bytes, bool word,
                            gw_osc_lockwords_t **out, uint64_t *id, char *why, size_t why_len)
{
    *out = nullptr;
    *id = 0;
    if (nranks < 1 || rank < 0 || rank >= nranks) return GW_OSC_ERR_RANGE;
    auto *l = new (std::nothrow) gw_osc_lockwords();
    if (l == nullptr) return GW_OSC_ERR_NOMEM;
    try {
        l->words.assign(static_cast<size_t>(nranks), nullptr);
        l->segs.assign(static_cast<size_t>(nranks), Segment{});
    } catch (const std::bad_alloc &) {
        delete l;
        return GW_OSC_ERR_NOMEM;
    }
    l->id = (static_cast<uint64_t>(static_cast<uint32_t>(getpid())) << 32) |
            (g_seq.fetch_add(1, std::memory_order_relaxed) + 1);
    char name[64];
    name_of(l->id, name, sizeof(name));
    const size_t len = segment_len(bytes);
    void *base = map_segment(name, true, len, why, why_len);
    if (base != nullptr) {
        l->named = true;
        l->keep(rank, base, len, word);
        *id = l->id;
    }
    *out = l;
    return 0;
}

int gw_osc_lockwords_open(gw_osc_lockwords_t *l, int t, uint64_t id, uint64_t bytes, bool word,
                          char *why, size_t why_len)
{
    if (t < 0 || static_cast<size_t>(t) >= l->segs.size()) return GW_OSC_ERR_RANGE;
    if (id == 0 || l->segs[static_cast<size_t>(t)].base != nullptr) return 0;
    char name[64];
    name_of(id, name, sizeof(name));
    const size_t len = segment_len(bytes);
    void *base = map_segment(name, false, len, why, why_len);
    if (base == nullptr) return -1;
    l->keep(t, base, len, word);
    return 0;
}

void *gw_osc_lockwords_data(gw_osc_lockwords_t *l, int t)
{
    if (l == nullptr || t < 0 || static_cast<size_t>(t) >= l->segs.size()) return nullptr;
    const Segment &g = l->segs[static_cast<size_t>(t)];
    return g.len > kPage ? static_cast<char *>(g.base) + kPage : nullptr;
}

int *gw_osc_lockwords_acc(gw_osc_lockwords_t *l, int t)
{
    if (l == nullptr || t < 0 || static_cast<size_t>(t) >= l->segs.size()) return nullptr;
    const Segment &g = l->segs[static_cast<size_t>(t)];
    return g.base != nullptr ? reinterpret_cast<int *>(static_cast<char *>(g.base) + kAccWord)
                             : nullptr;
}

bool gw_osc_acc_trylock(int *word, unsigned tries)
{
    // Held for one operation: spin a while, letting the holder run now and
    // then (ranks may outnumber cores).
    for (unsigned i = 0; i < tries; i++) {
        if (__atomic_load_n(word, __ATOMIC_RELAXED) == 0 &&
            __atomic_exchange_n(word, 1, __ATOMIC_ACQUIRE) == 0) {
            return true;
        }
        if (i % 64 == 63) (void)sched_yield();
    }
    return false;
}

void gw_osc_acc_unlock(int *word) { __atomic_store_n(word, 0, __ATOMIC_RELEASE); }

namespace {

uint64_t *fence_count(const gw_osc_lockwords_t *l, int t)
{
    const Segment &g = l->segs[static_cast<size_t>(t)];
    return g.base != nullptr
               ? reinterpret_cast<uint64_t *>(static_cast<char *>(g.base) + kFenceCount)
               : nullptr;
}

}  // namespace

bool gw_osc_fence_ready(gw_osc_lockwords_t *l, int n)
{
    if (l == nullptr || n < 1 || static_cast<size_t>(n) > l->segs.size()) return false;
    for (int t = 0; t < n; t++) {
        if (fence_count(l, t) == nullptr) return false;
    }
    return true;
}

uint64_t gw_osc_fence_arrive(gw_osc_lockwords_t *l, int rank)
{
    if (l == nullptr || rank < 0 || static_cast<size_t>(rank) >= l->segs.size()) return 0;
    uint64_t *c = fence_count(l, rank);
    if (c == nullptr) return 0;
    // Only this rank writes its count.
    const uint64_t next = __atomic_load_n(c, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(c, next, __ATOMIC_RELEASE);
    return next;
}

bool gw_osc_fence_reached(gw_osc_lockwords_t *l, int n, uint64_t count)
{
    if (count == 0 || l == nullptr || n < 1 || static_cast<size_t>(n) > l->segs.size()) {
        return false;
    }
    for (int t = 0; t < n; t++) {
        const uint64_t *c = fence_count(l, t);
        if (c == nullptr || __atomic_load_n(c, __ATOMIC_ACQUIRE) < count) return false;
    }
    return true;
}

void gw_osc_lockwords_unlink(gw_osc_lockwords_t *l)
{
    if (l == nullptr || !l->named) return;
    char name[64];
    name_of(l->id, name, sizeof(name));
    (void)shm_unlink(name);
    l->named = false;
}

int **gw_osc_lockwords_table(gw_osc_lockwords_t *l) { return l->words.data(); }

void gw_osc_lockwords_close(gw_osc_lockwords_t *l) { delete l; }

}  // extern "C"
