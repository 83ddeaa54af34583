// The wire form of an exported device buffer (legacy CUDA IPC).
//
// The sender exports the whole allocation once and describes the payload as a
// range inside it; the receiver maps the allocation once per (peer, base,
// buffer ID) and adds the offset. Both ends are processes of one node, so the
// blob is in host byte order. It is trivially copyable: send its bytes as they
// are, and on receipt accept it only through decode_ipc_blob(), which treats
// the bytes as untrusted.
//
//    0               4       6       8               12              16
//   +---------------+-------+-------+---------------+---------------+
//   | magic "GWIP"  |version| flags | device        | reserved (0)  |
//   +---------------+-------+-------+---------------+---------------+
//   | base: exporter's allocation base address                  16  |
//   | size: allocation size in bytes                             24  |
//   | buffer_id: exporter driver's buffer ID, never reused       32  |
//   | offset: payload start, from base                          40  |
//   | length: payload bytes (offset + length <= size)           48  |
//   | device_uuid[16]: the exporting GPU                        56  |
//   | handle[64]: cudaIpcMemHandle_t of the allocation          72  |
//   +---------------------------------------------------------------+ 136
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

inline constexpr uint32_t kIpcBlobMagic = 0x50495747u;  // "GWIP" in memory order
inline constexpr uint16_t kIpcBlobVersion = 1;

struct IpcBlob {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;     // none defined: must be 0
  int32_t device;     // exporter's device ordinal (its own numbering)
  uint32_t reserved;  // must be 0
  uint64_t base;
  uint64_t size;
  uint64_t buffer_id;
  uint64_t offset;
  uint64_t length;
  uint8_t device_uuid[16];
  uint8_t handle[64];
};

static_assert(std::is_trivially_copyable_v<IpcBlob>);
static_assert(std::is_standard_layout_v<IpcBlob>);
static_assert(sizeof(IpcBlob) == 136);
static_assert(offsetof(IpcBlob, base) == 16 && offsetof(IpcBlob, length) == 48);
static_assert(offsetof(IpcBlob, device_uuid) == 56 && offsetof(IpcBlob, handle) == 72);

// Checks every field of a blob already in memory (see decode_ipc_blob).
Status validate_ipc_blob(const IpcBlob& blob);

// Copies `size` untrusted bytes into *out if they form a valid blob: exact
// size, magic, version, zero reserved fields, non-zero base/size/buffer ID,
// no address overflow, and offset + length within the exported allocation.
// *out is untouched on failure.
Status decode_ipc_blob(const void* data, size_t size, IpcBlob* out);

}  // namespace gpuwire::cuda
