// The NVLink teams of gpuwire/gpu_device.h. The direct form maps the peers'
// buffers through the process's one IPC mapping cache (the GPU context's,
// which the engine of pml gpuwire uses too): CUDA maps an allocation only
// once per process, so a second cache would fail on a buffer the other has
// mapped (cudaErrorAlreadyMapped).
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu_device_state.hpp"
#include "gpuwire/cuda/ipc_blob.hpp"
#include "gpuwire/cuda/launcher.hpp"
#include "gpuwire/cuda/nvlink_board.hpp"
#include "gpuwire/cuda/nvlink_team.hpp"
#include "gpuwire/gpu_device.h"

namespace cu = gpuwire::cuda;
using gpuwire::cuda::coll::fail_status;
using gpuwire::cuda::coll::g_dev;
using gpuwire::cuda::detail::fail;

struct gw_coll_team {
    std::unique_ptr<cu::NvlTeam> team;
    std::vector<uint32_t> peer_ids;
    std::vector<cu::IpcMapping> leases; // the direct call's peer buffers
    const void *peer_in[GW_NVL_MAX_RANKS] = {};
    void *peer_out[GW_NVL_MAX_RANKS] = {};
    bool one_gpu = false; // every rank on this rank's GPU (connect)
    // The delegated form: the board the ranks share, and the calls this rank
    // launched that it has not seen finish, with the leases on the peers'
    // buffers their kernels use.
    std::unique_ptr<cu::NvlBoard> board;
    struct Launched {
        uint64_t seq;
        std::vector<cu::IpcMapping> leases;
    };
    std::mutex launched_mu; // initiation, MPI's progress and the launcher reach them
    std::deque<Launched> launched;
    // Where gw_coll_team_launcher_mode asks for it: the thread that launches
    // the calls this rank initiates last (made with the board).
    std::unique_ptr<cu::Launcher> launcher;
};

namespace {
// gw_coll_team_launcher_mode: 0 inline, 1 a launcher thread free of the
// rank's binding (on the binding, its spin would take the rank's own core).
std::atomic<int> g_launcher_mode{0};
// The launcher's spin after a launch: back-to-back calls find it awake.
constexpr std::chrono::microseconds kLauncherSpin{200};
} // namespace

static_assert(GW_COLL_TEAM_DESC_BYTES == sizeof(cu::NvlTeamDesc));
static_assert(GW_COLL_BUF_DESC_BYTES == sizeof(cu::IpcBlob));
static_assert(GW_COLL_BUF_DESC_BYTES == cu::NvlBoard::kDescBytes);

extern "C" {

GW_CORE_API int gw_coll_team_open(int gpu, int rank, int nranks, size_t slot_bytes,
                                  double timeout_s, gw_coll_team_t **out, void *desc, char *why,
                                  size_t why_len)
{
    *out = nullptr;
    const cu::NvlTeamDesc none = cu::unusable_nvl_team_desc();
    std::memcpy(desc, &none, sizeof(none));
    const uint64_t timeout_ns = static_cast<uint64_t>(timeout_s * 1e9);
    auto t = cu::NvlTeam::open(g_dev->ctx->driver(), gpu, rank, nranks, slot_bytes, timeout_ns);
    if (!t) return fail_status(why, why_len, "NVLink team", t.status());
    auto team = std::make_unique<gw_coll_team>();
    team->team = std::move(*t);
    std::memcpy(desc, &team->team->desc(), sizeof(cu::NvlTeamDesc));
    *out = team.release();
    return 0;
}

GW_CORE_API int gw_coll_team_connect(gw_coll_team_t *t, const void *descs,
                                     const uint32_t *peer_ids, bool shared_gpu, char *why,
                                     size_t why_len)
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
    t->one_gpu = true;
    for (int r = 1; r < n; ++r) {
        t->one_gpu = t->one_gpu && std::memcmp(all[r].uuid, all[0].uuid, sizeof(all[0].uuid)) == 0;
    }
    std::lock_guard<std::mutex> lock(g_dev->mu);
    cu::Status s = t->team->connect(all.data(), all.size(), shared_gpu);
    return s ? 0 : fail_status(why, why_len, "NVLink team", s);
}

