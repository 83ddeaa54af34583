#include "gpuwire/cuda/driver.hpp"

#include <cstdio>
#include <cstring>

#include "internal.hpp"

namespace gpuwire::cuda {

#if GPUWIRE_HAVE_CUDA

namespace {

char g_reason[192];

// Resolved at the CUDA 12.0 ABI, which every type in DriverEntryPoints matches.
constexpr unsigned kEntryPointAbi = 12000;

Status resolve(const char* name, void** fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, kEntryPointAbi, cudaEnableDefault, &q);
  if (e != cudaSuccess) return Status::runtime_error("cudaGetDriverEntryPointByVersion", e);
  if (q != cudaDriverEntryPointSuccess || p == nullptr)
    return Status::error(Errc::no_device, "cudaGetDriverEntryPointByVersion: symbol not found", q);
  *fn = p;
  return Status{};
}

Status resolve_all(DriverEntryPoints& e, const char** missing) {
  const struct {
    const char* name;
    void** slot;
  } table[] = {
      {"cuInit", reinterpret_cast<void**>(&e.cuInit)},
      {"cuDriverGetVersion", reinterpret_cast<void**>(&e.cuDriverGetVersion)},
      {"cuGetErrorName", reinterpret_cast<void**>(&e.cuGetErrorName)},
      {"cuDeviceGet", reinterpret_cast<void**>(&e.cuDeviceGet)},
      {"cuDeviceGetAttribute", reinterpret_cast<void**>(&e.cuDeviceGetAttribute)},
      {"cuDeviceGetUuid", reinterpret_cast<void**>(&e.cuDeviceGetUuid)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void**>(&e.cuDevicePrimaryCtxRetain)},
      {"cuCtxGetCurrent", reinterpret_cast<void**>(&e.cuCtxGetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void**>(&e.cuCtxSetCurrent)},
      {"cuPointerGetAttributes", reinterpret_cast<void**>(&e.cuPointerGetAttributes)},
      {"cuMemGetAddressRange", reinterpret_cast<void**>(&e.cuMemGetAddressRange)},
      {"cuMemRetainAllocationHandle", reinterpret_cast<void**>(&e.cuMemRetainAllocationHandle)},
      {"cuMemRelease", reinterpret_cast<void**>(&e.cuMemRelease)},
  };
  for (const auto& t : table) {
    Status s = resolve(t.name, t.slot);
    if (!s) {
      *missing = t.name;
      return s;
    }
  }
  // Optional: without it completions are signalled by a one-thread kernel.
  if (!resolve("cuStreamWriteValue64", reinterpret_cast<void**>(&e.cuStreamWriteValue64)))
    e.cuStreamWriteValue64 = nullptr;
  // Optional: without it synchronous copies into device memory are not marked.
  if (!resolve("cuPointerSetAttribute", reinterpret_cast<void**>(&e.cuPointerSetAttribute)))
    e.cuPointerSetAttribute = nullptr;
  return Status{};
}

// Status::message() would ask Driver::instance() for driver error names, which
// is not allowed while the instance is being built.
void describe(char* buf, size_t n, const char* what, const Status& s, const DriverEntryPoints& e) {
  const char* name = nullptr;
  if (s.native_api() == NativeApi::driver &&
      e.cuGetErrorName(static_cast<CUresult>(s.native()), &name) == CUDA_SUCCESS && name)
    std::snprintf(buf, n, "%s (%s: %s (%d))", what, s.call(), name, s.native());
  else if (s.native_api() == NativeApi::runtime)
    std::snprintf(buf, n, "%s (%s: %s (%d))", what, s.call(),
                  cudaGetErrorName(static_cast<cudaError_t>(s.native())), s.native());
  else
    std::snprintf(buf, n, "%s (%s)", what, s.call());
}

}  // namespace

Driver::Driver() {
  auto* e = new DriverEntryPoints();
  const char* missing = "";
  Status s = resolve_all(*e, &missing);
  if (!s) {
    char what[96];
    std::snprintf(what, sizeof what, "no CUDA driver: %s unavailable", missing);
    describe(g_reason, sizeof g_reason, what, s, *e);
    reason_ = g_reason;
    delete e;
    return;
  }
  int count = 0;
  s = drv_check(e->cuInit(0), "cuInit");
  if (s) s = drv_check(e->cuDriverGetVersion(&driver_version_), "cuDriverGetVersion");
  if (s) s = rt_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (s && count <= 0) s = Status::error(Errc::no_device, "cudaGetDeviceCount: 0 devices");
  if (!s) {
    describe(g_reason, sizeof g_reason, "no CUDA device", s, *e);
    reason_ = g_reason;
    delete e;
    return;
  }
  e->primary = std::make_unique<std::atomic<CUcontext>[]>(count);
  for (int i = 0; i < count; ++i) e->primary[i].store(nullptr, std::memory_order_relaxed);
  entry_ = e;
  device_count_ = count;
  available_ = true;
  reason_ = "";
}

Driver& Driver::instance() {
  static Driver* d = new Driver();  // never destroyed: CUDA may be torn down first at exit
  return *d;
}

namespace detail {
const char* native_error_name(NativeApi api, int code) {
  if (api == NativeApi::runtime) return cudaGetErrorName(static_cast<cudaError_t>(code));
  const char* name = nullptr;
  const DriverEntryPoints* e = Driver::instance().entry_points();
  if (e && e->cuGetErrorName(static_cast<CUresult>(code), &name) == CUDA_SUCCESS && name) return name;
  return "CUDA_ERROR";
}
}  // namespace detail

Status Driver::pointer_attributes(uintptr_t ptr, PointerAttributes* out) {
  if (!available_) return Status::error(Errc::no_device, reason_);
  CUpointer_attribute attrs[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_BUFFER_ID,
      CU_POINTER_ATTRIBUTE_IS_MANAGED,       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
      CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
      CU_POINTER_ATTRIBUTE_MAPPED};
  // Booleans land in zeroed 8-byte slots, whatever width the driver writes.
  unsigned int mem_type = 0;
  unsigned long long id = 0;
  uint64_t managed = 0, legacy = 0, mapped = 0;
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUmemoryPool pool = nullptr;
  void* data[] = {&mem_type, &id, &managed, &ordinal, &start, &size, &legacy, &pool, &mapped};
  static_assert(sizeof attrs / sizeof attrs[0] == sizeof data / sizeof data[0]);
  CUresult r = entry_->cuPointerGetAttributes(sizeof attrs / sizeof attrs[0], attrs, data,
                                              static_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS) {
    // Some attribute may be refused for some memory: ask the two that decide
    // whether the driver knows the address at all.
    unsigned int t = 0;
    unsigned long long bid = 0;
    CUpointer_attribute few[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void* few_data[] = {&t, &bid};
    if (entry_->cuPointerGetAttributes(2, few, few_data, static_cast<CUdeviceptr>(ptr)) ==
            CUDA_SUCCESS && t == 0 && bid == 0) {
      *out = PointerAttributes{};
      return Status{};
    }
    return drv_check(r, "cuPointerGetAttributes");
  }
  PointerAttributes a;
  a.memory_type = static_cast<RawMemoryType>(mem_type);
  a.buffer_id = id;
  a.device = ordinal;
  a.is_managed = managed != 0;
  a.legacy_ipc = legacy != 0;
  a.from_mempool = pool != nullptr;
  a.mapped = mapped != 0;
  a.range_base = static_cast<uintptr_t>(start);
  a.range_size = size;
  *out = a;
  return Status{};
}

Status Driver::set_sync_memops(uintptr_t ptr) {
  if (!available_) return Status::error(Errc::no_device, reason_);
  if (!entry_->cuPointerSetAttribute) return Status::error(Errc::not_supported, "cuPointerSetAttribute");
  const unsigned int on = 1;
  return drv_check(entry_->cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, static_cast<CUdeviceptr>(ptr)),
                   "cuPointerSetAttribute(SYNC_MEMOPS)");
}

Status Driver::buffer_id(uintptr_t ptr, uint64_t* out) {
  if (!available_) return Status::error(Errc::no_device, reason_);
  CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_BUFFER_ID;
  unsigned long long id = 0;
  void* data[] = {&id};
  Status s = drv_check(entry_->cuPointerGetAttributes(1, &attr, data, static_cast<CUdeviceptr>(ptr)),
                       "cuPointerGetAttributes(BUFFER_ID)");
  if (s) *out = id;
  return s;
}

Status Driver::vmm_range(uintptr_t ptr, bool* is_vmm, uintptr_t* base, size_t* size) {
  if (!available_) return Status::error(Errc::no_device, reason_);
  CUmemGenericAllocationHandle h = 0;
  if (entry_->cuMemRetainAllocationHandle(&h, reinterpret_cast<void*>(ptr)) != CUDA_SUCCESS) {
    *is_vmm = false;  // a probe: refusal means "not cuMemMap-ed"
    return Status{};
  }
  Status s = drv_check(entry_->cuMemRelease(h), "cuMemRelease");
  CUdeviceptr b = 0;
  size_t sz = 0;
  if (s) s = drv_check(entry_->cuMemGetAddressRange(&b, &sz, static_cast<CUdeviceptr>(ptr)),
                       "cuMemGetAddressRange");
  if (!s) return s;
  *is_vmm = true;
  *base = static_cast<uintptr_t>(b);
  *size = sz;
  return Status{};
}

Status Driver::device_uuid(int device, uint8_t out[16]) {
  if (!available_) return Status::error(Errc::no_device, reason_);
  CUdevice dev = 0;
  CUuuid uuid;
  Status s = drv_check(entry_->cuDeviceGet(&dev, device), "cuDeviceGet");
  if (s) s = drv_check(entry_->cuDeviceGetUuid(&uuid, dev), "cuDeviceGetUuid");
  if (s) std::memcpy(out, uuid.bytes, 16);
  return s;
}

Status Driver::ipc_get_handle(uintptr_t base, int device, IpcHandle* out) {
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  cudaIpcMemHandle_t h;
  static_assert(sizeof h == sizeof out->bytes);
  Status s = rt_check(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)), "cudaIpcGetMemHandle");
  if (s) std::memcpy(out->bytes, &h, sizeof h);
  return s;
}

