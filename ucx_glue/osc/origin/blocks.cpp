// An operation's target layout, built block by block at the origin
// (gpuwire/osc.h): the caller walks its datatype and hands each piece over;
// pieces that continue the last block extend it, so that a vector of
// adjacent elements travels as one block.
#include <cstdlib>

#include "gpuwire/osc.h"

extern "C" {

int gw_osc_blocks_init(gw_osc_blocks_t *l)
{
    *l = gw_osc_blocks_t{};
    l->b = static_cast<gw_osc_block_t *>(std::malloc(8 * sizeof(gw_osc_block_t)));
    if (l->b == nullptr) return GW_OSC_ERR_NOMEM;
    l->cap = 8;
    return 0;
}

int gw_osc_blocks_add(gw_osc_blocks_t *l, int64_t off, uint64_t len)
{
    if (len == 0) return 0;
    if (l->n > 0 && l->b[l->n - 1].off + static_cast<int64_t>(l->b[l->n - 1].len) == off) {
        l->b[l->n - 1].len += len;
        return 0;
    }
    if (l->n == l->cap) {
        auto *nb = static_cast<gw_osc_block_t *>(
            std::realloc(l->b, 2 * static_cast<size_t>(l->cap) * sizeof(gw_osc_block_t)));
        if (nb == nullptr) return GW_OSC_ERR_NOMEM;
        l->b = nb;
        l->cap *= 2;
    }
    l->b[l->n++] = gw_osc_block_t{off, len};
    return 0;
}

void gw_osc_blocks_fini(gw_osc_blocks_t *l)
{
    std::free(l->b);
    *l = gw_osc_blocks_t{};
}

}  // extern "C"
