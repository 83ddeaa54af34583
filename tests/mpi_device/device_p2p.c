/*
 * Point-to-point on device buffers under pml gpuwire: every memory combination
 * (host/device/managed/pool/pinned host), sizes from 0 B to 64 MiB, every send mode,
 * probes, truncation, stale mappings (free and re-allocate at the same address
 * between messages), hundreds of outstanding requests on slices of one
 * allocation. Data is checked on the host after the receive.
 *
 * GW_TEST_SAME_GPU=1 puts every rank on GPU 0; otherwise rank r uses GPU
 * r % count. Exits 77 (skipped) where there is no GPU.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "device_test.h"
#include "mpi_pvar.h"
#include "mpitest.h"

enum kind { K_HOST, K_DEVICE, K_MANAGED, K_POOL, K_PINNED, K_NKINDS };
static const char *kind_name[] = {"host", "device", "managed", "pool", "pinned"};


static void *alloc_kind(enum kind k, size_t len)
{
    void *p = NULL;
    size_t n = len ? len : 1;
    switch (k) {
    case K_HOST: p = malloc(n); break;
    case K_PINNED: CUDA_OK(cudaMallocHost(&p, n)); break;
    case K_DEVICE: CUDA_OK(cudaMalloc(&p, n)); break;
    case K_MANAGED: CUDA_OK(cudaMallocManaged(&p, n, cudaMemAttachGlobal)); break;
    case K_POOL:
        CUDA_OK(cudaMallocAsync(&p, n, 0));
        CUDA_OK(cudaStreamSynchronize(0));
        break;
    default: break;
    }
    return p;
}

static void free_kind(enum kind k, void *p)
{
    if (k == K_HOST) {
        free(p);
    } else if (k == K_PINNED) {
        CUDA_OK(cudaFreeHost(p));
    } else if (k == K_POOL) {
        CUDA_OK(cudaFreeAsync(p, 0));
        CUDA_OK(cudaStreamSynchronize(0));
    } else {
        CUDA_OK(cudaFree(p));
    }
}

/* Writes the pattern (seed) into buf of any kind. */
static void put_pattern(enum kind k, void *buf, size_t len, unsigned seed)
{
    if (!len) return;
    void *h = malloc(len);
    mt_fill(h, len, seed);
    CUDA_OK(cudaMemcpy(buf, h, len, cudaMemcpyDefault));
    free(h);
    (void)k;
}

/* Returns the first wrong byte or -1. */
static long check_pattern(void *buf, size_t len, unsigned seed)
{
    if (!len) return -1;
    void *h = malloc(len);
    CUDA_OK(cudaMemcpy(h, buf, len, cudaMemcpyDefault));
    long bad = mt_check_fill(h, len, seed);
    free(h);
    return bad;
}

