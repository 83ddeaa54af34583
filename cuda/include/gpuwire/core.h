/*
 * libgpuwire_core: the one library of gpuwire a process loads, whichever of
 * its components (pml gpuwire, coll gpuwire) are selected. It holds the
 * point-to-point engine (gpuwire/engine.h), the collectives' device API
 * (gpuwire/gpu_device.h) and the process's one GPU context behind both.
 *
 * This header: what the core exports (GW_CORE_API) and the counters it keeps
 * for every component, so that no component reads another's performance
 * variables: each shows its own from here.
 */
#ifndef GPUWIRE_CORE_H
#define GPUWIRE_CORE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The core's C API is exported from libgpuwire_core.so; everything else of
 * it (C++ included) stays hidden. A component that implements these
 * functions itself (the test component coll gpuwirefake) defines GW_CORE_API
 * empty, so that its own definitions stay hidden and bind within it. */
#ifndef GW_CORE_API
#define GW_CORE_API __attribute__((visibility("default")))
#endif

typedef struct {
    /* coll gpuwire's calls by path (its MPI_T counters coll_gpuwire_*_calls
     * are these variables); pml gpuwire's statistics table shows them too.
     * Atomic increments, relaxed. */
    unsigned long long coll_passthrough_calls;
    unsigned long long coll_staged_calls;
    unsigned long long coll_device_calls;
    /* The GPU context: acquire calls (one per component that opens with
     * device support on), contexts created (at most 1 while any is held),
     * references held now. */
    unsigned long long gpu_context_acquires;
    unsigned long long gpu_contexts_created;
    unsigned long long gpu_context_refs;
    /* gw_layer_open calls of libgpuwire_mpi.so (gpuwire/gpu_layer.h), failed
     * ones included: that the preload reached this core, the components' one. */
    unsigned long long layer_opens;
} gw_core_counters_t;

/* The core's version (the project's, "0.1.0"). */
GW_CORE_API const char *gw_core_version(void);

/* The process's counters; the storage lives as long as the core is loaded. */
GW_CORE_API gw_core_counters_t *gw_core_counters(void);

#ifdef __cplusplus
}
#endif

#endif
