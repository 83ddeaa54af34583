// Where the one-sided engine's lines go (osc_log.hpp).
#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "gpuwire/osc_direct.h"
#include "osc_log.hpp"

namespace gpuwire::osc {
namespace {
std::atomic<gw_osc_log_fn> sink{nullptr};
}  // namespace

void log(int verbosity, const char *fmt, ...)
{
    gw_osc_log_fn fn = sink.load(std::memory_order_acquire);
    if (fn == nullptr) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fn(verbosity, line);
}

}  // namespace gpuwire::osc

extern "C" void gw_osc_log_set(gw_osc_log_fn fn)
{
    gpuwire::osc::sink.store(fn, std::memory_order_release);
}
