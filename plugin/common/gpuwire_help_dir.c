#define _GNU_SOURCE
#include "gpuwire_help_dir.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gw_help_dir_of(const void *symbol, const char *file, char *dir, size_t dir_len)
{
    Dl_info info;
    if (!dladdr(symbol, &info) || !info.dli_fname) return -1;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash) return -1;
    size_t n = (size_t)(slash - info.dli_fname);
    if (n == 0 || n + 1 > dir_len) return -1;
    memcpy(dir, info.dli_fname, n);
    dir[n] = '\0';
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) return -1;
    return access(path, R_OK) == 0 ? 0 : -1;
}