GW_CORE_API void gw_coll_team_close(gw_coll_team_t *t)
{
    if (!t) return;
    t->launcher.reset(); // launches still queued run first: their ranks wait for them
    gw_coll_team_unmap(t);
    if (t->board) {
        // Its stream may still write into the board and use the leases.
        cu::detail::log_failure(cu::LogLevel::warn, "NVLink team", t->team->wait_idle());
        t->launched.clear();
    }
    std::lock_guard<std::mutex> lock(g_dev->mu);
    delete t;
}

GW_CORE_API int gw_coll_team_gpu(const gw_coll_team_t *t) { return t->team->device(); }
GW_CORE_API size_t gw_coll_team_slot_bytes(const gw_coll_team_t *t)
{
    return t->team->slot_bytes();
}

namespace {
// The last descriptions this thread made. A call's buffers come back call
// after call; one is served again only while the driver gives the same
// buffer ID for its address (one attribute query), since a buffer freed and
// allocated again there has a new ID. What it saves: the classifier's and the
// exporter's locked lookups on every delegated call's initiation.
struct DescMemo {
    const void *ptr = nullptr;
    size_t len = 0;
    uint64_t buffer_id = 0; // 0: empty
    cu::IpcBlob blob{};
};
constexpr unsigned kDescMemo = 4;
thread_local DescMemo t_desc_memo[kDescMemo];
thread_local unsigned t_desc_next = 0;

const cu::IpcBlob *desc_memo_find(const void *ptr, size_t len)
{
    for (const DescMemo &m : t_desc_memo) {
        if (m.buffer_id == 0 || m.ptr != ptr || m.len != len) continue;
        uint64_t id = 0;
        if (!g_dev->ctx->driver().buffer_id(reinterpret_cast<uintptr_t>(ptr), &id)) return nullptr;
        return id == m.buffer_id ? &m.blob : nullptr;
    }
    return nullptr;
}

void desc_memo_keep(const void *ptr, size_t len, uint64_t buffer_id, const cu::IpcBlob &blob)
{
    for (DescMemo &m : t_desc_memo) {
        if (m.ptr == ptr && m.len == len) {
            m = DescMemo{ptr, len, buffer_id, blob};
            return;
        }
    }
    t_desc_memo[t_desc_next++ % kDescMemo] = DescMemo{ptr, len, buffer_id, blob};
}
} // namespace

GW_CORE_API int gw_coll_buffer_describe(const void *ptr, size_t len, void *desc, char *why,
                                        size_t why_len)
{
    if (const cu::IpcBlob *known = desc_memo_find(ptr, len)) {
        std::memcpy(desc, known, sizeof(*known));
        return 0;
    }
    cu::IpcBlob blob{}; // all zero: no peer accepts it
    int rc = 0;
    cu::MemoryInfo info;
    cu::Status s = g_dev->ctx->classifier().classify(ptr, len, info);
    if (s) s = g_dev->ctx->export_range(info, ptr, len, &blob);
    if (!s) {
        blob = cu::IpcBlob{};
        rc = fail_status(why, why_len, "exporting a buffer for NVLink", s);
    } else {
        desc_memo_keep(ptr, len, info.buffer_id, blob);
    }
    std::memcpy(desc, &blob, sizeof(blob));
    return rc;
}

// A single peer's buffer outside a team: the lease keeps the cache's entry
// (refcounted, so never evicted) until unmap.
struct gw_coll_peer_mapping {
    cu::IpcMapping lease;
};

GW_CORE_API int gw_coll_peer_map(const void *desc, uint32_t peer_id,
                                 gw_coll_peer_mapping_t **out, void **ptr, int *gpu, char *why,
                                 size_t why_len)
{
    *out = nullptr;
    cu::IpcBlob blob;
    cu::Status s = cu::decode_ipc_blob(desc, sizeof(blob), &blob);
    if (!s) return fail(why, why_len, "the peer's buffer cannot be mapped: %s", s.message().c_str());
    // As pml gpuwire's receiver: the peer's GPU where this process sees it.
    int device = g_dev->ctx->device_of_uuid(blob.device_uuid);
    if (device < 0) device = 0;
    auto m = g_dev->ctx->mappings().acquire(peer_id, blob, device); // locks itself
    if (!m) return fail_status(why, why_len, "mapping a peer's buffer", m.status());
    auto held = std::make_unique<gw_coll_peer_mapping>();
    held->lease = std::move(*m);
    *ptr = held->lease.ptr();
    *gpu = device;
    *out = held.release();
    return 0;
}

