/*
 * gpuwire engine: the C API that plugin/ calls.
 *
 * The engine moves messages between peers; it knows nothing of Open MPI. Its
 * terms are plain: a peer is an index 0..npeers-1 (the process's rank in the
 * job), a context is a 32-bit communicator id, a message carries the sender's
 * rank inside that communicator and a tag, and a buffer is an address plus a
 * byte length (already packed: non-contiguous layouts are packed by the
 * caller).
 *
 * Threading: every call may be made from any thread when the engine was
 * created with thread_multiple = 1 (one internal lock serializes them);
 * otherwise from one thread at a time. Completion callbacks are never run with
 * the engine's lock held, so a callback may call back into the engine.
 *
 * Ownership: a gw_request_t is owned by the caller and must stay valid (and
 * untouched) from the call that starts an operation until its complete_cb has
 * run. The engine owns every UCX object it creates and releases all of them
 * in gw_engine_destroy().
 */
#ifndef GPUWIRE_ENGINE_H
#define GPUWIRE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GW_OK = 0,
    GW_ERR_NO_MEMORY,    /* an allocation failed */
    GW_ERR_UNREACHABLE,  /* no endpoint to the peer could be made, or it failed */
    GW_ERR_TRUNCATE,     /* the message was larger than the posted buffer */
    GW_ERR_CANCELED,     /* the operation was cancelled */
    GW_ERR_TRANSPORT,    /* UCX reported an error */
    GW_ERR_INVALID,      /* a bad argument */
    GW_ERR_UNSUPPORTED,  /* asked for something this build or machine cannot do */
} gw_status_t;

/* Human-readable name of a status ("truncated", ...). */
const char *gw_status_string(gw_status_t status);

#define GW_ANY_SOURCE (-1) /* matches any sender rank */
#define GW_ANY_TAG    (-1) /* matches any tag >= 0 (negative tags are internal) */

/* Limits of the envelope (it travels in a 64-bit UCX tag): context ids up to
 * GW_MAX_CONTEXT, ranks up to GW_MAX_RANK, tags from -(GW_MAX_TAG+1) to
 * GW_MAX_TAG. */
#define GW_MAX_CONTEXT 0x7fffe /* 0x7ffff carries chunks of chunked transfers */
#define GW_MAX_RANK    0xfffff
#define GW_MAX_TAG     0x7fffff

/* Flags of gw_isend(). */
#define GW_SEND_SYNC 0x1u /* complete only once the receiver has matched it */

typedef struct gw_engine gw_engine_t;
typedef struct gw_message gw_message_t; /* a message taken out by gw_improbe() */
typedef struct gw_request gw_request_t;

typedef void (*gw_complete_cb_t)(gw_request_t *req);

#ifdef __cplusplus
#define GW_ALIGN16 alignas(16)
#else
#define GW_ALIGN16 _Alignas(16)
#endif

/* Size of the engine's per-operation state kept inside each request. */
#define GW_REQUEST_PRIVATE_BYTES 384

/* gw_request_t::flags */
#define GW_REQ_INLINE_CB 0x1u /* complete_cb may run inside any engine call, with the
                                 engine's lock held: it must not call the engine */

struct gw_request {
    /* Set by the caller before starting an operation. */
    gw_complete_cb_t complete_cb;
    void *user;                /* free for the caller */
    unsigned flags;            /* GW_REQ_* */

    /* Outputs, valid when complete_cb runs. */
    gw_status_t status;
    int32_t source;            /* sender's rank in the communicator (receives) */
    int32_t tag;               /* message tag (receives) */
    size_t length;             /* bytes received; for a truncated message, its full size */

    /* Engine-private. */
    GW_ALIGN16 unsigned char priv[GW_REQUEST_PRIVATE_BYTES];
};

/* What a probe reports. */
typedef struct {
    int32_t source;
    int32_t tag;
    size_t length; /* payload bytes of the message */
} gw_probe_info_t;

/* Log levels given to the log callback. */
enum { GW_LOG_ERROR = 0, GW_LOG_WARN = 1, GW_LOG_INFO = 5, GW_LOG_DEBUG = 10 };

