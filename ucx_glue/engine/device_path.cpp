#include "engine/device_path.hpp"

#include <ucm/api/ucm.h>

#include <algorithm>
#include <cstring>

#include "engine/protocol.hpp"
#include "gpuwire/cuda/copy.hpp"

namespace gpuwire::engine {

const char *protocol_name(Protocol p)
{
    switch (p) {
    case Protocol::host: return "host";
    case Protocol::ipc: return "ipc";
    case Protocol::ucx_device: return "ucx-device";
    case Protocol::staged: return "staged";
    }
    return "?";
}

namespace {

// The classifier caches "plain host" answers by page range; such an answer
// stays right until the range is unmapped, so every unmap of the process is
// forwarded to it (UCM hooks munmap, mremap, shmdt and brk).
void on_vm_unmapped(ucm_event_type_t, ucm_event_t *event, void *arg)
{
    static_cast<DevicePath *>(arg)->forget_range(event->vm_unmapped.address,
                                                  event->vm_unmapped.size);
}

} // namespace

// Without unmap events a cached host answer could outlive its mapping: then
// the classifier asks the driver every time instead.
cuda::ClassifierConfig DevicePath::classifier_config()
{
    cuda::ClassifierConfig c;
    unmap_hooked_ =
        ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 1000, on_vm_unmapped, this) == UCS_OK;
    if (!unmap_hooked_) c.host_entries = 0;
    return c;
}

DevicePath::DevicePath(const DeviceConfig &config)
    : driver_(cuda::Driver::instance()),
      classifier_(driver_, classifier_config()),
      exporter_(driver_),
      mappings_(driver_, cuda::IpcCacheConfig{config.ipc_cache_entries, config.ipc_cache_bytes}),
      streams_(cuda::StreamPoolConfig{config.streams_per_device, 0, false}),
      pinned_(driver_, cuda::PinnedPoolConfig{
                           config.staging_chunk_bytes, 2,
                           std::max<size_t>(1, config.staging_max_bytes /
                                                   (2 * config.staging_chunk_bytes)),
                           0}),
      bounce_(driver_, cuda::PinnedCacheConfig{config.bounce_max_bytes, size_t{64} << 10})
{
}

std::unique_ptr<DevicePath> DevicePath::create(const DeviceConfig &config, std::string &why)
{
    cuda::Driver &drv = cuda::Driver::instance();
    if (!drv.available()) {
        why = drv.unavailable_reason();
        return nullptr;
    }
    if (drv.device_count() <= 0) {
        why = "no GPU";
        return nullptr;
    }
    std::unique_ptr<DevicePath> d(new DevicePath(config));
    for (int i = 0; i < drv.device_count(); ++i) {
        std::array<uint8_t, 16> u{};
        if (!drv.device_uuid(i, u.data())) u.fill(0);
        d->uuids_.push_back(u);
    }
    return d;
}

DevicePath::~DevicePath()
{
    // Copies still in flight hold mapping leases: wait for them.
    for (Pending &p : pending_) {
        while (!p.stream->reached(p.ticket) && p.stream->check()) {
        }
    }
    pending_.clear();
    if (unmap_hooked_) ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_vm_unmapped, this);
}

int DevicePath::device_of_uuid(const uint8_t uuid[16]) const
{
    for (size_t i = 0; i < uuids_.size(); ++i) {
        if (std::memcmp(uuids_[i].data(), uuid, 16) == 0) return static_cast<int>(i);
    }
    return -1;
}

cuda::Status DevicePath::copy_sync(void *dst, const void *src, size_t len, int device)
{
    auto s = streams_.get(device, 0);
    if (!s) return s.status();
    cuda::Status st = cuda::copy_async(dst, src, len, (*s)->stream());
    if (!st) return st;
    return (*s)->stream().synchronize();
}

cuda::Status DevicePath::copy_via_pinned(void *dst, const void *src, size_t len, int device,
                                         bool to_device)
{
    auto c0 = pinned_.acquire(device);
    if (!c0) return copy_sync(dst, src, len, device); // staging exhausted: direct copy
    if (len <= c0->size()) {
        // One piece: a plain synchronize is the cheapest wait (no stream write).
        char *pin = static_cast<char *>(c0->data());
        if (to_device) std::memcpy(pin, src, len);
        cuda::Status st = copy_sync(to_device ? dst : pin, to_device ? pin : src, len, device);
        if (st && !to_device) std::memcpy(dst, pin, len);
        return st;
    }
    auto c1 = pinned_.acquire(device);
    auto ts = streams_.get(device, 0);
    if (!ts) return ts.status();
    cuda::TrackedStream *s = *ts;
    cuda::PinnedChunk *chunk[2] = {&*c0, c1 ? &*c1 : &*c0};
    uint64_t ticket[2] = {0, 0};
    const size_t piece = chunk[0]->size();
    auto wait = [&](uint64_t t) -> cuda::Status {
        while (t && !s->reached(t)) {
            cuda::Status st = s->check();
            if (!st) return st;
        }
        return cuda::Status{};
    };
    for (size_t off = 0, i = 0; off < len; off += piece, ++i) {
        size_t n = std::min(piece, len - off);
        unsigned b = i & 1;
        cuda::Status st = wait(ticket[b]); // the chunk's previous DMA is done
        if (!st) return st;
        char *pin = static_cast<char *>(chunk[b]->data());
        if (to_device) {
            std::memcpy(pin, static_cast<const char *>(src) + off, n);
            st = cuda::copy_async(static_cast<char *>(dst) + off, pin, n, s->stream());
        } else {
            st = cuda::copy_async(pin, static_cast<const char *>(src) + off, n, s->stream());
            if (st) {
                auto t = s->mark();
                if (!t) return t.status();
                st = wait(*t);
                if (st) std::memcpy(static_cast<char *>(dst) + off, pin, n);
                continue;
            }
        }
        if (!st) return st;
        auto t = s->mark();
        if (!t) return t.status();
        ticket[b] = *t;
    }
    cuda::Status st = wait(ticket[0]);
    return st ? wait(ticket[1]) : st;
}

cuda::Status DevicePath::start_copy(void *dst, const void *src, size_t len, int device,
                                    cuda::IpcMapping mapping, void *token)
{
    auto s = streams_.next(device);
    if (!s) return s.status();
    cuda::Status st = cuda::copy_async(dst, src, len, (*s)->stream());
    if (!st) return st;
    auto ticket = (*s)->mark();
    if (!ticket) return ticket.status();
    pending_.push_back(Pending{token, std::move(mapping), *s, *ticket});
    return cuda::Status{};
}

} // namespace gpuwire::engine
