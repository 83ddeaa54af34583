#define _GNU_SOURCE
#include "gpuwire_pin.h"

#include <dlfcn.h>
#include <stdio.h>

int gw_pin_self(const void *symbol, char *why, unsigned long why_len)
{
    Dl_info info;
    if (!dladdr(symbol, &info) || !info.dli_fname) {
        snprintf(why, why_len, "dladdr cannot name the library holding gpuwire");
        return -1;
    }
    /* A second reference with RTLD_NODELETE: dlclose no longer unloads it. */
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "cannot pin %s in memory: %s", info.dli_fname, e ? e : "?");
        return -1;
    }
    return 0;
}
