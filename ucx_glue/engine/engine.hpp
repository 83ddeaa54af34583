// The point-to-point engine over UCP tagged messages.
//
// Design decision (docs/design.md, "Matching"): the MPI envelope is the UCX
// tag (wire.hpp), so UCX matches host messages exactly as Open MPI's pml/ucx
// does, with no header and no copy of ours on the fast path. A device buffer
// of the same node travels as a CUDA IPC descriptor: a tagged message on
// the same tag, told apart by its size and magic (wire.hpp, control_kind),
// matched in the same order as every other message from that sender, which
// the receiver turns into a copy out of the sender's GPU memory. No receive lets UCX write a descriptor where the user would see
// it: small receives land in a 256-byte block of the engine's, larger host
// receives keep a copy of the bytes a descriptor would overwrite and put them
// back, and device receives land in host memory first.
//
// A probe that finds a message of a control message's size must read it
// (a descriptor must report the size of the payload it names), so it takes
// the messages of that sender out of UCX, in order, up to that one, and keeps them in the context's queue ("pulled"); every
// receive and probe looks there first. Whatever stays in UCX from a sender
// is later than everything pulled from it, so MPI's order holds.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdarg>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/device_path.hpp"
#include "gpuwire/cuda/shared_staging.hpp"
#include "gpuwire/fabric/congestion_counters.hpp"
#include "gpuwire/fabric/rdma_devices.hpp"
#include "engine/fabric_setup.hpp"
#include "gpuwire/pacing/port_pacer.hpp"
#include "engine/matching.hpp"
#include "engine/protocol.hpp"
#include "engine/wire.hpp"
#include "gpuwire/engine.h"

#include "engine/ops.hpp"

namespace gpuwire::engine {

class Engine {
public:
    static gw_status_t create(const gw_engine_params_t &params, std::unique_ptr<Engine> &out,
                              std::string &why);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    const void *address() const { return address_; }
    size_t address_length() const { return address_length_; }

    // The fast path of progress: UCX, then the rest only when there is any.
    int progress()
    {
        std::unique_lock<EngineLock> guard(lock_);
        int n = static_cast<int>(ucp_worker_progress(worker_));
        if (side_work()) [[unlikely]]
            n += progress_side_work();
        const bool any_done = done_head_ != done_.size();
        guard.unlock();
        if (any_done) run_completions();
        return n;
    }
    void disconnect();
    gw_status_t check_reachable(uint32_t peer, std::string &why); // reach.cpp
    gw_status_t isend(gw_request_t *req, uint32_t peer, uint32_t ctx, int32_t my_rank,
                      int32_t tag, const void *buf, size_t len, unsigned flags) noexcept;
    gw_status_t irecv(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag, void *buf,
                      size_t cap) noexcept;
    gw_status_t isend_layout(gw_request_t *req, uint32_t peer, uint32_t ctx, int32_t my_rank,
                             int32_t tag, const gw_layout_t *layout, unsigned flags);
    gw_status_t irecv_layout(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag,
                             const gw_layout_t *layout);
    gw_status_t ipc_map(uint32_t peer, const void *blob, size_t len, int device, void **ptr,
                        void **lease, std::string &why);
    void ipc_unmap(void *lease);
    int iprobe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info);
    int improbe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info,
                gw_message_t **msg);
    gw_status_t imrecv(gw_request_t *req, gw_message_t *msg, void *buf, size_t cap);
    int cancel_recv(gw_request_t *req);
    void context_release(uint32_t ctx);
    void context_open(uint32_t ctx);
    void stats(gw_engine_stats_t *out) const;
    int is_device_memory(const void *buf, size_t len)
    {
        std::lock_guard<EngineLock> guard(lock_);
        return device_of(buf, len) >= 0;
    }
    int has_device(const char **why_not) const
    {
        if (why_not) *why_not = device_why_.c_str();
        return dev_ != nullptr;
    }

    // Runs the completion callbacks queued so far, without the lock held.
    void run_completions();

