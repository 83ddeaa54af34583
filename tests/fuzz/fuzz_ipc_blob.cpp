// The CUDA IPC descriptor (cuda/ipc_blob.hpp): the payload of an IPC message,
// written by another process. decode_ipc_blob must accept exactly the blobs
// whose ranges are safe to map and copy from, and touch nothing otherwise.
#include <cstring>

#include "fuzz_target.hpp"
#include "gpuwire/cuda/ipc_blob.hpp"

namespace {

using gpuwire::cuda::decode_ipc_blob;
using gpuwire::cuda::Errc;
using gpuwire::cuda::IpcBlob;
using gpuwire::cuda::kIpcBlobMagic;
using gpuwire::cuda::kIpcBlobVersion;
using gpuwire::cuda::Status;
using gpuwire::cuda::validate_ipc_blob;

// The rules of ipc_blob.hpp, written independently of the decoder.
bool acceptable(const IpcBlob &b) {
  uint64_t end = 0;
  if (b.magic != kIpcBlobMagic || b.version != kIpcBlobVersion) return false;
  if (b.flags != 0 || b.reserved != 0 || b.device < 0) return false;
  if (b.base == 0 || b.size == 0 || b.buffer_id == 0) return false;
  if (__builtin_add_overflow(b.base, b.size, &end)) return false;
  if (__builtin_add_overflow(b.offset, b.length, &end)) return false;
  return end <= b.size;
}

void check_failure(const Status &s) {
  GW_FUZZ_REQUIRE(s.code() == Errc::invalid_argument);
  GW_FUZZ_REQUIRE(s.call()[0] != '\0');
  GW_FUZZ_REQUIRE(!s.message().empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  IpcBlob out;
  std::memset(&out, 0x5C, sizeof out);
  IpcBlob before;
  std::memcpy(&before, &out, sizeof out);

  const Status s = decode_ipc_blob(data, size, &out);
  if (s) {
    GW_FUZZ_REQUIRE(size == sizeof(IpcBlob));
    GW_FUZZ_REQUIRE(std::memcmp(&out, data, sizeof out) == 0);
    GW_FUZZ_REQUIRE(acceptable(out));
    // What the receiver derives from an accepted blob stays inside the
    // exported allocation without wrapping.
    GW_FUZZ_REQUIRE(out.offset <= out.size && out.length <= out.size - out.offset);
    GW_FUZZ_REQUIRE(out.base + out.offset + out.length >= out.base);
  } else {
    check_failure(s);
    GW_FUZZ_REQUIRE(std::memcmp(&out, &before, sizeof out) == 0);
  }

  // The same bytes as a blob already in memory (shorter inputs zero-padded):
  // validate agrees with the independent rules, and with decode at full size.
  IpcBlob in_memory{};
  std::memcpy(&in_memory, data, size < sizeof in_memory ? size : sizeof in_memory);
  const Status v = validate_ipc_blob(in_memory);
  GW_FUZZ_REQUIRE(v.ok() == acceptable(in_memory));
  if (!v) check_failure(v);
  if (size == sizeof(IpcBlob)) GW_FUZZ_REQUIRE(v.ok() == s.ok());

  GW_FUZZ_REQUIRE(!decode_ipc_blob(nullptr, sizeof(IpcBlob), &out));
  return 0;
}
