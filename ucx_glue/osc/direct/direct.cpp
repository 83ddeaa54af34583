// A window's same-node direct path (gpuwire/osc_direct.h, docs/osc.md).
//
// Every rank describes its window (a CUDA IPC description of device memory,
// or its process and address for host memory); the caller sends the
// descriptions to every rank once. An origin maps each target on its node
// through the process's one IPC mapping cache and keeps the mapping until
// the window is freed. A Put or Get with contiguous layouts at both ends to
// such a target is then one asynchronous copy on the core's stream, whose
// ticket is remembered per GPU; nothing waits per operation, and every
// synchronisation that completes operations waits for the tickets first. A
// host window is one memory copy where the window lives in shared memory
// that this rank maps (MPI_Win_allocate; a copy on the GPU from a device
// origin buffer), else one cross-memory-attach call; either is complete on
// return.
// An accumulate-kind operation from host buffers to a host window mapped in
// shared memory is done here too, under the window's accumulate word.
// A contiguous Accumulate from a device buffer on the target window's GPU,
// with an op the GPU reduces, may send the buffer's description instead of
// its bytes (the target maps it and reduces from it).
#include "gpuwire/osc_direct.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "osc_log.hpp"

namespace gpuwire::osc {
namespace {

constexpr int kMaxGpus = 16;
// Attempts at a target's accumulate word before the operation goes as a
// message instead (gw_osc_acc_trylock).
constexpr unsigned kAccTries = 1024;

// One target's window as this rank reaches it.
struct Target {
    char *ptr = nullptr;  // the window's first byte here; nullptr: messages
    uint64_t size = 0;    // its bytes
    int disp_unit = 0;
    int gpu = -1;         // the local GPU whose stream copies to it; -1: host window
    void *mapping = nullptr;  // the peer mapping (gw_osc_dev_unmap); nullptr for this rank
    int pid = 0;          // host window: its process; ptr is an address there, never
                          // dereferenced here
    bool shared = false;  // host window mapped here: ptr is its first byte
};

// Maps target t's window into *d; true when the direct path takes it.
bool map_target(const gw_osc_win_self_t *self, int t, const gw_osc_win_desc_t &w,
                void *shared, gw_osc_peer_fn peer, void *ctx, Target *d)
{
    char why[256] = "";
    *d = Target{};
    d->size = w.size;
    d->disp_unit = w.disp_unit;
    uint32_t id = 0;
    if (w.kind == GW_OSC_WIN_HOST && t == self->rank && shared == nullptr) {
        shared = self->base;  // this rank's own window: its memory is here
    }
    if (w.kind == GW_OSC_WIN_HOST && shared != nullptr) {
        d->ptr = static_cast<char *>(shared);
        d->shared = true;
        return true;
    }
    if (w.kind == GW_OSC_WIN_HOST) {
        if (!peer(ctx, t, &id)) return false;
        if (gw_osc_cma_probe(w.pid, w.base, why, sizeof(why)) != 0) {
            log(1, "rank %d cannot reach rank %d's host window (%s): messages instead",
                self->rank, t, why);
            return false;
        }
        d->ptr = reinterpret_cast<char *>(static_cast<uintptr_t>(w.base));
        d->pid = w.pid;
        d->gpu = -1;
        return true;
    }
    if (t == self->rank) {
        d->ptr = self->base;
        d->gpu = self->gpu;
    } else {
        if (!peer(ctx, t, &id)) return false;
        void *ptr = nullptr;
        if (gw_osc_dev_map(w.desc, id, &d->mapping, &ptr, &d->gpu, why, sizeof(why)) != 0) {
            log(1, "rank %d cannot map rank %d's window (%s): messages instead", self->rank, t,
                why);
            return false;
        }
        d->ptr = static_cast<char *>(ptr);
    }
    if (d->gpu < 0 || d->gpu >= kMaxGpus) {
        gw_osc_dev_unmap(d->mapping);
        *d = Target{};
        return false;
    }
    return true;
}

}  // namespace

// The path of one window: its targets, and the last ticket issued per GPU.
class Direct {
public:
    Direct(int rank, int nranks) : rank_(rank), targets_(static_cast<size_t>(nranks)) {}
    ~Direct()
    {
        (void)wait();
        for (Target &t : targets_) {
            if (t.mapping != nullptr) gw_osc_dev_unmap(t.mapping);
        }
    }
    Direct(const Direct &) = delete;
    Direct &operator=(const Direct &) = delete;

