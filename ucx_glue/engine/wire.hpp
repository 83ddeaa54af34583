// What the engine puts on the wire.
//
// Point-to-point messages are UCX tagged messages; the MPI envelope lives in
// the 64-bit UCX tag, so a host message is exactly the user's bytes and UCX
// matches it (posted receives, unexpected queue, eager or rendezvous):
//
//   63  62            44 43            24 23             0
//   +--+----------------+----------------+----------------+
//   |0 | ctx (19 bits)  | src_rank (20)  | tag (24, signed)|
//   +--+----------------+----------------+----------------+
//
//   0        always clear, and in every receive's mask: a receive for one
//            source and one tag has UCX's full mask, which UCX looks up in a
//            hash (its unexpected messages, its posted receives) where any
//            other mask makes it scan all of them
//   ctx      communicator context id       (< 2^19, checked by the caller)
//   src_rank sender's rank in that context (< 2^20)
//   tag      MPI tag; negative tags are Open MPI's internal ones. A receive
//            for any tag matches only tags whose bit 23 is clear. Internal
//            tags below the field's range are folded into it on entry
//            (fold_tag).
//
// The engine's own messages on a communicator's tags (control messages)
// travel in the same order UCX keeps per endpoint as the user's, which is
// MPI's ordering rule across protocols. They are told from user bytes by
// their exact size and a magic (control_kind):
//
// DeviceDescriptor (152 bytes, the IPC blob's magic "GWIP" at byte 16): the
// sender's process index, the id the receiver acknowledges once its copy is
// done (AM_SYNC_ACK, an active message: acknowledgements need no ordering),
// and the IPC blob (cuda/ipc_blob.hpp) naming the payload in the sender's GPU
// memory.
//
// ChunkedHeader (32 bytes, magic "GWCH" at byte 0): the payload follows in
// chunks of chunk_bytes (the last one shorter), as tagged messages on context
// kChunkCtx (never a communicator's), rank field = the sender's process
// index, tag = the low 23 bits of xfer_id. UCX keeps them in order; the
// receiver posts them into the user's buffer (host) or into pinned slots it
// copies to the GPU. Used for device memory staged through pinned host
// memory, for paced sends, and for user bytes that would read as a control
// message: a host message of 32 or 152 bytes with that magic goes as a
// chunked transfer (Engine::start_escaped), so no user message is ever taken
// for one of the engine's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpuwire/cuda/ipc_blob.hpp"