GW_CORE_API void gw_coll_peer_unmap(gw_coll_peer_mapping_t *m) { delete m; }

static gw_nvl_coll_t nvl_coll(int coll)
{
    switch (coll) {
    case GW_COLL_TEAM_BCAST: return GW_NVL_BCAST;
    case GW_COLL_TEAM_ALLGATHER: return GW_NVL_ALLGATHER;
    default: return GW_NVL_ALLREDUCE;
    }
}

GW_CORE_API bool gw_coll_team_reduce_supported(int op, int type)
{
    return gw_nvl_reduce_supported(op, type);
}

GW_CORE_API bool gw_coll_ipc_shared(void) { return true; }

GW_CORE_API int gw_coll_team_map(gw_coll_team_t *t, const void *in_descs, const void *out_descs,
                                 char *why, size_t why_len)
{
    gw_coll_team_unmap(t);
    const int n = t->team->nranks(), me = t->team->rank();
    cu::IpcMappingCache &cache = g_dev->ctx->mappings(); // locks itself
    for (int k = 0; k < 2; ++k) {
        const void *descs = k == 0 ? in_descs : out_descs;
        if (!descs) continue;
        for (int r = 0; r < n; ++r) {
            if (r == me) continue;
            const char *desc = static_cast<const char *>(descs) + r * sizeof(cu::IpcBlob);
            cu::IpcBlob blob;
            cu::Status s = cu::decode_ipc_blob(desc, sizeof(blob), &blob);
            if (!s) {
                t->leases.clear();
                return fail(why, why_len, "rank %d's buffer cannot be mapped: %s", r,
                            s.message().c_str());
            }
            auto m = cache.acquire(t->peer_ids[r], blob, t->team->device());
            if (!m) {
                t->leases.clear();
                return fail_status(why, why_len, "mapping a peer's buffer", m.status());
            }
            void *ptr = m->ptr();
            t->leases.push_back(std::move(*m));
            if (k == 0) {
                t->peer_in[r] = ptr;
            } else {
                t->peer_out[r] = ptr;
            }
        }
    }
    return 0;
}

GW_CORE_API void gw_coll_team_unmap(gw_coll_team_t *t) { t->leases.clear(); }

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

GW_CORE_API int gw_coll_team_run(gw_coll_team_t *t, const gw_coll_team_call_t *c, char *why,
                                 size_t why_len)
{
    cu::Status s = t->team->run(nvl_call_of(t, c));
    gw_coll_team_unmap(t);
    return s ? 0 : fail_status(why, why_len, "NVLink collective", s);
}

GW_CORE_API int gw_coll_team_start(gw_coll_team_t *t, const gw_coll_team_call_t *c,
                                   uint64_t *ticket, char *why, size_t why_len)
{
    if (c->direct) return fail(why, why_len, "NVLink collective: started calls are one-shot");
    cu::Result<uint64_t> r = t->team->launch(nvl_call_of(t, c));
    if (!r) return fail_status(why, why_len, "NVLink collective", r.status());
    *ticket = *r;
    return 0;
}

GW_CORE_API int gw_coll_team_done(gw_coll_team_t *t, uint64_t ticket, bool query, bool *done,
                                  char *why, size_t why_len)
{
    cu::Result<bool> r = t->team->finished(ticket, query);
    if (!r) return fail_status(why, why_len, "NVLink collective", r.status());
    *done = *r;
    return 0;
}

GW_CORE_API bool gw_coll_team_one_gpu(const gw_coll_team_t *t) { return t->one_gpu; }

