/*
 * pml/gpuwire: MPI point-to-point for Open MPI over the gpuwire engine.
 *
 * This layer translates Open MPI objects into engine terms (communicator ->
 * context id, rank -> process index, datatype -> packed bytes) and engine
 * completions back into MPI requests and statuses. It owns no transport
 * state of its own.
 */
#ifndef PML_GPUWIRE_H
#define PML_GPUWIRE_H

#include "ompi_config.h"
#include "gpuwire_compat.h"

#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/message/message.h"
#include "ompi/request/request.h"
#include "opal/class/opal_free_list.h"

#include "gpuwire/engine.h"

typedef struct {
    mca_pml_base_module_t super;
    gw_engine_t *engine;
    opal_free_list_t requests;
    uint32_t my_peer;
    uint32_t world;  /* processes of this job: peer numbers 0..world-1, their vpids */
    uint32_t npeers; /* the engine's peers: world, then GW_PML_OTHER_JOBS_MAX more */
    /* Processes of other jobs (MPI_Comm_spawn, MPI_Comm_connect/accept), in
     * the order add_procs met them: peer number world + i is other[i]. */
    opal_process_name_t *other;
    uint32_t nother;
    int output;           /* opal_output stream for verbose messages */
    /* Worker addresses of the other processes, fetched from the modex on
     * first use and kept until finalize. */
    void **peer_addr;
    size_t *peer_addr_len;
    bool progress_registered;
    bool closing; /* the engine is being torn down: no call may re-enter it */
} mca_pml_gpuwire_module_t;

/* How many processes of other jobs one process can reach. */
#define GW_PML_OTHER_JOBS_MAX 1024u

typedef struct {
    int priority;
    int verbose;
    size_t rndv_threshold;
    bool err_handling;
    bool stats;
    bool device;
    bool ipc;
    bool device_sync;
    size_t ipc_threshold;
    size_t ipc_sync_max;
    size_t ipc_kernel_max;
    size_t chunk_bytes;    /* chunked transfers (staged device memory, paced sends) */
    size_t pace_mbps;      /* 0: no pacing; else the rate toward other nodes */
    size_t pace_min_bytes; /* host messages paced from this size */
    size_t recv_window_bytes; /* chunk bytes posted at once, all senders */
    bool staged_chunked;      /* staged device memory as a chunked transfer */
    bool pace_auto;           /* pace at the RoCE port's rate when pace_mbps is 0 */
    size_t pace_poll_us;      /* CNP counter polling period */
    bool roce_apply;          /* the chosen RoCE GID index and traffic class go to UCX */
    size_t ipc_cache_entries;
    size_t ipc_cache_bytes;
    size_t pinned_bounce_bytes; /* pinned whole-message staging buffers kept; 0: none */
    size_t staging_bytes;       /* pinned staging chunks, at most */
    bool shared_staging;        /* same-node device messages without IPC: shared slots */
    size_t shared_staging_min;  /* ... from this size */
    size_t shared_staging_bytes; /* this process's shared slots */
    bool shared_staging_host;   /* ... also host messages to a receiver into GPU memory */
    size_t bounce_to_host_max;  /* ... and small device messages into host from a bounce buffer */
    size_t shared_piece_bytes;  /* largest piece of a message through the slots; 0: a slot */
    bool shared_push;           /* host into a peer's GPU memory: this side copies */
    size_t push_pageable_min;   /* ... from pageable memory from this size; 0: never */
    size_t host_register_bytes; /* pageable host buffers pinned for reuse; 0: none */
    size_t host_register_min;   /* ... each of at least this size */
    int mpi_layer;              /* libgpuwire_mpi.so put in at MPI_Init: 0 never, 1 with a GPU, 2 always */
} mca_pml_gpuwire_params_t;

extern __attribute__((visibility("default"))) gw_pml_component_t mca_pml_gpuwire_component;
extern mca_pml_gpuwire_module_t mca_pml_gpuwire;
extern mca_pml_gpuwire_params_t mca_pml_gpuwire_params;

/* Module functions (pml_gpuwire.c). modex_key: the component, under whose
 * name the processes' worker addresses are published. */
int mca_pml_gpuwire_open_engine(bool enable_mpi_threads, const mca_base_component_t *modex_key);
void mca_pml_gpuwire_close_engine(void);
/* The module, its functions filled in, for Open MPI's selection. */
mca_pml_base_module_t *mca_pml_gpuwire_module(void);
int mca_pml_gpuwire_progress(void);

/* Puts libgpuwire_mpi.so's wrappers in this process when it was not
 * preloaded: mode is pml_gpuwire_mpi_layer (pml_gpuwire_layer.c). */
void mca_pml_gpuwire_layer_install(int mode, bool has_gpu, int output);

/* Registers the engine's counters as MPI_T performance variables. */
void mca_pml_gpuwire_register_pvars(const mca_base_component_t *component);

/* Maps an engine status to an MPI error class (pml_gpuwire_state.c, with
 * the module and parameter objects). */
int mca_pml_gpuwire_mpi_error(gw_status_t status);

#define PML_GPUWIRE_VERBOSE(level, ...) \
    opal_output_verbose((level), mca_pml_gpuwire.output, "pml:gpuwire: " __VA_ARGS__)

#endif