    std::vector<Target> &targets() { return targets_; }

    const Target *target(int t) const
    {
        if (t < 0 || static_cast<size_t>(t) >= targets_.size()) return nullptr;
        return targets_[static_cast<size_t>(t)].ptr != nullptr ? &targets_[static_cast<size_t>(t)]
                                                               : nullptr;
    }
    int rank() const { return rank_; }

    // A copy between device buffers on one GPU that nothing waits for at
    // once joins that GPU's batch: up to GW_OSC_COPY_BATCH of them go as one
    // kernel (a window of Puts costs one submission), launched when full or
    // by the next synchronisation (wait) or progress (kick). Any other copy
    // launches its GPU's batch first, keeping the stream's order. *ticket:
    // the copy's, 0 while batched. 0 or -1 (logged).
    int copy(void *dst, const void *src, uint64_t bytes, int gpu, bool both_device, bool now,
             uint64_t *ticket)
    {
        std::lock_guard<std::mutex> g(lock_);
        *ticket = 0;
        Batch &b = batch_[gpu];
        if (both_device && !now) {
            b.item[b.n++] = gw_coll_copy_item_t{dst, src, bytes};
            queued_.fetch_add(1, std::memory_order_relaxed);
            gpus_.fetch_or(1u << gpu, std::memory_order_relaxed);
            return b.n == GW_OSC_COPY_BATCH ? launch(gpu) : 0;
        }
        if (launch(gpu) != 0) return -1;
        int r = gw_osc_dev_copy_start(dst, src, bytes, gpu, both_device, ticket);
        if (r == 0) note(gpu, *ticket);
        return r;
    }

    // Launches every batch; 0 or GW_OSC_ERR_FAILED. One relaxed load when
    // none waits.
    int kick()
    {
        if (queued_.load(std::memory_order_relaxed) == 0) return 0;
        std::lock_guard<std::mutex> g(lock_);
        int rc = 0;
        for (int gpu = 0; gpu < kMaxGpus; gpu++) {
            if (launch(gpu) != 0) rc = GW_OSC_ERR_FAILED;
        }
        return rc;
    }

    int wait()
    {
        // Stores into shared host windows are seen by their target before
        // whatever this synchronisation sends or releases next (a store).
        std::atomic_thread_fence(std::memory_order_release);
        int rc = kick();
        // A batch that failed to start since the last wait fails this one.
        if (failed_.load(std::memory_order_relaxed) &&
            failed_.exchange(false, std::memory_order_relaxed)) {
            rc = GW_OSC_ERR_FAILED;
        }
        // No copy ever went on a GPU (host windows): nothing to wait for.
        if (gpus_.load(std::memory_order_relaxed) == 0) return rc;
        uint64_t want[kMaxGpus];
        unsigned gpus;
        {
            // One look at the GPUs this window has copied on. The bits stay:
            // a wait on a ticket passed already is one load, and another
            // thread's wait in progress must not make this one return early.
            std::lock_guard<std::mutex> g(lock_);
            gpus = gpus_.load(std::memory_order_relaxed);
            std::memcpy(want, issued_, sizeof(want));
        }
        for (int g = 0; gpus != 0 && g < kMaxGpus; g++) {
            if (!(gpus & (1u << g))) continue;
            if (gw_osc_dev_copy_wait(g, want[g]) != 0) rc = GW_OSC_ERR_FAILED;
        }
        return rc;
    }

private:
    // The copies of one GPU waiting for their kernel.
    struct Batch {
        gw_coll_copy_item_t item[GW_OSC_COPY_BATCH];
        int n = 0;
    };

    void note(int gpu, uint64_t ticket)
    {
        if (ticket > issued_[gpu]) issued_[gpu] = ticket;
        gpus_.fetch_or(1u << gpu, std::memory_order_relaxed);
    }

    // Under lock_: gpu's batch as one kernel. A batch that fails to start is
    // dropped (logged): the caller is told, and so is the next wait.
    int launch(int gpu)
    {
        Batch &b = batch_[gpu];
        if (b.n == 0) return 0;
        uint64_t ticket = 0;
        int r = gw_osc_dev_copy_batch(b.item, b.n, gpu, &ticket);
        queued_.fetch_sub(static_cast<unsigned>(b.n), std::memory_order_relaxed);
        b.n = 0;
        if (r == 0) {
            note(gpu, ticket);
        } else {
            failed_.store(true, std::memory_order_relaxed);
        }
        return r;
    }

