// The same-node direct path's state (ucx_glue/osc/direct): one window's
// targets as this rank reaches them and its batches of device copies, shared
// by direct.cpp (descriptions, mappings, Put and Get) and direct_acc.cpp
// (the accumulate family done by the origin).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "gpuwire/osc_direct.h"

namespace gpuwire::osc {

constexpr int kMaxGpus = 16;
// Attempts at a target's accumulate word before the operation goes as a
// message instead (gw_osc_acc_trylock).
constexpr unsigned kAccTries = 1024;

// One target's window as this rank reaches it.
struct Target {
    char *ptr = nullptr;  // the window's first byte here; nullptr: messages
    uint64_t size = 0;    // its bytes
    int disp_unit = 0;
    int gpu = -1;         // the local GPU whose stream copies to it; -1: host window
    void *mapping = nullptr;  // the peer mapping (gw_osc_dev_unmap); nullptr for this rank
    int pid = 0;          // host window: its process; ptr is an address there, never
                          // dereferenced here
    bool shared = false;  // host window mapped here: ptr is its first byte
};

// The path of one window: its targets, and the last ticket issued per GPU.
class Direct {
public:
    Direct(int rank, int nranks) : rank_(rank), targets_(static_cast<size_t>(nranks)) {}
    ~Direct()
    {
        (void)wait();
        for (Target &t : targets_) {
            if (t.mapping != nullptr) gw_osc_dev_unmap(t.mapping);
        }
    }
    Direct(const Direct &) = delete;
    Direct &operator=(const Direct &) = delete;

    std::vector<Target> &targets() { return targets_; }

    const Target *target(int t) const
    {
        if (t < 0 || static_cast<size_t>(t) >= targets_.size()) return nullptr;
        return targets_[static_cast<size_t>(t)].ptr != nullptr ? &targets_[static_cast<size_t>(t)]
                                                               : nullptr;
    }
    int rank() const { return rank_; }

    // A copy between device buffers on one GPU that nothing waits for at
    // once joins that GPU's batch: up to GW_OSC_COPY_BATCH of them go as one
    // kernel (a window of Puts costs one submission), launched when full or
    // by the next synchronisation (wait) or progress (kick). Any other copy
    // launches its GPU's batch first, keeping the stream's order. *ticket:
    // the copy's, 0 while batched. 0 or -1 (logged).
    int copy(void *dst, const void *src, uint64_t bytes, int gpu, bool both_device, bool now,
             uint64_t *ticket)
    {
        std::lock_guard<std::mutex> g(lock_);
        *ticket = 0;
        Batch &b = batch_[gpu];
        if (both_device && !now) {
            b.item[b.n++] = gw_coll_copy_item_t{dst, src, bytes};
            queued_.fetch_add(1, std::memory_order_relaxed);
            gpus_.fetch_or(1u << gpu, std::memory_order_relaxed);
            return b.n == GW_OSC_COPY_BATCH ? launch(gpu) : 0;
        }
        if (launch(gpu) != 0) return -1;
        int r = gw_osc_dev_copy_start(dst, src, bytes, gpu, both_device, ticket);
        if (r == 0) note(gpu, *ticket);
        return r;
    }

    // Launches every batch; 0 or GW_OSC_ERR_FAILED. One relaxed load when
    // none waits.
    int kick()
    {
        if (queued_.load(std::memory_order_relaxed) == 0) return 0;
        std::lock_guard<std::mutex> g(lock_);
        int rc = 0;
        for (int gpu = 0; gpu < kMaxGpus; gpu++) {
            if (launch(gpu) != 0) rc = GW_OSC_ERR_FAILED;
        }
        return rc;
    }

    int wait()
    {
        // Stores into shared host windows are seen by their target before
        // whatever this synchronisation sends or releases next (a store).
        std::atomic_thread_fence(std::memory_order_release);
        int rc = kick();
        // A batch that failed to start since the last wait fails this one.
        if (failed_.load(std::memory_order_relaxed) &&
            failed_.exchange(false, std::memory_order_relaxed)) {
            rc = GW_OSC_ERR_FAILED;
        }
        // No copy ever went on a GPU (host windows): nothing to wait for.
        if (gpus_.load(std::memory_order_relaxed) == 0) return rc;
        uint64_t want[kMaxGpus];
        unsigned gpus;
        {
            // One look at the GPUs this window has copied on. The bits stay:
            // a wait on a ticket passed already is one load, and another
            // thread's wait in progress must not make this one return early.
            std::lock_guard<std::mutex> g(lock_);
            gpus = gpus_.load(std::memory_order_relaxed);
            std::memcpy(want, issued_, sizeof(want));
        }
        for (int g = 0; gpus != 0 && g < kMaxGpus; g++) {
            if (!(gpus & (1u << g))) continue;
            if (gw_osc_dev_copy_wait(g, want[g]) != 0) rc = GW_OSC_ERR_FAILED;
        }
        return rc;
    }

private:
    // The copies of one GPU waiting for their kernel.
    struct Batch {
        gw_coll_copy_item_t item[GW_OSC_COPY_BATCH];
        int n = 0;
    };

    void note(int gpu, uint64_t ticket)
    {
        if (ticket > issued_[gpu]) issued_[gpu] = ticket;
        gpus_.fetch_or(1u << gpu, std::memory_order_relaxed);
    }

    // Under lock_: gpu's batch as one kernel. A batch that fails to start is
    // dropped (logged): the caller is told, and so is the next wait.
    int launch(int gpu)
    {
        Batch &b = batch_[gpu];
        if (b.n == 0) return 0;
        uint64_t ticket = 0;
        int r = gw_osc_dev_copy_batch(b.item, b.n, gpu, &ticket);
        queued_.fetch_sub(static_cast<unsigned>(b.n), std::memory_order_relaxed);
        b.n = 0;
        if (r == 0) {
            note(gpu, ticket);
        } else {
            failed_.store(true, std::memory_order_relaxed);
        }
        return r;
    }

    int rank_;
    std::vector<Target> targets_;
    std::mutex lock_;  // everything below
    uint64_t issued_[kMaxGpus] = {};
    std::atomic<unsigned> gpus_{0};  // GPUs copied on (written under lock_)
    Batch batch_[kMaxGpus];
    std::atomic<unsigned> queued_{0};  // copies in batches, all GPUs
    std::atomic<bool> failed_{false};  // a batch failed to start since the last wait
};

}  // namespace gpuwire::osc

struct gw_osc_direct {
    gpuwire::osc::Direct path;
    gw_osc_direct(int rank, int nranks) : path(rank, nranks) {}
};

namespace gpuwire::osc {

// Target t's bytes [tdisp * disp_unit + off, + bytes) as mapped here;
// nullptr (logged) when they are not all inside its window.
char *locate(const gw_osc_direct_t *d, const Target *t, int target, int64_t tdisp, int64_t off,
             uint64_t bytes);

}  // namespace gpuwire::osc
