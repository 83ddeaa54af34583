// cuda_floor_bench: the CUDA floors gpuwire's protocols stand on, as medians.
//   - 8-byte cudaMemcpyAsync D2H / H2D (pinned) and GPU0->GPU1, each + stream sync
//   - cudaMemcpyPeer GPU0->GPU1 bandwidth, 4 MiB .. 1 GiB
//   - pinned H2D / D2H bandwidth
//   - completion: TrackedStream::mark + reached vs event record + query
//   - MemoryClassifier cost per call: host/device, cache hit/miss
//   - what a small device message pays besides its copy: waiting for the
//     idle legacy default stream, an interprocess event's record there and
//     a stream's wait on an event, a DeviceGuard switch
// Usage: cuda_floor_bench [reps]   (prints a table; exits 77 without a GPU)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <cuda_runtime_api.h>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gpuwire/cuda/stream.hpp"

using namespace gpuwire::cuda;
using Clock = std::chrono::steady_clock;

namespace {

int g_reps = 1000;

__global__ void empty_kernel() {}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorName(e));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median wall time of one call of fn, in microseconds.
double time_us(int reps, const std::function<void()>& fn) {
  for (int i = 0; i < std::max(3, reps / 20); ++i) fn();
  std::vector<double> t;
  t.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
  }
  return median(t);
}

// Median wall time of fn alone, with setup run (untimed) before each call.
double time_after_us(int reps, const std::function<void()>& setup, const std::function<void()>& fn) {
  std::vector<double> t;
  t.reserve(reps);
  for (int i = 0; i < reps + std::max(3, reps / 20); ++i) {
    setup();
    auto a = Clock::now();
    fn();
    if (i >= std::max(3, reps / 20)) t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
  }
  return median(t);
}

// Median nanoseconds per call over batches of `batch` calls.
double ns_per_call(int batch, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r < 50; ++r) {
    auto a = Clock::now();
    for (int i = 0; i < batch; ++i) fn();
    t.push_back(std::chrono::duration<double, std::nano>(Clock::now() - a).count() / batch);
  }
  return median(t);
}

