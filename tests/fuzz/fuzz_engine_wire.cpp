// What the engine reads from another process (ucx_glue/engine/wire.hpp): the
// device descriptor, the chunked-transfer header and the acknowledgement, as
// they arrive through UCX (any length, any alignment), and the envelope
// packed into a UCX tag.
#include <cstring>

#include "engine/wire.hpp"
#include "fuzz_target.hpp"

namespace {

using namespace gpuwire::engine;

// Decodes `bytes` with `decode` and checks the contract: success only for the
// struct's size, a byte-exact copy on success, the output untouched on
// failure, and nothing accepted from a null pointer.
template <class T, class Decode>
void check_decoder(Decode decode, const uint8_t *bytes, size_t size)
{
    T out;
    std::memset(&out, 0xA5, sizeof out);
    T before;
    std::memcpy(&before, &out, sizeof out);

    const bool ok = decode(bytes, size, &out);
    if (ok) {
        GW_FUZZ_REQUIRE(size == sizeof(T));
        GW_FUZZ_REQUIRE(std::memcmp(&out, bytes, sizeof(T)) == 0);
    } else {
        GW_FUZZ_REQUIRE(std::memcmp(&out, &before, sizeof out) == 0);
    }
    T kept;
    std::memcpy(&kept, &out, sizeof out);
    GW_FUZZ_REQUIRE(!decode(nullptr, size, &out));
    GW_FUZZ_REQUIRE(std::memcmp(&out, &kept, sizeof out) == 0);
}

// Any tag the engine sends (bit 63 clear) decodes to fields that encode back
// to the same tag, and a receive for exactly those fields matches it; one
// with bit 63 set matches no receive.
void check_tag(uint64_t t)
{
    {
        uint64_t want, mask;
        make_recv_tag(ctx_of(t), rank_of(t), tag_of(t), false, want, mask);
        GW_FUZZ_REQUIRE((((t ^ want) & mask) == 0) == !(t & kSpareBit));
    }
    t &= ~kSpareBit;
    const uint32_t ctx = ctx_of(t);
    const int32_t rank = rank_of(t);
    const int32_t tag = tag_of(t);
    GW_FUZZ_REQUIRE(ctx <= kMaxCtx && rank >= 0 && rank <= kMaxRank);
    GW_FUZZ_REQUIRE(tag >= -kMaxTag - 1 && tag <= kMaxTag);
    GW_FUZZ_REQUIRE(make_send_tag(ctx, rank, tag) == t);
    uint64_t want, mask;
    make_recv_tag(ctx, rank, tag, false, want, mask);
    GW_FUZZ_REQUIRE(((t ^ want) & mask) == 0);
    make_recv_tag(ctx, -1, 0, true, want, mask);
    GW_FUZZ_REQUIRE((((t ^ want) & mask) == 0) == (tag >= 0));
}

// What decodes as a control message is recognised as one by the receive path
// (control_kind), which reads only its size and magic.
bool decode_desc(const void *b, size_t n, DeviceDescriptor *out)
{
    if (!decode_descriptor(b, n, out)) return false;
    GW_FUZZ_REQUIRE(control_kind(b, n) == Control::descriptor);
    return true;
}
bool decode_ack(const void *b, size_t n, SyncAckHeader *out) { return decode_sync_ack(b, n, out); }
bool decode_hint(const void *b, size_t n, KindHint *out)
{
    if (!decode_kind_hint(b, n, out)) return false;
    GW_FUZZ_REQUIRE(out->magic == kKindHintMagic && out->reserved == 0);
    GW_FUZZ_REQUIRE(out->into == kHintIntoDevice || out->into == kHintIntoHost);
    return true;
}
bool decode_shared(const void *b, size_t n, SharedChunkDesc *out)
{
    if (!decode_shared_chunk(b, n, out)) return false;
    GW_FUZZ_REQUIRE(out->magic == kSharedChunkMagic);
    return true;
}
bool decode_chunked(const void *b, size_t n, ChunkedHeader *out)
{
    if (!decode_chunked_header(b, n, out)) return false;
    // What an accepted header promises the receiver.
    GW_FUZZ_REQUIRE(out->magic == kChunkedMagic && (out->flags & ~kChunkedFlags) == 0);
    GW_FUZZ_REQUIRE(!(out->flags & kChunkedFromHost) || (out->flags & kChunkedShared));
    GW_FUZZ_REQUIRE(!(out->flags & kChunkedPushable) || (out->flags & kChunkedFromHost));
    GW_FUZZ_REQUIRE(out->chunk_bytes > 0 && out->chunk_bytes <= kMaxChunkBytes);
    GW_FUZZ_REQUIRE(chunk_tag(out->src_peer & uint32_t(kMaxRank), out->xfer_id) <= ~kSpareBit);
    GW_FUZZ_REQUIRE(control_kind(b, n) == Control::chunked);
    return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_decoder<DeviceDescriptor>(decode_desc, data, size);
    check_decoder<SyncAckHeader>(decode_ack, data, size);
    check_decoder<ChunkedHeader>(decode_chunked, data, size);
    check_decoder<SharedChunkDesc>(decode_shared, data, size);
    check_decoder<KindHint>(decode_hint, data, size);
    for (size_t at = 1; at + sizeof(ChunkedHeader) <= size && at < 16; ++at) {
        check_decoder<ChunkedHeader>(decode_chunked, data + at, sizeof(ChunkedHeader));
    }
    // UCX hands over bytes at whatever alignment its buffer has.
    for (size_t at = 1; at + sizeof(DeviceDescriptor) <= size && at < 16; ++at) {
        check_decoder<DeviceDescriptor>(decode_desc, data + at, sizeof(DeviceDescriptor));
    }
    for (size_t at = 0; at + sizeof(uint64_t) <= size && at < 64; at += 8) {
        uint64_t t;
        std::memcpy(&t, data + at, sizeof t);
        check_tag(t);
    }
    return 0;
}
