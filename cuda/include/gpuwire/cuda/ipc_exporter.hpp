// IpcExporter: the sender's side of CUDA IPC.
//
// Exports a whole allocation once (cudaIpcGetMemHandle on its base) and keeps
// the handle by the driver's buffer ID, which the driver never reuses: a buffer
// freed and re-allocated at the same address has a new ID and is exported anew.
// Entries of freed buffers are never looked up again and age out of the LRU;
// forget() drops one early. Nothing is released on eviction: an exported
// handle holds no resource in the exporting process.
//
// Threading: not synchronised; the owner serialises calls (one engine lock or
// one progress thread). The DriverApi must outlive the exporter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/ipc_blob.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

struct IpcExporterCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;     // handles obtained from the driver
  uint64_t evictions = 0;
  uint64_t refused = 0;    // buffers that legacy IPC cannot export
};

class IpcExporter {
 public:
  explicit IpcExporter(DriverApi& driver, size_t max_entries = 1024);
  IpcExporter(const IpcExporter&) = delete;
  IpcExporter& operator=(const IpcExporter&) = delete;

  // Describes [ptr, ptr + len) for a peer. `info` must be the classifier's
  // current answer for this buffer. Fails with not_supported for memory legacy
  // IPC cannot export (pool, VMM, managed, host) and invalid_argument for a
  // range outside the allocation; *out is set only on success.
  Status export_range(const MemoryInfo& info, const void* ptr, size_t len, IpcBlob* out);

  void forget(uint64_t buffer_id);
  IpcExporterCounters counters() const { return counters_; }
  size_t size() const { return lru_.size(); }

 private:
  struct Export {
    uint64_t buffer_id;
    uint64_t base;
    uint64_t size;
    int device;
    uint8_t uuid[16];
    IpcHandle handle;
  };
  using Lru = std::list<Export>;

  DriverApi& driver_;
  const size_t max_entries_;
  Lru lru_;  // front: most recently used
  std::unordered_map<uint64_t, Lru::iterator> by_id_;
  IpcExporterCounters counters_;
};

}  // namespace gpuwire::cuda