GW_CORE_API int gw_coll_team_board_open(gw_coll_team_t *t, const char *name, bool create,
                                        char *why, size_t why_len)
{
    auto b = cu::NvlBoard::open(name, create, t->team->nranks(), t->team->device());
    if (!b) return fail(why, why_len, "NVLink board %s: %s", name, b.status().message().c_str());
    t->board = std::move(*b);
    if (1 == g_launcher_mode.load(std::memory_order_relaxed) && !t->launcher) {
        // The launcher starts here, not at the first delegated call: a
        // thread's first CUDA calls cost milliseconds under MPS, which the
        // first calls of the application would otherwise wait for.
        t->launcher = std::make_unique<cu::Launcher>(kLauncherSpin, true);
        t->launcher->submit([t] {
            cu::detail::log_failure(cu::LogLevel::warn, "NVLink launcher", t->team->stream_status());
        });
        t->launcher->drain();
    }
    return 0;
}

GW_CORE_API void gw_coll_team_board_unlink(const char *name) { cu::NvlBoard::unlink(name); }

GW_CORE_API void gw_coll_team_board_close(gw_coll_team_t *t) { t->board.reset(); }

/* Marks call seq failed for every rank (the launcher's CPU: no kernel runs). */
static void board_fail(const cu::NvlBoard &b, uint64_t seq)
{
    __atomic_store_n(b.done(seq), (seq << 1) | 1, __ATOMIC_RELEASE);
}

/* Lets go of the leases of the calls this rank launched that have finished
 * (their completion word written: done, or failed). */
static void release_finished_locked(gw_coll_team_t *t)
{
    const cu::NvlBoard &b = *t->board;
    while (!t->launched.empty() &&
           (__atomic_load_n(b.done(t->launched.front().seq), __ATOMIC_ACQUIRE) >> 1) >=
               t->launched.front().seq) {
        t->launched.pop_front();
    }
}

static void release_finished(gw_coll_team_t *t)
{
    std::lock_guard<std::mutex> lock(t->launched_mu);
    release_finished_locked(t);
}

/* Rank r's buffer of a delegated call, as this process addresses it. */
static int board_map(gw_coll_team_t *t, const char *desc, int r, void **ptr,
                     std::vector<cu::IpcMapping> &leases, char *why, size_t why_len)
{
    cu::IpcBlob blob;
    cu::Status s = cu::decode_ipc_blob(desc, sizeof(blob), &blob);
    if (!s) {
        return fail(why, why_len, "rank %d's buffer cannot be mapped (%s): it could not take part",
                    r, s.message().c_str());
    }
    auto m = g_dev->ctx->mappings().acquire(t->peer_ids[r], blob, t->team->device());
    if (!m) return fail_status(why, why_len, "mapping a peer's buffer", m.status());
    *ptr = m->ptr();
    leases.push_back(std::move(*m));
    return 0;
}

/* Maps the other ranks' buffers of call seq (their descriptions on the
 * board) into call, and launches it: the kernel, then the completion word.
 * On failure the call is marked failed for every rank. */
static int launch_delegated(gw_coll_team_t *t, uint64_t seq, gw_nvl_all_call_t call, bool need_in,
                            char *why, size_t why_len)
{
    const cu::NvlBoard &b = *t->board;
    const int n = t->team->nranks(), me = t->team->rank();
    // A call launched earlier may have finished unseen by this rank's
    // completion checks: its leases go first, since a peer may have freed
    // such a buffer and now posts a new one at the same address, which CUDA
    // refuses to map while the old mapping stays open (cudaErrorAlreadyMapped).
    release_finished(t);
    std::vector<cu::IpcMapping> leases;
    for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        void *in = nullptr, *out = nullptr;
        int rc = need_in ? board_map(t, b.in_desc(seq, r), r, &in, leases, why, why_len) : 0;
        if (0 == rc) rc = board_map(t, b.out_desc(seq, r), r, &out, leases, why, why_len);
        if (0 != rc) {
            board_fail(b, seq);
            return -1;
        }
        call.in[r] = in;
        call.out[r] = out;
    }
    // Listed before the launch: once the completion word is written, a
    // completion check that sees it finds the call here and lets its leases
    // go (listed after, from the launcher thread, they outlived the call).
    {
        std::lock_guard<std::mutex> lock(t->launched_mu);
        t->launched.push_back({seq, std::move(leases)});
    }
    cu::Status s = t->team->launch_all(call, b.done_device(seq), seq << 1);
    if (!s) {
        // The kernel may be queued without its completion word: the stream
        // is given up on (every later launch fails too). The failure mark
        // ends the call, and its listing with it.
        board_fail(b, seq);
        return fail_status(why, why_len, "NVLink delegated call", s);
    }
    return 0;
}

