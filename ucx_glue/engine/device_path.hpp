// The engine's GPU side: memory classification, IPC export and mapping,
// streams, and the device copies in flight. Created only when a CUDA driver
// and at least one GPU are present; without it every buffer is host memory.
//
// Ownership: the GPU state itself (classifier, exporter, mapping cache,
// streams, pinned staging chunks, pinned bounce buffers) belongs to the
// process's one GpuContext (gpuwire/cuda/gpu_context.hpp), shared with coll
// gpuwire; a DevicePath holds one reference to it and owns the copies in
// flight, each of which owns its IPC mapping lease. A bounce buffer lent to a
// message goes back with return_bounce(); the owner destroys the DevicePath
// only once nothing (UCX included) can touch those buffers any more.
// Threading: used under the engine's lock only (the context locks what it
// shares with the collectives).
#pragma once

#include <cstdint>
#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/gpu_context.hpp"
#include "gpuwire/cuda/ipc_blob.hpp"
#include "gpuwire/cuda/ipc_exporter.hpp"
#include "gpuwire/cuda/ipc_mapping_cache.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gpuwire/cuda/pinned_cache.hpp"
#include "gpuwire/cuda/pinned_pool.hpp"
#include "gpuwire/cuda/stream.hpp"

namespace gpuwire::engine {

struct DeviceConfig {
    size_t ipc_cache_entries = 512;
    size_t ipc_cache_bytes = size_t{64} << 30;
    int streams_per_device = 4;
    size_t staging_chunk_bytes = size_t{4} << 20;
    size_t staging_max_bytes = size_t{64} << 20; // pinned host memory for staging
    size_t bounce_max_bytes = size_t{256} << 20; // pinned whole-message buffers; 0: none
    // pml_gpuwire_device_sync: copies into or out of the application's memory
    // are ordered after its GPU's legacy default stream, which the engine's
    // streams are not (stream.hpp says why): queued copies run on that stream,
    // the others wait for it first.
    bool order_after_user = true;
    // The application's host buffers pinned for reuse (HostRegistry): at
    // most this many bytes, ranges of at least host_register_min; 0: none.
    size_t host_register_bytes = 0;
    size_t host_register_min = size_t{1} << 20;
};

class DevicePath {
public:
    // Returns nullptr (with the reason in why) when there is no usable GPU.
    static std::unique_ptr<DevicePath> create(const DeviceConfig &config, std::string &why);
    ~DevicePath();

    // Memory kind of a buffer; on a driver error the buffer is taken as host
    // memory and the error is returned for logging.
    cuda::Status classify(const void *buf, size_t len, cuda::MemoryInfo &out)
    {
        return ctx_->classifier().classify(buf, len, out);
    }
    // Plain host memory by the classifier's host table alone (no driver
    // call, no lock): the host fast path's test (host_path.hpp). False means
    // "not known", to be classified.
    bool known_host(const void *buf, size_t len)
    {
        return ctx_->classifier().known_host(buf, len);
    }
    void forget_range(const void *addr, size_t len) { ctx_->classifier().invalidate(addr, len); }
    // Pageable host memory a message uses again, pinned for a DMA straight
    // to or from it (HostRegistry::pin): true when [buf, buf + len) is pinned.
    bool pin_host(const void *buf, size_t len, int device)
    {
        return ctx_->host_registry().pin(buf, len, device);
    }
    cuda::HostRegistryCounters host_registry_counters() const
    {
        return ctx_->host_registry().counters();
    }
    // Whether the process's unmaps reach the registry (UCM's hooks).
    bool host_registry_hooked() const { return ctx_->host_registry_hooked(); }

    cuda::Status export_range(const cuda::MemoryInfo &mi, const void *buf, size_t len,
                              cuda::IpcBlob *blob)
    {
        return ctx_->export_range(mi, buf, len, blob);
    }

    // The local ordinal of the GPU with this UUID, or -1.
    int device_of_uuid(const uint8_t uuid[16]) const { return ctx_->device_of_uuid(uuid); }

    // With DeviceConfig::order_after_user: waits for `device`'s legacy default
    // stream (0.3 us while the process has run no kernel, 1.5-2 us after one).
    // Errors are logged by the caller.
    cuda::Status order_after_user(int device)
    {
        return order_ ? cuda::wait_legacy_stream(device) : cuda::Status{};
    }

    // Synchronous copy between any two kinds of memory, on `device`'s stream:
    // one cudaMemcpyAsync and a stream synchronize. From or to pinned host
    // memory (a bounce buffer) this is one DMA at full speed.
    cuda::Status copy_sync(void *dst, const void *src, size_t len, int device);
    // Synchronous copy between pageable host memory and GPU memory through
    // pinned chunks (a copy from or to pageable memory is several times
    // slower): two chunks alternate so the CPU copy of one overlaps the DMA of
    // the other. to_device: src is host, dst is on the GPU; else the reverse.
    cuda::Status copy_via_pinned(void *dst, const void *src, size_t len, int device,
                                 bool to_device);

