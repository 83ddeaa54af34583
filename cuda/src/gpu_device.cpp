// The C interface of coll_gpuwire_device.h over the cuda module.
#include "coll_gpuwire_device.h"

#include <ucm/api/ucm.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/device_buffer.hpp"
#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/ipc_exporter.hpp"
#include "gpuwire/cuda/ipc_mapping_cache.hpp"
#include "gpuwire/cuda/nvlink_team.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gpuwire/cuda/pinned_pool.hpp"
#include "gpuwire/cuda/reduce.h"
#include "gpuwire/cuda/stream.hpp"
#include "gpuwire/cuda/why.hpp"

namespace cu = gpuwire::cuda;

namespace {

using gpuwire::cuda::detail::fail;

int fail_status(char *why, size_t why_len, const char *what, const cu::Status &s)
{
    return fail(why, why_len, "%s: %s", what, s.message().c_str());
}

// Pinned host buffers of any size, lent whole and kept for reuse up to a
// bound on pinned bytes. Pinning costs far more than a copy (cudaHostAlloc of
// 64 MiB: milliseconds), so it pays only through reuse: a request that the
// bound cannot hold, even after dropping idle buffers, gets plain host memory.
// Not synchronised: the owner's lock serialises get and put.
class StagingCache {
  public:
    StagingCache(cu::DriverApi &driver, size_t bound) : driver_(driver), bound_(bound) {}

    int get(size_t len, int gpu, gw_coll_host_buf_t *out, char *why, size_t why_len)
    {
        const size_t need = round_up(len);
        Slot *best = nullptr;
        for (auto &s : slots_) {
            if (!s->lent && s->buf.size() >= len && s->buf.size() <= 4 * need &&
                (!best || s->buf.size() < best->buf.size()))
                best = s.get();
        }
        if (!best && need <= bound_) {
            drop_idle_until(bound_ - need);
            if (pinned_ + need <= bound_) {
                auto b = cu::PinnedBuffer::allocate(driver_, need, gpu);
                if (b) {
                    slots_.push_back(std::make_unique<Slot>(Slot{std::move(*b), false}));
                    pinned_ += need;
                    best = slots_.back().get();
                }
                // A failed pin falls back to plain host memory below.
            }
        }
        if (best) {
            best->lent = true;
            ++lent_;
            *out = gw_coll_host_buf_t{best->buf.data(), len, best};
            return 0;
        }
        void *p = std::malloc(len ? len : 1);
        if (!p) return fail(why, why_len, "malloc of %zu bytes of host staging failed", len);
        ++plain_;
        *out = gw_coll_host_buf_t{p, len, nullptr};
        return 0;
    }

    void put(gw_coll_host_buf_t *b)
    {
        if (b->owner) {
            static_cast<Slot *>(b->owner)->lent = false;
            --lent_;
        } else {
            std::free(b->ptr);
        }
        *b = gw_coll_host_buf_t{nullptr, 0, nullptr};
    }

    size_t pinned() const { return pinned_; }
    size_t lent() const { return lent_; }
    size_t plain() const { return plain_; }

  private:
    struct Slot {
        cu::PinnedBuffer buf;
        bool lent;
    };
    static size_t round_up(size_t len)
    {
        size_t n = 4096;
        while (n < len && n < (SIZE_MAX >> 1)) n <<= 1;
        return n < len ? len : n;
    }
    void drop_idle_until(size_t target)
    {
        while (pinned_ > target) {
            auto it = std::max_element(slots_.begin(), slots_.end(), [](auto &a, auto &b) {
                size_t sa = a->lent ? 0 : a->buf.size(), sb = b->lent ? 0 : b->buf.size();
                return sa < sb;
            });
            if (it == slots_.end() || (*it)->lent) return;
            pinned_ -= (*it)->buf.size();
            slots_.erase(it);
        }
    }