    int rank_;
    std::vector<Target> targets_;
    std::mutex lock_;  // everything below
    uint64_t issued_[kMaxGpus] = {};
    std::atomic<unsigned> gpus_{0};  // GPUs copied on (written under lock_)
    Batch batch_[kMaxGpus];
    std::atomic<unsigned> queued_{0};  // copies in batches, all GPUs
    std::atomic<bool> failed_{false};  // a batch failed to start since the last wait
};

}  // namespace gpuwire::osc

struct gw_osc_direct {
    gpuwire::osc::Direct path;
    gw_osc_direct(int rank, int nranks) : path(rank, nranks) {}
};

using gpuwire::osc::log;
using gpuwire::osc::Target;
using gpuwire::osc::kAccTries;

extern "C" {

void gw_osc_direct_describe(bool enabled, const gw_osc_win_self_t *self, gw_osc_win_desc_t *mine)
{
    char why[256] = "";
    std::memset(mine, 0, sizeof(*mine));
    // The extent always goes: every origin checks its accesses against it.
    mine->disp_unit = self->disp_unit;
    mine->size = self->size;
    if (!enabled || self->size == 0) return;
    if (self->gpu < 0) {
        mine->kind = GW_OSC_WIN_HOST;
        mine->pid = static_cast<int32_t>(getpid());
        mine->base = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(self->base));
        return;
    }
    // The application's earlier work on the window (a cudaMemset, say) lands
    // before any peer copies into it.
    if (gw_osc_dev_wait_user(self->gpu) != 0) return;
    if (gw_osc_dev_describe(self->base, self->size, mine->desc, why, sizeof(why)) != 0) {
        log(1, "rank %d's window cannot be mapped by its peers (%s): their Put and Get go as "
               "messages", self->rank, why);
        return;
    }
    mine->kind = GW_OSC_WIN_DEVICE;
}

int gw_osc_direct_open(const gw_osc_win_self_t *self, int nranks, const gw_osc_win_desc_t *all,
                       void *const *host_data, gw_osc_peer_fn peer, void *peer_ctx,
                       gw_osc_direct_t **out, int *mapped)
{
    *out = nullptr;
    *mapped = 0;
    auto *d = new (std::nothrow) gw_osc_direct(self->rank, nranks);
    if (d == nullptr) return GW_OSC_ERR_NOMEM;
    std::vector<Target> &targets = d->path.targets();
    for (int t = 0; t < nranks; t++) {
        if (all[t].kind != GW_OSC_WIN_DEVICE && all[t].kind != GW_OSC_WIN_HOST) continue;
        void *shared = host_data != nullptr ? host_data[t] : nullptr;
        if (gpuwire::osc::map_target(self, t, all[t], shared, peer, peer_ctx, &targets[t])) {
            (*mapped)++;
        }
    }
    if (*mapped == 0) {
        delete d;
        return 0;
    }
    *out = d;
    return 0;
}

void gw_osc_direct_close(gw_osc_direct_t *d) { delete d; }

int gw_osc_direct_wait(gw_osc_direct_t *d) { return d == nullptr ? 0 : d->path.wait(); }

int gw_osc_direct_kick(gw_osc_direct_t *d) { return d == nullptr ? 0 : d->path.kick(); }

namespace {

// Target t's bytes [tdisp * disp_unit + off, + bytes) as mapped here;
// nullptr (logged) when they are not all inside its window.
char *locate(const gw_osc_direct_t *d, const Target *t, int target, int64_t tdisp, int64_t off,
             uint64_t bytes)
{
    int64_t at = tdisp * t->disp_unit + off;
    if (at < 0 || static_cast<uint64_t>(at) + bytes > t->size) {
        log(0, "rank %d accessed [%lld, +%llu) outside rank %d's window of %llu bytes",
            d->path.rank(), static_cast<long long>(at), static_cast<unsigned long long>(bytes),
            target, static_cast<unsigned long long>(t->size));
        return nullptr;
    }
    return t->ptr + at;
}

}  // namespace

