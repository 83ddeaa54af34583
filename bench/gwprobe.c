/* gwprobe: where the time of a non-blocking collective on device memory
 * goes, as an application sees it, and what the core's per-call steps cost.
 *
 *   classify / describe   the core's memory classification and CUDA IPC
 *                         description of a device buffer (ns a call)
 *   test_pending          MPI_Test on a receive nothing matches: one pass of
 *                         MPI's progress (ns a call)
 *   iallreduce / ibcast   per size: pure (initiation to Wait's return, no
 *                         compute), init (the initiating call), wait (MPI_Wait
 *                         after the CPU computed 3 x pure), and the overlap
 *                         OSU would print for them (us, medians over ranks'
 *                         maxima)
 *
 * Run with 2 or more ranks on device buffers, pml and coll gpuwire selected;
 * the core's entry points are called directly (linked against
 * libgpuwire_core.so, loaded once with the components). Options: -m MIN:MAX
 * (bytes, powers of two; default 4096:4194304), -i ITERS (default 200). */
#define _GNU_SOURCE
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "bench_stats.h"
#include "gpuwire/gpu_device.h"

static int rank, nranks;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "gwprobe: rank %d: %s failed (%d)\n", rank, what, rc);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void cuda_check(cudaError_t e, const char *what)
{
    if (cudaSuccess != e) {
        fprintf(stderr, "gwprobe: rank %d: %s: %s\n", rank, what, cudaGetErrorString(e));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void spin_us(double us)
{
    double end = now_us() + us;
    while (now_us() < end) {
    }
}

/* The ns a call of one step, median of 7 batches of 2,000. */
#define PER_CALL_NS(var, body)                                                                 \
    do {                                                                                       \
        double b_[7];                                                                          \
        for (int k_ = 0; k_ < 7; ++k_) {                                                       \
            double t0_ = now_us();                                                             \
            for (int i_ = 0; i_ < 2000; ++i_) {                                                \
                body;                                                                          \
            }                                                                                  \
            b_[k_] = (now_us() - t0_) * 1e3 / 2000.0;                                          \
        }                                                                                      \
        var = median(b_, 7);                                                                   \
    } while (0)

static void core_steps(void *dbuf, size_t len)
{
    char why[256];
    gw_coll_mem_t mem;
    char desc[GW_COLL_BUF_DESC_BYTES];
    double classify_ns, describe_ns, test_ns;
    PER_CALL_NS(classify_ns, {
        int rc = gw_coll_device_classify(dbuf, len, &mem, why, sizeof(why));
        if (rc) die(why, rc);
    });
    PER_CALL_NS(describe_ns, {
        int rc = gw_coll_buffer_describe(dbuf, len, desc, why, sizeof(why));
        if (rc) die(why, rc);
    });
    MPI_Request r;
    int flag = 0, dummy;
    MPI_Irecv(&dummy, 1, MPI_INT, MPI_ANY_SOURCE, 32000, MPI_COMM_WORLD, &r);
    PER_CALL_NS(test_ns, {
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        if (flag) die("MPI_Test on an unmatched receive", 0);
    });
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (0 == rank) {
        printf("# core steps (rank 0, ns a call)\n");
        printf("classify %.0f\ndescribe %.0f\ntest_pending %.0f\n", classify_ns, describe_ns,
               test_ns);
    }
}

typedef enum { IALLREDUCE, IBCAST } coll_t;

static int start(coll_t c, void *s, void *d, size_t len, MPI_Request *r)
{
    if (IALLREDUCE == c) {
        return MPI_Iallreduce(s, d, (int)(len / sizeof(float)), MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD, r);
    }
    return MPI_Ibcast(d, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD, r);
}

/* The ranks' largest median. */
static double max_over_ranks(double v)
{
    double m = 0;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static void overlap_row(coll_t c, void *s, void *d, size_t len, int iters)
{
    double *pure = malloc(sizeof(double) * (size_t)iters);
    double *init = malloc(sizeof(double) * (size_t)iters);
    double *wait = malloc(sizeof(double) * (size_t)iters);
    double *total = malloc(sizeof(double) * (size_t)iters);
    if (!pure || !init || !wait || !total) die("malloc", 0);
    MPI_Request r;
    int rc;
    for (int i = -iters / 10 - 1; i < iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_us();
        if ((rc = start(c, s, d, len, &r))) die("initiation", rc);
        if ((rc = MPI_Wait(&r, MPI_STATUS_IGNORE))) die("MPI_Wait", rc);
        if (i >= 0) pure[i] = now_us() - t0;
    }
    const double p = max_over_ranks(median(pure, iters));
    const double compute = 3 * p;
    for (int i = -iters / 10 - 1; i < iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_us();
        if ((rc = start(c, s, d, len, &r))) die("initiation", rc);
        double t1 = now_us();
        spin_us(compute);
        double t2 = now_us();
        if ((rc = MPI_Wait(&r, MPI_STATUS_IGNORE))) die("MPI_Wait", rc);
        double t3 = now_us();
        if (i >= 0) {
            init[i] = t1 - t0;
            wait[i] = t3 - t2;
            total[i] = t3 - t0;
        }
    }
    const double mi = max_over_ranks(median(init, iters));
    const double mw = max_over_ranks(median(wait, iters));
    const double mt = max_over_ranks(median(total, iters));
    double ov = 100.0 * (1.0 - (mt - compute) / p);
    if (ov < 0) ov = 0;
    if (0 == rank) {
        printf("%-10s %9zu %8.2f %8.2f %8.2f %8.1f\n", IALLREDUCE == c ? "iallreduce" : "ibcast",
               len, p, mi, mw, ov);
    }
    free(pure);
    free(init);
    free(wait);
    free(total);
}

int main(int argc, char **argv)
{
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int ndev = 0;
    if (cudaSuccess == cudaGetDeviceCount(&ndev) && ndev > 0) {
        cuda_check(cudaSetDevice((lr ? atoi(lr) : 0) % ndev), "cudaSetDevice");
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t lo = 4096, hi = 4u << 20;
    int iters = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m") && 2 == sscanf(argv[i + 1], "%zu:%zu", &lo, &hi)) continue;
        if (!strcmp(argv[i], "-i") && (iters = atoi(argv[i + 1])) > 0) continue;
        if (0 == rank) fprintf(stderr, "usage: gwprobe [-m MIN:MAX] [-i ITERS]\n");
        MPI_Finalize();
        return 2;
    }
    if (nranks < 2 || lo == 0 || lo > hi) {
        if (0 == rank) fprintf(stderr, "gwprobe: needs 2 or more ranks and 0 < MIN <= MAX\n");
        MPI_Finalize();
        return 2;
    }
    void *s = NULL, *d = NULL;
    cuda_check(cudaMalloc(&s, hi), "cudaMalloc");
    cuda_check(cudaMalloc(&d, hi), "cudaMalloc");
    cuda_check(cudaMemset(s, 0, hi), "cudaMemset");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    core_steps(d, hi);
    if (0 == rank) printf("# collective      bytes  pure_us  init_us  wait_us overlap%%\n");
    for (coll_t c = IALLREDUCE; c <= IBCAST; ++c) {
        for (size_t len = lo; len <= hi; len *= 2) overlap_row(c, s, d, len, iters);
    }
    cuda_check(cudaFree(s), "cudaFree");
    cuda_check(cudaFree(d), "cudaFree");
    MPI_Finalize();
    return 0;
}