static const size_t sizes[] = {0, 1, 8, 4096, 65537, 1 << 20, (4 << 20) + 3, 64 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Rank 0 sends to the last rank with the given mode; both check everything. */
static void exchange(enum kind sk, enum kind rk, size_t len, int mode)
{
    int peer = mt_size - 1;
    unsigned seed = (unsigned)(len * 31 + sk * 7 + rk * 3 + mode);
    int tag = 100 + mode;
    if (mt_rank == 0) {
        void *s = alloc_kind(sk, len);
        put_pattern(sk, s, len, seed);
        MPI_Request r;
        switch (mode) {
        case 0: MT_CHECK_MPI(MPI_Send(s, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD)); break;
        case 1: MT_CHECK_MPI(MPI_Ssend(s, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD)); break;
        case 2:
            MT_CHECK_MPI(MPI_Isend(s, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r));
            MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
            break;
        case 3:
            MT_CHECK_MPI(MPI_Send_init(s, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r));
            for (int i = 0; i < 2; ++i) {
                MT_CHECK_MPI(MPI_Start(&r));
                MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
            }
            MT_CHECK_MPI(MPI_Request_free(&r));
            break;
        }
        free_kind(sk, s);
    } else if (mt_rank == peer) {
        void *d = alloc_kind(rk, len);
        MPI_Status st;
        int rounds = mode == 3 ? 2 : 1;
        for (int i = 0; i < rounds; ++i) {
            if (mode == 2) {
                /* Probe first: the size reported is the payload's. */
                MPI_Message msg;
                int count = -1;
                MT_CHECK_MPI(MPI_Mprobe(0, tag, MPI_COMM_WORLD, &msg, &st));
                MPI_Get_count(&st, MPI_BYTE, &count);
                MT_CHECK_EQ(count, len);
                MT_CHECK_MPI(MPI_Mrecv(d, (int)len, MPI_BYTE, &msg, &st));
            } else {
                MT_CHECK_MPI(MPI_Recv(d, (int)len, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                      MPI_COMM_WORLD, &st));
            }
            int count = -1;
            MPI_Get_count(&st, MPI_BYTE, &count);
            MT_CHECK_EQ(count, len);
            MT_CHECK_EQ(st.MPI_SOURCE, 0);
            MT_CHECK_EQ(st.MPI_TAG, tag);
            long bad = check_pattern(d, len, seed);
            if (bad >= 0)
                mt_fail(__FILE__, __LINE__, "%s->%s %zu B mode %d: byte %ld wrong",
                        kind_name[sk], kind_name[rk], len, mode, bad);
        }
        free_kind(rk, d);
    }
}

/* Free and re-allocate the send buffer between messages: the same address
 * comes back with a new buffer ID and must never be served a stale mapping. */
static void stale_mappings(void)
{
    int peer = mt_size - 1;
    size_t len = 1 << 20;
    for (int i = 0; i < 6; ++i) {
        if (mt_rank == 0) {
            void *s = alloc_kind(K_DEVICE, len);
            put_pattern(K_DEVICE, s, len, 1000 + i);
            MT_CHECK_MPI(MPI_Send(s, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD));
            free_kind(K_DEVICE, s);
        } else if (mt_rank == peer) {
            void *d = alloc_kind(K_DEVICE, len);
            MT_CHECK_MPI(MPI_Recv(d, (int)len, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            long bad = check_pattern(d, len, 1000 + i);
            if (bad >= 0) mt_fail(__FILE__, __LINE__, "round %d: stale data at byte %ld", i, bad);
            free_kind(K_DEVICE, d);
        }
    }
}

/* Hundreds of requests in flight, on slices of one allocation each side. */
static void many_outstanding(void)
{
    const int n = 256;
    const size_t slice = 65536 + 64;
    int peer = mt_size - 1;
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * n);
    void *buf = alloc_kind(K_DEVICE, slice * n);
    if (mt_rank == 0) {
        for (int i = 0; i < n; ++i) put_pattern(K_DEVICE, (char *)buf + i * slice, slice, 50 + i);
        for (int i = 0; i < n; ++i)
            MT_CHECK_MPI(MPI_Isend((char *)buf + i * slice, (int)slice, MPI_BYTE, peer, i,
                                   MPI_COMM_WORLD, &reqs[i]));
        MT_CHECK_MPI(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
    } else if (mt_rank == peer) {
        for (int i = n - 1; i >= 0; --i) /* posted in reverse: matched by tag */
            MT_CHECK_MPI(MPI_Irecv((char *)buf + i * slice, (int)slice, MPI_BYTE, 0, i,
                                   MPI_COMM_WORLD, &reqs[i]));
        MT_CHECK_MPI(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
        for (int i = 0; i < n; ++i) {
            long bad = check_pattern((char *)buf + i * slice, slice, 50 + i);
            if (bad >= 0) mt_fail(__FILE__, __LINE__, "slice %d: byte %ld wrong", i, bad);
        }
    }
    free_kind(K_DEVICE, buf);
    free(reqs);
}

/* A device message larger than the device receive buffer: MPI_ERR_TRUNCATE,
 * nothing written past the buffer, the sender completes, the pair still works. */
static void truncation(void)
{
    int peer = mt_size - 1;
    size_t len = 4 << 20, cap = 1 << 20, guard = 4096;
    if (mt_rank == 0) {
        void *s = alloc_kind(K_DEVICE, len);
        put_pattern(K_DEVICE, s, len, 9);
        MT_CHECK_MPI(MPI_Send(s, (int)len, MPI_BYTE, peer, 9, MPI_COMM_WORLD));
        MT_CHECK_MPI(MPI_Send(s, 8, MPI_BYTE, peer, 10, MPI_COMM_WORLD));
        free_kind(K_DEVICE, s);
    } else if (mt_rank == peer) {
        char *d = alloc_kind(K_DEVICE, cap + guard);
        put_pattern(K_DEVICE, d, cap + guard, 77);
        MPI_Status st;
        int rc = MPI_Recv(d, (int)cap, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &st);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        MT_CHECK_EQ(cls, MPI_ERR_TRUNCATE);
        /* The guard after the buffer keeps the old pattern. */
        char *h = malloc(cap + guard), *ref = malloc(cap + guard);
        CUDA_OK(cudaMemcpy(h, d, cap + guard, cudaMemcpyDefault));
        mt_fill(ref, cap + guard, 77);
        MT_CHECK(memcmp(h + cap, ref + cap, guard) == 0);
        free(h);
        free(ref);
        MT_CHECK_MPI(MPI_Recv(d, 8, MPI_BYTE, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MT_CHECK(check_pattern(d, 8, 9) < 0);
        free_kind(K_DEVICE, d);
    }
}

/* Small device messages to a receiver that takes them into pageable host
 * memory go as host messages from a pinned bounce buffer once it has said so
 * (pml_gpuwire_bounce_to_host_sends), and back through CUDA IPC
 * (pml_gpuwire_ipc_sends) once it takes them into GPU memory again. The
 * receiver's word is an active message: each phase sends 8-byte messages,
 * every one checked, until rank 0's counter moves (at most 50). Needs MPI_T
 * (GW_TEST_EXPECT_PVARS set). */
static void small_to_host_and_back(void)
{
    const int peer = mt_size - 1;
    MPI_T_pvar_session se;
    MPI_T_pvar_handle h[2];
    const char *names[2] = {"pml_gpuwire_bounce_to_host_sends", "pml_gpuwire_ipc_sends"};
    if (mt_rank == 0) {
        MT_CHECK_EQ(MPI_T_pvar_session_create(&se), MPI_SUCCESS);
        for (int i = 0; i < 2; ++i) {
            int idx = find_pvar(names[i]), count = 0;
            MT_CHECK(idx >= 0);
            MT_CHECK_EQ(MPI_T_pvar_handle_alloc(se, idx, NULL, &h[i], &count), MPI_SUCCESS);
        }
    }
    void *s = alloc_kind(K_DEVICE, 8);
    for (int phase = 0; phase < 2; ++phase) {
        /* 0: into pageable host memory, counted by h[0]; 1: into GPU memory, h[1]. */
        const enum kind rk = phase == 0 ? K_HOST : K_DEVICE;
        void *d = alloc_kind(rk, 8);
        unsigned long long before = 0, now = 0;
        if (mt_rank == 0) MPI_T_pvar_read(se, h[phase], &before);
        int moved = 0, round = 0;
        for (; round < 50 && !moved; ++round) {
            const unsigned seed = 4000 + 100 * phase + round;
            if (mt_rank == 0) {
                put_pattern(K_DEVICE, s, 8, seed);
                MT_CHECK_MPI(MPI_Send(s, 8, MPI_BYTE, peer, 11, MPI_COMM_WORLD));
            } else if (mt_rank == peer) {
                MT_CHECK_MPI(MPI_Recv(d, 8, MPI_BYTE, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                long bad = check_pattern(d, 8, seed);
                if (bad >= 0)
                    mt_fail(__FILE__, __LINE__, "phase %d round %d: byte %ld wrong", phase,
                            round, bad);
            }
            if (mt_rank == 0) {
                MPI_T_pvar_read(se, h[phase], &now);
                moved = now > before;
            }
            /* A reduction: rank 0 receives, so its progress takes the hint. */
            MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &moved, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        }
        if (mt_rank == 0 && !moved)
            mt_fail(__FILE__, __LINE__, "%s did not count in 50 messages into %s memory",
                    names[phase], kind_name[rk]);
        if (mt_rank == 0) printf("8 B device -> %s: %s counted at message %d\n", kind_name[rk],
                                 names[phase], round);
        free_kind(rk, d);
    }
    free_kind(K_DEVICE, s);
    if (mt_rank == 0) {
        for (int i = 0; i < 2; ++i) MPI_T_pvar_handle_free(se, &h[i]);
        MPI_T_pvar_session_free(&se);
    }
}

/* GW_TEST_EXPECT_PVARS="R:name,R:name ..." (commas or spaces): on rank R (a
 * number, or "last": the receiver of the exchanges; rank 0 sends them) the
 * counter pvar name must have counted during the run, e.g.
 * "0:pml_gpuwire_shared_chunks". A counter
 * handle counts from its allocation: opened before the messages, read after.
 * GW_TEST_NEED_UCX_CUDA=1: skipped unless the UCX in use moves CUDA memory. */
#define MAX_EXPECT 4
static MPI_T_pvar_session pv_session;
static struct {
    char name[96];
    MPI_T_pvar_handle handle;
} expect[MAX_EXPECT];
static int nexpect, pv_open;

static void expect_open(const char *spec)
{
    MT_CHECK_EQ(MPI_T_pvar_session_create(&pv_session), MPI_SUCCESS);
    pv_open = 1;
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, " ,", &save); tok && nexpect < MAX_EXPECT;
         tok = strtok_r(NULL, " ,", &save)) {
        char *colon = strchr(tok, ':');
        MT_CHECK(colon != NULL);
        if (!colon) continue;
        *colon = '\0';
        const int rank = strcmp(tok, "last") == 0 ? mt_size - 1 : atoi(tok);
        if (rank != mt_rank) continue;
        int idx = find_pvar(colon + 1), count = 0;
        MT_CHECK(idx >= 0);
        if (idx < 0) continue;
        snprintf(expect[nexpect].name, sizeof(expect[nexpect].name), "%s", colon + 1);
        MT_CHECK_EQ(MPI_T_pvar_handle_alloc(pv_session, idx, NULL, &expect[nexpect].handle, &count),
                    MPI_SUCCESS);
        ++nexpect;
    }
}

static void expect_close(void)
{
    if (!pv_open) return;
    for (int i = 0; i < nexpect; ++i) {
        unsigned long long v = 0;
        MT_CHECK_EQ(MPI_T_pvar_read(pv_session, expect[i].handle, &v), MPI_SUCCESS);
        if (v == 0) {
            mt_fail(__FILE__, __LINE__, "%s did not count on rank %d", expect[i].name, mt_rank);
        } else {
            printf("[rank %d] %s: %llu\n", mt_rank, expect[i].name, v);
        }
        MPI_T_pvar_handle_free(pv_session, &expect[i].handle);
    }
    MPI_T_pvar_session_free(&pv_session);
}

int main(int argc, char **argv)
{
    const char *expect_spec = getenv("GW_TEST_EXPECT_PVARS");
    const int use_mpit = expect_spec && *expect_spec;
    int provided = 0;
    if (use_mpit) MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int dev = device_test_select_gpu();
    if (dev < 0) {
        if (use_mpit) MPI_T_finalize();
        return mt_skip("no GPU (CUDA driver or device absent)");
    }
    if (device_test_lacks_ucx_cuda()) {
        if (use_mpit) MPI_T_finalize();
        return mt_skip("the UCX in use cannot move CUDA memory (ci/gpu.sh: GPU_UCX_LIB)");
    }
    if (expect_spec && *expect_spec) expect_open(expect_spec);

    for (int sk = 0; sk < K_NKINDS; ++sk)
        for (int rk = 0; rk < K_NKINDS; ++rk)
            for (size_t i = 0; i < NSIZES; ++i)
                for (int mode = 0; mode < 4; ++mode) {
                    if (sizes[i] > (4 << 20) && (mode != 0 || (sk != K_DEVICE && rk != K_DEVICE)))
                        continue; /* 64 MiB: standard mode, device on one side */
                    exchange((enum kind)sk, (enum kind)rk, sizes[i], mode);
                }
    MPI_Barrier(MPI_COMM_WORLD);
    stale_mappings();
    MPI_Barrier(MPI_COMM_WORLD);
    many_outstanding();
    MPI_Barrier(MPI_COMM_WORLD);
    truncation();
    MPI_Barrier(MPI_COMM_WORLD);
    /* Only where the receiver's hints are on (pml_gpuwire_ipc and
     * _shared_staging_host, the defaults). */
    if (use_mpit && getenv("GW_TEST_SMALL_TO_HOST")) small_to_host_and_back();
    if (use_mpit) {
        expect_close();
        MPI_T_finalize();
    }
    return mt_finish();
}
