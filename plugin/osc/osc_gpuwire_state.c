/*
 * osc/gpuwire's process-wide state, beneath every other file of the
 * component: the parameters (their defaults come from the table,
 * gw_params_register), the windows and the counters.
 */
#include "osc_gpuwire.h"

gw_osc_state_t gw_osc_state = {
    .output = -1,
};
