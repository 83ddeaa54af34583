/* A buffer of the simulated GPU (the CPU may touch it), for the collective
 * engine's unit tests: scratch memory of gpuwire/gpu_device.h, given back
 * when it goes. */
#ifndef GPUWIRE_TESTS_UNIT_COLL_DEV_BUF_HPP
#define GPUWIRE_TESTS_UNIT_COLL_DEV_BUF_HPP

#include <cstddef>

#include "gpuwire/gpu_device.h"
#include "gw_catch.hpp"

class DevBuf {
public:
    explicit DevBuf(size_t bytes)
    {
        char why[200];
        REQUIRE(0 == gw_coll_scratch_get(bytes, 0, &b_, why, sizeof(why)));
    }
    ~DevBuf() { gw_coll_scratch_put(&b_); }
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    template <class T = char> T *p() const { return static_cast<T *>(b_.ptr); }

private:
    gw_coll_dev_buf_t b_{};
};

#endif
