// The core's process-wide counters (gpuwire/core.h). In an object file of its
// own: whatever links the cuda module statically pulls in only this.
#include "gpuwire/core.h"

namespace {
gw_core_counters_t g_counters{};
}

extern "C" GW_CORE_API gw_core_counters_t *gw_core_counters(void) { return &g_counters; }
