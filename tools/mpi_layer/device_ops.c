/* device_ops.h over libgpuwire_core (gpuwire/gpu_layer.h). */
#include "device_ops.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire/gpu_layer.h"

/* The layer's reference on the GPU context: taken at the first
 * classification, not at load, so that a process that preloads the library
 * and never calls a wrapped function (mpirun's children that are not ranks,
 * a shell) never starts CUDA. */
enum { GW_DEV_UNOPENED, GW_DEV_OPEN, GW_DEV_NO_GPU };
static int gw_state = GW_DEV_UNOPENED; /* atomic; changed under gw_mu */
static pthread_mutex_t gw_mu = PTHREAD_MUTEX_INITIALIZER;

static int gw_dev_state(void)
{
    int s = __atomic_load_n(&gw_state, __ATOMIC_ACQUIRE);
    if (s != GW_DEV_UNOPENED) return s;
    pthread_mutex_lock(&gw_mu);
    s = gw_state;
    if (s == GW_DEV_UNOPENED) {
        /* No driver or no GPU: every buffer is host memory, as Open MPI
         * itself assumes; nothing to report. */
        char why[256];
        s = gw_layer_open(why, sizeof(why)) > 0 ? GW_DEV_OPEN : GW_DEV_NO_GPU;
        __atomic_store_n(&gw_state, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&gw_mu);
    return s;
}

void gw_dev_close(void)
{
    pthread_mutex_lock(&gw_mu);
    if (gw_state == GW_DEV_OPEN) gw_layer_close();
    __atomic_store_n(&gw_state, GW_DEV_UNOPENED, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&gw_mu);
}

/* GPUWIRE_MPI_STAGE_ALL=1 (tests only): every buffer takes the device path,
 * copied by memcpy where there is no GPU, so that CI runs the staging code. */
static int gw_stage_all(void)
{
    static int on = -1;
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("GPUWIRE_MPI_STAGE_ALL");
        v = e && e[0] == '1';
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* 1 device memory on *gpu, 0 host, -1 after a line on stderr. */
static int gw_classify(const void *ptr, int *gpu)
{
    *gpu = -1;
    if (ptr == NULL || gw_dev_state() != GW_DEV_OPEN) return 0;
    char why[256];
    int r = gw_layer_classify(ptr, gpu, why, sizeof(why));
    if (r < 0) fprintf(stderr, "libgpuwire_mpi: cannot tell the memory kind of %p: %s\n", ptr, why);
    return r;
}

int gw_dev_is_device(const void *ptr)
{
    int gpu;
    int r = gw_classify(ptr, &gpu);
    return r == 0 && ptr && gw_stage_all() ? 1 : r;
}

int gw_dev_copy(void *dst, const void *src, size_t len)
{
    if (len == 0) return 0;
    int gpu = -1;
    /* The GPU holding the device side: the source's, else the destination's. */
    if (gw_classify(src, &gpu) <= 0 && gw_classify(dst, &gpu) < 0) return -1;
    if (gpu < 0) {
        /* Both sides on the host: only GPUWIRE_MPI_STAGE_ALL gets here. */
        memcpy(dst, src, len);
        return 0;
    }
    char why[256];
    if (gw_layer_copy(dst, src, len, gpu, why, sizeof(why)) != 0) {
        fprintf(stderr, "libgpuwire_mpi: %s\n", why);
        return -1;
    }
    return 0;
}

/* Before each temporary: where it came from, so that free gives it back
 * there; 64 bytes keep the temporary as aligned as the memory under it. */
typedef struct {
    gw_layer_host_buf_t buf; /* from the core; buf.ptr NULL: malloc-ed here */
    void *raw;
} gw_temp_header_t;
#define GW_TEMP_HEADER 64
_Static_assert(sizeof(gw_temp_header_t) <= GW_TEMP_HEADER, "temporary header too small");

void *gw_dev_host_alloc(size_t len, const void *near)
{
    if (len > SIZE_MAX - 2 * GW_TEMP_HEADER) return NULL;
    const size_t need = len + GW_TEMP_HEADER;
    gw_temp_header_t h = {{NULL, 0, NULL}, NULL};
    int gpu = -1;
    if (gw_classify(near, &gpu) > 0) {
        char why[256];
        if (gw_layer_host_get(need, gpu, &h.buf, why, sizeof(why)) != 0) {
            fprintf(stderr, "libgpuwire_mpi: %s\n", why);
            return NULL;
        }
        h.raw = h.buf.ptr;
    } else {
        /* No GPU (GPUWIRE_MPI_STAGE_ALL): plain memory. */
        h.raw = aligned_alloc(GW_TEMP_HEADER,
                              (need + GW_TEMP_HEADER - 1) / GW_TEMP_HEADER * GW_TEMP_HEADER);
        if (!h.raw) return NULL;
    }
    memcpy(h.raw, &h, sizeof(h));
    return (char *)h.raw + GW_TEMP_HEADER;
}

void gw_dev_host_free(void *ptr)
{
    if (!ptr) return;
    gw_temp_header_t h;
    memcpy(&h, (char *)ptr - GW_TEMP_HEADER, sizeof(h));
    if (h.buf.ptr)
        gw_layer_host_put(&h.buf);
    else
        free(h.raw);
}
