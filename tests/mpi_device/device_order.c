/*
 * Work the application queued on the legacy default stream before an MPI call
 * comes first: a send carries what a copy queued before it writes, and a
 * receive's data is not overwritten by a write queued before the receive.
 * (A cudaMemcpy from pageable memory may return before its DMA lands: the
 * same thing, with a shorter window.)
 *
 * The queued write waits behind a host function that sleeps HOLD_MS, so a
 * read or write of gpuwire's that is not ordered after it happens inside that
 * window, every time. One rank of a case queues its write late, the others
 * have theirs done before the call (a late write on both ends would hide an
 * unordered read by the peer behind the reader's own wait). Point-to-point
 * contiguous and non-contiguous (packed on the GPU), blocking and not, small
 * and large; Allreduce and Bcast on device buffers.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device_test.h"
#include "mpitest.h"

#define HOLD_MS 150
#define FILL 0x5A

static void CUDART_CB hold(void *arg)
{
    (void)arg;
    struct timespec ts = {0, HOLD_MS * 1000000L};
    nanosleep(&ts, NULL);
}

/* Queues on the legacy default stream: the pause, then len bytes from the
 * pinned host src into the device dst. */
static void queue_late_copy(void *dst, const void *src, size_t len)
{
    CUDA_OK(cudaLaunchHostFunc(cudaStreamLegacy, hold, NULL));
    CUDA_OK(cudaMemcpyAsync(dst, src, len, cudaMemcpyHostToDevice, cudaStreamLegacy));
}

/* The host bytes into the device buffer: queued late, or done now. */
static void put(void *dst, const void *src, size_t len, int late)
{
    if (late) {
        queue_late_copy(dst, src, len);
    } else {
        CUDA_OK(cudaMemcpy(dst, src, len, cudaMemcpyHostToDevice));
        CUDA_OK(cudaDeviceSynchronize());
    }
}

static void *pinned(size_t len)
{
    void *p = NULL;
    CUDA_OK(cudaMallocHost(&p, len ? len : 1));
    return p;
}

static void *device_zeroed(size_t len)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, len ? len : 1));
    CUDA_OK(cudaMemset(d, 0, len));
    CUDA_OK(cudaDeviceSynchronize());
    return d;
}

typedef struct {
    const char *name;
    MPI_Datatype type;
    int count;
    size_t span; /* bytes the buffer covers */
} layout_t;

/* Rank 0 sends its pattern, rank 1 receives it over its fill; late_rank's
 * write is queued late. */
static void p2p(const layout_t *l, int nonblocking, int late_rank, int tag)
{
    if (mt_rank > 1) return;
    char *d = device_zeroed(l->span);
    char *h = pinned(l->span);
    if (mt_rank == 0) {
        mt_fill(h, l->span, 100u + (unsigned)tag);
        put(d, h, l->span, late_rank == 0);
        if (nonblocking) {
            MPI_Request r;
            MT_CHECK_MPI(MPI_Isend(d, l->count, l->type, 1, tag, MPI_COMM_WORLD, &r));
            MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else {
            MT_CHECK_MPI(MPI_Send(d, l->count, l->type, 1, tag, MPI_COMM_WORLD));
        }
    } else {
        memset(h, FILL, l->span);
        put(d, h, l->span, late_rank == 1);
        MPI_Status st;
        if (nonblocking) {
            MPI_Request r;
            MT_CHECK_MPI(MPI_Irecv(d, l->count, l->type, 0, tag, MPI_COMM_WORLD, &r));
            MT_CHECK_MPI(MPI_Wait(&r, &st));
        } else {
            MT_CHECK_MPI(MPI_Recv(d, l->count, l->type, 0, tag, MPI_COMM_WORLD, &st));
        }
        MT_CHECK_EQ(st.MPI_ERROR, MPI_SUCCESS);
        CUDA_OK(cudaDeviceSynchronize());
        char *got = malloc(l->span);
        CUDA_OK(cudaMemcpy(got, d, l->span, cudaMemcpyDeviceToHost));
        /* What the buffer must hold: the fill, with the type's bytes of the
         * sender's pattern unpacked over it (Open MPI's host convertor). */
        char *sent = malloc(l->span), *want = malloc(l->span);
        mt_fill(sent, l->span, 100u + (unsigned)tag);
        memset(want, FILL, l->span);
        int packed_size = 0, pos = 0;
        MT_CHECK_MPI(MPI_Pack_size(l->count, l->type, MPI_COMM_SELF, &packed_size));
        char *packed = malloc((size_t)packed_size);
        MT_CHECK_MPI(MPI_Pack(sent, l->count, l->type, packed, packed_size, &pos, MPI_COMM_SELF));
        pos = 0;
        MT_CHECK_MPI(MPI_Unpack(packed, packed_size, &pos, want, l->count, l->type, MPI_COMM_SELF));
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < l->span; ++i) {
            if (got[i] != want[i] && bad++ == 0) first = i;
        }
        if (bad) {
            mt_fail(__FILE__, __LINE__, "%s %s (%zu bytes), late %s: %zu byte(s) wrong, first "
                    "at %zu (0x%02x, want 0x%02x): a queued write was not ordered before "
                    "gpuwire's", l->name, nonblocking ? "non-blocking" : "blocking", l->span,
                    late_rank == 0 ? "send buffer" : "receive buffer", bad, first,
                    (unsigned char)got[first], (unsigned char)want[first]);
        }
        free(packed);
        free(want);
        free(sent);
        free(got);
    }
    CUDA_OK(cudaFreeHost(h));
    CUDA_OK(cudaFree(d));
}

