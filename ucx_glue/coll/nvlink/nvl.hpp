/*
 * What the NVLink family's files share (gpuwire/coll_nvlink.h): log lines,
 * the clock of the timeouts, the forms a call may take.
 */
#ifndef GPUWIRE_COLL_NVLINK_NVL_HPP
#define GPUWIRE_COLL_NVLINK_NVL_HPP

#include "gpuwire/coll_nvlink.h"

namespace gw::nvl {

/* One line through the transport's log; the communicator's name is
 * tp.name(). */
void logf(const gw_ce_nvl_t &nvl, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Seconds of a monotonic clock. */
double now_s();

const char *coll_name(gw_ce_nvl_coll_t c);

inline void count(unsigned long long *counter)
{
    if (nullptr != counter) __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* The delegated form (nvl_delegate.cpp): a blocking call, and a
 * non-blocking call's request. */
int dl_run(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c, const gw_ce_region_t r[GW_CE_REGION_COUNT]);
int dl_start(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
             const gw_ce_region_t r[GW_CE_REGION_COUNT], void *arg);
/* A one-shot non-blocking call's request (nvl_nb.cpp). */
int nb_start(gw_ce_nvl_t *nvl, const gw_ce_nvl_call_t *c,
             const gw_ce_region_t r[GW_CE_REGION_COUNT], void *arg);

} // namespace gw::nvl

#endif
