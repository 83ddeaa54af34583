/* The core's own identity; the rest of libgpuwire_core.so comes whole from
 * the static libraries it is assembled from (core/CMakeLists.txt). */
#include "gpuwire/core.h"

GW_CORE_API const char *gw_core_version(void) { return GPUWIRE_VERSION_STRING; }
