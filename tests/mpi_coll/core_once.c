/*
 * One core per process: whichever gpuwire components a job selects, each
 * process maps libgpuwire_core.so from exactly one path, and the core's
 * counters (gpuwire/core.h, reached through the copy the components loaded)
 * show at most one GPU context created while every component that opened
 * with device support holds a reference.
 *
 * Usage: core_once <pml> <coll>
 *   pml:  gpuwire | other   whether pml gpuwire is the selected pml
 *   coll: gpuwire | none    whether coll gpuwire is in the coll list
 * Checks, on every rank:
 *   - the core is mapped from one path, beside the components that use it;
 *   - mca_pml_gpuwire.so / mca_coll_gpuwire.so are mapped iff selected;
 *   - gpu_contexts_created <= 1, and == 1 iff some GPU context is held;
 *     gpu_context_acquires >= the number of components selected (each opens
 *     with device support on by default);
 *   - a host Allreduce gives the right sum, and coll gpuwire's pass-through
 *     counter, kept in the core, counted it (0 without coll gpuwire).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire/core.h"
#include "mpitest.h"

#define MAX_PATHS 8

/* The distinct files mapped whose name ends in `name`; returns how many. */
static int mapped_paths(const char *name, char paths[MAX_PATHS][512])
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    int n = 0;
    char line[1024];
    const size_t nl = strlen(name);
    while (fgets(line, sizeof(line), f)) {
        char *path = strchr(line, '/');
        if (!path) continue;
        path[strcspn(path, "\n")] = '\0';
        const size_t pl = strlen(path);
        if (pl < nl || strcmp(path + pl - nl, name) != 0 || path[pl - nl - 1] != '/') continue;
        int seen = 0;
        for (int i = 0; i < n; ++i) seen |= 0 == strcmp(paths[i], path);
        if (!seen && n < MAX_PATHS) snprintf(paths[n++], 512, "%.511s", path);
    }
    fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (argc < 3) {
        fprintf(stderr, "usage: core_once gpuwire|other gpuwire|none\n");
        return 2;
    }
    const int pml = 0 == strcmp(argv[1], "gpuwire");
    const int coll = 0 == strcmp(argv[2], "gpuwire");

    char core[MAX_PATHS][512], other[MAX_PATHS][512];
    const int ncore = mapped_paths("libgpuwire_core.so", core);
    MT_CHECK_EQ(ncore, 1);
    MT_CHECK_EQ(mapped_paths("mca_pml_gpuwire.so", other), pml);
    MT_CHECK_EQ(mapped_paths("mca_coll_gpuwire.so", other), coll);
    if (1 != ncore) {
        for (int i = 0; i < ncore; ++i) fprintf(stderr, "rank %d: core at %s\n", mt_rank, core[i]);
        return mt_finish();
    }

    /* The copy the components loaded, not one of this program's own. */
    void *h = dlopen(core[0], RTLD_NOW | RTLD_NOLOAD);
    MT_CHECK(NULL != h);
    if (!h) return mt_finish();
    gw_core_counters_t *(*counters)(void) =
        (gw_core_counters_t * (*)(void)) dlsym(h, "gw_core_counters");
    MT_CHECK(NULL != counters);
    /* Only the C API is exported: no C++ symbol of the engine. */
    MT_CHECK(NULL == dlsym(h, "_ZN7gpuwire4cuda10GpuContext7acquireERKNS0_16GpuContextConfigERNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"));
    if (!counters) return mt_finish();

    const gw_core_counters_t *c = counters();
    MT_CHECK(c->gpu_contexts_created <= 1);
    MT_CHECK_EQ(c->gpu_contexts_created, c->gpu_context_refs > 0 ? 1 : 0);
    MT_CHECK(c->gpu_context_refs <= (unsigned long long)(pml + coll));
    MT_CHECK(c->gpu_context_acquires >= (unsigned long long)(pml + coll));

    const unsigned long long before = c->coll_passthrough_calls;
    long in = mt_rank + 1, sum = 0;
    MT_CHECK_MPI(MPI_Allreduce(&in, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    MT_CHECK_EQ(sum, (long)mt_size * (mt_size + 1) / 2);
    if (coll) {
        MT_CHECK(c->coll_passthrough_calls > before);
    } else {
        MT_CHECK_EQ(c->coll_passthrough_calls, 0);
    }
    if (0 == mt_rank) {
        printf("core %s at %s: %llu GPU context(s) created, %llu acquire(s), %llu held\n",
               ((const char *(*)(void))dlsym(h, "gw_core_version"))(), core[0],
               c->gpu_contexts_created, c->gpu_context_acquires, c->gpu_context_refs);
    }
    dlclose(h);
    return mt_finish();
}
