/*
 * What the ring asks of the GPU (gpuwire/gpu_device.h), with its owners:
 * device scratch given back by its destructor, and the stream's last ticket
 * of a job so that "has everything I queued finished" is one question.
 * Failures are written into the caller's why buffer as one line naming
 * the failed call.
 */
#ifndef GPUWIRE_COLL_RING_DEVICE_HPP
#define GPUWIRE_COLL_RING_DEVICE_HPP

#include <cstddef>
#include <cstdint>

#include "gpuwire/coll_engine.h"
#include "gpuwire/gpu_device.h"

namespace gpuwire::coll {

/* The caller's why buffer: fail() writes one line and returns rc. */
struct Why {
    char *buf;
    size_t len;
    int fail(int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
};

/* Device scratch on one GPU, given back when destroyed unless abandoned
 * (messages may still land in it: it is then never reused). */
class DeviceScratch {
public:
    DeviceScratch() = default;
    ~DeviceScratch();
    DeviceScratch(const DeviceScratch &) = delete;
    DeviceScratch &operator=(const DeviceScratch &) = delete;

    /* bytes on gpu; 0 bytes holds nothing. Once per object. */
    int get(size_t bytes, int gpu, Why &w);
    char *ptr() const { return static_cast<char *>(b_.ptr); }
    void abandon() { abandoned_ = true; }

private:
    gw_coll_dev_buf_t b_{};
    bool abandoned_ = false;
};

/* A job's work on its GPU's stream: kernels and copies are queued in order,
 * so the last one's ticket covers all of them. */
class DeviceStream {
public:
    explicit DeviceStream(int gpu) : gpu_(gpu) {}

    /* out = x op y, count elements. */
    int reduce(int op, int type, const void *x, const void *y, void *out, size_t count, Why &w);
    int copy(void *dst, const void *src, size_t bytes, Why &w);
    /* Whether everything queued has finished (true when nothing is);
     * never waits. */
    int reached(bool query, bool *done, Why &w);
    bool pending() const { return pending_; }
    /* Waits for what is queued, ignoring a failure (a job being freed). */
    void drain();

private:
    int gpu_;
    uint64_t ticket_ = 0;
    bool pending_ = false;
};

} // namespace gpuwire::coll

#endif