Status Driver::ipc_open(const IpcHandle& handle, int device, uintptr_t* mapped) {
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes, sizeof h);
  void* p = nullptr;
  Status s = rt_check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  if (s) *mapped = reinterpret_cast<uintptr_t>(p);
  return s;
}

Status Driver::ipc_close(uintptr_t mapped, int device) {
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  return rt_check(cudaIpcCloseMemHandle(reinterpret_cast<void*>(mapped)), "cudaIpcCloseMemHandle");
}

Status Driver::host_alloc(size_t bytes, int device, void** out) {
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  void* p = nullptr;
  Status s = rt_check(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc");
  if (s) *out = p;
  return s;
}

Status Driver::host_free(void* ptr) {
  if (!available_) return Status::error(Errc::no_device, reason_);
  return rt_check(cudaFreeHost(ptr), "cudaFreeHost");
}

Status Driver::host_register(void* ptr, size_t bytes, int device) {
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  return rt_check(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable), "cudaHostRegister");
}

Status Driver::host_unregister(void* ptr) {
  if (!available_) return Status::error(Errc::no_device, reason_);
  return rt_check(cudaHostUnregister(ptr), "cudaHostUnregister");
}

bool Driver::stream_write_value64(int device) const {
  if (!available_ || !entry_->cuStreamWriteValue64) return false;
  CUdevice dev = 0;
  int v = 0;
  if (entry_->cuDeviceGet(&dev, device) != CUDA_SUCCESS) return false;
  if (entry_->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) != CUDA_SUCCESS)
    return false;
  return v != 0;
}

