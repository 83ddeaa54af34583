// A DriverApi that simulates the CUDA driver's view of a process: allocations
// at chosen or fresh addresses, buffer IDs that are never reused, IPC handles,
// mappings and pinned host memory, with call counters and failure injection.
// Device addresses are never dereferenced; pinned host memory is real.
#pragma once

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "gpuwire/cuda/driver.hpp"

namespace gw_test {

using namespace gpuwire::cuda;

enum class FakeKind { device, pool, managed, pinned_host, vmm };

class FakeDriver : public DriverApi {
 public:
  struct Alloc {
    uintptr_t base;
    size_t size;
    uint64_t id;
    FakeKind kind;
    int device;
  };

  explicit FakeDriver(int devices = 2, bool available = true) : devices_(devices), available_(available) {}
  ~FakeDriver() override {
    for (void* p : host_) std::free(p);
  }

  // A new allocation; at != 0 puts it at that address (as a re-use would).
  uintptr_t alloc(size_t size, FakeKind kind = FakeKind::device, int device = 0, uintptr_t at = 0) {
    uintptr_t base = at ? at : next_va_;
    if (!at) next_va_ += (size + 0xFFFFF) & ~uintptr_t{0xFFFFF};
    allocs_[base] = Alloc{base, size, next_id_++, kind, device};
    return base;
  }
  void free(uintptr_t base) { allocs_.erase(base); }
  const Alloc* find(uintptr_t p) const {
    auto it = allocs_.upper_bound(p);
    if (it == allocs_.begin()) return nullptr;
    --it;
    return p - it->second.base < it->second.size ? &it->second : nullptr;
  }

  bool available() const override { return available_; }
  int device_count() const override { return available_ ? devices_ : 0; }

  Status pointer_attributes(uintptr_t ptr, PointerAttributes* out) override {
    ++attribute_queries;
    if (on_query) on_query(ptr);
    if (fail_queries) return Status::driver_error("cuPointerGetAttributes", 1);
    PointerAttributes a;
    if (const Alloc* al = find(ptr)) {
      a.buffer_id = al->id;
      a.device = al->device;
      a.mapped = true;
      a.range_base = al->base;
      a.range_size = al->size;
      a.memory_type = al->kind == FakeKind::pinned_host ? RawMemoryType::host : RawMemoryType::device;
      a.is_managed = al->kind == FakeKind::managed;
      a.legacy_ipc = al->kind == FakeKind::device;
      a.from_mempool = al->kind == FakeKind::pool;
      if (al->kind == FakeKind::vmm) {  // the reserved range, larger than the mapping
        a.range_base = al->base - 0x100000;
        a.range_size = al->size + 0x200000;
      }
    }
    *out = a;
    return Status{};
  }
  Status buffer_id(uintptr_t ptr, uint64_t* out) override {
    ++id_queries;
    if (fail_queries) return Status::driver_error("cuPointerGetAttributes(BUFFER_ID)", 1);
    const Alloc* al = find(ptr);
    *out = al ? al->id : 0;
    return Status{};
  }
  Status set_sync_memops(uintptr_t ptr) override {
    sync_marked.push_back(ptr);
    const Alloc* al = find(ptr);
    if (!al || al->base != ptr) return Status::driver_error("cuPointerSetAttribute(SYNC_MEMOPS)", 1);
    return Status{};
  }
  Status vmm_range(uintptr_t ptr, bool* is_vmm, uintptr_t* base, size_t* size) override {
    ++vmm_queries;
    const Alloc* al = find(ptr);
    *is_vmm = al && al->kind == FakeKind::vmm;
    if (*is_vmm) {
      *base = al->base;
      *size = al->size;
    }
    return Status{};
  }
  Status device_uuid(int device, uint8_t out[16]) override {
    std::memset(out, 0, 16);
    out[0] = static_cast<uint8_t>(0xA0 + device);
    return Status{};
  }