    cu::DriverApi &driver_;
    const size_t bound_;
    std::vector<std::unique_ptr<Slot>> slots_;
    size_t pinned_ = 0;
    size_t lent_ = 0;
    size_t plain_ = 0;
};

// Device scratch of the GPU collectives: per GPU, at most kKeep idle buffers
// are kept (the largest given back). A reduction holds at most two at once:
// its algorithm's scratch and the temporaries for buffers it cannot use in
// place (host memory, another GPU). A request is served by the smallest idle
// buffer large enough, else by a buffer of its own, which on its return
// replaces the smallest idle one if it is larger. cudaFree synchronises the
// device, so buffers are kept rather than freed per call.
// Not synchronised: the owner's lock serialises get and put.
class ScratchCache {
  public:
    static constexpr size_t kKeep = 2;

    int get(size_t len, int gpu, gw_coll_dev_buf_t *out, char *why, size_t why_len)
    {
        if (gpu < 0) return fail(why, why_len, "device scratch: no GPU given");
        if (static_cast<size_t>(gpu) >= idle_.size()) idle_.resize(gpu + 1);
        auto &idle = idle_[gpu];
        std::unique_ptr<cu::DeviceBuffer> *best = nullptr;
        for (auto &slot : idle) {
            if (slot && slot->size() >= len && (!best || slot->size() < (*best)->size())) {
                best = &slot;
            }
        }
        std::unique_ptr<cu::DeviceBuffer> b;
        if (best) {
            b = std::move(*best);
        } else {
            size_t want = 1 << 20;
            while (want < len && want < (SIZE_MAX >> 1)) want <<= 1;
            if (want < len) want = len;
            auto r = cu::DeviceBuffer::allocate(gpu, want);
            if (!r) return fail_status(why, why_len, "device scratch (cudaMalloc)", r.status());
            b = std::make_unique<cu::DeviceBuffer>(std::move(*r));
        }
        *out = gw_coll_dev_buf_t{b->data(), len, b.get()};
        b.release();
        return 0;
    }

    void put(gw_coll_dev_buf_t *buf)
    {
        std::unique_ptr<cu::DeviceBuffer> b(static_cast<cu::DeviceBuffer *>(buf->owner));
        *buf = gw_coll_dev_buf_t{nullptr, 0, nullptr};
        if (!b) return;
        const int gpu = b->device();
        if (static_cast<size_t>(gpu) >= idle_.size()) idle_.resize(gpu + 1);
        auto &idle = idle_[gpu];
        std::unique_ptr<cu::DeviceBuffer> *smallest = nullptr;
        for (auto &slot : idle) {
            if (!slot) {
                smallest = &slot;
                break;
            }
            if (!smallest || slot->size() < (*smallest)->size()) smallest = &slot;
        }
        if (!*smallest || (*smallest)->size() < b->size()) *smallest = std::move(b);
        // Otherwise b is freed here.
    }

  private:
    std::vector<std::array<std::unique_ptr<cu::DeviceBuffer>, kKeep>> idle_;
};

// The classifier an unmap must reach; null until it exists. The UCM handler
// is installed before the classifier, because whether it could be installed
// decides the classifier's configuration.
std::atomic<cu::MemoryClassifier *> g_unmap_target{nullptr};

void on_vm_unmapped(ucm_event_type_t, ucm_event_t *event, void *)
{
    cu::MemoryClassifier *c = g_unmap_target.load(std::memory_order_acquire);
    if (c) c->invalidate(event->vm_unmapped.address, event->vm_unmapped.size);
}

struct DeviceState {
    DeviceState(cu::Driver &d, bool hooked, size_t staging_bytes)
        : driver(d), unmap_hooked(hooked),
          classifier(d, [hooked] {
              cu::ClassifierConfig c;
              if (!hooked) c.host_entries = 0;
              return c;
          }()),
          streams(cu::StreamPoolConfig{1, 0, false}), staging(d, staging_bytes)
    {
    }