int gw_osc_direct_rma(gw_osc_direct_t *d, bool put, void *origin, uint64_t bytes, int target,
                      int64_t tdisp, int64_t off, bool wait, int *rc)
{
    const Target *t = d == nullptr ? nullptr : d->path.target(target);
    if (t == nullptr) return GW_OSC_DIRECT_NO;
    *rc = 0;
    if (bytes == 0) return GW_OSC_DIRECT_DONE;
    char *remote = locate(d, t, target, tdisp, off, bytes);
    if (remote == nullptr) {
        *rc = GW_OSC_ERR_RANGE;
        return GW_OSC_DIRECT_DONE;
    }
    bool unordered = false;
    int ogpu = gw_osc_dev_where_order(origin, bytes, &unordered);
    if (t->shared) {
        // The window's memory is mapped here: the copy is the operation. A
        // device origin buffer: one copy on its GPU between it and the
        // mapping (behind the application's work there), complete on return.
        if (ogpu >= 0) {
            if (gw_osc_dev_copy(put ? remote : origin, put ? origin : remote, bytes, ogpu) != 0) {
                *rc = GW_OSC_ERR_FAILED;
                return GW_OSC_DIRECT_DONE;
            }
            return GW_OSC_DIRECT_MOVED;
        }
        std::memcpy(put ? remote : origin, put ? origin : remote, bytes);
        return GW_OSC_DIRECT_MOVED;
    }
    if (t->pid != 0) {
        // A host window: the kernel copies, the call returns with the bytes
        // there. Device origin buffers keep the message path.
        if (ogpu >= 0) return GW_OSC_DIRECT_NO;
        char why[256];
        if (gw_osc_cma_copy(t->pid, put, origin, static_cast<uint64_t>(
                                                     reinterpret_cast<uintptr_t>(remote)),
                            bytes, why, sizeof(why)) != 0) {
            // Memory the kernel will not copy (a driver's mapping, say): the
            // message path does it again, whole.
            log(1, "%s; sent as a message instead", why);
            return GW_OSC_DIRECT_NO;
        }
        return GW_OSC_DIRECT_MOVED;
    }
    if (unordered && gw_osc_dev_wait_user(ogpu) != 0) {
        *rc = GW_OSC_ERR_FAILED;
        return GW_OSC_DIRECT_DONE;
    }
    uint64_t ticket = 0;
    if (d->path.copy(put ? remote : origin, put ? origin : remote, bytes, t->gpu,
                     ogpu == t->gpu, wait, &ticket) != 0) {
        *rc = GW_OSC_ERR_FAILED;
        return GW_OSC_DIRECT_DONE;
    }
    // Rput, Rget: the request completes with the copy.
    if (wait && gw_osc_dev_copy_wait(t->gpu, ticket) != 0) *rc = GW_OSC_ERR_FAILED;
    return GW_OSC_DIRECT_MOVED;
}

