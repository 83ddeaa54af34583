#include "device.hpp"

#include <cstdarg>
#include <cstdio>

namespace gpuwire::coll {

int Why::fail(int rc, const char *fmt, ...)
{
    if (nullptr != buf && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
    return rc;
}

DeviceScratch::~DeviceScratch()
{
    if (!abandoned_) gw_coll_scratch_put(&b_);
}

int DeviceScratch::get(size_t bytes, int gpu, Why &w)
{
    if (0 == bytes) return GW_CE_OK;
    char why[200];
    if (0 != gw_coll_scratch_get(bytes, gpu, &b_, why, sizeof(why))) {
        b_ = gw_coll_dev_buf_t{};
        return w.fail(GW_CE_ERR, "device scratch of %zu bytes: %s", bytes, why);
    }
    return GW_CE_OK;
}

int DeviceStream::reduce(int op, int type, const void *x, const void *y, void *out, size_t count,
                         Why &w)
{
    char why[200];
    if (0 != gw_coll_reduce_start(op, type, x, y, out, count, gpu_, &ticket_, why, sizeof(why))) {
        return w.fail(GW_CE_ERR, "reduction kernel: %s", why);
    }
    pending_ = true;
    return GW_CE_OK;
}

int DeviceStream::copy(void *dst, const void *src, size_t bytes, Why &w)
{
    char why[200];
    if (0 != gw_coll_copy_start(dst, src, bytes, gpu_, &ticket_, why, sizeof(why))) {
        return w.fail(GW_CE_ERR, "device copy: %s", why);
    }
    pending_ = true;
    return GW_CE_OK;
}

int DeviceStream::reached(bool query, bool *done, Why &w)
{
    *done = true;
    if (!pending_) return GW_CE_OK;
    char why[200];
    bool d = false;
    if (0 != gw_coll_copy_done(gpu_, ticket_, query, &d, why, sizeof(why))) {
        return w.fail(GW_CE_ERR, "device stream: %s", why);
    }
    *done = d;
    if (d) pending_ = false;
    return GW_CE_OK;
}

void DeviceStream::drain()
{
    if (!pending_) return;
    char why[200];
    (void)gw_coll_copy_wait(gpu_, ticket_, why, sizeof(why));
    pending_ = false;
}

} // namespace gpuwire::coll
