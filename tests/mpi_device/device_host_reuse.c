/*
 * Pageable host buffers used again by messages to and from GPU memory (two
 * ranks: rank 0 on pageable host memory, rank 1 on device memory): pinned on
 * their second use (pml_gpuwire_host_register_bytes), and never stale once
 * freed. Each size goes back and forth several times; then rank 0 frees its
 * buffer and allocates another of the same size (malloc gives large buffers
 * their own mapping, usually at the same address), fills it with new bytes,
 * checks its own cudaMemcpy of it (a registration left behind after the free
 * would make the driver copy the old pages), and sends and receives again.
 * The counters must show buffers pinned, used pinned, and unregistered by the
 * free. Exits 77 (skipped) where there is no GPU.
 */
#include <cuda_runtime_api.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device_test.h"
#include "mpi_pvar.h"
#include "mpitest.h"

static void fill(unsigned char *h, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; ++i) h[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 12)) & 0xff);
}

static long wrong(const unsigned char *h, size_t len, unsigned seed)
{
    long bad = 0;
    for (size_t i = 0; i < len; ++i)
        if (h[i] != (unsigned char)((i * 131u + seed * 7u + (i >> 12)) & 0xff)) ++bad;
    return bad;
}

/* Rank 1's device buffer against the pattern, through a host copy. */
static long device_wrong(const void *d, size_t len, unsigned seed)
{
    unsigned char *h = malloc(len);
    CUDA_OK(cudaMemcpy(h, d, len, cudaMemcpyDeviceToHost));
    long bad = wrong(h, len, seed);
    free(h);
    return bad;
}

static void device_fill(void *d, size_t len, unsigned seed)
{
    unsigned char *h = malloc(len);
    fill(h, len, seed);
    CUDA_OK(cudaMemcpy(d, h, len, cudaMemcpyHostToDevice));
    free(h);
}

/* One round: rank 0's host bytes to rank 1's GPU, then rank 1's back. */
static void round_trip(unsigned char *host, void *dev, size_t len, unsigned seed)
{
    MPI_Status st;
    if (mt_rank == 0) {
        fill(host, len, seed);
        MT_CHECK_EQ(MPI_Send(host, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD), MPI_SUCCESS);
        memset(host, 0xee, len);
        MT_CHECK_EQ(MPI_Recv(host, (int)len, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &st), MPI_SUCCESS);
        int n = -1;
        MPI_Get_count(&st, MPI_BYTE, &n);
        MT_CHECK_EQ(n, (int)len);
        long bad = wrong(host, len, seed + 1);
        if (bad) mt_fail(__FILE__, __LINE__, "%zu B device to host, seed %u: %ld bytes wrong", len, seed, bad);
    } else if (mt_rank == 1) {
        CUDA_OK(cudaMemset(dev, 0xdd, len));
        CUDA_OK(cudaDeviceSynchronize());
        MT_CHECK_EQ(MPI_Recv(dev, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st), MPI_SUCCESS);
        long bad = device_wrong(dev, len, seed);
        if (bad) mt_fail(__FILE__, __LINE__, "%zu B host to device, seed %u: %ld bytes wrong", len, seed, bad);
        device_fill(dev, len, seed + 1);
        MT_CHECK_EQ(MPI_Send(dev, (int)len, MPI_BYTE, 0, 2, MPI_COMM_WORLD), MPI_SUCCESS);
    }
}

/* Rank 0 checks that its own copies of a fresh buffer see its new bytes. */
static void own_copy_sees_new_bytes(const unsigned char *host, size_t len, unsigned seed)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, len));
    CUDA_OK(cudaMemcpy(d, host, len, cudaMemcpyHostToDevice));
    long bad = device_wrong(d, len, seed);
    if (bad) mt_fail(__FILE__, __LINE__, "the application's own copy of a re-allocated %zu B buffer: %ld bytes wrong", len, bad);
    CUDA_OK(cudaFree(d));
}

/* The registry's counters, read as their growth since the start. */
static const char *const counter_names[] = {
    "pml_gpuwire_host_registered", "pml_gpuwire_host_register_hits",
    "pml_gpuwire_host_register_unmapped", "pml_gpuwire_host_register_refused"};
enum { C_REGISTERED, C_HITS, C_UNMAPPED, C_REFUSED, C_COUNT };
static pvar_counters_t counters;
#define counter(i) pvar_counters_read(&counters, (i))

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (device_test_select_gpu() < 0) {
        MPI_T_finalize();
        return mt_skip("no GPU (CUDA driver or device absent)");
    }
    if (mt_size != 2) {
        MPI_T_finalize();
        return mt_skip("needs exactly 2 ranks");
    }
    /* Large buffers always get their own mapping, freed with munmap (glibc
     * otherwise raises its threshold after the first free). */
    MT_CHECK(mallopt(M_MMAP_THRESHOLD, 256 << 10) == 1);
    int missing = pvar_counters_open(&counters, counter_names, C_COUNT);
    if (missing >= 0) mt_fail(__FILE__, __LINE__, "no performance variable %s", counter_names[missing]);
    static const size_t sizes[] = {(1 << 20) + 5, 4 << 20, (16 << 20) + 4096};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        const size_t len = sizes[i];
        unsigned char *host = NULL;
        void *dev = NULL;
        if (mt_rank == 0) host = malloc(len);
        if (mt_rank == 1) CUDA_OK(cudaMalloc(&dev, len));
        for (unsigned r = 0; r < 5; ++r) round_trip(host, dev, len, 10 * (unsigned)i + 2 * r);
        if (mt_rank == 0) {
            /* Freed and allocated again: new pages, usually the same address. */
            uintptr_t before = (uintptr_t)host;
            free(host);
            host = malloc(len);
            fill(host, len, 99);
            own_copy_sees_new_bytes(host, len, 99);
            if ((uintptr_t)host == before) printf("[rank 0] %zu B: re-allocated at the same address\n", len);
        }
        for (unsigned r = 0; r < 3; ++r) round_trip(host, dev, len, 100 + 10 * (unsigned)i + 2 * r);
        if (mt_rank == 0) {
            free(host);
            /* A mapping that takes the freed range: the application's copy. */
            unsigned char *again = malloc(len);
            fill(again, len, 77);
            own_copy_sees_new_bytes(again, len, 77);
            free(again);
        }
        if (mt_rank == 1) CUDA_OK(cudaFree(dev));
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (mt_rank == 0 && !getenv("GW_TEST_NO_REGISTER")) {
        unsigned long long reg = counter(C_REGISTERED);
        unsigned long long hits = counter(C_HITS);
        unsigned long long gone = counter(C_UNMAPPED);
        unsigned long long bytes = pvar_value_now("pml_gpuwire_host_registered_bytes");
        unsigned long long refused = counter(C_REFUSED);
        printf("[rank 0] host_registered %llu, hits %llu, unmapped %llu, bytes now %llu, "
               "refused %llu\n", reg, hits, gone, bytes, refused);
        MT_CHECK(reg >= 3);
        MT_CHECK_EQ(refused, 0ULL); /* malloc's own chunks: never refused */
        MT_CHECK(hits >= 3 * 4);
        MT_CHECK(gone >= 3); /* every buffer it pinned was freed */
        MT_CHECK_EQ(bytes, 0ULL);
    }
    if (mt_rank == 0 && getenv("GW_TEST_NO_REGISTER")) MT_CHECK_EQ(counter(C_REGISTERED), 0ULL);
    pvar_counters_close(&counters);
    MPI_T_finalize();
    return mt_finish();
}