    cu::Driver &driver;
    const bool unmap_hooked;
    cu::MemoryClassifier classifier;
    std::mutex mu; // streams and staging
    cu::StreamPool streams;
    StagingCache staging;
    ScratchCache scratch;
    // The direct NVLink calls: this rank's exports and its mappings of the
    // peers' buffers (under mu).
    cu::IpcExporter exporter{driver};
    cu::IpcMappingCache mappings{driver};
};

std::unique_ptr<DeviceState> g_state;
void (*g_log)(int, const char *) = nullptr;

void log_sink(cu::LogLevel level, const char *msg, void *)
{
    if (g_log) g_log(static_cast<int>(level), msg);
}

// The stream of gpu; the caller holds g_state->mu.
int stream_of(int gpu, cu::TrackedStream **out, char *why, size_t why_len)
{
    auto s = g_state->streams.get(gpu, 0);
    if (!s) return fail_status(why, why_len, "stream", s.status());
    *out = *s;
    return 0;
}

} // namespace

// pml gpuwire's mapping of other processes' buffers (pml_gpuwire.c), found
// by name: CUDA maps an allocation only once per process, so where pml
// gpuwire runs its cache serves both components. 0 mapped, 1 not available
// there (map here), -1 failed.
using PmlIpcMap = int (*)(uint32_t peer, const void *blob, size_t len, int device, void **ptr,
                          void **lease, char *why, size_t why_len);
using PmlIpcUnmap = void (*)(void *lease);

namespace {
struct PmlIpc {
    PmlIpcMap map = nullptr;
    PmlIpcUnmap unmap = nullptr;
};
const PmlIpc &pml_ipc()
{
    static const PmlIpc found = [] {
        PmlIpc p;
        p.map = reinterpret_cast<PmlIpcMap>(dlsym(RTLD_DEFAULT, "gpuwire_pml_ipc_map"));
        p.unmap = reinterpret_cast<PmlIpcUnmap>(dlsym(RTLD_DEFAULT, "gpuwire_pml_ipc_unmap"));
        if (!p.map || !p.unmap) p = PmlIpc{};
        return p;
    }();
    return found;
}
} // namespace

struct gw_coll_team {
    std::unique_ptr<cu::NvlTeam> team;
    std::vector<uint32_t> peer_ids;
    std::vector<cu::IpcMapping> leases; // the direct call's peer buffers, mapped here
    std::vector<void *> pml_leases;     // or through pml gpuwire's cache
    const void *peer_in[GW_NVL_MAX_RANKS] = {};
    void *peer_out[GW_NVL_MAX_RANKS] = {};
};

// Ends the direct call's mappings; under g_state->mu.
static void unmap_locked(gw_coll_team_t *t)
{
    t->leases.clear();
    for (void *lease : t->pml_leases) pml_ipc().unmap(lease);
    t->pml_leases.clear();
}

static_assert(GW_COLL_TEAM_DESC_BYTES == sizeof(cu::NvlTeamDesc));
static_assert(GW_COLL_BUF_DESC_BYTES == sizeof(cu::IpcBlob));

extern "C" {

int gw_coll_device_open(const gw_coll_device_params_t *params, char *why, size_t why_len)
{
    if (g_state) return g_state->driver.device_count();
    g_log = params->log;
    cu::set_log_sink(g_log ? log_sink : nullptr, nullptr);
    cu::Driver &drv = cu::Driver::instance();
    if (!drv.available()) return fail(why, why_len, "no GPU: %s", drv.unavailable_reason());
    if (drv.device_count() <= 0) return fail(why, why_len, "no GPU: the driver reports none");
    bool hooked =
        ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 1000, on_vm_unmapped, nullptr) == UCS_OK;
    g_state = std::make_unique<DeviceState>(drv, hooked, params->staging_bytes);
    g_unmap_target.store(&g_state->classifier, std::memory_order_release);
    return drv.device_count();
}

void gw_coll_device_close(void)
{
    if (!g_state) return;
    // After the unset no handler runs any more; then the classifier may go.
    if (g_state->unmap_hooked) ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_vm_unmapped, nullptr);
    g_unmap_target.store(nullptr, std::memory_order_release);
    g_state.reset();
    cu::set_log_sink(nullptr, nullptr);
}

