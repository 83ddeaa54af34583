#include "engine/device_path.hpp"

#include <ucm/api/ucm.h>

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
std::atomic<DevicePath *> g_unmap_target{nullptr};

void on_vm_unmapped(ucm_event_type_t, ucm_event_t *event, void *)
{
    DevicePath *d = g_unmap_target.load(std::memory_order_acquire);
    if (d) d->forget_range(event->vm_unmapped.address, event->vm_unmapped.size);
}

bool install_unmap_hook()
{
    return ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 1000, on_vm_unmapped, nullptr) == UCS_OK;
}

cuda::ClassifierConfig classifier_config()
{
    cuda::ClassifierConfig c;
    // Without unmap events a cached host answer could outlive its mapping:
    // then ask the driver every time instead.
    static const bool hooked = install_unmap_hook();
    if (!hooked) c.host_entries = 0;
    return c;
}

} // namespace

DevicePath::DevicePath(const DeviceConfig &config)
    : driver_(cuda::Driver::instance()),
      classifier_(driver_, classifier_config()),
      exporter_(driver_),
      mappings_(driver_, cuda::IpcCacheConfig{config.ipc_cache_entries, config.ipc_cache_bytes}),
      streams_(cuda::StreamPoolConfig{config.streams_per_device, 0, false})
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
    g_unmap_target.store(d.get(), std::memory_order_release);
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
    DevicePath *self = this;
    g_unmap_target.compare_exchange_strong(self, nullptr);
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
