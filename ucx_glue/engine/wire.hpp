// Wire formats of the engine's active messages. Every struct is trivially
// copyable, fixed-size and checked with static_assert; a receiver validates
// lengths and indices before it uses anything (the bytes come from another
// process).
//
// AM_MSG header (32 bytes), followed by the payload (eager) or announcing it
// (UCX rendezvous):
//
//   0          4          8          12         16
//   +----------+----------+----------+----------+
//   |   ctx    | src_rank |   tag    | src_peer |
//   +----------+----------+----------+----------+
//   |   seq    |  flags   |       sync_id       |
//   +----------+----------+---------------------+
//   16         20         24                    32
//
//   ctx      communicator context id
//   src_rank sender's rank in that communicator
//   tag      MPI tag (negative: internal to Open MPI's collectives)
//   src_peer sender's process index, range-checked by the receiver
//   seq      per (sender, receiver) sequence number: restores send order
//   sync_id  nonzero: the sender waits for AM_SYNC_ACK carrying it
//
//   flags    kFlagSync: synchronous send; kFlagIpc: the payload is a CUDA IPC
//            descriptor (cuda/ipc_blob.hpp) of the real payload, which the
//            receiver copies from the mapping, then acknowledges with sync_id
//
// AM_SYNC_ACK header (8 bytes): the sync_id of the matched message (for an
// IPC message: sent once the receiver's copy is done, so the sender may reuse
// its buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace gpuwire::engine {

enum AmId : unsigned {
    AM_MSG = 1,
    AM_SYNC_ACK = 2,
};

constexpr uint32_t kFlagSync = 0x1;
constexpr uint32_t kFlagIpc = 0x2;

struct MsgHeader {
    uint32_t ctx;
    int32_t src_rank;
    int32_t tag;
    uint32_t src_peer;
    uint32_t seq;
    uint32_t flags;
    uint64_t sync_id;
};
static_assert(sizeof(MsgHeader) == 32);
static_assert(std::is_trivially_copyable_v<MsgHeader>);

// Reads a message header from untrusted bytes: exact size only. What the
// fields mean is checked by the receiver against its own state (process
// count, sequence numbers); nothing here trusts them.
inline bool decode_msg_header(const void *bytes, size_t length, MsgHeader *out)
{
    if (bytes == nullptr || length != sizeof(MsgHeader)) return false;
    std::memcpy(out, bytes, sizeof(MsgHeader));
    return true;
}

struct SyncAckHeader {
    uint64_t sync_id;
};
static_assert(sizeof(SyncAckHeader) == 8);
static_assert(std::is_trivially_copyable_v<SyncAckHeader>);

inline bool decode_sync_ack(const void *bytes, size_t length, SyncAckHeader *out)
{
    if (bytes == nullptr || length != sizeof(SyncAckHeader)) return false;
    std::memcpy(out, bytes, sizeof(SyncAckHeader));
    return true;
}

} // namespace gpuwire::engine
