// The point-to-point engine over UCP active messages.
//
// Design decision (ARCHITECTURE.md "Matching across protocols"): gpuwire does
// its own MPI matching over UCX active messages, as ob1 does over BTLs. Every
// message carries a real header (wire.hpp), so control messages of the device
// protocols never land in a user's buffer, probes report the payload's size,
// and a message pulled out of UCX early keeps its place through a per-peer
// sequence number. UCX still picks eager or rendezvous per message (or the
// rndv_threshold parameter forces it), and a rendezvous payload goes straight
// into the user's buffer with ucp_am_recv_data_nbx.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdarg>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/device_path.hpp"
#include "engine/matching.hpp"
#include "engine/protocol.hpp"
#include "engine/wire.hpp"
#include "gpuwire/engine.h"

namespace gpuwire::engine {

class Engine;

// A message that arrived before its receive was posted, or out of order.
struct InboundMsg {
    ListNode link; // first member: OrderedQueue relies on it
    int32_t source = 0;
    int32_t tag = 0;
    uint32_t ctx = 0;
    uint32_t peer = 0;
    uint32_t seq = 0;
    uint64_t sync_id = 0;
    uint32_t flags = 0;
    size_t length = 0;      // payload bytes (for IPC: the bytes the descriptor names)
    size_t wire_length = 0; // bytes at data
    void *data = nullptr;
    enum Kind : uint8_t { OWNED, UCX_DATA, RNDV } kind = OWNED;
};

// Per-operation state kept in gw_request_t::priv.
struct RecvOp {
    ListNode link; // first member
    int32_t want_source;
    int32_t want_tag;
    void *buf;
    size_t cap;
    uint32_t ctx;
    gw_request_t *req;
    Engine *engine;
    int32_t device;   // GPU of buf, or -1 for host memory
    void *bounce;     // host landing buffer of a rendezvous into device memory
    uint32_t ack_peer; // acknowledgement owed once a device copy is done
    uint64_t ack_id;
};

struct SendOp {
    MsgHeader hdr; // UCX reads it until the send completes
    gw_request_t *req;
    Engine *engine;
    void *side;      // heap: IPC descriptor or staged copy, freed when UCX is done
    uint8_t waiting; // bits: kWaitSend, kWaitAck
    gw_status_t status;
};
static_assert(sizeof(RecvOp) <= GW_REQUEST_PRIVATE_BYTES);
static_assert(sizeof(SendOp) <= GW_REQUEST_PRIVATE_BYTES);

using Context = MatchContext<RecvOp, InboundMsg>;

// A lock that costs one predictable branch when the application is not
// multi-threaded.
class EngineLock {
public:
    explicit EngineLock(bool enabled) : enabled_(enabled) {}
    void lock()
    {
        if (enabled_) m_.lock();
    }
    void unlock()
    {
        if (enabled_) m_.unlock();
    }

private:
    bool enabled_;
    std::mutex m_;
};

class Engine {
public:
    static gw_status_t create(const gw_engine_params_t &params, std::unique_ptr<Engine> &out,
                              std::string &why);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    const void *address() const { return address_; }
    size_t address_length() const { return address_length_; }

    int progress();
    void disconnect();
    gw_status_t isend(gw_request_t *req, uint32_t peer, uint32_t ctx, int32_t my_rank,
                      int32_t tag, const void *buf, size_t len, unsigned flags);
    gw_status_t irecv(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag, void *buf,
                      size_t cap);
    int iprobe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info);
    int improbe(uint32_t ctx, int32_t source, int32_t tag, gw_probe_info_t *info,
                gw_message_t **msg);
    gw_status_t imrecv(gw_request_t *req, gw_message_t *msg, void *buf, size_t cap);
    int cancel_recv(gw_request_t *req);
    void context_release(uint32_t ctx);
    void stats(gw_engine_stats_t *out) const;
    int is_device_memory(const void *buf, size_t len)
    {
        lock_.lock();
        int d = device_of(buf, len);
        lock_.unlock();
        return d >= 0;
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
        uint32_t send_seq = 0;
        uint32_t recv_seq = 0;
        std::map<uint32_t, InboundMsg *> early; // arrived before their turn
        bool failed = false;
    };
    struct PendingAck {
        uint32_t peer;
        uint64_t sync_id;
    };

    explicit Engine(const gw_engine_params_t &params);
    gw_status_t init(std::string &why);

    void log(int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    // The endpoint to a peer, made on first use (connect()).
    ucp_ep_h endpoint(uint32_t peer, gw_status_t &status)
    {
        Peer &p = peers_[peer];
        if (p.ep && !p.failed) [[likely]] {
            status = GW_OK;
            return p.ep;
        }
        return connect(peer, status);
    }
    ucp_ep_h connect(uint32_t peer, gw_status_t &status);
    Context &context(uint32_t id);
    void complete(gw_request_t *req, gw_status_t status);

    // Receive side.
    static ucs_status_t on_msg(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param);
    static ucs_status_t on_sync_ack(void *arg, const void *header, size_t header_length,
                                    void *data, size_t length, const ucp_am_recv_param_t *param);
    static void on_rndv_done(void *request, ucs_status_t status, size_t length, void *user_data);
    static void on_send_done(void *request, ucs_status_t status, void *user_data);
    static void on_ack_sent(void *request, ucs_status_t status, void *user_data);
    static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);

    // Handles a message whose turn has come; returns true when it keeps the
    // UCX data (it was queued as unexpected).
    bool dispatch(InboundMsg &view, InboundMsg *stored);
    InboundMsg *store(const InboundMsg &view);
    void release(InboundMsg *msg);
    void deliver(RecvOp *op, InboundMsg &msg, bool in_callback);
    RecvOp *start_recv(gw_request_t *req, uint32_t ctx, int32_t source, int32_t tag, void *buf,
                       size_t cap);
    void deliver_ipc(RecvOp *op, InboundMsg &msg);
    void deliver_eager(RecvOp *op, InboundMsg &msg);
    void send_done(SendOp *op, ucs_status_t status);
    void flush_acks();
    bool peer_local(uint32_t peer);
    Protocol choose(uint32_t peer, const void *buf, size_t len, cuda::MemoryInfo &mi);
    int device_of(const void *buf, size_t len);

    gw_engine_params_t params_;
    mutable EngineLock lock_;
    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    ucp_address_t *address_ = nullptr;
    size_t address_length_ = 0;
    std::vector<Peer> peers_;
    std::unordered_map<uint32_t, std::unique_ptr<Context>> contexts_;
    Context *last_context_ = nullptr;
    std::unordered_map<uint64_t, SendOp *> sync_waiting_;
    uint64_t next_sync_id_ = 1;
    std::vector<PendingAck> pending_acks_;
    std::vector<gw_request_t *> done_;
    size_t done_head_ = 0;
    gw_engine_stats_t stats_{};

    std::unique_ptr<DevicePath> dev_;
    std::string device_why_;
    PathConfig path_;
    std::vector<int8_t> local_; // -1 unknown, 0 remote, 1 same node
};

} // namespace gpuwire::engine