// Median GB/s of one copy of `bytes` on `s`, timed with events.
double gbps(size_t bytes, cudaStream_t s, const std::function<void()>& copy) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  copy();
  check(cudaStreamSynchronize(s), "sync");
  const int reps = bytes >= (size_t{256} << 20) ? 5 : 20;
  std::vector<double> v;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a, s), "record");
    copy();
    check(cudaEventRecord(b, s), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    v.push_back(bytes / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(v);
}

void row(const char* what, double value, const char* unit) { std::printf("%-52s %10.3f %s\n", what, value, unit); }

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_reps = std::max(10, std::atoi(argv[1]));
  Driver& drv = Driver::instance();
  if (!drv.available()) {
    std::printf("SKIP: no GPU (CUDA driver or device absent): %s\n", drv.unavailable_reason());
    return 77;
  }
  const int ngpu = drv.device_count();
  std::printf("cuda_floor_bench: %d GPU(s), driver %d, %d reps; medians\n", ngpu, drv.driver_version(), g_reps);

  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  void *d8 = nullptr, *h8 = nullptr;
  check(cudaMalloc(&d8, 64), "cudaMalloc");
  check(cudaMallocHost(&h8, 64), "cudaMallocHost");

  row("8 B cudaMemcpyAsync D2H (pinned) + sync", time_us(g_reps, [&] {
        check(cudaMemcpyAsync(h8, d8, 8, cudaMemcpyDeviceToHost, s), "memcpy");
        check(cudaStreamSynchronize(s), "sync");
      }), "us");
  row("8 B cudaMemcpyAsync H2D (pinned) + sync", time_us(g_reps, [&] {
        check(cudaMemcpyAsync(d8, h8, 8, cudaMemcpyHostToDevice, s), "memcpy");
        check(cudaStreamSynchronize(s), "sync");
      }), "us");
  // 8 bytes device to device on one GPU, then a synchronize of the stream.
  auto d2d8 = [&](cudaStream_t st) {
    check(cudaMemcpyAsync(static_cast<char*>(d8) + 32, d8, 8, cudaMemcpyDeviceToDevice, st), "memcpy");
    check(cudaStreamSynchronize(st), "sync");
  };
  // The same-GPU D D floor (two ranks on one GPU, under MPS for a fair figure).
  row("8 B cudaMemcpyAsync D2D (same GPU) + sync", time_us(g_reps, [&] { d2d8(s); }), "us");
  row("8 B cudaMemcpyAsync issue only (D2H)", time_us(g_reps, [&] {
        check(cudaMemcpyAsync(h8, d8, 8, cudaMemcpyDeviceToHost, s), "memcpy");
      }), "us");
  check(cudaStreamSynchronize(s), "sync");

  // Completion: a value written by the stream vs an event queried in a loop.
  {
    StreamPool pool;
    TrackedStream* ts = pool.next(0).value();
    row("TrackedStream::mark issue", time_us(g_reps, [&] { (void)ts->mark(); }), "us");
    check(cudaStreamSynchronize(ts->handle()), "sync");
    row("8 B D2H + mark + spin on reached()", time_us(g_reps, [&] {
          check(cudaMemcpyAsync(h8, d8, 8, cudaMemcpyDeviceToHost, ts->handle()), "memcpy");
          uint64_t t = ts->mark().value();
          while (!ts->reached(t)) {
          }
        }), "us");
    // The engine's small receive: the copy and its signal in one kernel.
    gpuwire::cuda::CopyItem item{static_cast<char*>(d8) + 32, d8, 8};
    row("8 B D2D copy_and_mark (one kernel) + spin on reached()", time_us(g_reps, [&] {
          uint64_t t = ts->copy_and_mark(&item, 1).value();
          while (!ts->reached(t)) {
          }
        }), "us");
    // Same-GPU D2D: what moves it (SMs or a copy engine) and what signals it.
    row("8 B D2D cudaMemcpyAsync + mark + spin on reached()", time_us(g_reps, [&] {
          check(cudaMemcpyAsync(static_cast<char*>(d8) + 32, d8, 8, cudaMemcpyDeviceToDevice, ts->handle()), "memcpy");
          uint64_t t = ts->mark().value();
          while (!ts->reached(t)) {
          }
        }), "us");
    // What any submission costs: the signal alone, an empty kernel, and a
    // small same-GPU copy taken by the copy engines through pinned memory.
    row("mark alone + spin on reached()", time_us(g_reps, [&] {
          uint64_t t = ts->mark().value();
          while (!ts->reached(t)) {
          }
        }), "us");
    row("empty kernel + mark + spin on reached()", time_us(g_reps, [&] {
          empty_kernel<<<1, 1, 0, ts->handle()>>>();
          check(cudaGetLastError(), "launch");
          uint64_t t = ts->mark().value();
          while (!ts->reached(t)) {
          }
        }), "us");
    // Back to back on one stream, a kernel may wait for the previous one to
    // retire after its mark was seen: the same copies over the pool's streams in turn.
    row("8 B D2D copy_and_mark, streams in turn + spin", time_us(g_reps, [&] {
          TrackedStream* st = pool.next(0).value();
          uint64_t t = st->copy_and_mark(&item, 1).value();
          while (!st->reached(t)) {
          }
        }), "us");
    row("8 B D2D cudaMemcpyAsync + mark, streams in turn + spin", time_us(g_reps, [&] {
          TrackedStream* st = pool.next(0).value();
          check(cudaMemcpyAsync(static_cast<char*>(d8) + 32, d8, 8, cudaMemcpyDeviceToDevice, st->handle()), "memcpy");
          uint64_t t = st->mark().value();
          while (!st->reached(t)) {
          }
        }), "us");
    row("8 B D2D as D2H + H2D via pinned + mark + spin", time_us(g_reps, [&] {
          check(cudaMemcpyAsync(h8, d8, 8, cudaMemcpyDeviceToHost, ts->handle()), "memcpy");
          check(cudaMemcpyAsync(static_cast<char*>(d8) + 32, h8, 8, cudaMemcpyHostToDevice, ts->handle()), "memcpy");
          uint64_t t = ts->mark().value();
          while (!ts->reached(t)) {
          }
        }), "us");
    row("8 B H2D + mark + spin on reached()", time_us(g_reps, [&] {
          check(cudaMemcpyAsync(d8, h8, 8, cudaMemcpyHostToDevice, ts->handle()), "memcpy");
          uint64_t t = ts->mark().value();
          while (!ts->reached(t)) {
          }
        }), "us");
    {
      void* dsts[1] = {static_cast<char*>(d8) + 32};
      const void* srcs[1] = {d8};
      size_t sizes[1] = {8};
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t idx = 0;
      row("8 B D2D cudaMemcpyBatchAsync (copy engine hint) + mark + spin", time_us(g_reps, [&] {
            check(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &idx, 1, ts->handle()), "batch memcpy");
            uint64_t t = ts->mark().value();
            while (!ts->reached(t)) {
            }
          }), "us");
    }
    {
      StreamPoolConfig nb;
      nb.nonblocking_mask = ~uint64_t{0};
      StreamPool nbpool(nb);
      TrackedStream* ns = nbpool.next(0).value();
      row("8 B D2D copy_and_mark, non-blocking stream + spin", time_us(g_reps, [&] {
            uint64_t t = ns->copy_and_mark(&item, 1).value();
            while (!ns->reached(t)) {
            }
          }), "us");
      row("cudaStreamSynchronize(legacy) after non-blocking copy_and_mark", time_after_us(g_reps, [&] {
            uint64_t t = ns->copy_and_mark(&item, 1).value();
            while (!ns->reached(t)) {
            }
          }, [] { check(cudaStreamSynchronize(cudaStreamLegacy), "sync legacy"); }), "us");
    }
    cudaEvent_t ev;
    check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event");
    row("8 B D2H + event record + spin on cudaEventQuery", time_us(g_reps, [&] {
          check(cudaMemcpyAsync(h8, d8, 8, cudaMemcpyDeviceToHost, ts->handle()), "memcpy");
          check(cudaEventRecord(ev, ts->handle()), "record");
          while (cudaEventQuery(ev) == cudaErrorNotReady) {
          }
        }), "us");
    row("cudaEventQuery on finished work", time_us(g_reps, [&] { (void)cudaEventQuery(ev); }), "us");
    row("TrackedStream::reached (one load)", ns_per_call(100000, [&] { (void)ts->reached(1); }) / 1000, "us");
    cudaEventDestroy(ev);
  }

  // Per-message costs besides the copy (the legacy default stream idle).
  {
    check(cudaDeviceSynchronize(), "sync");
    auto sync_legacy = [] { check(cudaStreamSynchronize(cudaStreamLegacy), "sync legacy"); };
    row("cudaStreamSynchronize(legacy), idle", time_us(g_reps, sync_legacy), "us");
    row("cudaStreamQuery(legacy), idle", time_us(g_reps, [&] {
          check(cudaStreamQuery(cudaStreamLegacy), "query legacy");
        }), "us");
    // The engine's streams are blocking ones (ordered after the legacy
    // stream): the sender's wait for the legacy stream follows copies there.
    cudaStream_t sb;
    check(cudaStreamCreateWithFlags(&sb, cudaStreamDefault), "blocking stream");
    auto copy_on_sb = [&] {
      check(cudaMemcpyAsync(h8, d8, 8, cudaMemcpyDeviceToHost, sb), "memcpy");
      check(cudaStreamSynchronize(sb), "sync");
    };
    row("8 B D2H + sync on a blocking stream", time_us(g_reps, copy_on_sb), "us");
    row("cudaStreamSynchronize(legacy) after a blocking-stream copy", time_after_us(g_reps, copy_on_sb, sync_legacy), "us");
    row("cudaStreamQuery(legacy) after a blocking-stream copy", time_after_us(g_reps, copy_on_sb, [&] {
          check(cudaStreamQuery(cudaStreamLegacy), "query legacy");
        }), "us");
    // A process holds several such streams (the engine's pool, the pack
    // stream, coll's): the legacy stream's wait may look at each.
    for (unsigned flags : {unsigned(cudaStreamDefault), unsigned(cudaStreamNonBlocking)}) {
      std::vector<cudaStream_t> many(8);
      for (auto& m : many) check(cudaStreamCreateWithFlags(&m, flags), "stream");
      auto copy_on_each = [&] {
        for (auto m : many) check(cudaMemcpyAsync(h8, d8, 8, cudaMemcpyDeviceToHost, m), "memcpy");
        for (auto m : many) check(cudaStreamSynchronize(m), "sync");
      };
      row(flags == cudaStreamDefault ? "cudaStreamSynchronize(legacy) after copies on 8 blocking streams"
                                     : "cudaStreamSynchronize(legacy) after copies on 8 non-blocking",
          time_after_us(g_reps, copy_on_each, sync_legacy), "us");
      for (auto m : many) check(cudaStreamDestroy(m), "cudaStreamDestroy");
    }
    cudaEvent_t ipc;
    check(cudaEventCreateWithFlags(&ipc, cudaEventDisableTiming | cudaEventInterprocess), "ipc event");
    cudaIpcEventHandle_t h;
    check(cudaIpcGetEventHandle(&h, ipc), "cudaIpcGetEventHandle");
    row("cudaEventRecord(interprocess event, legacy)", time_us(g_reps, [&] {
          check(cudaEventRecord(ipc, cudaStreamLegacy), "record");
        }), "us");
    check(cudaDeviceSynchronize(), "sync");
    row("cudaStreamWaitEvent(stream, interprocess event), issue", time_us(g_reps, [&] {
          check(cudaStreamWaitEvent(s, ipc, 0), "wait");
        }), "us");
    check(cudaStreamSynchronize(s), "sync");
    row("8 B H2D after a wait on an interprocess event + sync", time_us(g_reps, [&] {
          check(cudaEventRecord(ipc, cudaStreamLegacy), "record");
          check(cudaStreamWaitEvent(s, ipc, 0), "wait");
          check(cudaMemcpyAsync(d8, h8, 8, cudaMemcpyHostToDevice, s), "memcpy");
          check(cudaStreamSynchronize(s), "sync");
        }), "us");
    check(cudaEventDestroy(ipc), "destroy");
    // Last in this block: once a device-to-device copy has run on a blocking
    // stream, every later wait or query of the legacy stream costs more, for
    // the rest of the process (the rows above measure the state before).
    row("cudaStreamSynchronize(legacy) after a blocking-stream D2D",
        time_after_us(g_reps, [&] { d2d8(sb); }, sync_legacy), "us");
    row("cudaStreamSynchronize(legacy), idle, after a blocking-stream D2D", time_us(g_reps, sync_legacy), "us");
    cudaEvent_t done;
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
    row("cudaEventRecord(legacy) + cudaEventQuery, after a blocking-stream D2D", time_us(g_reps, [&] {
          check(cudaEventRecord(done, cudaStreamLegacy), "record");
          while (cudaEventQuery(done) == cudaErrorNotReady) {
          }
        }), "us");
    check(cudaEventDestroy(done), "cudaEventDestroy");
    row("8 B D2D + sync on the legacy stream", time_us(g_reps, [&] { d2d8(cudaStreamLegacy); }), "us");
    check(cudaStreamDestroy(sb), "cudaStreamDestroy");
    row("DeviceGuard on the current device", time_us(g_reps, [&] {
          DeviceGuard g(0);
          (void)g;
        }), "us");
  }

  // The classifier.
  {
    std::vector<char> host(1 << 20);
    void* dev = nullptr;
    check(cudaMalloc(&dev, 1 << 20), "cudaMalloc");
    MemoryInfo info;
    MemoryClassifier cached(drv);
    ClassifierConfig none;
    none.host_entries = 0;
    none.device_entries = 0;
    MemoryClassifier uncached(drv, none);
    row("classify host, cache hit", ns_per_call(100000, [&] { (void)cached.classify(host.data(), 4096, info); }),
        "ns");
    row("classify host, miss (driver query)",
        ns_per_call(2000, [&] { (void)uncached.classify(host.data(), 4096, info); }), "ns");
    row("classify device, hit (buffer ID confirmed)",
        ns_per_call(2000, [&] { (void)cached.classify(dev, 4096, info); }), "ns");
    row("classify device, miss (full query)",
        ns_per_call(2000, [&] { (void)uncached.classify(dev, 4096, info); }), "ns");
    row("classifier invalidate() of one range (1024 entries)",
        ns_per_call(2000, [&] { cached.invalidate(host.data() + (2 << 20), 4096); }), "ns");
    check(cudaFree(dev), "cudaFree");
  }

  // Same-GPU D2D of a window of 64 copies of 4 MiB (osu_bw's window): the
  // rate a D D bandwidth test on one GPU can reach, by the copy engine
  // (cudaMemcpyAsync) and by one copy_and_mark kernel for the whole window.
  {
    const size_t one = size_t{4} << 20;
    const int window = 64;
    void *src = nullptr, *dst = nullptr;
    check(cudaMalloc(&src, one * window), "cudaMalloc");
    check(cudaMalloc(&dst, one * window), "cudaMalloc");
    row("D2D window of 64 x 4 MiB, cudaMemcpyAsync", gbps(one * window, s, [&] {
          for (int i = 0; i < window; ++i)
            check(cudaMemcpyAsync(static_cast<char*>(dst) + i * one, static_cast<char*>(src) + i * one, one,
                                  cudaMemcpyDeviceToDevice, s), "memcpy");
        }), "GB/s");
    StreamPoolConfig nb;
    nb.nonblocking_mask = ~uint64_t{0};
    StreamPool wpool(nb);
    TrackedStream* ws = wpool.next(0).value();
    std::vector<CopyItem> items;
    for (int i = 0; i < window; ++i)
      items.push_back(CopyItem{static_cast<char*>(dst) + i * one, static_cast<char*>(src) + i * one, one});
    row("D2D window of 64 x 4 MiB, one copy_and_mark kernel", gbps(one * window, ws->handle(), [&] {
          (void)ws->copy_and_mark(items.data(), window).value();
        }), "GB/s");
    check(cudaStreamSynchronize(ws->handle()), "sync");
    // The whole 256 MiB as one copy, bytes read plus bytes written: the HBM
    // rate a collective that reads and writes every buffer once is held to.
    row("D2D 256 MiB cudaMemcpyAsync, read+write counted", 2 * gbps(one * window, s, [&] {
          check(cudaMemcpyAsync(dst, src, one * window, cudaMemcpyDeviceToDevice, s), "memcpy");
        }), "GB/s");
    check(cudaFree(src), "cudaFree");
    check(cudaFree(dst), "cudaFree");
  }

  // Pinned host <-> device bandwidth.
  for (size_t mib : {1, 4, 16, 64, 256}) {
    size_t bytes = mib << 20;
    void *h = nullptr, *d = nullptr;
    check(cudaMallocHost(&h, bytes), "cudaMallocHost");
    check(cudaMalloc(&d, bytes), "cudaMalloc");
    char label[64];
    std::snprintf(label, sizeof label, "pinned H2D %zu MiB", mib);
    row(label, gbps(bytes, s, [&] { check(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s), "h2d"); }),
        "GB/s");
    std::snprintf(label, sizeof label, "pinned D2H %zu MiB", mib);
    row(label, gbps(bytes, s, [&] { check(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s), "d2h"); }),
        "GB/s");
    cudaFreeHost(h);
    cudaFree(d);
  }

  // Pageable host memory (malloc, touched) <-> device with a plain cudaMemcpy:
  // the reference for host buffers that are not pinned. Wall clock, median.
  for (size_t mib : {1, 4, 16, 64}) {
    const size_t bytes = mib << 20;
    std::vector<char> h(bytes, 1);
    void* d = nullptr;
    check(cudaMalloc(&d, bytes), "cudaMalloc");
    auto wall_gbps = [&](const std::function<void()>& copy) {
      copy();
      std::vector<double> v;
      for (int i = 0; i < (mib >= 64 ? 5 : 20); ++i) {
        auto t0 = std::chrono::steady_clock::now();
        copy();
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        v.push_back(bytes / sec / 1e9);
      }
      return median(v);
    };
    char label[64];
    std::snprintf(label, sizeof label, "pageable H2D %zu MiB (cudaMemcpy)", mib);
    row(label, wall_gbps([&] { check(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice), "h2d"); }), "GB/s");
    std::snprintf(label, sizeof label, "pageable D2H %zu MiB (cudaMemcpy)", mib);
    row(label, wall_gbps([&] { check(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost), "d2h"); }), "GB/s");
    cudaFree(d);
  }

  if (ngpu >= 2) {
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, 0, 1), "canAccessPeer");
    if (can) {
      check(cudaDeviceEnablePeerAccess(1, 0), "enablePeer 0->1");
      check(cudaSetDevice(1), "cudaSetDevice");
      check(cudaDeviceEnablePeerAccess(0, 0), "enablePeer 1->0");
      check(cudaSetDevice(0), "cudaSetDevice");
    }
    void* p1 = nullptr;
    check(cudaSetDevice(1), "cudaSetDevice");
    check(cudaMalloc(&p1, size_t{1} << 30), "cudaMalloc 1 GiB on GPU1");
    check(cudaSetDevice(0), "cudaSetDevice");
    void* p0 = nullptr;
    check(cudaMalloc(&p0, size_t{1} << 30), "cudaMalloc 1 GiB on GPU0");
    row("8 B cudaMemcpyPeerAsync GPU0->GPU1 + sync", time_us(g_reps, [&] {
          check(cudaMemcpyPeerAsync(p1, 1, p0, 0, 8, s), "peer");
          check(cudaStreamSynchronize(s), "sync");
        }), "us");
    for (size_t mib = 4; mib <= 1024; mib *= 4) {
      size_t bytes = mib << 20;
      char label[64];
      std::snprintf(label, sizeof label, "cudaMemcpyPeerAsync GPU0->GPU1 %zu MiB", mib);
      row(label, gbps(bytes, s, [&] { check(cudaMemcpyPeerAsync(p1, 1, p0, 0, bytes, s), "peer"); }), "GB/s");
    }
    cudaFree(p0);
    check(cudaSetDevice(1), "cudaSetDevice");
    cudaFree(p1);
    check(cudaSetDevice(0), "cudaSetDevice");
  } else {
    std::printf("one GPU: peer rows skipped\n");
  }

  cudaFree(d8);
  cudaFreeHost(h8);
  cudaStreamDestroy(s);
  return 0;
}
