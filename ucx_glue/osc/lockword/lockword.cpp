// Passive-target locks taken by same-node origins themselves (gpuwire/osc.h):
// each rank of a window keeps its lock in a word of POSIX shared memory that
// the ranks on its node map once, at the window's creation. An origin there
// takes and releases the lock with atomics on that word, without a message
// to the target and without waiting for the target to poll; an origin that
// cannot map it (another node, another IPC namespace) sends its request,
// and the target takes the same word for it (gw_osc_sync_lock_request).
//
// The word: 0 free, -1 held exclusively, n > 0 held shared by n origins.
#include "gpuwire/osc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

namespace {

constexpr size_t kPage = 4096;
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

// Maps the page of name; nullptr with why.
int *map_word(const char *name, bool create, char *why, size_t why_len)
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
    if (create && ftruncate(fd, static_cast<off_t>(kPage)) != 0) {
        say(why, why_len, "ftruncate", name);
        (void)close(fd);
        (void)shm_unlink(name);
        return nullptr;
    }
    void *p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    (void)close(fd);
    if (p == MAP_FAILED) {
        say(why, why_len, "mmap", name);
        if (create) (void)shm_unlink(name);
        return nullptr;
    }
    return static_cast<int *>(p);
}

}  // namespace

struct gw_osc_lockwords {
    uint64_t id = 0;
    bool named = false;        // our name still exists (unlink removes it)
    std::vector<int *> words;  // per rank, mapped here; nullptr: by message

    ~gw_osc_lockwords()
    {
        if (named) {
            char name[64];
            name_of(id, name, sizeof(name));
            (void)shm_unlink(name);
        }
        for (int *w : words) {
            if (w != nullptr) (void)munmap(w, kPage);
        }
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

int gw_osc_lockwords_create(int nranks, int rank, gw_osc_lockwords_t **out, uint64_t *id,
                            char *why, size_t why_len)
{
    *out = nullptr;
    *id = 0;
    if (nranks < 1 || rank < 0 || rank >= nranks) return GW_OSC_ERR_RANGE;
    auto *l = new (std::nothrow) gw_osc_lockwords();
    if (l == nullptr) return GW_OSC_ERR_NOMEM;
    try {
        l->words.assign(static_cast<size_t>(nranks), nullptr);
    } catch (const std::bad_alloc &) {
        delete l;
        return GW_OSC_ERR_NOMEM;
    }
    l->id = (static_cast<uint64_t>(static_cast<uint32_t>(getpid())) << 32) |
            (g_seq.fetch_add(1, std::memory_order_relaxed) + 1);
    char name[64];
    name_of(l->id, name, sizeof(name));
    int *w = map_word(name, true, why, why_len);
    if (w != nullptr) {
        l->named = true;
        l->words[static_cast<size_t>(rank)] = w;
        *id = l->id;
    }
    *out = l;
    return 0;
}

int gw_osc_lockwords_open(gw_osc_lockwords_t *l, int t, uint64_t id, char *why, size_t why_len)
{
    if (t < 0 || static_cast<size_t>(t) >= l->words.size()) return GW_OSC_ERR_RANGE;
    if (id == 0 || l->words[static_cast<size_t>(t)] != nullptr) return 0;
    char name[64];
    name_of(id, name, sizeof(name));
    int *w = map_word(name, false, why, why_len);
    if (w == nullptr) return -1;
    l->words[static_cast<size_t>(t)] = w;
    return 0;
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