bool Driver::mps_enabled(int device) const {
  if (!available_) return false;
  CUdevice dev = 0;
  int v = 0;
  if (entry_->cuDeviceGet(&dev, device) != CUDA_SUCCESS) return false;
  if (entry_->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev) != CUDA_SUCCESS) return false;
  return v != 0;
}

Status Driver::push_device(int device, void** previous, bool* switched) {
  if (!available_) return Status::error(Errc::no_device, reason_);
  if (device < 0 || device >= device_count_)
    return Status::error(Errc::invalid_argument, "DeviceGuard: no such device", device);
  CUcontext ctx = entry_->primary[device].load(std::memory_order_acquire);
  if (ctx == nullptr) {
    std::lock_guard<std::mutex> lock(entry_->primary_mu);
    ctx = entry_->primary[device].load(std::memory_order_relaxed);
    if (ctx == nullptr) {
      CUdevice dev = 0;
      Status s = drv_check(entry_->cuDeviceGet(&dev, device), "cuDeviceGet");
      if (s) s = drv_check(entry_->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
      if (!s) return s;
      entry_->primary[device].store(ctx, std::memory_order_release);
    }
  }
  CUcontext cur = nullptr;
  Status s = drv_check(entry_->cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (!s) return s;
  *previous = cur;
  *switched = cur != ctx;
  if (*switched) return drv_check(entry_->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return Status{};
}

void Driver::pop_device(void* previous) {
  Status s = drv_check(entry_->cuCtxSetCurrent(static_cast<CUcontext>(previous)), "cuCtxSetCurrent");
  detail::log_failure(LogLevel::warn, "DeviceGuard restore", s);
}

#else  // !GPUWIRE_HAVE_CUDA

Driver::Driver() { reason_ = "gpuwire built without CUDA"; }

Driver& Driver::instance() {
  static Driver* d = new Driver();
  return *d;
}

namespace detail {
const char* native_error_name(NativeApi, int) { return "CUDA_ERROR"; }
}  // namespace detail

Status Driver::pointer_attributes(uintptr_t, PointerAttributes*) { return no_cuda_status(); }
Status Driver::buffer_id(uintptr_t, uint64_t*) { return no_cuda_status(); }
Status Driver::set_sync_memops(uintptr_t) { return no_cuda_status(); }
Status Driver::vmm_range(uintptr_t, bool*, uintptr_t*, size_t*) { return no_cuda_status(); }
Status Driver::device_uuid(int, uint8_t*) { return no_cuda_status(); }
Status Driver::ipc_get_handle(uintptr_t, int, IpcHandle*) { return no_cuda_status(); }
Status Driver::ipc_open(const IpcHandle&, int, uintptr_t*) { return no_cuda_status(); }
Status Driver::ipc_close(uintptr_t, int) { return no_cuda_status(); }
Status Driver::host_alloc(size_t, int, void**) { return no_cuda_status(); }
Status Driver::host_free(void*) { return no_cuda_status(); }
Status Driver::host_register(void*, size_t, int) { return no_cuda_status(); }
Status Driver::host_unregister(void*) { return no_cuda_status(); }
bool Driver::stream_write_value64(int) const { return false; }
bool Driver::mps_enabled(int) const { return false; }
Status Driver::push_device(int, void**, bool*) { return no_cuda_status(); }
void Driver::pop_device(void*) {}

#endif  // GPUWIRE_HAVE_CUDA

namespace {
// Status::message() names CUDA's error codes through this (status.cpp).
[[maybe_unused]] const bool g_namer_set =
    (detail::set_error_namer(&detail::native_error_name), true);
}  // namespace

DeviceGuard::DeviceGuard(int device) {
  bool switched = false;
  status_ = Driver::instance().push_device(device, &previous_, &switched);
  active_ = status_.ok() && switched;
}

DeviceGuard::~DeviceGuard() {
  if (active_) Driver::instance().pop_device(previous_);
}

DeviceGuard::DeviceGuard(DeviceGuard&& other) noexcept
    : status_(other.status_), previous_(other.previous_), active_(other.active_) {
  other.active_ = false;
}

}  // namespace gpuwire::cuda