int gw_coll_device_classify(const void *ptr, size_t len, gw_coll_mem_t *out, char *why,
                            size_t why_len)
{
    cu::MemoryInfo info;
    cu::Status s = g_state->classifier.classify(ptr, len, info);
    if (!s) return fail_status(why, why_len, "classify", s);
    out->on_gpu = info.on_gpu();
    out->gpu = info.on_gpu() ? info.device : -1;
    return 0;
}

int gw_coll_staging_get(size_t len, int gpu, gw_coll_host_buf_t *out, char *why, size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_state->mu);
    return g_state->staging.get(len, gpu < 0 ? 0 : gpu, out, why, why_len);
}

void gw_coll_staging_put(gw_coll_host_buf_t *buf)
{
    if (!buf->ptr) return;
    std::lock_guard<std::mutex> lock(g_state->mu);
    g_state->staging.put(buf);
}

int gw_coll_device_wait_user(int gpu, char *why, size_t why_len)
{
    cu::Status s = cu::wait_legacy_stream(gpu);
    return s ? 0 : fail_status(why, why_len, "waiting for the default stream", s);
}

int gw_coll_copy_start(void *dst, const void *src, size_t len, int gpu, uint64_t *ticket,
                       char *why, size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_state->mu);
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    cu::Status s = cu::copy_async(dst, src, len, ts->stream());
    if (!s) return fail_status(why, why_len, "copy", s);
    auto t = ts->mark();
    if (!t) return fail_status(why, why_len, "copy completion", t.status());
    *ticket = *t;
    return 0;
}

int gw_coll_copy_wait(int gpu, uint64_t ticket, char *why, size_t why_len)
{
    cu::TrackedStream *ts = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_state->mu);
        if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    }
    while (!ts->reached(ticket)) {
        cu::Status s = ts->check();
        if (!s) return fail_status(why, why_len, "copy", s);
    }
    return 0;
}

int gw_coll_copy_done(int gpu, uint64_t ticket, bool query_errors, bool *done, char *why,
                      size_t why_len)
{
    cu::TrackedStream *ts = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_state->mu);
        if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    }
    if (ts->reached(ticket)) {
        *done = true;
        return 0;
    }
    if (query_errors) {
        cu::Status s = ts->check();
        if (!s) return fail_status(why, why_len, "copy", s);
    }
    *done = false;
    return 0;
}

int gw_coll_scratch_get(size_t len, int gpu, gw_coll_dev_buf_t *out, char *why, size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_state->mu);
    return g_state->scratch.get(len, gpu, out, why, why_len);
}

void gw_coll_scratch_put(gw_coll_dev_buf_t *buf)
{
    if (!buf->owner) return;
    std::lock_guard<std::mutex> lock(g_state->mu);
    g_state->scratch.put(buf);
}

bool gw_coll_reduce_supported(int op, int type) { return gw_reduce_supported(op, type) != 0; }

int gw_coll_reduce_start(int op, int type, const void *a, const void *b, void *out, size_t count,
                         int gpu, uint64_t *ticket, char *why, size_t why_len)
{
    std::lock_guard<std::mutex> lock(g_state->mu);
    cu::TrackedStream *ts = nullptr;
    if (stream_of(gpu, &ts, why, why_len) != 0) return -1;
    {
        cu::DeviceGuard guard(gpu);
        if (!guard.status()) return fail_status(why, why_len, "reduction", guard.status());
        if (gw_dev_reduce3(op, type, a, b, out, count, ts->handle(), why, why_len) != 0) return -1;
    }
    auto t = ts->mark();
    if (!t) return fail_status(why, why_len, "reduction completion", t.status());
    *ticket = *t;
    return 0;
}

