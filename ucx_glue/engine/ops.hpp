// The engine's records of operations in flight (the private part of a
// gw_request_t, chunked transfers), the path a send takes, and the engine's
// lock: what engine.hpp's Engine class is made of.
#pragma once

#include <ucp/api/ucp.h>

#include <mutex>

#include "engine/device_path.hpp"
#include "engine/matching.hpp"
#include "engine/protocol.hpp"
#include "engine/wire.hpp"
#include "gpuwire/engine.h"

namespace gpuwire::engine {
class Engine;

// A message taken out of UCX by a probe (see above): still in UCX's hands
// (UCX), or a device descriptor already read (DESC).
struct InboundMsg {
    ListNode link; // first member: OrderedQueue relies on it
    int32_t source = 0;
    int32_t tag = 0;
    uint32_t ctx = 0;
    size_t length = 0; // payload bytes (for DESC: the bytes the descriptor names)
    ucp_tag_message_h handle = nullptr;
    uint64_t sender_tag = 0;
    // BYTES: user bytes of a control message's size, read to tell them apart.
    enum Kind : uint8_t { UCX, DESC, CHUNKED, BYTES } kind = UCX;
    DeviceDescriptor desc;
    ChunkedHeader chunked;
    alignas(8) unsigned char bytes[sizeof(DeviceDescriptor)];
};

// Bytes of the engine's landing blocks: a descriptor, or a whole small
// message, fits in one.
constexpr size_t kBlockBytes = 256;
static_assert(kBlockBytes >= sizeof(DeviceDescriptor));

// Per-operation state kept in gw_request_t::priv.
struct RecvOp {
    ListNode link;     // first member: in the engine's list of receives posted to UCX
    void *buf;
    size_t cap;
    gw_request_t *req;
    Engine *engine;
    void *ucx_req;     // UCX's request while the receive is posted there
    void *landing;     // where UCX writes: buf, block or bounce
    void *bounce;      // host landing of a device receive larger than a block
    uint64_t ack_id;   // acknowledgement owed once a device copy is done
    uint32_t ack_peer;
    int32_t device;    // GPU of buf, or -1 for host memory
    uint8_t done;      // UCX reported completion
    uint8_t saved;     // block holds the head of buf (landing == buf)
    uint8_t pinned;    // bounce is lent by the device path's pinned cache (else malloc)
    uint8_t direct;    // a device buffer UCX may write itself (Engine::lands_on_device)
    uint8_t host_pinned; // buf is pinned host memory (a DMA reaches it directly)
    // A receive into a gw_layout_t (then landing is that layout): 1 while UCX
    // unpacks into it, 2 once a control message made it land whole in buf
    // (kReqLayoutStaged), unpacked from there at completion.
    uint8_t layout;
    // The sender's process failed before this receive matched anything
    // (Engine::fail_peer): its cancellation completes it as unreachable.
    uint8_t peer_gone;
    // What the receive asked for (Engine::fail_peer finds the receives only
    // one process can satisfy).
    uint32_t ctx;
    int32_t source;
    // Landing zone of a small receive, or the saved head of buf: inside the
    // request, so a receive allocates nothing.
    alignas(16) unsigned char block[kBlockBytes];
};

// An engine-internal bit of gw_request_t::flags: a layout receive landed
// whole in a staging buffer (RecvOp::layout == 2), unpacked at completion.
constexpr unsigned kReqLayoutStaged = 0x80000000u;

// SendOp::waiting bits.
constexpr uint8_t kWaitSend = 0x1; // UCX has not finished the send
constexpr uint8_t kWaitAck = 0x2;  // the receiver's copy is not acknowledged yet
constexpr uint8_t kWaitXfer = 0x4; // chunks of a chunked transfer are still moving

// UCX status -> engine status.
inline gw_status_t from_ucs(ucs_status_t s)
{
    switch (s) {
    case UCS_OK: return GW_OK;
    case UCS_ERR_NO_MEMORY: return GW_ERR_NO_MEMORY;
    case UCS_ERR_CANCELED: return GW_ERR_CANCELED;
    case UCS_ERR_MESSAGE_TRUNCATED: return GW_ERR_TRUNCATE;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET: return GW_ERR_UNREACHABLE;
    default: return GW_ERR_TRANSPORT;
    }
}

// Parameters of a tagged receive into host memory. UCX 1.13 does not report
// the sender's tag on an immediate completion, so the callback is asked for
// always (it may run inside the call).
inline ucp_request_param_t recv_param(ucp_tag_recv_nbx_callback_t cb, void *user)
{
    ucp_request_param_t rp;
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    rp.cb.recv = cb;
    rp.user_data = user;
    rp.memory_type = UCS_MEMORY_TYPE_HOST;
    return rp;
}

// Parameters of a tagged send from host memory.
inline ucp_request_param_t send_param(ucp_send_nbx_callback_t cb, void *user)
{
    ucp_request_param_t rp;
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    rp.cb.send = cb;
    rp.user_data = user;
    rp.memory_type = UCS_MEMORY_TYPE_HOST;
    return rp;
}

struct SendOp {
    gw_request_t *req;
    Engine *engine;
    void *side;      // heap: device descriptor or staged copy, freed when UCX is done
    uint64_t sync_id;
    uint8_t waiting; // bits: kWaitSend, kWaitAck
    uint8_t desc;    // side is a DeviceDescriptor
    gw_status_t status;
    uint8_t pinned;  // side is a staged copy lent by the pinned cache (else malloc)
    uint32_t peer = 0; // kWaitAck: the process whose acknowledgement it waits for
};
static_assert(sizeof(RecvOp) <= GW_REQUEST_PRIVATE_BYTES);
static_assert(sizeof(SendOp) <= GW_REQUEST_PRIVATE_BYTES);

using Context = MatchContext<RecvOp, InboundMsg>;

// A chunked transfer (wire.hpp, ChunkedHeader) in progress, at either end.
// Up to kXferSlots chunks are in flight; each slot is one chunk's state.
constexpr unsigned kXferSlots = 4;
struct Xfer;
struct XferSlot {
    Xfer *x;
    cuda::PinnedChunk pinned; // device side: the chunk's host copy
    void *heap = nullptr;     // ... in plain host memory when no pinned chunk was free
    void *shared = nullptr;   // ... in a shared staging slot (sending: out_slot of the outbox)
    int out_slot = -1;
    void *host() const { return heap ? heap : shared ? shared : pinned.data(); }
    SharedChunkDesc desc{};   // shared staging: the chunk message (sent or received)
    size_t off = 0, n = 0;
    void *ucx_req = nullptr; // receiving: UCX's request while posted
    bool counted = false;    // receiving: in the engine's posted bytes
    bool push_failed = false; // sending, pushed: the copy into the receiver's buffer failed
    enum State : uint8_t { FREE, COPYING, WIRE } state = FREE;
};
struct Xfer {
    Engine *engine;
    bool sending;
    gw_request_t *req;
    SendOp *sop;       // sending: the operation completed at the end
    RecvOp *rop;       // receiving
    ucp_ep_h ep;       // sending
    char *buf;         // user memory (host or device)
    size_t len, chunk;
    size_t next = 0;   // next chunk offset to start
    size_t done = 0;   // bytes finished (sent / landed and copied)
    uint64_t tag;      // UCX tag of the chunks
    int device;        // GPU of buf, -1 host memory
    bool discard;      // receiving a truncated message: chunks go nowhere
    bool paced;        // sending: chunks pass the pacer
    bool shared = false; // chunks through the sender's shared staging slots
    bool waits_go = false; // sending: no chunk before the GoMessage (shared, or synchronous)
    bool go = false;     // waits_go: the receiver has matched (GoMessage)
    void *go_req = nullptr; // UCX's request of the GoMessage (received or sent) while pending
    uint32_t peer = 0;   // the other process
    // Host memory into GPU memory, pushed (kChunkedPushable, kGoPush): the
    // sender copies each chunk into the receiver's buffer, mapped here.
    bool pushable = false;     // sending: offered in the header
    bool push_offered = false; // receiving: the go-ahead described the buffer
    bool into_pinned = false;  // receiving: into pinned host memory (kGoIntoPinned)
    int push_state = 0;        // sending: 0 no, 1 described, 2 mapped, -1 through the slots
    int push_device = -1;      // sending: the GPU of the mapping
    cuda::IpcMapping push_map;
    GoPush go_msg{};           // .go alone unless kGoPush
    void *scratch = nullptr; // discarding: where the chunks land
    gw_status_t status = GW_OK;
    XferSlot slots[kXferSlots];
};

// Where a message goes (Engine::decide, send_path.cpp).
enum class SendPath : uint8_t {
    host,           // the bytes to UCX as they are (eager or rendezvous)
    host_paced,     // host, large, to another node: chunks the pacer admits
    host_shared,    // host, to a receiver that takes them into GPU memory: shared slots
    ipc,            // same node, device memory: a CUDA IPC descriptor
    ucx_device,     // other node, device memory: UCX moves it (GPUDirect RDMA)
    staged_shared,  // device memory through the shared staging slots
    staged_chunked, // device memory through pinned chunks
    staged_whole,   // device memory copied whole into host memory, sent as host data
};

// The arguments of one send, as the starters take them.
struct SendArgs {
    gw_request_t *req;
    ucp_ep_h ep;
    uint32_t peer;
    uint64_t wire_tag;
    const void *buf;
    size_t len;
    unsigned flags;
    int device; // GPU of buf, -1 for host memory
};

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

} // namespace gpuwire::engine
