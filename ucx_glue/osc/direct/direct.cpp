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
// The accumulate family done by the origin: direct_acc.cpp.
#include <unistd.h>

#include <new>

#include "direct_path.hpp"
#include "osc_log.hpp"

namespace gpuwire::osc {
namespace {

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

}  // namespace gpuwire::osc

using gpuwire::osc::locate;
using gpuwire::osc::log;
using gpuwire::osc::Target;

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

}  // extern "C"