void gw_coll_device_stats(gw_coll_device_stats_t *out)
{
    *out = gw_coll_device_stats_t{};
    if (!g_state) return;
    cu::ClassifierCounters c = g_state->classifier.counters();
    out->host_hits = c.host_hits;
    out->misses = c.misses;
    out->stale = c.stale;
    out->invalidated = c.invalidated;
    out->classified = c.host_hits + c.device_hits + c.misses;
    std::lock_guard<std::mutex> lock(g_state->mu);
    out->pinned_bytes = g_state->staging.pinned();
    out->pinned_lent = g_state->staging.lent();
    out->plain_allocs = g_state->staging.plain();
    out->unmap_hooked = g_state->unmap_hooked;
}

int gw_coll_team_open(int gpu, int rank, int nranks, size_t slot_bytes, double timeout_s,
                      gw_coll_team_t **out, void *desc, char *why, size_t why_len)
{
    *out = nullptr;
    const cu::NvlTeamDesc none = cu::unusable_nvl_team_desc();
    std::memcpy(desc, &none, sizeof(none));
    const uint64_t timeout_ns = static_cast<uint64_t>(timeout_s * 1e9);
    auto t = cu::NvlTeam::open(g_state->driver, gpu, rank, nranks, slot_bytes, timeout_ns);
    if (!t) return fail_status(why, why_len, "NVLink team", t.status());
    auto team = std::make_unique<gw_coll_team>();
    team->team = std::move(*t);
    std::memcpy(desc, &team->team->desc(), sizeof(cu::NvlTeamDesc));
    *out = team.release();
    return 0;
}

int gw_coll_team_connect(gw_coll_team_t *t, const void *descs, const uint32_t *peer_ids,
                         bool shared_gpu, char *why, size_t why_len)
{
    const int n = t->team->nranks();
    std::vector<cu::NvlTeamDesc> all(n);
    for (int r = 0; r < n; ++r) {
        cu::Status s = cu::decode_nvl_team_desc(
            static_cast<const char *>(descs) + r * sizeof(cu::NvlTeamDesc),
            sizeof(cu::NvlTeamDesc), &all[r]);
        if (!s) return fail(why, why_len, "NVLink team: rank %d: %s", r, s.message().c_str());
    }
    t->peer_ids.assign(peer_ids, peer_ids + n);
    std::lock_guard<std::mutex> lock(g_state->mu);
    cu::Status s = t->team->connect(all.data(), all.size(), shared_gpu);
    return s ? 0 : fail_status(why, why_len, "NVLink team", s);
}

void gw_coll_team_close(gw_coll_team_t *t)
{
    if (!t) return;
    gw_coll_team_unmap(t);
    std::lock_guard<std::mutex> lock(g_state->mu);
    delete t;
}

int gw_coll_team_gpu(const gw_coll_team_t *t) { return t->team->device(); }
size_t gw_coll_team_slot_bytes(const gw_coll_team_t *t) { return t->team->slot_bytes(); }

int gw_coll_buffer_describe(const void *ptr, size_t len, void *desc, char *why, size_t why_len)
{
    cu::IpcBlob blob{}; // all zero: no peer accepts it
    int rc = 0;
    cu::MemoryInfo info;
    cu::Status s = g_state->classifier.classify(ptr, len, info);
    if (s) {
        std::lock_guard<std::mutex> lock(g_state->mu);
        s = g_state->exporter.export_range(info, ptr, len, &blob);
    }
    if (!s) {
        blob = cu::IpcBlob{};
        rc = fail_status(why, why_len, "exporting a buffer for NVLink", s);
    }
    std::memcpy(desc, &blob, sizeof(blob));
    return rc;
}

static gw_nvl_coll_t nvl_coll(int coll)
{
    switch (coll) {
    case GW_COLL_TEAM_BCAST: return GW_NVL_BCAST;
    case GW_COLL_TEAM_ALLGATHER: return GW_NVL_ALLGATHER;
    default: return GW_NVL_ALLREDUCE;
    }
}

bool gw_coll_team_reduce_supported(int op, int type) { return gw_nvl_reduce_supported(op, type); }

bool gw_coll_ipc_shared(void) { return pml_ipc().map != nullptr; }

