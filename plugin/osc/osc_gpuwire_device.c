/* See osc_gpuwire_device.h. */
#include "osc_gpuwire_device.h"

#include <stdint.h>

#include "coll_gpuwire_device.h"
#include "opal/util/output.h"

static int ngpus = 0;

static void dev_log(int level, const char *msg)
{
    if (level <= 1) opal_output(0, "osc:gpuwire: %s", msg);
}

int gw_osc_dev_open(char *why, size_t why_len)
{
    /* No pinned staging: this component stages through its own messages. */
    gw_coll_device_params_t p = {.staging_bytes = 0, .log = dev_log};
    int n = gw_coll_device_open(&p, why, why_len);
    ngpus = n > 0 ? n : 0;
    return n;
}

void gw_osc_dev_close(void)
{
    if (ngpus > 0) gw_coll_device_close();
    ngpus = 0;
}

int gw_osc_dev_where(const void *p, size_t len)
{
    if (ngpus <= 0 || p == NULL) return -1;
    gw_coll_mem_t mem;
    char why[256];
    if (gw_coll_device_classify(p, len ? len : 1, &mem, why, sizeof(why)) != 0) {
        opal_output(0, "osc:gpuwire: cannot tell where %p lives (%s); taken as host memory", p,
                    why);
        return -1;
    }
    return mem.on_gpu ? mem.gpu : -1;
}

int gw_osc_dev_copy(void *dst, const void *src, size_t len, int gpu)
{
    uint64_t ticket = 0;
    char why[256];
    if (len == 0) return 0;
    /* Work the application queued on the legacy stream comes first. */
    if (gw_coll_device_wait_user(gpu, why, sizeof(why)) != 0 ||
        gw_coll_copy_start(dst, src, len, gpu, &ticket, why, sizeof(why)) != 0 ||
        gw_coll_copy_wait(gpu, ticket, why, sizeof(why)) != 0) {
        opal_output(0, "osc:gpuwire: device copy of %zu bytes failed: %s", len, why);
        return -1;
    }
    return 0;
}
