#include "gpuwire/cuda/ipc_blob.hpp"

#include <cstring>

namespace gpuwire::cuda {

namespace {
Status malformed(const char* what) { return Status::error(Errc::invalid_argument, what); }
}  // namespace

Status validate_ipc_blob(const IpcBlob& b) {
  if (b.magic != kIpcBlobMagic) return malformed("ipc blob: bad magic");
  if (b.version != kIpcBlobVersion) return malformed("ipc blob: unknown version");
  if (b.flags != 0 || b.reserved != 0) return malformed("ipc blob: reserved bits set");
  if (b.device < 0) return malformed("ipc blob: negative device");
  if (b.base == 0 || b.size == 0) return malformed("ipc blob: empty allocation");
  if (b.base + b.size < b.base) return malformed("ipc blob: allocation wraps the address space");
  if (b.buffer_id == 0) return malformed("ipc blob: no buffer ID");
  if (b.offset > b.size) return malformed("ipc blob: offset past the allocation");
  if (b.length > b.size - b.offset) return malformed("ipc blob: range past the allocation");
  return Status{};
}

Status decode_ipc_blob(const void* data, size_t size, IpcBlob* out) {
  if (data == nullptr || size != sizeof(IpcBlob)) return malformed("ipc blob: wrong size");
  IpcBlob b;
  std::memcpy(&b, data, sizeof b);  // no alignment assumed of the wire buffer
  Status s = validate_ipc_blob(b);
  if (s) *out = b;
  return s;
}

}  // namespace gpuwire::cuda