typedef struct {
    uint32_t my_peer;        /* this process's index */
    uint32_t npeers;         /* number of processes in the job */
    /* Peers at or above this index are processes of other jobs (MPI_Comm_spawn,
     * connect/accept; 0: none): the engine's own messages (CUDA IPC
     * descriptors, chunked transfers, kind hints) name their sender by its
     * index in its own job, so device bytes to such a peer go through host
     * memory as a plain message and no hint goes to it. */
    uint32_t job_peers;
    int thread_multiple;     /* nonzero: calls may come from several threads */

    /* Returns the UCX worker address of a peer (from the runtime's exchange);
     * the engine copies what it needs. Called lazily, on the first message to
     * or from that peer. Returns nonzero when the address is unknown. */
    int (*resolve_peer)(void *ctx, uint32_t peer, const void **addr, size_t *len);
    void *resolve_ctx;

    /* Log sink; level is one of GW_LOG_*; may be NULL. */
    void (*log)(void *ctx, int level, const char *msg);
    void *log_ctx;
    int verbose; /* messages above this level are not produced */

    /* Messages of at least this many bytes go through UCX rendezvous;
     * 0 lets UCX choose (UCX_RNDV_THRESH). */
    size_t rndv_threshold;
    /* UCX endpoint error handling: 0 none (fastest), 1 peer failure detection. */
    int err_mode_peer;

    /* Device buffers. */
    int device_support;        /* nonzero: use the GPU when one is present */
    /* Nonzero when the peer runs on this node (CUDA IPC possible). NULL: only
     * this process itself is local. */
    int (*peer_is_local)(void *ctx, uint32_t peer);
    /* The process index of rank `rank` of communicator `ctx`, from the
     * runtime's own tables (0 on success). A device descriptor is used only
     * when the process it names is the one the runtime says sent it. NULL:
     * no check. */
    int (*peer_of_rank)(void *ctx, uint32_t comm_ctx, int32_t rank, uint32_t *peer);
    int ipc_enabled;           /* nonzero: same-node device messages use CUDA IPC */
    int device_sync;           /* nonzero: before a peer reads a device buffer through IPC,
                                  wait for this process's default-stream work */
    size_t ipc_threshold;      /* device messages of at least this size use IPC */
    size_t ipc_sync_max;       /* IPC copies up to this size complete synchronously */
    size_t ipc_kernel_max;     /* IPC copies into GPU memory up to this size: gpuwire's copy
                                  kernel, batched, signalling completion itself; 0: never */
    size_t ipc_cache_entries;  /* mapped peer allocations kept, per process */
    size_t ipc_cache_bytes;    /* bytes of mapped peer allocations kept */

    /* Chunked transfers: device memory staged through pinned host memory
     * (and paced sends) move in chunks of this many bytes. */
    size_t chunk_bytes;
    /* Pacing of sends to other nodes: 0 off; else host messages of at least
     * pace_min_bytes to a peer on another node go in chunks admitted by a
     * token bucket at this rate (Gb/s), under DCQCN control. */
    double pace_gbps;
    size_t pace_min_bytes;
    /* With pace_gbps 0: nonzero paces at the rate of the first active RoCE
     * port the fabric layer finds (none found: no pacing). Either way, when
     * such a port exists, its rp_cnp_handled counter feeds the pacer's DCQCN
     * controller every pace_poll_us microseconds. */
    int pace_auto;
    unsigned pace_poll_us;
    /* Root of the sysfs tree the fabric layer reads ("/" when NULL; tests
     * point it at a tree they build). */
    const char *sysfs_root;
    /* Nonzero: the RoCEv2 GID index and traffic class the fabric layer
     * chooses go to UCX (UCX_IB_GID_INDEX, UCX_IB_TRAFFIC_CLASS) unless the
     * user set them; 0: they are only logged. */
    int roce_apply;
    /* Receiver-driven admission: chunk receives posted at once, over all
     * incoming chunked transfers, stay within this many bytes (chunks move
     * by UCX rendezvous only once posted, so this bounds the bytes in flight
     * toward this process from all senders). 0: no bound beyond the per
     * transfer slots. */
    size_t recv_window_bytes;
    /* Device memory without IPC: nonzero sends it as a chunked transfer
     * through pinned slots (pipelined); 0 copies it whole into host memory
     * and sends that as one message. */
    int staged_chunked;
    /* Pinned host memory kept for device messages staged whole through host
     * memory (a receive into device memory lands in one pinned buffer, a
     * staged send is copied out into one): buffers are lent per message and
     * kept for reuse, never more than this many bytes in all. A message the
     * bound cannot serve goes through pageable memory. 0: none. */
    size_t pinned_bounce_bytes;
    /* Pinned host memory for the staging chunks (chunked transfers, and
     * copies between pageable host memory and the GPU): pinned a slab of two
     * chunks at a time as needed, kept until the end, never more than this
     * many bytes (at least one slab). */
    size_t staging_bytes;
    /* Device memory without IPC to a peer on this node (IPC off, memory IPC
     * cannot export): nonzero sends messages of at least shared_staging_min
     * bytes through staging slots in host memory shared with the receiver
     * (one DMA out of the sender's GPU, one into the receiver's, no CPU
     * copy; docs/cuda.md). shared_staging_bytes: the slots of this process,
     * pinned once on first use; chunk_bytes each (at most 256 slots). */
    int shared_staging;
    size_t shared_staging_min;
    size_t shared_staging_bytes;
    /* With shared_staging: messages of at least shared_staging_min bytes to
     * a peer on this node go through the slots too where host memory at one
     * end meets GPU memory at the other: host messages its receives take into
     * GPU memory (one memcpy in, one DMA out), device messages its receives
     * take into pageable host memory (instead of CUDA IPC). The receiver
     * tells the sender after such a message came the usual way; a transfer
     * it takes the other way switches the sender back. Device messages of at
     * most bounce_to_host_max bytes (below shared_staging_min) to such a
     * receiver into pageable host memory go as host messages from a pinned
     * bounce buffer. */
    int shared_staging_host;
    size_t bounce_to_host_max;
    /* Largest piece of a message through the shared slots (at most a slot):
     * smaller pieces let the sender's DMA of one overlap the receiver's
     * memcpy of the one before. 0: a slot. */
    size_t shared_piece_bytes;
    /* Host messages through the slots to a receiver into GPU memory that
     * CUDA IPC exports: nonzero (the default) lets the sender copy into that
     * buffer itself, from pinned host memory (one DMA per piece), or from
     * pageable host memory of at least push_pageable_min bytes (0, the
     * default: never). */
    int shared_push;
    size_t push_pageable_min;
    /* Pageable host buffers used again by messages between host and GPU
     * memory are pinned (cudaHostRegister), at most host_register_bytes of
     * them (0: none; least recently used out first), each of at least
     * host_register_min bytes, on a buffer's second use; unregistered when
     * the process unmaps them. */
    size_t host_register_bytes;
    size_t host_register_min;
} gw_engine_params_t;

