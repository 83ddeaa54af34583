// cuda/ against the real driver ([gpu]): memory kinds, buffer re-use, several
// GPUs, streams with completion counters, copies. Skipped (exit 77) without a GPU.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu_gate.hpp"
#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/ipc_exporter.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gpuwire/cuda/pinned_pool.hpp"
#include "gpuwire/cuda/stream.hpp"

#if GPUWIRE_HAVE_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

using namespace gpuwire::cuda;

namespace {

#define CUDA_OK(call) REQUIRE((call) == cudaSuccess)

MemoryInfo classify(MemoryClassifier& c, const void* p, size_t len) {
  MemoryInfo info;
  Status s = c.classify(p, len, info);
  INFO(s.message());
  REQUIRE(s.ok());
  return info;
}

void wait_for(TrackedStream& ts, uint64_t ticket) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!ts.reached(ticket)) {
    if (std::chrono::steady_clock::now() > until) {
      INFO(ts.check().message());
      FAIL("ticket " << ticket << " never reached");
    }
  }
}

template <class Fn>
Fn driver_fn(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  REQUIRE(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) == cudaSuccess);
  REQUIRE(p != nullptr);
  return reinterpret_cast<Fn>(p);
}

}  // namespace

TEST_CASE("driver: loaded without libcuda linked", "[gpu][cuda]") {
  Driver& d = Driver::instance();
  REQUIRE(d.available());
  CHECK(d.device_count() >= 1);
  CHECK(d.driver_version() >= 13000);
  WARN("devices " << d.device_count() << ", driver " << d.driver_version()
                  << ", cuStreamWriteValue64 " << d.stream_write_value64(0));
  int before = -1, after = -1;
  CUDA_OK(cudaGetDevice(&before));
  {
    DeviceGuard g(d.device_count() - 1);
    REQUIRE(g.status().ok());
  }
  CUDA_OK(cudaGetDevice(&after));
  CHECK(before == after);
}

TEST_CASE("classifier: every kind of real memory", "[gpu][cuda]") {
  Driver& d = Driver::instance();
  MemoryClassifier c(d);
  IpcExporter ex(d);
  IpcBlob blob;

  std::vector<char> heap(1 << 20);
  char stack[256];
  CHECK(classify(c, heap.data(), heap.size()).kind == MemoryKind::host);
  CHECK(classify(c, stack, sizeof stack).kind == MemoryKind::host);
  CHECK(classify(c, heap.data(), heap.size()).kind == MemoryKind::host);
  CHECK(c.counters().host_hits == 1);

  void* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, 3 << 20));
  MemoryInfo di = classify(c, static_cast<char*>(dev) + 4096, 100);
  CHECK(di.kind == MemoryKind::device);
  CHECK(di.legacy_ipc_exportable());
  CHECK(di.base == reinterpret_cast<uintptr_t>(dev));
  CHECK(di.size >= (3u << 20));
  CHECK(di.buffer_id != 0);
  CHECK(di.device == 0);
  CHECK(classify(c, dev, 64).buffer_id == di.buffer_id);
  CHECK(c.counters().device_hits == 1);
  CHECK(ex.export_range(di, dev, 64, &blob).ok());

  void* pinned = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, 1 << 20));
  CHECK(classify(c, pinned, 4096).kind == MemoryKind::pinned_host);

  void* reg = std::aligned_alloc(4096, 1 << 20);
  CUDA_OK(cudaHostRegister(reg, 1 << 20, cudaHostRegisterDefault));
  MemoryInfo ri = classify(c, static_cast<char*>(reg) + 8192, 64);
  CHECK(ri.kind == MemoryKind::pinned_host);
  CUDA_OK(cudaHostUnregister(reg));
  CHECK(classify(c, static_cast<char*>(reg) + 8192, 64).kind == MemoryKind::host);  // ID gone: re-asked

  void* managed = nullptr;
  CUDA_OK(cudaMallocManaged(&managed, 1 << 20));
  CHECK(classify(c, managed, 64).kind == MemoryKind::managed);
  CHECK(ex.export_range(classify(c, managed, 64), managed, 64, &blob).code() == Errc::not_supported);

  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  void* pool = nullptr;
  CUDA_OK(cudaMallocAsync(&pool, 1 << 20, s));
  CUDA_OK(cudaStreamSynchronize(s));
  MemoryInfo pi = classify(c, pool, 64);
  CHECK(pi.kind == MemoryKind::device);
  CHECK((pi.flags & kMemPool) != 0);
  CHECK_FALSE(pi.legacy_ipc_exportable());
  CHECK(ex.export_range(pi, pool, 64, &blob).code() == Errc::not_supported);
  const uint64_t pool_id = pi.buffer_id;
  CUDA_OK(cudaFreeAsync(pool, s));
  void* pool2 = nullptr;
  CUDA_OK(cudaMallocAsync(&pool2, 1 << 20, s));
  CUDA_OK(cudaStreamSynchronize(s));
  MemoryInfo pi2 = classify(c, pool2, 64);
  uint64_t fresh = 0;
  REQUIRE(d.buffer_id(reinterpret_cast<uintptr_t>(pool2), &fresh).ok());
  CHECK(pi2.buffer_id == fresh);  // the cache agrees with the driver, re-use or not
  WARN("cudaMallocAsync re-use: same address " << (pool2 == pool) << ", buffer IDs " << pool_id << " -> "
                                               << pi2.buffer_id);
  CUDA_OK(cudaFreeAsync(pool2, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaStreamDestroy(s));

  CUDA_OK(cudaFree(managed));
  std::free(reg);
  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaFree(dev));
  CHECK(c.counters().driver_errors == 0);
}

