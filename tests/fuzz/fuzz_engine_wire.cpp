// The engine's active-message headers (ucx_glue/engine/wire.hpp), as they
// arrive from another process through UCX: any length, any alignment.
#include <cstring>

#include "engine/wire.hpp"
#include "fuzz_target.hpp"

namespace {

using gpuwire::engine::decode_msg_header;
using gpuwire::engine::decode_sync_ack;
using gpuwire::engine::MsgHeader;
using gpuwire::engine::SyncAckHeader;

// Decodes `bytes` with `decode` and checks the contract: success exactly for
// the struct's size, a byte-exact copy on success, the output untouched on
// failure.
template <class Header, class Decode>
void check_decoder(Decode decode, const uint8_t *bytes, size_t size) {
  Header out;
  std::memset(&out, 0xA5, sizeof out);
  Header before;
  std::memcpy(&before, &out, sizeof out);

  const bool ok = decode(bytes, size, &out);
  GW_FUZZ_REQUIRE(ok == (size == sizeof(Header)));
  if (ok) {
    GW_FUZZ_REQUIRE(std::memcmp(&out, bytes, sizeof(Header)) == 0);
  } else {
    GW_FUZZ_REQUIRE(std::memcmp(&out, &before, sizeof out) == 0);
  }
  Header kept;
  std::memcpy(&kept, &out, sizeof out);
  GW_FUZZ_REQUIRE(!decode(nullptr, size, &out));
  GW_FUZZ_REQUIRE(std::memcmp(&out, &kept, sizeof out) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_decoder<MsgHeader>(decode_msg_header, data, size);
  check_decoder<SyncAckHeader>(decode_sync_ack, data, size);
  // UCX hands over header bytes at whatever alignment its buffer has: decode
  // every window of the input that has the header's size, at every offset.
  for (size_t at = 0; at + sizeof(MsgHeader) <= size && at < 64; ++at) {
    check_decoder<MsgHeader>(decode_msg_header, data + at, sizeof(MsgHeader));
  }
  for (size_t at = 0; at + sizeof(SyncAckHeader) <= size && at < 64; ++at) {
    check_decoder<SyncAckHeader>(decode_sync_ack, data + at, sizeof(SyncAckHeader));
  }
  return 0;
}