GW_CORE_API void gw_coll_team_launcher_mode(int mode)
{
    g_launcher_mode.store(mode, std::memory_order_relaxed);
}

GW_CORE_API int gw_coll_team_post(gw_coll_team_t *t, uint64_t seq, const gw_coll_team_call_t *c,
                                  const void *in_desc, const void *out_desc, bool *launched,
                                  char *why, size_t why_len)
{
    *launched = false;
    if (!t->board) return fail(why, why_len, "NVLink team: no board for delegated calls");
    const cu::NvlBoard &b = *t->board;
    const uint64_t K = cu::NvlBoard::kEntries;
    const int n = t->team->nranks(), me = t->team->rank();
    if (seq > K && (__atomic_load_n(b.done(seq), __ATOMIC_ACQUIRE) >> 1) < seq - K) return 1;
    static const char none[GW_COLL_BUF_DESC_BYTES] = {}; // no peer accepts it
    std::memcpy(b.in_desc(seq, me), in_desc ? in_desc : none, GW_COLL_BUF_DESC_BYTES);
    std::memcpy(b.out_desc(seq, me), out_desc ? out_desc : none, GW_COLL_BUF_DESC_BYTES);
    const uint64_t before = __atomic_fetch_add(b.arrived(seq), 1, __ATOMIC_ACQ_REL);
    if (before != ((seq - 1) / K) * n + n - 1) return 0; // a later rank launches it
    *launched = true;
    if (!in_desc || !out_desc) {
        board_fail(b, seq);
        return fail(why, why_len, "this rank could not take part");
    }
    gw_nvl_all_call_t call{};
    call.coll = nvl_coll(c->coll);
    call.op = c->op;
    call.type = c->type;
    call.bytes = c->bytes;
    call.root = c->root;
    call.nranks = n;
    call.in[me] = c->in;
    call.out[me] = c->out;
    const bool need_in = GW_COLL_TEAM_BCAST != c->coll;
    const int mode = g_launcher_mode.load(std::memory_order_relaxed);
    if (0 == mode) return launch_delegated(t, seq, call, need_in, why, why_len);
    // The launch goes to the launcher; a failure there marks the call failed
    // for every rank (each sees it at its completion check), and the
    // launcher names the cause.
    if (!t->launcher) t->launcher = std::make_unique<cu::Launcher>(kLauncherSpin, true);
    t->launcher->submit([t, seq, call, need_in] {
        char lwhy[256] = "";
        if (0 != launch_delegated(t, seq, call, need_in, lwhy, sizeof(lwhy))) {
            cu::detail::log(cu::LogLevel::error, "NVLink delegated call %llu: %s",
                            static_cast<unsigned long long>(seq), lwhy);
        }
    });
    return 0;
}

GW_CORE_API int gw_coll_team_posted_done(gw_coll_team_t *t, uint64_t seq, bool query, bool *done,
                                         char *why, size_t why_len)
{
    const cu::NvlBoard &b = *t->board;
    {
        std::lock_guard<std::mutex> lock(t->launched_mu);
        release_finished_locked(t);
        if (query && !t->launched.empty()) {
            cu::Status s = t->team->stream_status();
            if (!s) {
                for (const auto &l : t->launched) board_fail(b, l.seq);
                return fail_status(why, why_len, "NVLink delegated call", s);
            }
        }
    }
    const uint64_t d = __atomic_load_n(b.done(seq), __ATOMIC_ACQUIRE);
    if ((d >> 1) < seq) {
        *done = false;
        return 0;
    }
    if ((d >> 1) == seq && (d & 1) != 0) {
        return fail(why, why_len, "the rank that launched it failed (its message names the cause)");
    }
    // Finished: where this rank launched it, its leases go now, before the
    // application may free the buffers and a peer post new ones there.
    release_finished(t);
    *done = true;
    return 0;
}

} // extern "C"
