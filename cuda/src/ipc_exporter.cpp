#include "gpuwire/cuda/ipc_exporter.hpp"

#include <cstring>

namespace gpuwire::cuda {

IpcExporter::IpcExporter(DriverApi& driver, size_t max_entries)
    : driver_(driver), max_entries_(max_entries ? max_entries : 1) {}

Status IpcExporter::export_range(const MemoryInfo& info, const void* ptr, size_t len, IpcBlob* out) {
  if (!info.legacy_ipc_exportable()) {
    ++counters_.refused;
    return Status::error(Errc::not_supported, "IpcExporter: memory not exportable by legacy IPC",
                         static_cast<int>(info.kind));
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (info.buffer_id == 0 || info.size == 0 || p < info.base || p - info.base > info.size ||
      len > info.size - (p - info.base))
    return Status::error(Errc::invalid_argument, "IpcExporter: range outside the allocation");

  auto it = by_id_.find(info.buffer_id);
  if (it != by_id_.end() && it->second->base == info.base && it->second->size == info.size) {
    ++counters_.hits;
    lru_.splice(lru_.begin(), lru_, it->second);
  } else {
    if (it != by_id_.end()) {  // same ID, other range: the driver's word wins
      lru_.erase(it->second);
      by_id_.erase(it);
    }
    Export e{};
    e.buffer_id = info.buffer_id;
    e.base = info.base;
    e.size = info.size;
    e.device = info.device;
    Status s = driver_.device_uuid(info.device, e.uuid);
    if (s) s = driver_.ipc_get_handle(info.base, info.device, &e.handle);
    if (!s) return detail::log_status(LogLevel::error, "IpcExporter", s);
    ++counters_.misses;
    lru_.push_front(e);
    by_id_[e.buffer_id] = lru_.begin();
    while (lru_.size() > max_entries_) {
      by_id_.erase(lru_.back().buffer_id);
      lru_.pop_back();
      ++counters_.evictions;
    }
  }

  const Export& e = lru_.front();
  IpcBlob b{};
  b.magic = kIpcBlobMagic;
  b.version = kIpcBlobVersion;
  b.device = e.device;
  b.base = e.base;
  b.size = e.size;
  b.buffer_id = e.buffer_id;
  b.offset = p - e.base;
  b.length = len;
  std::memcpy(b.device_uuid, e.uuid, sizeof b.device_uuid);
  std::memcpy(b.handle, e.handle.bytes, sizeof b.handle);
  *out = b;
  return Status{};
}

void IpcExporter::forget(uint64_t buffer_id) {
  auto it = by_id_.find(buffer_id);
  if (it == by_id_.end()) return;
  lru_.erase(it->second);
  by_id_.erase(it);
}

}  // namespace gpuwire::cuda
