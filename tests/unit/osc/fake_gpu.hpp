// A stand-in for the core's C device API (gpuwire/gpu_device.h) under the
// one-sided engine's GPU door and direct path: "device memory" is host
// memory registered with a GPU, copies and reductions happen when started
// (tickets count them per GPU), descriptions name a registered range and
// map back to it; every call is recorded, and each kind can be made to fail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gwtest {

struct FakeGpu {
    struct Range {
        const char *p;
        size_t len;
        int gpu;
        bool unordered;
        bool exportable;
    };
    struct Copy {
        void *dst;
        const void *src;
        size_t len;
        int gpu;
        bool both_device;
    };
    int ngpus = 2;
    std::vector<Range> ranges;
    std::vector<Copy> copies;           // started, in order (copy_start and device copies)
    std::vector<int> batches;           // items of each batch started
    std::vector<std::pair<int, uint64_t>> waits;  // (gpu, ticket) of copy_wait
    std::vector<int> user_waits;        // gpus of wait_user
    uint64_t tickets[4] = {};           // the last ticket per GPU
    int maps = 0, unmaps = 0;           // peer mappings made and given back
    int map_gpu = -1;                   // the GPU a mapping lands on; -1: the range's
    long scratch_lent = 0;
    int reductions = 0;
    int cas = 0;  // compare-and-swap kernels
    bool opened = false;
    // Failures.
    bool fail_open = false, fail_copy = false, fail_wait = false, fail_map = false,
         fail_user = false, fail_reduce = false, fail_classify = false;

    // The one instance the C functions use (set by the constructor).
    static FakeGpu *current;
    FakeGpu();
    ~FakeGpu();
    FakeGpu(const FakeGpu &) = delete;
    FakeGpu &operator=(const FakeGpu &) = delete;

    // Marks [p, p + len) as gpu's memory.
    void device(const void *p, size_t len, int gpu, bool unordered = false,
                bool exportable = true)
    {
        ranges.push_back({static_cast<const char *>(p), len, gpu, unordered, exportable});
    }
    const Range *find(const void *p, size_t len) const;
};

}  // namespace gwtest