/* Initializes params with defaults. */
void gw_engine_params_init(gw_engine_params_t *params);

/* Creates the UCX context and worker. On failure returns an error and writes a
 * one-line cause into why (if not NULL). */
gw_status_t gw_engine_create(const gw_engine_params_t *params, gw_engine_t **engine,
                             char *why, size_t why_len);
/* Flushes and closes every endpoint, then releases everything. Operations
 * still in flight complete with GW_ERR_CANCELED before it returns. */
void gw_engine_destroy(gw_engine_t *engine);

/* Closes every endpoint (flushing what was sent), bounded in time. The job
 * should then synchronize before destroying engines, so no process tears
 * down its worker while a peer still flushes towards it. */
void gw_engine_disconnect(gw_engine_t *engine);

/* Whether UCX can reach process peer with the transports it was given:
 * makes (and keeps) the endpoint to it, as its first message would. GW_OK,
 * or GW_ERR_UNREACHABLE with one sentence in why naming the peer and the
 * transports. See engine/reach.cpp for what this costs. */
gw_status_t gw_engine_check_reachable(gw_engine_t *engine, uint32_t peer, char *why,
                                      size_t why_len);

/* This worker's address, to publish to the other processes. Valid until
 * gw_engine_destroy(). */
void gw_engine_address(const gw_engine_t *engine, const void **addr, size_t *len);

/* Advances everything in flight; returns the number of events handled. */
int gw_engine_progress(gw_engine_t *engine);

/* Sends len bytes at buf to peer, as (ctx, my_rank, tag). */
gw_status_t gw_isend(gw_engine_t *engine, gw_request_t *req, uint32_t peer, uint32_t ctx,
                     int32_t my_rank, int32_t tag, const void *buf, size_t len, unsigned flags);

/* Posts a receive of at most cap bytes into buf. source and tag may be
 * GW_ANY_SOURCE / GW_ANY_TAG. */
gw_status_t gw_irecv(gw_engine_t *engine, gw_request_t *req, uint32_t ctx, int32_t source,
                     int32_t tag, void *buf, size_t cap);