static int value(int rank, size_t i) { return (int)((size_t)(rank + 1) * 1000u + i % 977u); }

/* late_rank's input (or, late_out, its output's fill) is written late. */
static void allreduce(size_t n, int late_rank, int late_out)
{
    const int late = mt_rank == late_rank;
    const size_t bytes = n * sizeof(int);
    int *in = device_zeroed(bytes), *out = device_zeroed(bytes);
    int *hin = pinned(bytes), *hout = pinned(bytes);
    for (size_t i = 0; i < n; ++i) hin[i] = value(mt_rank, i);
    memset(hout, FILL, bytes);
    put(out, hout, bytes, late && late_out);
    put(in, hin, bytes, late && !late_out);
    MT_CHECK_MPI(MPI_Allreduce(in, out, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CUDA_OK(cudaDeviceSynchronize());
    int *got = malloc(bytes);
    CUDA_OK(cudaMemcpy(got, out, bytes, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        int want = 0;
        for (int r = 0; r < mt_size; ++r) want += value(r, i);
        if (got[i] != want && bad++ == 0)
            mt_fail(__FILE__, __LINE__, "Allreduce of %zu ints, rank %d's %s late: element %zu "
                    "is %d, want %d", n, late_rank, late_out ? "output" : "input", i, got[i],
                    want);
    }
    free(got);
    CUDA_OK(cudaFreeHost(hout));
    CUDA_OK(cudaFreeHost(hin));
    CUDA_OK(cudaFree(out));
    CUDA_OK(cudaFree(in));
}

/* late_rank's write (the root's data, or another's fill) is queued late. */
static void bcast(size_t bytes, int late_rank)
{
    char *d = device_zeroed(bytes), *h = pinned(bytes);
    if (mt_rank == 0) {
        mt_fill(h, bytes, 7);
    } else {
        memset(h, FILL, bytes);
    }
    put(d, h, bytes, mt_rank == late_rank);
    MT_CHECK_MPI(MPI_Bcast(d, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    long bad = mt_check_fill(h, bytes, 7);
    if (bad >= 0)
        mt_fail(__FILE__, __LINE__, "Bcast of %zu bytes, rank %d late: byte %ld wrong", bytes,
                late_rank, bad);
    CUDA_OK(cudaFreeHost(h));
    CUDA_OK(cudaFree(d));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int dev = device_test_select_gpu();
    if (dev < 0) return mt_skip("no GPU (CUDA driver or device absent)");
    if (device_test_lacks_ucx_cuda())
        return mt_skip("the UCX in use cannot move CUDA memory (ci/gpu.sh: GPU_UCX_LIB)");

    MPI_Datatype vec;
    const int blocks = 64 * 1024; /* one int in every two: 512 KiB of span */
    MT_CHECK_MPI(MPI_Type_vector(blocks, 1, 2, MPI_INT, &vec));
    MT_CHECK_MPI(MPI_Type_commit(&vec));
    const layout_t layouts[] = {
        {"contiguous", MPI_BYTE, 4096, 4096},
        {"contiguous", MPI_BYTE, 4 << 20, 4 << 20},
        {"vector", vec, 1, (size_t)(2 * blocks - 1) * sizeof(int)},
    };
    int tag = 0;
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); ++i) {
        for (int nb = 0; nb < 2; ++nb)
            for (int late = 0; late < 2; ++late) p2p(&layouts[i], nb, late, ++tag);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const size_t counts[] = {1024, (size_t)1 << 20};
    for (int i = 0; i < 2; ++i) {
        allreduce(counts[i], 0, 0);
        allreduce(counts[i], 1, 0);
        allreduce(counts[i], 1, 1);
        bcast(counts[i] * sizeof(int), 0);
        bcast(counts[i] * sizeof(int), 1);
    }
    MT_CHECK_MPI(MPI_Type_free(&vec));
    return mt_finish();
}