  // A handle names the allocation: (buffer ID, base).
  Status ipc_get_handle(uintptr_t base, int device, IpcHandle* out) override {
    ++ipc_gets;
    const Alloc* al = find(base);
    if (!al || al->base != base || al->kind != FakeKind::device)
      return Status::runtime_error("cudaIpcGetMemHandle", 1);
    std::memset(out->bytes, 0, sizeof out->bytes);
    std::memcpy(out->bytes, &al->id, 8);
    std::memcpy(out->bytes + 8, &al->base, 8);
    return Status{};
  }
  Status ipc_open(const IpcHandle& h, int device, uintptr_t* mapped) override {
    ++ipc_opens;
    if (fail_opens > 0) {
      --fail_opens;
      return Status::runtime_error("cudaIpcOpenMemHandle", 205);
    }
    uint64_t id = 0;
    std::memcpy(&id, h.bytes, 8);
    if (id == 0) return Status::runtime_error("cudaIpcOpenMemHandle", 1);
    uintptr_t m = next_map_;
    next_map_ += 0x10000000;
    open_[m] = id;
    *mapped = m;
    return Status{};
  }
  Status ipc_close(uintptr_t mapped, int device) override {
    ++ipc_closes;
    if (open_.erase(mapped) == 0) {
      ++bad_closes;
      return Status::runtime_error("cudaIpcCloseMemHandle", 1);
    }
    closed_maps.insert(mapped);
    return Status{};
  }
  bool is_open(uintptr_t mapped_base) const { return open_.count(mapped_base) != 0; }
  size_t open_count() const { return open_.size(); }

  Status host_alloc(size_t bytes, int device, void** out) override {
    ++host_allocs;
    last_host_device = device;
    if (fail_host_alloc) return Status::runtime_error("cudaHostAlloc", 2);
    void* p = std::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095});
    host_.insert(p);
    *out = p;
    return Status{};
  }
  Status host_free(void* p) override {
    ++host_frees;
    if (host_.erase(p) == 0) return Status::runtime_error("cudaFreeHost", 1);
    std::free(p);
    return Status{};
  }
  size_t host_live() const { return host_.size(); }
  Status host_register(void* p, size_t bytes, int device) override {
    ++host_registers;
    last_host_device = device;
    if (fail_host_register) return Status::runtime_error("cudaHostRegister", 2);
    // As the driver: no range may overlap one registered already
    // (cudaErrorHostMemoryAlreadyRegistered).
    const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
    for (const auto& r : registered_) {
      const auto rlo = reinterpret_cast<uintptr_t>(r.first);
      if (rlo < hi && lo < rlo + r.second) return Status::runtime_error("cudaHostRegister", 712);
    }
    registered_[p] = bytes;
    return Status{};
  }
  Status host_unregister(void* p) override {
    ++host_unregisters;
    if (registered_.erase(p) == 0) return Status::runtime_error("cudaHostUnregister", 1);
    return Status{};
  }
  size_t registered_live() const { return registered_.size(); }

  // Counters and knobs, read and set by the tests.
  int attribute_queries = 0, id_queries = 0, vmm_queries = 0;
  std::vector<uintptr_t> sync_marked;  // set_sync_memops() calls, in order
  int ipc_gets = 0, ipc_opens = 0, ipc_closes = 0, bad_closes = 0;
  int host_allocs = 0, host_frees = 0;
  int host_registers = 0, host_unregisters = 0;
  bool fail_host_register = false;
  int last_host_device = -1;  // whose context made the last pinned allocation
  int fail_opens = 0;
  bool fail_queries = false, fail_host_alloc = false;
  std::function<void(uintptr_t)> on_query;  // runs inside pointer_attributes
  std::set<uintptr_t> closed_maps;
  std::map<void*, size_t> registered_;

 private:
  int devices_;
  bool available_;
  uint64_t next_id_ = 1000;
  uintptr_t next_va_ = 0x7f0000000000;
  uintptr_t next_map_ = 0x500000000000;
  std::map<uintptr_t, Alloc> allocs_;
  std::map<uintptr_t, uint64_t> open_;
  std::set<void*> host_;
};

}  // namespace gw_test