/* A non-contiguous host layout of `length` packed bytes, packed and unpacked
 * by its owner piece by piece while UCX moves the message (UCX's generic
 * datatype), so no copy of the whole message is ever staged: a staging
 * buffer the size of the message is fresh memory, whose first touch costs
 * more than the copy itself and grows worse than linearly with its size.
 * Offsets are in packed bytes and mostly increase. pack returns the bytes
 * written (at most max); unpack returns 0, or -1 on failure. The layout must
 * stay valid until the request completes. */
typedef struct {
    size_t (*pack)(void *user, size_t offset, void *dst, size_t max);
    int (*unpack)(void *user, size_t offset, const void *src, size_t len);
    void *user;
    size_t length;
} gw_layout_t;

/* gw_isend of the bytes of a layout in host memory. GW_ERR_UNSUPPORTED when
 * this message must take a path that needs its bytes in one range (paced,
 * shared staging): then stage it and call gw_isend. */
gw_status_t gw_isend_layout(gw_engine_t *engine, gw_request_t *req, uint32_t peer, uint32_t ctx,
                            int32_t my_rank, int32_t tag, const gw_layout_t *layout,
                            unsigned flags);

/* gw_irecv into a layout in host memory (at most layout->length bytes).
 * GW_ERR_UNSUPPORTED when it must land in one range (messages taken out of
 * UCX by a probe are waiting): then stage it and call gw_irecv. */
gw_status_t gw_irecv_layout(gw_engine_t *engine, gw_request_t *req, uint32_t ctx,
                            int32_t source, int32_t tag, const gw_layout_t *layout);

/* Looks for a matching message that has arrived (no progress is made).
 * Returns 1 and fills info when one is there, 0 otherwise; -1 when source is
 * one process (not GW_ANY_SOURCE) that failed (peer failure detection on,
 * err_mode_peer) and nothing of it matches: no message of it will ever come.
 * Messages it sent before it failed are still found first. */
int gw_iprobe(gw_engine_t *engine, uint32_t ctx, int32_t source, int32_t tag,
              gw_probe_info_t *info);

/* Like gw_iprobe (same returns), but takes the message out of matching: it
 * will be received only by gw_imrecv() with the returned handle. */
int gw_improbe(gw_engine_t *engine, uint32_t ctx, int32_t source, int32_t tag,
               gw_probe_info_t *info, gw_message_t **msg);

/* Receives a message taken by gw_improbe(); msg is consumed. */
gw_status_t gw_imrecv(gw_engine_t *engine, gw_request_t *req, gw_message_t *msg, void *buf,
                      size_t cap);

/* Cancels a posted receive that has not matched yet: returns 1 and completes
 * it with GW_ERR_CANCELED; returns 0 when it is already matched. */
int gw_cancel_recv(gw_engine_t *engine, gw_request_t *req);

/* Maps a range another process of this node exported (blob: the 136-byte
 * IPC description, cuda/ipc_blob.hpp) into device's context through the
 * process's one mapping cache (the GPU context's, which coll gpuwire's
 * device API uses directly), under the engine's lock. peer: the exporter's process
 * index. *ptr stays valid until gw_ipc_unmap(*lease). GW_OK; or
 * GW_ERR_UNSUPPORTED (no GPU), GW_ERR_INVALID (a bad blob or peer) or
 * GW_ERR_TRANSPORT (CUDA refused), with the reason in why. */
gw_status_t gw_ipc_map(gw_engine_t *engine, uint32_t peer, const void *blob, size_t len,
                       int device, void **ptr, void **lease, char *why, size_t why_len);
void gw_ipc_unmap(gw_engine_t *engine, void *lease);

/* Forgets a communicator: messages the engine holds for it are dropped (and
 * counted). Posted receives must have completed. What UCX still holds for it
 * is dropped when its context id is opened again (gw_context_open): finding
 * that costs a look at every message UCX holds, and a communicator is freed
 * far more often than its id comes back. */
void gw_context_release(gw_engine_t *engine, uint32_t ctx);

/* A communicator with this context id is created: before any process may
 * send on it, so that messages of a released communicator that had the same
 * id are dropped first (Open MPI calls pml_add_comm before the barrier after
 * which the new communicator may carry messages). */
void gw_context_open(gw_engine_t *engine, uint32_t ctx);