namespace {

// gw_osc_direct_acc on a device window that gpu's stream reaches: by the
// kernels, waited for under the word. An op on a type without a kernel:
// the message path.
int device_acc(const gw_osc_direct_t *d, const Target *t, int *word, uint32_t kind, int target,
               int64_t tdisp, int64_t off, uint64_t bytes, const void *origin,
               const void *compare, void *result, int32_t type, int32_t op, int *rc)
{
    const bool cas = kind == GW_OSC_CAS;
    if (cas ? (bytes > 16 || origin == nullptr || compare == nullptr || result == nullptr)
            : (origin != nullptr && !gw_osc_dev_reduce_supported(op, type))) {
        return GW_OSC_DIRECT_NO;
    }
    bool o_late = false, r_late = false, c_late = false;
    const int ogpu = origin != nullptr ? gw_osc_dev_where_order(origin, bytes, &o_late) : -1;
    const int rgpu = result != nullptr ? gw_osc_dev_where_order(result, bytes, &r_late) : -1;
    const int cgpu = compare != nullptr ? gw_osc_dev_where_order(compare, bytes, &c_late) : -1;
    if (bytes == 0) return GW_OSC_DIRECT_DONE;
    char *remote = locate(d, t, target, tdisp, off, bytes);
    if (remote == nullptr) {
        *rc = GW_OSC_ERR_RANGE;
        return GW_OSC_DIRECT_DONE;
    }
    // The application's work on its buffers lands first.
    if ((o_late && gw_osc_dev_wait_user(ogpu) != 0) ||
        (r_late && rgpu != ogpu && gw_osc_dev_wait_user(rgpu) != 0) ||
        (c_late && cgpu != ogpu && cgpu != rgpu && gw_osc_dev_wait_user(cgpu) != 0)) {
        *rc = GW_OSC_ERR_FAILED;
        return GW_OSC_DIRECT_DONE;
    }
    if (!gw_osc_acc_trylock(word, kAccTries)) return GW_OSC_DIRECT_BUSY;
    int r = cas ? gw_osc_dev_cas(remote, t->gpu, origin, ogpu == t->gpu, compare,
                                 cgpu == t->gpu, result, rgpu == t->gpu, bytes)
                : gw_osc_dev_acc(remote, t->gpu, origin, ogpu == t->gpu, result, rgpu == t->gpu,
                                 bytes, op, type);
    gw_osc_acc_unlock(word);
    if (r != 0) *rc = GW_OSC_ERR_FAILED;
    return GW_OSC_DIRECT_MOVED;
}

// Host buffers only: a device buffer keeps the message path (which stages it).
bool host_buffers(const void *origin, const void *compare, const void *result, uint64_t bytes)
{
    for (const void *p : {origin, compare, result}) {
        if (p != nullptr && bytes > 0 && gw_osc_dev_where(p, bytes) >= 0) return false;
    }
    return true;
}

// The bytes of one step of cma_acc: a multiple of every contiguous
// predefined element size (1 to 32 bytes, 3, 5, 6, 12, 20, 24 among them),
// small enough to stay in the cache between the read and the write.
constexpr uint64_t kCmaStep = uint64_t{15} << 14;  // 240 KiB
constexpr uint64_t kCmaStack = 4096;

// gw_osc_direct_acc on a host window reached by cross-memory attach: under
// the word, each step's window bytes read into a scratch buffer (the result
// gets them), combined there with the origin's, and written back. MPI_NO_OP
// only reads; REPLACE without a result only writes; a compare-and-swap
// writes only where it swaps. A first read the kernel refuses changes
// nothing: the message path does it.
int cma_acc(const gw_osc_direct_t *d, const Target *t, int *word, uint32_t kind, int target,
            int64_t tdisp, int64_t off, uint64_t bytes, const void *origin, const void *compare,
            void *result, int32_t type, int32_t op, const gw_osc_mem_ops_t *ops, int *rc)
{
    if (!host_buffers(origin, compare, result, bytes)) return GW_OSC_DIRECT_NO;
    if (bytes == 0) return GW_OSC_DIRECT_DONE;
    char *remote = locate(d, t, target, tdisp, off, bytes);
    if (remote == nullptr) {
        *rc = GW_OSC_ERR_RANGE;
        return GW_OSC_DIRECT_DONE;
    }
    const auto at = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(remote));
    const bool cas = kind == GW_OSC_CAS;
    const bool read_only = origin == nullptr;  // MPI_NO_OP
    const bool write_only = !cas && op == GW_OSC_OP_REPLACE && result == nullptr;
    const uint64_t step = bytes < kCmaStep ? bytes : kCmaStep;
    char stack[kCmaStack];
    char *scratch = nullptr;
    if (!read_only && !write_only) {
        scratch = step <= kCmaStack ? stack : static_cast<char *>(gw_osc_buf_get(step));
        if (scratch == nullptr) return GW_OSC_DIRECT_NO;  // the message path has its own
    }
    if (!gw_osc_acc_trylock(word, kAccTries)) {
        if (scratch != stack) gw_osc_buf_put(scratch, step);
        return GW_OSC_DIRECT_BUSY;
    }
    char why[256] = "";
    int r = 0;
    uint64_t done = 0;
    bool changed = false;  // a combined value may have been written
    while (r == 0 && done < bytes) {
        const uint64_t n = step < bytes - done ? step : bytes - done;
        auto *res = result != nullptr ? static_cast<char *>(result) + done : nullptr;
        const auto *src = static_cast<const char *>(origin) + (origin != nullptr ? done : 0);
        if (write_only) {
            // (A REPLACE done again whole by a message is the same REPLACE.)
            r = gw_osc_cma_copy(t->pid, true, const_cast<char *>(src), at + done, n, why,
                                sizeof(why));
        } else {
            r = gw_osc_cma_copy(t->pid, false, read_only ? res : scratch, at + done, n, why,
                                sizeof(why));
            if (r == 0 && !read_only) {
                if (gw_osc_apply_at(ops, kind, type, op, scratch, -1, src,
                                    static_cast<const char *>(compare), res, n) != 0) {
                    r = GW_OSC_ERR_FAILED;
                } else if (!cas || std::memcmp(res, compare, n) == 0) {
                    changed = true;
                    r = gw_osc_cma_copy(t->pid, true, scratch, at + done, n, why, sizeof(why));
                }
            }
        }
        if (r == 0) done += n;
    }
    gw_osc_acc_unlock(word);
    if (scratch != stack) gw_osc_buf_put(scratch, step);
    if (r == GW_OSC_ERR_FAILED) {
        *rc = r;
    } else if (r != 0 && !changed) {
        // Memory the kernel will not copy (a driver's mapping, say), refused
        // before anything combined was written.
        log(1, "%s; sent as a message instead", why);
        return GW_OSC_DIRECT_NO;
    } else if (r != 0) {
        log(0, "rank %d: an accumulate into rank %d's window stopped after %llu of %llu bytes "
               "(%s)", d->path.rank(), target, static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(bytes), why);
        *rc = GW_OSC_ERR_FAILED;
    }
    return GW_OSC_DIRECT_MOVED;
}

}  // namespace