private:
    struct Peer {
        ucp_ep_h ep = nullptr;
        bool failed = false;
        // Sender side (its KindHint): this peer takes our large host
        // messages into GPU memory, or our device messages into pageable
        // host memory; they go through the shared slots (small device ones
        // through a pinned bounce buffer as host messages).
        bool into_device = false;
        bool into_host = false;
        // Receiver side: a KindHint of that kind was sent to this peer and
        // not answered since by a shared transfer that shows the sender
        // switched back.
        bool hinted_device = false;
        bool hinted_host = false;
    };
    struct PendingAck {
        uint32_t peer;
        uint64_t sync_id;
    };

    explicit Engine(const gw_engine_params_t &params);
    gw_status_t init(std::string &why);
    gw_status_t create_layout_dts(std::string &why);

    void log(int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    // The endpoint to a peer, made on first use (connect()).
    ucp_ep_h endpoint(uint32_t peer, gw_status_t &status, bool quiet = false)
    {
        Peer &p = peers_[peer];
        if (p.ep && !p.failed) [[likely]] {
            status = GW_OK;
            return p.ep;
        }
        return connect(peer, status, quiet);
    }
    // quiet: the caller reports a failure itself (check_reachable).
    ucp_ep_h connect(uint32_t peer, gw_status_t &status, bool quiet = false);
    Context &context(uint32_t id);
    // Completes req: at once when its callback may run under the engine's
    // lock (GW_REQ_INLINE_CB), else queued for run_completions().
    void complete(gw_request_t *req, gw_status_t status)
    {
        if (req->flags & kReqLayoutStaged) [[unlikely]]
            status = unstage_layout(req, status);
        req->status = status;
        if (req->flags & GW_REQ_INLINE_CB) {
            req->complete_cb(req);
        } else {
            queue_done(req);
        }
    }
    // Out of line: the vector's growth would make complete() too large to
    // inline into the receive's fast path.
    [[gnu::noinline]] void queue_done(gw_request_t *req) { done_.push_back(req); }
    bool side_work() const
    {
        return (dev_ && dev_->busy()) || (cnp_reader_ && pacer_) || !xfers_.empty() ||
               !pending_acks_.empty() || !pending_hints_.empty();
    }
    int progress_side_work();
    // Starts the device copies receives queued (DevicePath::queue_copy).
    void flush_copies()
    {
        if (dev_ && dev_->queued()) dev_->flush_copies();
    }

    // Receive side.
    static ucs_status_t on_sync_ack(void *arg, const void *header, size_t header_length,
                                    void *data, size_t length, const ucp_am_recv_param_t *param);
    static void on_recv_done(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                             void *user_data);
    static void on_send_done(void *request, ucs_status_t status, void *user_data);
    static void on_ack_sent(void *request, ucs_status_t status, void *user_data);
    static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);
    // A process failed (its endpoint's error, pml_gpuwire_err_handling 1):
    // everything that only it could complete ends with GW_ERR_UNREACHABLE.
    void fail_peer(uint32_t peer);
    // Whether (ctx, rank) is a process that failed; false when unknown.
    bool rank_failed(uint32_t ctx, int32_t rank);
    // Ends a chunked transfer early with st: no further chunk starts, chunk
    // receives still posted are cancelled.
    void stop_xfer(Xfer &x, gw_status_t st);
    void refuse_if_gone(RecvOp *op);
    // Peer failure detection on: a receive posted for one process needs an
    // endpoint to it (UCX tells of a failure only through the user's
    // endpoints), and ends at once when that process already failed.
    void watch_sender(RecvOp *op);
    // Makes the endpoint to the process of (ctx, rank) when there is none.
    void watch_rank(uint32_t ctx, int32_t rank);
    // A probe for (ctx, source) that matched nothing: true when source is one
    // process and it failed, so nothing more of it will come.
    bool probe_source_gone(uint32_t ctx, int32_t source);

    // The send path (send_path.cpp): decide() picks the path of a message,
    // once; a starter per path, each called with guard holding the lock,
    // which it releases.
    SendPath decide(uint32_t peer, const void *buf, size_t len, unsigned flags,
                    cuda::MemoryInfo &mi, int &device);
    SendPath staged_path(uint32_t peer, size_t len, int device, unsigned flags);
    SendOp *send_op(gw_request_t *req);
    using Guard = std::unique_lock<EngineLock>;
    gw_status_t start_host(Guard &guard, const SendArgs &a);
    // isend beyond its inline fast path; the fast path's parts (host_path.hpp).
    [[gnu::noinline]] gw_status_t isend_general(gw_request_t *req, uint32_t peer, uint32_t ctx,
                                                int32_t my_rank, int32_t tag, const void *buf,
                                                size_t len, unsigned flags);
    gw_status_t send_host(Guard &guard, gw_request_t *req, ucp_ep_h ep, uint32_t peer,
                          uint64_t wire_tag, const void *buf, size_t len, unsigned flags);
    [[gnu::noinline]] gw_status_t host_kept(ucs_status_ptr_t r, gw_request_t *req, uint32_t peer,
                                            size_t len);
    gw_status_t start_chunked(Guard &guard, const SendArgs &a, int device, bool paced,
                              bool shared, bool sync = false, bool pushable = false);
    // User bytes that would read as a control message (wire.hpp,
    // control_kind) go as a chunked transfer of one chunk.
    gw_status_t start_escaped(Guard &guard, const SendArgs &a, int device);
    gw_status_t start_ipc(Guard &guard, const SendArgs &a, const cuda::MemoryInfo &mi);
    gw_status_t start_ucx_device(Guard &guard, const SendArgs &a);
    gw_status_t start_staged(Guard &guard, const SendArgs &a, SendPath path);
    gw_status_t send_whole(Guard &guard, const SendArgs &a, SendOp *op, const void *payload,
                           size_t payload_len, uint64_t wire_tag, ucp_request_param_t &rp,
                           bool sync);
    void count_host_send(size_t len, bool kept);
    gw_status_t sent_at_once(Guard &guard, gw_request_t *req);
    RecvOp *start_recv(gw_request_t *req, void *buf, size_t cap);
    // Layout receives (layout.cpp): the bytes UCX held back in op->block go
    // to the layout; a control message makes it land whole first.
    bool finish_layout_recv(RecvOp *op, size_t length);
    bool stage_layout(RecvOp *op, size_t length);
    gw_status_t unstage_layout(gw_request_t *req, gw_status_t status);
    // Picks where UCX writes for this receive; false when out of memory.
    bool lands_on_device(uint32_t ctx, int32_t source);
    void order_after_user(int device);
    void order_unordered(int device);
    bool prepare_landing(RecvOp *op);
    // Every receive ends here: inline, one test for the rare bounce buffer.
    void release_landing(RecvOp *op)
    {
        if (op->bounce) [[unlikely]]
            free_bounce(op);
    }
    void free_bounce(RecvOp *op);
    // Posts op into UCX (a fresh receive) or receives a pulled message.
    void post(RecvOp *op, uint32_t ctx, int32_t source, int32_t tag);
    void receive_pulled(RecvOp *op, InboundMsg *m);
    void receive_bytes(RecvOp *op, InboundMsg *m);
    void finish_recv(RecvOp *op, ucs_status_t status, uint64_t sender_tag, size_t length);
    [[gnu::noinline]] void finish_failed(RecvOp *op, ucs_status_t status, size_t length);
    [[gnu::noinline]] gw_status_t finish_on_device(RecvOp *op, uint64_t sender_tag, size_t length);
    [[gnu::noinline]] bool finish_unusual(RecvOp *op, ucs_status_t &status, uint64_t sender_tag,
                                          size_t length);
    // True when the runtime says (ctx, rank) of this tag is process `peer`.
    bool sender_is(uint64_t sender_tag, uint32_t peer);
    void deliver_ipc(RecvOp *op, const DeviceDescriptor &d);
    // Takes one message out of UCX (probe with remove); reads a descriptor
    // at once. nullptr when none matches.
    InboundMsg *pull(uint64_t tag, uint64_t mask);
    // Pulls the messages of (ctx, source) into the context queue, in order,
    // up to the first that matches want_tag; returns that one (queued).
    InboundMsg *pull_prefix(uint32_t ctx, int32_t source, int32_t want_tag);
    void release(InboundMsg *msg);
    void drop_unreceived(InboundMsg *m);
    void drain(ucp_tag_message_h handle, size_t length);
    bool read_device_message(ucs_status_t status, const void *bytes, size_t length,
                             uint64_t sender_tag, InboundMsg &m);
    void send_done(SendOp *op, ucs_status_t status);
    void free_side(SendOp *op);
    // A pinned bounce buffer of at least len bytes for a device message, or
    // nullptr: then the message goes through pageable memory.
    void *lend_bounce(size_t len, int device);
    void flush_acks();
    void send_am(uint32_t peer, unsigned id, const void *header, size_t length);
    void hint_kind(uint32_t peer, uint32_t into);
    void classify_recv(RecvOp *op);
    static ucs_status_t on_kind_hint(void *arg, const void *header, size_t header_length,
                                     void *data, size_t length, const ucp_am_recv_param_t *param);

    // Chunked transfers (chunked.cpp; go-ahead and push: chunked_push.cpp).
    gw_status_t start_chunked_send(SendOp *op, ucp_ep_h ep, uint32_t peer, uint64_t wire_tag,
                                   const void *buf, size_t len, int device, bool paced,
                                   bool shared = false, bool sync = false, bool pushable = false);
    void send_go(Xfer &x, uint64_t xfer_id);
    void offer_push(Xfer &x);
    void start_push(Xfer &x);
    void fail_unstarted(Xfer &x, gw_status_t st);
    void start_chunked_recv(RecvOp *op, const ChunkedHeader &h);
    void advance_xfers();
    bool advance(Xfer &x);
    void start_chunk(Xfer &x, XferSlot &s);
    void chunk_on_wire(Xfer &x, XferSlot &s);
    void chunk_done(XferSlot &s, gw_status_t st);
    static void on_chunk_sent(void *request, ucs_status_t status, void *user_data);
    static void on_go(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                      void *user_data);
    static void on_go_sent(void *request, ucs_status_t status, void *user_data);
    void shared_chunk_received(Xfer &x, XferSlot &s, size_t length, gw_status_t st);
    bool chunk_to_device(Xfer &x, XferSlot &s, const void *src);
    // The outbox, created on first use; nullptr when it cannot be (logged once).
    cuda::SharedOutbox *outbox(int device);
    bool use_shared_staging(uint32_t peer, size_t len, int device);
    static void on_chunk_received(void *request, ucs_status_t status,
                                  const ucp_tag_recv_info_t *info, void *user_data);
    void finish_xfer(Xfer *x);
    void slot_copied(XferSlot &s, bool ok);
    void abandon_xfers();
    void free_abandoned();
    static XferSlot *slot_of_token(void *token);
    bool peer_local(uint32_t peer);
    // A process of another job (gw_engine_params_t.job_peers).
    bool other_job(uint32_t peer) const
    {
        return params_.job_peers != 0 && peer >= params_.job_peers;
    }
    Protocol choose(uint32_t peer, const void *buf, size_t len, cuda::MemoryInfo &mi);
    int device_of(const void *buf, size_t len, bool *pinned = nullptr);
    bool pin_reused(const void *buf, size_t len, int device);
    bool host_pinned(const cuda::MemoryInfo &mi, const void *buf, size_t len, int device);

    gw_engine_params_t params_;
    mutable EngineLock lock_;
    // UCX's parameters of a host send and of a receive (into host memory, or
    // a GPU buffer UCX writes itself), but user_data: written under the lock
    // by send_host and post, read by UCX inside the call only.
    ucp_request_param_t host_send_rp_ = send_param(&Engine::on_send_done, nullptr);
    ucp_request_param_t host_recv_rp_ = recv_param(&Engine::on_recv_done, nullptr);
    ucp_request_param_t device_recv_rp_ = host_recv_rp_; // memory type CUDA (constructor)
    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    // UCX generic datatypes of gw_layout_t sends (state: the layout) and
    // receives (state: the RecvOp).
    ucp_datatype_t layout_send_dt_ = 0;
    ucp_datatype_t layout_recv_dt_ = 0;
    bool layout_dts_ = false;
    ucp_address_t *address_ = nullptr;
    size_t address_length_ = 0;
    std::vector<Peer> peers_;
    bool any_failed_ = false; // some peer failed (fail_peer)
    std::unordered_map<uint32_t, std::unique_ptr<Context>> contexts_;
    // Context ids released whose messages UCX may still hold (context_open).
    std::unordered_set<uint32_t> released_;
    Context *last_context_ = nullptr;
    size_t pulled_ = 0; // messages in the contexts' queues, all contexts
    OrderedQueue<RecvOp> in_ucx_; // receives posted to UCX
    std::vector<Xfer *> xfers_;    // chunked transfers in progress
    std::vector<Xfer *> abandoned_; // at teardown, freed after the worker
    uint64_t next_xfer_id_ = 1;
    size_t recv_posted_bytes_ = 0; // chunk receives posted (recv_window_bytes)
    std::unique_ptr<pacing::SteadyClock> clock_;
    std::optional<pacing::PortPacer> pacer_;
    // The RoCE port's CNP counter, polled from progress() for the pacer.
    std::unique_ptr<fabric::CongestionCounterReader> cnp_reader_;
    FabricSetup fabric_;
    fabric::OnceFilter fabric_once_;
    uint64_t next_cnp_poll_ns_ = 0;
    void poll_congestion();
    gw_status_t start_pacing(std::string &why);
    fabric::LogSink fabric_sink();
    std::unordered_map<uint64_t, SendOp *> sync_waiting_;
    uint64_t next_sync_id_ = 1;
    std::vector<PendingAck> pending_acks_;
    struct PendingHint {
        uint32_t peer;
        uint32_t into;
    };
    std::vector<PendingHint> pending_hints_; // KindHints owed
    // Some peer was ever sent kHintIntoHost: host messages into GPU memory
    // then look up their sender (it may stage small device messages to us).
    bool hinted_host_any_ = false;
    std::vector<gw_request_t *> done_;
    size_t done_head_ = 0;
    gw_engine_stats_t stats_{};

    std::unique_ptr<DevicePath> dev_;
    // Same-node staging slots: this process's, and its peers' mapped here.
    // Released after dev_ (no device copy of theirs is in flight then).
    std::unique_ptr<cuda::SharedOutbox> outbox_;
    std::unique_ptr<cuda::SharedInbox> inbox_;
    bool outbox_failed_ = false;
    std::string device_why_;
    bool closing_ = false; // the destructor runs: no device work starts
    bool bounce_busy_logged_ = false;
    bool bounce_failed_logged_ = false;
    PathConfig path_;
    std::vector<int8_t> local_; // -1 unknown, 0 remote, 1 same node
};

} // namespace gpuwire::engine

#include "engine/host_path.hpp"