/* Counters for statistics. */
typedef struct {
    uint64_t sends, recvs, bytes_sent, bytes_received;
    /* host sends completed at once (eager) / through UCX rendezvous (of at
     * least rndv_threshold bytes when set, else those UCX did not complete at
     * once); messages taken out of UCX by probes; device-copy acknowledgements */
    uint64_t eager_sends, rndv_sends, probe_pulls, sync_acks;
    uint64_t dropped_messages;
    uint64_t endpoints;
    uint64_t ipc_sends, staged_sends, ucx_device_sends, device_recvs;
    uint64_t classifier_host_hits, classifier_device_hits, classifier_misses;
    uint64_t ipc_map_hits, ipc_map_misses, ipc_map_evictions;
    /* chunked transfers (staged device memory, paced sends) started and
     * received; chunks the pacer held back */
    uint64_t chunked_sends, chunked_recvs, pacer_deferrals;
    /* chunk receives held back by the receive window; chunks staged in plain
     * host memory because every pinned chunk was on loan */
    uint64_t window_deferrals, staging_heap_chunks;
    /* the pacer: its current rate (Mb/s, 0 when off) and the CNPs fed to it */
    uint64_t pace_rate_mbps, pace_cnps;
    /* pinned bounce buffers (pinned_bounce_bytes): lent again, pinned anew,
     * unpinned to make room for a larger one; device messages staged through
     * pageable memory because none could be lent */
    uint64_t pinned_bounce_hits, pinned_bounce_pins, pinned_bounce_evictions;
    uint64_t pinned_bounce_fallbacks;
    /* bytes the pinned bounce cache holds now (lent or idle), at most
     * pinned_bounce_bytes */
    uint64_t pinned_bounce_held_bytes;
    /* bytes of pinned staging chunks pinned now (at most staging_bytes);
     * peer GPU allocations mapped through CUDA IPC now (cached or still
     * leased after the peer freed them) and their bytes */
    uint64_t pinned_staging_held_bytes;
    uint64_t ipc_mappings_open, ipc_mapped_bytes;
    /* chunks sent through this process's shared staging slots; times a chunk
     * found every slot with a receiver (counted at each retry) */
    uint64_t shared_chunks, shared_slot_waits;
    /* device receives UCX wrote straight into GPU memory (a UCX that moves
     * CUDA memory, a sender on another node); 1 when the UCX in use moves
     * CUDA memory, else 0 */
    uint64_t ucx_device_recvs, ucx_moves_cuda;
    /* host messages sent through the shared staging slots (their receiver
     * takes them into GPU memory) */
    uint64_t shared_host_sends;
    /* device messages sent through the shared staging slots instead of CUDA
     * IPC (their receiver takes them into pageable host memory) */
    uint64_t shared_to_host_sends;
    /* device messages below shared_staging_min sent from a pinned bounce
     * buffer as host messages instead of CUDA IPC (their receiver takes them
     * into pageable host memory) */
    uint64_t bounce_to_host_sends;
    /* of shared_host_sends, those this process copied into the receiver's
     * GPU memory itself (pml_gpuwire_shared_push) */
    uint64_t shared_push_sends;
    /* pageable host buffers of messages to or from GPU memory pinned for
     * reuse (pml_gpuwire_host_register_bytes): registered, messages that
     * found theirs registered, unregistered because the process unmapped
     * them, and the bytes pinned now (a level); buffers not pinned (not
     * memory of their own, or the driver refused) */
    uint64_t host_registered;
    uint64_t host_register_hits;
    uint64_t host_register_unmapped;
    uint64_t host_registered_bytes;
    uint64_t host_register_refused;
} gw_engine_stats_t;

/* Nonzero when buf is GPU memory (device, managed or VMM). */
int gw_engine_is_device_memory(gw_engine_t *engine, const void *buf, size_t len);

/* Whether the engine found a GPU it can use ("" reason when it did). */
int gw_engine_has_device(const gw_engine_t *engine, const char **why_not);
void gw_engine_stats(const gw_engine_t *engine, gw_engine_stats_t *stats);

/* Host memory for a whole message (packed datatypes, device messages staged
 * through plain host memory): 64-byte aligned; at 128 KiB and above mapped
 * and given back to the system by gw_host_buffer_free,
 * so that such buffers never leave freed memory resident in the C library's
 * heap. NULL when out of memory. Thread-safe. */
void *gw_host_buffer_alloc(size_t bytes);
void gw_host_buffer_free(void *buffer);

#ifdef __cplusplus
}
#endif
#endif /* GPUWIRE_ENGINE_H */
