// The buffers of window messages and replies (gpuwire/osc.h). A large one,
// fresh from malloc, is a new mapping whose every page faults on first touch
// and is unmapped again when freed: for a 128 KiB Get through messages that
// cost more than the copies. So buffers from kBig bytes are kept, a few for
// the whole process, and handed out again to any message that fits.
#include <atomic>
#include <cstdlib>

#include "gpuwire/osc.h"

namespace {

constexpr size_t kBig = size_t{64} << 10;
constexpr size_t kHead = 64;  // the buffer's capacity, before its bytes
constexpr int kKept = 8;

std::atomic<char *> kept[kKept];

size_t capacity_of(const char *base) { return *reinterpret_cast<const size_t *>(base); }

}  // namespace

extern "C" {

void *gw_osc_buf_get(size_t len)
{
    if (len < kBig) return std::malloc(len ? len : 1);
    for (auto &slot : kept) {
        char *base = slot.exchange(nullptr, std::memory_order_acquire);
        if (base == nullptr) continue;
        if (capacity_of(base) >= len) return base + kHead;
        std::free(base);  // too small for today's messages
    }
    // Whole multiples of kBig, so that sizes near one another share buffers.
    const size_t cap = (len + kBig - 1) / kBig * kBig;
    char *base = static_cast<char *>(std::malloc(kHead + cap));
    if (base == nullptr) return nullptr;
    *reinterpret_cast<size_t *>(base) = cap;
    return base + kHead;
}

void gw_osc_buf_put(void *buf, size_t len)
{
    if (buf == nullptr) return;
    if (len < kBig) {
        std::free(buf);
        return;
    }
    char *base = static_cast<char *>(buf) - kHead;
    for (auto &slot : kept) {
        char *none = nullptr;
        if (slot.compare_exchange_strong(none, base, std::memory_order_release,
                                         std::memory_order_relaxed)) {
            return;
        }
    }
    std::free(base);
}

}  // extern "C"