int gw_coll_team_map(gw_coll_team_t *t, const void *in_descs, const void *out_descs, char *why,
                     size_t why_len)
{
    gw_coll_team_unmap(t);
    const int n = t->team->nranks(), me = t->team->rank();
    const PmlIpc &pml = pml_ipc();
    std::lock_guard<std::mutex> lock(g_state->mu);
    for (int k = 0; k < 2; ++k) {
        const void *descs = k == 0 ? in_descs : out_descs;
        if (!descs) continue;
        for (int r = 0; r < n; ++r) {
            if (r == me) continue;
            const char *desc = static_cast<const char *>(descs) + r * sizeof(cu::IpcBlob);
            void *ptr = nullptr;
            int rc = 1;
            if (pml.map) {
                void *lease = nullptr;
                rc = pml.map(t->peer_ids[r], desc, sizeof(cu::IpcBlob), t->team->device(), &ptr,
                             &lease, why, why_len);
                if (0 == rc) t->pml_leases.push_back(lease);
            }
            if (rc < 0) {
                unmap_locked(t);
                return -1;
            }
            if (rc > 0) {
                cu::IpcBlob blob;
                cu::Status s = cu::decode_ipc_blob(desc, sizeof(blob), &blob);
                if (!s) {
                    unmap_locked(t);
                    return fail(why, why_len, "rank %d's buffer cannot be mapped: %s", r,
                                s.message().c_str());
                }
                auto m = g_state->mappings.acquire(t->peer_ids[r], blob, t->team->device());
                if (!m) {
                    unmap_locked(t);
                    return fail_status(why, why_len, "mapping a peer's buffer", m.status());
                }
                ptr = m->ptr();
                t->leases.push_back(std::move(*m));
            }
            if (k == 0) {
                t->peer_in[r] = ptr;
            } else {
                t->peer_out[r] = ptr;
            }
        }
    }
    return 0;
}

void gw_coll_team_unmap(gw_coll_team_t *t)
{
    if (t->leases.empty() && t->pml_leases.empty()) return;
    std::lock_guard<std::mutex> lock(g_state->mu);
    unmap_locked(t);
}

static gw_nvl_call_t nvl_call_of(const gw_coll_team_t *t, const gw_coll_team_call_t *c)
{
    gw_nvl_call_t call{};
    call.coll = nvl_coll(c->coll);
    call.op = c->op;
    call.type = c->type;
    call.in = c->in;
    call.out = c->out;
    call.bytes = c->bytes;
    call.root = c->root;
    call.direct = c->direct;
    if (c->direct) {
        const int me = t->team->rank();
        for (int r = 0; r < t->team->nranks(); ++r) {
            call.peer_in[r] = r == me ? c->in : t->peer_in[r];
            call.peer_out[r] = r == me ? c->out : t->peer_out[r];
        }
    }
    return call;
}

int gw_coll_team_run(gw_coll_team_t *t, const gw_coll_team_call_t *c, char *why, size_t why_len)
{
    cu::Status s = t->team->run(nvl_call_of(t, c));
    gw_coll_team_unmap(t);
    return s ? 0 : fail_status(why, why_len, "NVLink collective", s);
}

int gw_coll_team_start(gw_coll_team_t *t, const gw_coll_team_call_t *c, uint64_t *ticket,
                       char *why, size_t why_len)
{
    if (c->direct) return fail(why, why_len, "NVLink collective: started calls are one-shot");
    cu::Result<uint64_t> r = t->team->launch(nvl_call_of(t, c));
    if (!r) return fail_status(why, why_len, "NVLink collective", r.status());
    *ticket = *r;
    return 0;
}

int gw_coll_team_done(gw_coll_team_t *t, uint64_t ticket, bool query, bool *done, char *why,
                      size_t why_len)
{
    cu::Result<bool> r = t->team->finished(ticket, query);
    if (!r) return fail_status(why, why_len, "NVLink collective", r.status());
    *done = *r;
    return 0;
}

} // extern "C"
