// The one-sided engine's lines (gw_osc_log_set, gpuwire/osc_direct.h): one
// line each, without the component's prefix, which the caller's function
// adds.
#pragma once

namespace gpuwire::osc {

// verbosity 0: an error, always shown; n > 0: shown at the caller's
// verbosity n. Formats as printf; dropped when no function is set.
void log(int verbosity, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace gpuwire::osc