TEST_CASE("classifier: cuMemMap-ed memory", "[gpu][cuda]") {
  auto create = driver_fn<PFN_cuMemCreate_v10020>("cuMemCreate");
  auto reserve = driver_fn<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve");
  auto map = driver_fn<PFN_cuMemMap_v10020>("cuMemMap");
  auto set_access = driver_fn<PFN_cuMemSetAccess_v10020>("cuMemSetAccess");
  auto unmap = driver_fn<PFN_cuMemUnmap_v10020>("cuMemUnmap");
  auto release = driver_fn<PFN_cuMemRelease_v10020>("cuMemRelease");
  auto addr_free = driver_fn<PFN_cuMemAddressFree_v10020>("cuMemAddressFree");
  auto granularity = driver_fn<PFN_cuMemGetAllocationGranularity_v10020>("cuMemGetAllocationGranularity");
  CUDA_OK(cudaFree(nullptr));  // the primary context exists

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t g = 0;
  REQUIRE(granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
  CUdeviceptr va = 0;
  REQUIRE(reserve(&va, 4 * g, 0, 0, 0) == CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  MemoryClassifier c(Driver::instance());
  uint64_t ids[2] = {0, 0};
  for (int round = 0; round < 2; ++round) {  // round 1: a new allocation at the same address
    CUmemGenericAllocationHandle h;
    REQUIRE(create(&h, 2 * g, &prop, 0) == CUDA_SUCCESS);
    REQUIRE(map(va + g, 2 * g, 0, h, 0) == CUDA_SUCCESS);
    REQUIRE(set_access(va + g, 2 * g, &access, 1) == CUDA_SUCCESS);
    MemoryInfo info = classify(c, reinterpret_cast<void*>(va + g + 100), 64);
    CHECK(info.kind == MemoryKind::vmm);
    CHECK(info.base == va + g);
    CHECK(info.size == 2 * g);
    CHECK(info.on_gpu());
    uint64_t fresh = 0;
    REQUIRE(Driver::instance().buffer_id(va + g + 100, &fresh).ok());
    CHECK(info.buffer_id == fresh);
    CHECK(classify(c, reinterpret_cast<void*>(va + g), 64).buffer_id == fresh);
    ids[round] = info.buffer_id;
    REQUIRE(unmap(va + g, 2 * g) == CUDA_SUCCESS);
    REQUIRE(release(h) == CUDA_SUCCESS);
  }
  WARN("VMM remap at the same address: buffer IDs " << ids[0] << " -> " << ids[1]);
  CHECK(ids[0] != ids[1]);
  CHECK(c.counters().stale >= 1);  // the cached entry of round 0 was caught
  REQUIRE(addr_free(va, 4 * g) == CUDA_SUCCESS);
}

TEST_CASE("classifier: a freed and re-allocated buffer is never served stale", "[gpu][cuda]") {
  MemoryClassifier c(Driver::instance());
  int same = 0;
  for (int i = 0; i < 8; ++i) {
    void* a = nullptr;
    CUDA_OK(cudaMalloc(&a, 8 << 20));
    const uint64_t first = classify(c, a, 64).buffer_id;
    CUDA_OK(cudaFree(a));
    void* b = nullptr;
    CUDA_OK(cudaMalloc(&b, 8 << 20));
    MemoryInfo again = classify(c, b, 64);
    uint64_t fresh = 0;
    REQUIRE(Driver::instance().buffer_id(reinterpret_cast<uintptr_t>(b), &fresh).ok());
    CHECK(again.buffer_id == fresh);
    if (a == b) {
      ++same;
      CHECK(again.buffer_id != first);
    }
    CUDA_OK(cudaFree(b));
  }
  WARN("re-allocated at the same address " << same << "/8 times; stale entries caught: " << c.counters().stale);
  CHECK(c.counters().stale >= static_cast<uint64_t>(same));
}

TEST_CASE("streams: copies through pinned chunks, completion by counters", "[gpu][cuda]") {
  Driver& d = Driver::instance();
  for (bool kernel : {false, true}) {
    INFO("kernel signal " << kernel);
    StreamPoolConfig scfg;
    scfg.force_kernel_signal = kernel;
    StreamPool pool(scfg);
    Result<TrackedStream*> ts = pool.next(0);
    REQUIRE(ts.ok());
    CHECK((*ts)->signals_by_kernel() == (kernel || !d.stream_write_value64(0)));
    PinnedPoolConfig pcfg;
    pcfg.chunk_bytes = 1 << 20;
    pcfg.chunks_per_slab = 2;
    pcfg.max_slabs = 1;
    PinnedPool pinned(d, pcfg);
    Result<PinnedChunk> src = pinned.acquire(), dst = pinned.acquire();
    REQUIRE(src.ok());
    REQUIRE(dst.ok());
    auto* s = static_cast<uint8_t*>(src->data());
    for (size_t i = 0; i < src->size(); ++i) s[i] = static_cast<uint8_t>(i * 7 + 3);
    std::memset(dst->data(), 0, dst->size());
    void* dev = nullptr;
    void* dev2 = nullptr;
    CUDA_OK(cudaMalloc(&dev, 1 << 20));
    CUDA_OK(cudaMalloc(&dev2, 1 << 20));
    const auto& st = (*ts)->stream();
    REQUIRE(copy_async(dev, src->data(), 1 << 20, st).ok());
    REQUIRE(copy_async(dev2, dev, 1 << 20, st).ok());
    REQUIRE(copy_async(dst->data(), dev2, 1 << 20, st).ok());
    Result<uint64_t> t = (*ts)->mark();
    REQUIRE(t.ok());
    wait_for(**ts, *t);
    CHECK(std::memcmp(src->data(), dst->data(), 1 << 20) == 0);
    for (int i = 0; i < 100; ++i) REQUIRE((*ts)->mark().ok());
    REQUIRE(st.synchronize().ok());
    CHECK((*ts)->completed() == (*ts)->issued());
    CHECK((*ts)->issued() == *t + 100);
    CHECK((*ts)->check().ok());

    Result<Event> ev = Event::create(0);
    REQUIRE(ev.ok());
    REQUIRE(ev->record(st).ok());
    REQUIRE(ev->synchronize().ok());
    CHECK(ev->done().value());
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFree(dev2));
  }
}

TEST_CASE("streams: copy_and_mark copies a batch and signals it with one kernel", "[gpu][cuda]") {
  // Non-blocking and blocking streams; sizes around the kernel's block
  // share; source and destination at every alignment the engine may see.
  for (uint64_t mask : {uint64_t{0}, ~uint64_t{0}}) {
    INFO("non-blocking mask " << mask);
    StreamPoolConfig scfg;
    scfg.nonblocking_mask = mask;
    StreamPool pool(scfg);
    Result<TrackedStream*> ts = pool.next(0);
    REQUIRE(ts.ok());
    const size_t total = 24 << 20;
    std::vector<uint8_t> host(total), back(total);
    for (size_t i = 0; i < total; ++i) host[i] = static_cast<uint8_t>(i * 13 + (i >> 11));
    void* src = nullptr;
    void* dst = nullptr;
    CUDA_OK(cudaMalloc(&src, total));
    CUDA_OK(cudaMalloc(&dst, total));
    CUDA_OK(cudaMemcpy(src, host.data(), total, cudaMemcpyHostToDevice));
    const size_t sizes[] = {1, 7, 8, 15, 16, 17, 4095, 4096, 16384, 16385, 65536, 100003,
                            1 << 20, (3 << 20) + 5, 9 << 20};
    const size_t shifts[] = {0, 1, 4, 8, 3};
    uint64_t last = 0;
    for (int batch : {1, 5, 15, kCopyBatchMax}) {
      INFO("batch " << batch);
      CUDA_OK(cudaMemset(dst, 0, total));
      std::vector<CopyItem> items;
      std::vector<size_t> at;  // where each item starts (the same offset at both ends but for the shift)
      size_t off = 0;
      for (int i = 0; i < batch; ++i) {
        size_t len = sizes[i % (sizeof sizes / sizeof sizes[0])];
        if (batch == kCopyBatchMax) len = std::min<size_t>(len, 65536);
        const size_t so = off + shifts[i % 5], dso = off + shifts[(i + 2) % 5];
        REQUIRE(std::max(so, dso) + len <= total);
        items.push_back(CopyItem{static_cast<char*>(dst) + dso, static_cast<char*>(src) + so, len});
        at.push_back(so);
        off += len + 64;
      }
      Result<uint64_t> t = (*ts)->copy_and_mark(items.data(), batch);
      REQUIRE(t.ok());
      CHECK(*t == last + 1);
      last = *t;
      wait_for(**ts, *t);
      CUDA_OK(cudaMemcpy(back.data(), dst, total, cudaMemcpyDeviceToHost));
      for (int i = 0; i < batch; ++i) {
        INFO("item " << i << ": " << items[i].len << " bytes");
        const size_t d = static_cast<char*>(items[i].dst) - static_cast<char*>(dst);
        CHECK(std::memcmp(back.data() + d, host.data() + at[i], items[i].len) == 0);
        // nothing written around it
        if (d > 0) CHECK(back[d - 1] == 0);
        CHECK(back[d + items[i].len] == 0);
      }
    }
    // Mixed with mark(): the tickets stay in order on one stream.
    CopyItem one{dst, src, 8};
    REQUIRE((*ts)->mark().ok());
    Result<uint64_t> t = (*ts)->copy_and_mark(&one, 1);
    REQUIRE(t.ok());
    CHECK(*t == last + 2);
    wait_for(**ts, *t);
    CHECK((*ts)->check().ok());
    CUDA_OK(cudaFree(src));
    CUDA_OK(cudaFree(dst));
  }
}

TEST_CASE("several GPUs: ordinals and peer copies", "[gpu][cuda]") {
  Driver& d = Driver::instance();
  if (d.device_count() < 2) {
    WARN("one GPU: nothing to check");
    return;
  }
  MemoryClassifier c(d);
  void* on0 = nullptr;
  void* on1 = nullptr;
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaMalloc(&on1, 4 << 20));
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaMalloc(&on0, 4 << 20));
  CHECK(classify(c, on1, 64).device == 1);
  CHECK(classify(c, on0, 64).device == 0);

  REQUIRE(enable_peer_access(0, 1).ok());
  REQUIRE(enable_peer_access(0, 1).ok());  // idempotent
  REQUIRE(enable_peer_access(1, 0).ok());
  StreamPool pool;
  Result<TrackedStream*> ts = pool.next(0);
  REQUIRE(ts.ok());
  std::vector<uint8_t> host(4 << 20), back(4 << 20);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i ^ (i >> 9));
  CUDA_OK(cudaMemcpy(on0, host.data(), host.size(), cudaMemcpyHostToDevice));
  REQUIRE(copy_peer_async(on1, 1, on0, 0, host.size(), (*ts)->stream()).ok());
  Result<uint64_t> t = (*ts)->mark();
  REQUIRE(t.ok());
  wait_for(**ts, *t);
  CUDA_OK(cudaMemcpy(back.data(), on1, back.size(), cudaMemcpyDeviceToHost));
  const bool same_bytes = host == back;  // not CHECK(a == b): Catch would print 4 MiB
  CHECK(same_bytes);
  // the same through unified addressing on a stream of device 1
  Result<TrackedStream*> ts1 = pool.next(1);
  REQUIRE(ts1.ok());
  CUDA_OK(cudaMemset(on1, 0x5a, 4 << 20));  // on device 0's legacy stream, async to the host
  CUDA_OK(cudaDeviceSynchronize());
  REQUIRE(copy_async(on0, on1, 4 << 20, (*ts1)->stream()).ok());
  Result<uint64_t> t1 = (*ts1)->mark();
  REQUIRE(t1.ok());
  wait_for(**ts1, *t1);
  CUDA_OK(cudaMemcpy(back.data(), on0, back.size(), cudaMemcpyDeviceToHost));
  const bool all_5a = back == std::vector<uint8_t>(4 << 20, 0x5a);
  CHECK(all_5a);
  CUDA_OK(cudaFree(on0));
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaFree(on1));
  CUDA_OK(cudaSetDevice(0));
}

#else  // host-only build: the gate above exits 77 before any test runs

// Reached only where the gate did not skip: a host-only build must never
// find a usable driver, and must say why in one line.
TEST_CASE("gpu tests need a CUDA build", "[gpu][cuda]") {
  gpuwire::cuda::Driver& d = gpuwire::cuda::Driver::instance();
  CHECK_FALSE(d.available());
  REQUIRE(d.unavailable_reason() != nullptr);
  CHECK(std::strlen(d.unavailable_reason()) > 0);
}

#endif
