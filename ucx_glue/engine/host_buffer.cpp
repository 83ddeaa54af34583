// Whole-message host buffers (gw_host_buffer_alloc in gpuwire/engine.h).
//
// Why not plain malloc: glibc serves a large malloc from mmap, and the first
// time such a block is freed it raises its mmap threshold to that block's
// size (up to 32 MiB). From then on blocks of up to that size come from the
// heap, and when freed they stay resident for as long as anything above them
// in the heap is live: the process's resident memory grows by tens of MiB a
// while into a run and never falls back (measured by the GPU soak: +37 to
// +47 MiB after the first tenth). Mapping large buffers ourselves gives the
// memory back at free and leaves glibc's threshold alone.
#include "gpuwire/engine.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace {

constexpr size_t kLarge = size_t{128} << 10; // glibc's default mmap threshold
constexpr uint64_t kMapped = 0x4d4150504544ull; // "MAPPED"
constexpr uint64_t kHeap = 0x48454150ull;       // "HEAP"

// Before the bytes handed out: 64 bytes, so the buffer stays 64-byte aligned.
struct alignas(64) Header {
    uint64_t kind;
    size_t total; // bytes mapped (header included)
};
static_assert(sizeof(Header) == 64);

} // namespace

extern "C" void *gw_host_buffer_alloc(size_t bytes)
{
    if (bytes > SIZE_MAX - sizeof(Header) - 4096) return nullptr;
    const size_t total = bytes + sizeof(Header);
    void *base;
    Header h{};
    if (bytes >= kLarge) {
        // Not populated: a receive's landing is sized by its capacity, and
        // the message may be far shorter; pages appear as they are written.
        base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) return nullptr;
        h.kind = kMapped;
    } else {
        base = std::aligned_alloc(alignof(Header), (total + 63) / 64 * 64);
        if (!base) return nullptr;
        h.kind = kHeap;
    }
    h.total = total;
    *static_cast<Header *>(base) = h;
    return static_cast<Header *>(base) + 1;
}

extern "C" void gw_host_buffer_free(void *buffer)
{
    if (!buffer) return;
    Header *h = static_cast<Header *>(buffer) - 1;
    if (h->kind == kMapped) {
        munmap(h, h->total);
    } else {
        std::free(h);
    }
}