int gw_osc_direct_acc(gw_osc_direct_t *d, int *word, uint32_t kind, int target, int64_t tdisp,
                      int64_t off, uint64_t bytes, const void *origin, const void *compare,
                      void *result, int32_t type, int32_t op, const gw_osc_mem_ops_t *ops,
                      int *rc)
{
    const Target *t = d == nullptr ? nullptr : d->path.target(target);
    if (t == nullptr || word == nullptr) return GW_OSC_DIRECT_NO;
    if (kind != GW_OSC_ACC && kind != GW_OSC_GACC && kind != GW_OSC_CAS) return GW_OSC_DIRECT_NO;
    *rc = 0;
    if (!t->shared) {
        if (t->gpu < 0) {
            return cma_acc(d, t, word, kind, target, tdisp, off, bytes, origin, compare, result,
                           type, op, ops, rc);
        }
        return device_acc(d, t, word, kind, target, tdisp, off, bytes, origin, compare, result,
                          type, op, rc);
    }
    if (!host_buffers(origin, compare, result, bytes)) return GW_OSC_DIRECT_NO;
    if (bytes == 0) return GW_OSC_DIRECT_DONE;
    char *remote = locate(d, t, target, tdisp, off, bytes);
    if (remote == nullptr) {
        *rc = GW_OSC_ERR_RANGE;
        return GW_OSC_DIRECT_DONE;
    }
    if (!gw_osc_acc_trylock(word, kAccTries)) return GW_OSC_DIRECT_BUSY;
    int r = gw_osc_apply_at(ops, kind, type, op, remote, -1, static_cast<const char *>(origin),
                            static_cast<const char *>(compare), static_cast<char *>(result),
                            bytes);
    gw_osc_acc_unlock(word);
    if (r != 0) *rc = GW_OSC_ERR_FAILED;
    return GW_OSC_DIRECT_MOVED;
}

bool gw_osc_direct_acc_ref(gw_osc_direct_t *d, int target, const void *origin, uint64_t bytes,
                           int op, int type, void *desc)
{
    const Target *t = d == nullptr ? nullptr : d->path.target(target);
    if (t == nullptr || target == d->path.rank() || t->gpu < 0 || bytes == 0 ||
        !gw_osc_dev_reduce_supported(op, type)) {
        return false;
    }
    bool unordered = false;
    // The target maps the buffer on its window's GPU: only an origin buffer
    // on that same GPU is read there.
    int ogpu = gw_osc_dev_where_order(origin, bytes, &unordered);
    if (ogpu < 0 || ogpu != t->gpu) return false;
    if (unordered && gw_osc_dev_wait_user(ogpu) != 0) return false;
    char why[256];
    return gw_osc_dev_describe(origin, bytes, desc, why, sizeof(why)) == 0;
}

}  // extern "C"
