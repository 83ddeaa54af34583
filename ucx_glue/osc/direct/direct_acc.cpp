// The accumulate family done by a same-node origin itself under the target's
// accumulate word (gpuwire/osc_direct.h, docs/osc.md): in a host window
// mapped in shared memory (memory copies and the caller's combine), in a
// device window mapped here (the GPU's kernels), or in a host window reached
// by cross-memory attach (read, combined here, written back). And whether a
// contiguous Accumulate from a device buffer on the target window's GPU, with
// an op the GPU reduces, may send the buffer's description instead of its
// bytes (the target maps it and reduces from it).
#include <cstdint>
#include <cstring>

#include "direct_path.hpp"
#include "osc_log.hpp"

using gpuwire::osc::kAccTries;
using gpuwire::osc::locate;
using gpuwire::osc::log;
using gpuwire::osc::Target;

extern "C" {

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