namespace gpuwire::engine {

constexpr unsigned kTagBits = 24;
constexpr unsigned kRankBits = 20;
constexpr unsigned kCtxBits = 19;
constexpr uint64_t kSpareBit = 1ull << 63; // always 0 on the wire
constexpr uint64_t kFullMask = ~uint64_t(0); // UCP_TAG_MASK_FULL
constexpr uint64_t kTagMask = (1ull << kTagBits) - 1;
constexpr uint64_t kTagSignBit = 1ull << (kTagBits - 1);
constexpr uint64_t kRankMask = ((1ull << kRankBits) - 1) << kTagBits;
constexpr uint64_t kCtxMask = ((1ull << kCtxBits) - 1) << (kTagBits + kRankBits);
constexpr uint32_t kMaxCtx = (1u << kCtxBits) - 1;
constexpr uint32_t kChunkCtx = kMaxCtx; // chunks of chunked transfers only
constexpr int32_t kMaxRank = (1 << kRankBits) - 1;
constexpr int32_t kMaxTag = (1 << (kTagBits - 1)) - 1;
static_assert(kTagBits + kRankBits + kCtxBits == 63);
static_assert((kSpareBit | kCtxMask | kRankMask | kTagMask) == kFullMask);

// Open MPI's internal tags reach far below the field: libnbc gives each
// non-blocking collective of a communicator the next tag down from -27 to
// -INT_MAX/2 before it starts again, so after 2^23 of them its tags would
// lose their high bits, and a truncated tag can read as a user's (bit 23
// clear: an MPI_ANY_TAG receive takes it). Tags below the field's range fold
// back onto [kMinTag, kFoldTop], below every fixed internal tag (coll's
// blocking tags, the communicator's CID agreement near -31080). Two tags
// 2^23 - 2^16 apart then share a value, which matters only for two of
// libnbc's collectives that many calls apart in flight at once on one
// communicator. The engine's entry points fold (capi.cpp), so every tag
// inside the engine, its own queues' included, is in the field's range.
constexpr int32_t kMinTag = -(1 << (kTagBits - 1));
constexpr int32_t kFoldTop = -(1 << 16);
constexpr int32_t fold_tag(int32_t tag)
{
    if (tag >= kMinTag) return tag;
    const int64_t span = int64_t(kFoldTop) - kMinTag + 1;
    return int32_t(kFoldTop - (int64_t(kFoldTop) - tag) % span);
}

constexpr uint64_t make_send_tag(uint32_t ctx, int32_t rank, int32_t tag)
{
    return (uint64_t(ctx) << (kTagBits + kRankBits)) |
           (uint64_t(uint32_t(rank)) << kTagBits & kRankMask) | (uint64_t(uint32_t(tag)) & kTagMask);
}

// Tag and mask of a receive; source and tag may be -1 (any).
constexpr void make_recv_tag(uint32_t ctx, int32_t source, int32_t tag, bool any_tag,
                             uint64_t &out_tag, uint64_t &out_mask)
{
    out_tag = uint64_t(ctx) << (kTagBits + kRankBits);
    out_mask = kSpareBit | kCtxMask;
    if (source >= 0) {
        out_tag |= uint64_t(uint32_t(source)) << kTagBits & kRankMask;
        out_mask |= kRankMask;
    }
    if (any_tag) {
        out_mask |= kTagSignBit; // tag >= 0
    } else {
        out_tag |= uint64_t(uint32_t(tag)) & kTagMask;
        out_mask |= kTagMask;
    }
}

constexpr int32_t tag_of(uint64_t t)
{
    uint32_t v = uint32_t(t & kTagMask);
    return (v & kTagSignBit) ? int32_t(v | ~uint32_t(kTagMask)) : int32_t(v);
}
constexpr int32_t rank_of(uint64_t t) { return int32_t((t & kRankMask) >> kTagBits); }
constexpr uint32_t ctx_of(uint64_t t) { return uint32_t((t & kCtxMask) >> (kTagBits + kRankBits)); }

enum AmId : unsigned {
    AM_SYNC_ACK = 2,
    AM_KIND_HINT = 3, // KindHint: where my receives of your large messages land
};

// Reads a T from untrusted bytes of exactly its size; *out is written only
// when valid(t) accepts it.
template <class T, class Valid>
inline bool decode_exact(const void *bytes, size_t length, T *out, Valid valid)
{
    static_assert(std::is_trivially_copyable_v<T>);
    if (bytes == nullptr || length != sizeof(T)) return false;
    T t;
    std::memcpy(&t, bytes, sizeof(t));
    if (!valid(t)) return false;
    *out = t;
    return true;
}

struct DeviceDescriptor {
    uint32_t src_peer; // range-checked by the receiver
    uint32_t reserved; // must be 0
    uint64_t ack_id;
    cuda::IpcBlob blob;
};
static_assert(sizeof(DeviceDescriptor) == 152);
static_assert(std::is_trivially_copyable_v<DeviceDescriptor>);

// Reads a descriptor from untrusted bytes: exact size, reserved field zero,
// a valid blob (decode_ipc_blob). The caller checks src_peer against its own
// process count.
inline bool decode_descriptor(const void *bytes, size_t length, DeviceDescriptor *out)
{
    return decode_exact(bytes, length, out, [bytes](DeviceDescriptor &d) {
        return d.reserved == 0 &&
               cuda::decode_ipc_blob(static_cast<const char *>(bytes) +
                                         offsetof(DeviceDescriptor, blob),
                                     sizeof(cuda::IpcBlob), &d.blob);
    });
}

constexpr uint32_t kChunkedMagic = 0x48435747u; // "GWCH" in memory order
constexpr uint32_t kMaxChunkBytes = 1u << 30;

struct ChunkedHeader {
    uint32_t magic;
    uint32_t src_peer; // range-checked by the receiver
    uint64_t xfer_id;
    uint64_t length;
    uint32_t chunk_bytes;
    uint32_t flags; // kChunked* below, or 0
};
// The chunks travel through the sender's shared staging slots: each chunk
// message is a SharedChunkDesc, and the receiver first sends a GoMessage.
constexpr uint32_t kChunkedShared = 1;
// With kChunkedShared: the sender's buffer is host memory (it went through
// the slots because the receiver said it receives into GPU memory).
constexpr uint32_t kChunkedFromHost = 2;
// With kChunkedFromHost: the sender can copy into the receiver's GPU memory
// itself (its buffer is pinned, or large enough for a pageable DMA to pay):
// a receiver into memory CUDA IPC exports sends a GoPush.
constexpr uint32_t kChunkedPushable = 4;
// A synchronous send: the receiver sends a GoMessage once a receive matched
// the header, and the sender moves no chunk (so completes) before it. The
// header itself is an ordinary message: a probe that reads it completes
// nothing.
constexpr uint32_t kChunkedSync = 8;
constexpr uint32_t kChunkedFlags =
    kChunkedShared | kChunkedFromHost | kChunkedPushable | kChunkedSync;
static_assert(sizeof(ChunkedHeader) == 32);
static_assert(std::is_trivially_copyable_v<ChunkedHeader>);

// Reads a chunked-transfer header from untrusted bytes: exact size, magic,
// no unknown flag, a chunk size in (0, kMaxChunkBytes].
inline bool decode_chunked_header(const void *bytes, size_t length, ChunkedHeader *out)
{
    return decode_exact(bytes, length, out, [](const ChunkedHeader &h) {
        return h.magic == kChunkedMagic && (h.flags & ~kChunkedFlags) == 0 &&
               (!(h.flags & kChunkedFromHost) || (h.flags & kChunkedShared)) &&
               (!(h.flags & kChunkedPushable) || (h.flags & kChunkedFromHost)) &&
               h.chunk_bytes > 0 && h.chunk_bytes <= kMaxChunkBytes;
    });
}

constexpr uint64_t chunk_tag(uint32_t src_peer, uint64_t xfer_id)
{
    return make_send_tag(kChunkCtx, int32_t(src_peer), int32_t(xfer_id & uint64_t(kMaxTag)));
}

// A chunk of a shared-staging transfer (cuda/shared_staging.hpp): it lies in
// slot `slot` of segment (pid, fd) of the sender's node; offset and bytes
// say which part of the message it is, and must be the part the receiver
// expects next.
constexpr uint32_t kSharedChunkMagic = 0x43535747u; // "GWSC" in memory order
struct SharedChunkDesc {
    uint32_t magic;
    uint32_t pid;
    uint32_t fd;
    uint32_t slot;
    uint64_t offset;
    uint64_t bytes;
};
static_assert(sizeof(SharedChunkDesc) == 32);
static_assert(std::is_trivially_copyable_v<SharedChunkDesc>);

inline bool decode_shared_chunk(const void *bytes, size_t length, SharedChunkDesc *out)
{
    return decode_exact(bytes, length, out,
                        [](const SharedChunkDesc &d) { return d.magic == kSharedChunkMagic; });
}

// Receiver to sender of a shared-staging transfer, on the transfer's chunk
// tag: the header is matched, the sender may fill slots. Until then the
// sender holds no slot for it, so slots are never held by a transfer the
// receiver has not reached.
struct GoMessage {
    uint64_t xfer_id;
    uint32_t flags; // kGoIntoDevice: the receive buffer is GPU memory
    uint32_t reserved;
};
constexpr uint32_t kGoIntoDevice = 1;
// The go-ahead carries an IPC description of the receive buffer (GoPush):
// the sender copies each chunk into it and sends a chunk message whose slot
// is kPushedSlot once its copy is done.
constexpr uint32_t kGoPush = 2;
// The receive buffer is host memory a DMA reaches (pinned): a device sender
// goes back to CUDA IPC for its next messages (the receiver copies out of
// the mapping with one DMA), as for kGoIntoDevice.
constexpr uint32_t kGoIntoPinned = 4;
static_assert(sizeof(GoMessage) == 16);
struct GoPush {
    GoMessage go;
    cuda::IpcBlob blob;
};
constexpr uint32_t kPushedSlot = 0xffffffffu;

// A receiver on this node took a large message from this sender the slow
// way: a host message into GPU memory through host memory (into =
// kHintIntoDevice), or a CUDA IPC message into pageable host memory
// (kHintIntoHost). The sender's next such messages to it go through its
// shared staging slots (pml_gpuwire_shared_staging_host).
struct KindHint {
    uint32_t magic; // kKindHintMagic
    uint32_t src_peer;
    uint32_t into; // kHintIntoDevice or kHintIntoHost
    uint32_t reserved; // 0
};
constexpr uint32_t kKindHintMagic = 0x47574b48; // "GWKH"
constexpr uint32_t kHintIntoDevice = 1;
constexpr uint32_t kHintIntoHost = 2;
static_assert(sizeof(KindHint) == 16);

inline bool decode_kind_hint(const void *bytes, size_t length, KindHint *out)
{
    return decode_exact(bytes, length, out, [](const KindHint &h) {
        return h.magic == kKindHintMagic && (h.into == kHintIntoDevice || h.into == kHintIntoHost) &&
               h.reserved == 0;
    });
}

// Which of the engine's messages a message on a communicator's tag is, by
// its exact size and magic; none: user bytes. Reads at most 20 bytes of it.
enum class Control : uint8_t { none, descriptor, chunked };
constexpr bool control_length(size_t length)
{
    return length == sizeof(ChunkedHeader) || length == sizeof(DeviceDescriptor);
}
inline Control control_kind(const void *bytes, size_t length)
{
    uint32_t magic = 0;
    const auto *b = static_cast<const unsigned char *>(bytes);
    if (length == sizeof(ChunkedHeader)) {
        std::memcpy(&magic, b + offsetof(ChunkedHeader, magic), sizeof(magic));
        return magic == kChunkedMagic ? Control::chunked : Control::none;
    }
    if (length == sizeof(DeviceDescriptor)) {
        std::memcpy(&magic, b + offsetof(DeviceDescriptor, blob) + offsetof(cuda::IpcBlob, magic),
                    sizeof(magic));
        return magic == cuda::kIpcBlobMagic ? Control::descriptor : Control::none;
    }
    return Control::none;
}

struct SyncAckHeader {
    uint64_t sync_id;
};
static_assert(sizeof(SyncAckHeader) == 8);
static_assert(std::is_trivially_copyable_v<SyncAckHeader>);

inline bool decode_sync_ack(const void *bytes, size_t length, SyncAckHeader *out)
{
    return decode_exact(bytes, length, out, [](const SyncAckHeader &) { return true; });
}

} // namespace gpuwire::engine