    // Starts an asynchronous copy; `token` comes back from poll() when it is done.
    struct Pending {
        void *token;
        cuda::IpcMapping mapping;
        cuda::TrackedStream *stream;
        uint64_t ticket;
        cuda::Status start; // an error: the copy never started, reported by poll() as is
    };
    cuda::Status start_copy(void *dst, const void *src, size_t len, int device,
                            cuda::IpcMapping mapping, void *token);
    // Queues a copy between device-accessible buffers for the next
    // flush_copies(), which moves every queued copy of a GPU and signals
    // their completion with one kernel (TrackedStream::copy_and_mark): the
    // copies of one progress call cost one submission. `token` comes back from
    // poll() once its copy is done (or failed).
    void queue_copy(void *dst, const void *src, size_t len, int device, cuda::IpcMapping mapping,
                    void *token);
    bool queued() const { return !queue_.empty(); }
    void flush_copies();

    // Opens (or finds) the mapping of a peer's exported range.
    cuda::Result<cuda::IpcMapping> map(uint32_t peer, const cuda::IpcBlob &blob, int device)
    {
        return ctx_->mappings().acquire(peer, blob, device);
    }

    // Calls done(token, status) for every finished copy; returns how many.
    template <class F>
    int poll(F &&done)
    {
        int n = 0;
        while (!pending_.empty()) {
            Pending &p = pending_.front();
            if (!p.start) {
                done(p.token, p.start);
            } else if (!p.stream->reached(p.ticket)) {
                cuda::Status s = p.stream->check_sometimes();
                if (s) break;
                done(p.token, s); // the stream failed: report, drop
            } else {
                done(p.token, cuda::Status{});
            }
            pending_.pop_front();
            ++n;
        }
        return n;
    }
    bool busy() const { return !pending_.empty() || !queue_.empty(); }
    // A pinned host chunk for a chunked transfer; busy when all are on loan.
    cuda::Result<cuda::PinnedChunk> acquire_pinned(int device)
    {
        return ctx_->with_pinned_pool([&](cuda::PinnedPool &p) { return p.acquire(device); });
    }
    size_t pinned_chunk_bytes() const { return ctx_->pinned_chunk_bytes(); }

    // A whole-message pinned host buffer of at least `bytes`
    // (gpuwire/cuda/pinned_cache.hpp): a device receive lands in it, a staged
    // send is copied out into it. busy when the bound cannot be met (or the
    // cache is off), the driver's error when pinning failed: the caller then
    // stages through plain host memory.
    cuda::Result<void *> lend_bounce(size_t bytes, int device)
    {
        return ctx_->with_pinned_cache(
            [&](cuda::PinnedCache &c) { return c.acquire(bytes, device); });
    }
    void return_bounce(void *buffer)
    {
        ctx_->with_pinned_cache([&](cuda::PinnedCache &c) { c.release(buffer); });
    }
    const cuda::PinnedCache &bounce_cache() const { return ctx_->pinned_cache(); }

    // Gauges: pinned staging bytes now; peer allocations mapped now (cached
    // or withdrawn but leased) and the bytes of the cached ones.
    size_t pinned_staging_bytes() const { return ctx_->pinned_staging_bytes(); }
    size_t mappings_open() const
    {
        return ctx_->mappings().entries() + ctx_->mappings().withdrawn();
    }
    size_t mapped_bytes() const { return ctx_->mappings().bytes(); }

    cuda::ClassifierCounters classifier_counters() const { return ctx_->classifier().counters(); }
    cuda::IpcCacheCounters mapping_counters() const { return ctx_->mappings().counters(); }
    cuda::IpcExporterCounters exporter_counters() const { return ctx_->exporter_counters(); }

private:
    DevicePath(cuda::GpuContext *ctx, bool order) : ctx_(ctx), order_(order) {}

    struct Queued {
        cuda::CopyItem item;
        int device;
        cuda::IpcMapping mapping;
        void *token;
    };

    cuda::GpuContext *const ctx_; // one reference, released by the destructor
    const bool order_;            // DeviceConfig::order_after_user
    std::vector<Queued> queue_;   // copies waiting for flush_copies()
    // Copies complete in the order they were issued per stream; one FIFO of
    // all of them is polled from the front (a later copy on another stream
    // waits for the earlier one to be seen, which costs nothing measurable).
    std::deque<Pending> pending_;
};

} // namespace gpuwire::engine
