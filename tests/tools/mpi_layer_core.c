/*
 * One core per process with libgpuwire_mpi.so too: the layer uses the
 * libgpuwire_core.so that pml gpuwire and coll gpuwire use, whichever loads
 * it first, and so the process's one GPU context.
 *
 * Usage: mpi_layer_core preload
 *            under -x LD_PRELOAD=libgpuwire_mpi.so: the core is first loaded
 *            as the layer's dependency, at start-up, before the components
 *        mpi_layer_core dlopen <libgpuwire_mpi.so>
 *            the program opens the layer after MPI_Init, when the components
 *            have loaded the core
 * Checks, on every rank, with pml gpuwire selected:
 *   - libgpuwire_core.so is mapped from one path, and libgpuwire_mpi.so is
 *     mapped (that it holds no CUDA runtime or classifier of its own:
 *     mpi_layer_linkage.sh);
 *   - the layer's first wrapped call reaches that core: its counter
 *     layer_opens goes up by exactly 1 (a second call opens nothing);
 *   - MPI_Pack packs the right bytes;
 *   - with a GPU (GW_TEST_DEVICE, a device buffer): still one GPU context
 *     created, the layer holds one more reference on it, and after
 *     MPI_Finalize (preload: the layer's) no reference is left.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire/core.h"
#include "mpitest.h"

#ifdef GW_TEST_DEVICE
#include "device_test.h"
#endif

#define MAX_PATHS 8

/* How many distinct files whose name ends in /name are mapped. */
static int mapped(const char *name, char first[512])
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char paths[MAX_PATHS][512];
    int n = 0;
    char line[1024];
    const size_t nl = strlen(name);
    while (fgets(line, sizeof(line), f)) {
        char *path = strchr(line, '/');
        if (!path) continue;
        path[strcspn(path, "\n")] = '\0';
        const size_t pl = strlen(path);
        if (pl < nl + 1 || strcmp(path + pl - nl, name) != 0 || path[pl - nl - 1] != '/') continue;
        int seen = 0;
        for (int i = 0; i < n; ++i) seen |= 0 == strcmp(paths[i], path);
        if (!seen && n < MAX_PATHS) snprintf(paths[n++], 512, "%.511s", path);
    }
    fclose(f);
    if (first && n > 0) snprintf(first, 512, "%s", paths[0]);
    return n;
}

typedef int (*pack_fn)(const void *, int, MPI_Datatype, void *, int, int *, MPI_Comm);

/* Packs 64 ints from buf (host or device) with pack; checks the bytes. */
static void pack_and_check(pack_fn pack, const void *buf, const int *expect)
{
    int out[64] = {0};
    int pos = 0;
    MT_CHECK_MPI(pack(buf, 64, MPI_INT, out, (int)sizeof(out), &pos, MPI_COMM_WORLD));
    MT_CHECK_EQ(pos, sizeof(out));
    MT_CHECK(0 == memcmp(out, expect, sizeof(out)));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
#ifdef GW_TEST_DEVICE
    if (device_test_select_gpu() < 0) return mt_skip("no GPU on this machine");
#endif
    const int preload = argc > 1 && 0 == strcmp(argv[1], "preload");
    if (!preload && (argc < 3 || strcmp(argv[1], "dlopen") != 0)) {
        fprintf(stderr, "usage: mpi_layer_core preload | dlopen <libgpuwire_mpi.so>\n");
        return 2;
    }

    pack_fn pack = MPI_Pack;
    void *layer = NULL;
    if (!preload) {
        layer = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        if (!layer) {
            mt_fail(__FILE__, __LINE__, "dlopen %s: %s", argv[2], dlerror());
            return mt_finish();
        }
        pack = (pack_fn)dlsym(layer, "MPI_Pack");
    }
    Dl_info info;
    MT_CHECK(pack && dladdr((void *)pack, &info) && info.dli_fname &&
             strstr(info.dli_fname, "libgpuwire_mpi.so"));

    char core[512] = "";
    MT_CHECK_EQ(mapped("libgpuwire_core.so", core), 1);
    MT_CHECK_EQ(mapped("libgpuwire_mpi.so", NULL), 1);
    MT_CHECK_EQ(mapped("mca_pml_gpuwire.so", NULL), 1);
    void *h = core[0] ? dlopen(core, RTLD_NOW | RTLD_NOLOAD) : NULL;
    gw_core_counters_t *(*counters)(void) =
        h ? (gw_core_counters_t * (*)(void)) dlsym(h, "gw_core_counters") : NULL;
    MT_CHECK(NULL != counters);
    if (!counters || !pack) return mt_finish();
    const gw_core_counters_t *c = counters();

    int host[64];
    for (int i = 0; i < 64; ++i) host[i] = mt_rank * 1000 + i;
    const void *buf = host;
#ifdef GW_TEST_DEVICE
    void *dev = NULL;
    CUDA_OK(cudaMalloc(&dev, sizeof(host)));
    CUDA_OK(cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice));
    buf = dev;
#endif
    const unsigned long long opens = c->layer_opens, refs = c->gpu_context_refs;
    pack_and_check(pack, buf, host);
    MT_CHECK_EQ(c->layer_opens, opens + 1);
    pack_and_check(pack, buf, host);
    MT_CHECK_EQ(c->layer_opens, opens + 1);
    MT_CHECK(c->gpu_contexts_created <= 1);
#ifdef GW_TEST_DEVICE
    /* The context pml gpuwire created serves the layer: one more reference. */
    MT_CHECK_EQ(c->gpu_contexts_created, 1);
    MT_CHECK_EQ(c->gpu_context_refs, refs + 1);
    CUDA_OK(cudaFree(dev));
#else
    /* Host buffers: the layer still classifies them, so where a GPU context
     * exists (pml gpuwire made it) the layer holds a reference to it too;
     * without a GPU it takes none. */
    MT_CHECK_EQ(c->gpu_context_refs, refs + (c->gpu_contexts_created ? 1 : 0));
#endif
    if (0 == mt_rank)
        printf("core at %s: layer_opens %llu, %llu GPU context(s) created, %llu reference(s)\n",
               core, c->layer_opens, c->gpu_contexts_created, c->gpu_context_refs);

    int rc = mt_finish();
    /* Preloaded, MPI_Finalize was the layer's: every reference is back
     * (checked here, since nothing collective runs after MPI_Finalize). */
    if (preload && c->gpu_context_refs != 0) {
        fprintf(stderr, "rank %d: %llu reference(s) on the GPU context after MPI_Finalize\n",
                mt_rank, c->gpu_context_refs);
        rc = 1;
    }
    return rc;
}
