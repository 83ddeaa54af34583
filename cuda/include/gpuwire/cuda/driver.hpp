// The CUDA driver as the rest of the module sees it.
//
// DriverApi is the narrow interface through which the classifier, the IPC
// caches and the pinned pool reach CUDA. Driver implements it over the real
// driver; unit tests implement it with a fake that simulates allocations.
//
// Driver:
// - Driver::instance() loads once (thread-safe) and never unloads. cudart is
//   linked statically and libcuda is never linked: driver entry points come from
//   cudaGetDriverEntryPointByVersion, so a machine with no driver loads this code
//   and reports available() == false with a one-line unavailable_reason().
// - Loading calls cuInit and counts devices; it creates no context. Contexts are
//   the devices' primary contexts, retained the first time a device is used.
// - All methods are safe to call from any thread.
//
// Public headers of this module include no CUDA header: streams are passed as
// CUstream_st* (the type behind both cudaStream_t and CUstream).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpuwire/cuda/status.hpp"

struct CUstream_st;

namespace gpuwire::cuda {

using StreamHandle = CUstream_st*;

// cudaIpcMemHandle_t, as bytes.
struct IpcHandle {
  uint8_t bytes[64];
};

// CUmemorytype values; none: the driver does not know the address.
enum class RawMemoryType : uint32_t { none = 0, host = 1, device = 2, array = 3, unified = 4 };

// What one cuPointerGetAttributes call tells about an address.
struct PointerAttributes {
  RawMemoryType memory_type = RawMemoryType::none;
  uint64_t buffer_id = 0;  // 0: not a CUDA allocation
  int device = -1;
  bool is_managed = false;
  bool legacy_ipc = false;    // cudaIpcGetMemHandle accepts it
  bool from_mempool = false;  // cudaMallocAsync / cudaMallocFromPoolAsync
  bool mapped = false;
  uintptr_t range_base = 0;  // allocation (or reserved VA range) start
  size_t range_size = 0;
};

class DriverApi {
 public:
  virtual ~DriverApi() = default;

  virtual bool available() const = 0;
  virtual int device_count() const = 0;

  // All attributes of `ptr` in one driver call. A host address the driver does
  // not know is not an error: it comes back with memory_type none, buffer_id 0.
  virtual Status pointer_attributes(uintptr_t ptr, PointerAttributes* out) = 0;
  // Only the buffer ID (0 when the driver does not know the address).
  virtual Status buffer_id(uintptr_t ptr, uint64_t* out) = 0;
  // Whether `ptr` is cuMemMap-ed memory, and then the mapped chunk's range.
  virtual Status vmm_range(uintptr_t ptr, bool* is_vmm, uintptr_t* base, size_t* size) = 0;
  virtual Status device_uuid(int device, uint8_t out[16]) = 0;
  // Makes synchronous copies (cudaMemcpy) into or out of the allocation at
  // `ptr` return only once the data has landed (CU_POINTER_ATTRIBUTE_SYNC_MEMOPS;
  // a cudaMemcpy from pageable memory may return earlier without it).
  virtual Status set_sync_memops(uintptr_t ptr) = 0;
  // Whether contexts on `device` are shared through CUDA MPS (kernels of
  // several processes then run at once); false when the driver cannot say.
  virtual bool mps_enabled(int device) const { return false; }

  // Legacy CUDA IPC. `device` is the ordinal whose context exports/maps.
  virtual Status ipc_get_handle(uintptr_t base, int device, IpcHandle* out) = 0;
  virtual Status ipc_open(const IpcHandle& handle, int device, uintptr_t* mapped) = 0;
  virtual Status ipc_close(uintptr_t mapped, int device) = 0;

  // Pinned host memory: portable (usable from every device) and mapped into the
  // devices' address space. `device`'s context makes the allocation.
  virtual Status host_alloc(size_t bytes, int device, void** out) = 0;
  virtual Status host_free(void* ptr) = 0;
  // Pins memory the caller mapped (a shared-memory segment), portable: copies
  // on every device run from and to it at full speed. Unregister before unmapping.
  virtual Status host_register(void* ptr, size_t bytes, int device) = 0;
  virtual Status host_unregister(void* ptr) = 0;
};

struct DriverEntryPoints;  // defined in the module's private sources

class Driver final : public DriverApi {
 public:
  static Driver& instance();

  bool available() const override { return available_; }
  int device_count() const override { return device_count_; }
  // Why available() is false ("" when it is true).
  const char* unavailable_reason() const { return reason_; }
  int driver_version() const { return driver_version_; }

  Status pointer_attributes(uintptr_t ptr, PointerAttributes* out) override;
  Status buffer_id(uintptr_t ptr, uint64_t* out) override;
  Status set_sync_memops(uintptr_t ptr) override;
  Status vmm_range(uintptr_t ptr, bool* is_vmm, uintptr_t* base, size_t* size) override;
  Status device_uuid(int device, uint8_t out[16]) override;
  Status ipc_get_handle(uintptr_t base, int device, IpcHandle* out) override;
  Status ipc_open(const IpcHandle& handle, int device, uintptr_t* mapped) override;
  Status ipc_close(uintptr_t mapped, int device) override;
  Status host_alloc(size_t bytes, int device, void** out) override;
  Status host_free(void* ptr) override;
  Status host_register(void* ptr, size_t bytes, int device) override;
  Status host_unregister(void* ptr) override;

  // Whether streams of `device` can write 64-bit values (cuStreamWriteValue64).
  bool stream_write_value64(int device) const;
  bool mps_enabled(int device) const override;

  // Private to the module's sources: nullptr when !available().
  const DriverEntryPoints* entry_points() const { return entry_; }
  // Makes the primary context of `device` current; *previous is the context it
  // replaced (an opaque CUcontext), *switched whether it changed. For DeviceGuard.
  Status push_device(int device, void** previous, bool* switched);
  void pop_device(void* previous);

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

 private:
  Driver();
  ~Driver() override = default;

  bool available_ = false;
  int device_count_ = 0;
  int driver_version_ = 0;
  const char* reason_ = "not loaded";
  DriverEntryPoints* entry_ = nullptr;
};

// Makes a device's primary context current for the guard's lifetime and puts
// back the previous context (possibly none: no context is created on a device
// the application did not use). Move-only; not shared between threads.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(DeviceGuard&& other) noexcept;
  DeviceGuard& operator=(DeviceGuard&&) = delete;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  // Check before using the device: the switch itself can fail.
  const Status& status() const { return status_; }

 private:
  Status status_;
  void* previous_ = nullptr;
  bool active_ = false;
};

}  // namespace gpuwire::cuda
