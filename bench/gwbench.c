/* gwbench: point-to-point and all-reduce timings of an MPI library, printed
 * as one table per test.
 *
 *   latency    ping-pong between ranks 0 and 1; one-way time = median round
 *              trip / 2 (us)
 *   bw         rank 0 streams windows of non-blocking sends to rank 1, which
 *              acknowledges each window (GB/s = 1e9 bytes/s)
 *   bibw       both ranks stream windows at each other at once (GB/s)
 *   allreduce  MPI_Allreduce of floats (MPI_SUM) on all ranks; the largest
 *              of the ranks' median times (us)
 *
 * Buffers are host memory unless --device (CUDA builds) puts them on the
 * GPU. --validate gives every message its own pattern and checks it on
 * arrival; the checks sit outside rank 0's timed sections where they can
 * (latency, all-reduce) and inside them otherwise, so validated bandwidth
 * figures are lower. Run with --help for the options. */
#define _GNU_SOURCE
#include <mpi.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"

#ifdef GPUWIRE_BENCH_CUDA
#include <cuda_runtime.h>
#endif

enum { T_LATENCY = 1, T_BW = 2, T_BIBW = 4, T_ALLREDUCE = 8 };

static struct {
    int tests;
    size_t sizes[64];
    int nsizes;
    int iters, warmup, window;
    size_t window_bytes;
    int device, validate, report_rss;
    char pinned;     /* this rank's host buffers are pinned (cudaMallocHost) */
    const char *mem; /* --mem: per-rank kinds, or NULL */
} opt = {.tests = T_LATENCY | T_BW | T_BIBW | T_ALLREDUCE, .iters = -1, .warmup = -1,
         .window = 64, .window_bytes = 256u << 20};

static int rank, nranks, failures;

static void die(const char *msg)
{
    if (rank == 0) fprintf(stderr, "gwbench: %s\n", msg);
    MPI_Finalize();
    exit(2);
}

/* ---- buffers: host or device, with host-side fill and check ---------- */

static void *buf_alloc(size_t n)
{
    void *p = NULL;
    if (n == 0) n = 1;
#ifdef GPUWIRE_BENCH_CUDA
    if (opt.device) {
        if (cudaMalloc(&p, n) != cudaSuccess) die("cudaMalloc failed");
        cudaMemset(p, 'a', n);
        cudaDeviceSynchronize();
        return p;
    }
#endif
#ifdef GPUWIRE_BENCH_CUDA
    if (opt.pinned) {
        if (cudaMallocHost(&p, n) != cudaSuccess) die("cudaMallocHost failed");
        memset(p, 'a', n);
        return p;
    }
#endif
    p = malloc(n);
    if (!p) die("out of host memory");
    memset(p, 'a', n);
    return p;
}

static void buf_free(void *p)
{
#ifdef GPUWIRE_BENCH_CUDA
    if (opt.device) {
        cudaFree(p);
        return;
    }
    if (opt.pinned) {
        cudaFreeHost(p);
        return;
    }
#endif
    free(p);
}

/* Host scratch for preparing and checking device data. */
static unsigned char *scratch;
static size_t scratch_size;

static unsigned char pattern(uint32_t seed, size_t i)
{
    uint32_t x = seed * 2654435761u ^ (uint32_t)i * 2246822519u;
    return (unsigned char)(x >> 24 ^ x >> 11 ^ x);
}

static void fill(void *buf, size_t n, uint32_t seed)
{
    unsigned char *h = opt.device ? scratch : buf;
    for (size_t i = 0; i < n; i++) h[i] = pattern(seed, i);
#ifdef GPUWIRE_BENCH_CUDA
    if (opt.device) cudaMemcpy(buf, scratch, n, cudaMemcpyHostToDevice);
#endif
}

static void clear(void *buf, size_t n)
{
#ifdef GPUWIRE_BENCH_CUDA
    if (opt.device) {
        cudaMemset(buf, 0, n);
        cudaDeviceSynchronize();
        return;
    }
#endif
    memset(buf, 0, n);
}

static void check(const void *buf, size_t n, uint32_t seed, const char *what)
{
    const unsigned char *h = buf;
#ifdef GPUWIRE_BENCH_CUDA
    if (opt.device) {
        cudaMemcpy(scratch, buf, n, cudaMemcpyDeviceToHost);
        h = scratch;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        if (h[i] != pattern(seed, i)) {
            if (failures++ < 10)
                fprintf(stderr, "gwbench: rank %d: %s of %zu bytes wrong at byte %zu\n", rank,
                        what, n, i);
            return;
        }
    }
}

/* ---- timing helpers -------------------------------------------------- */

/* Iterations for a size unless -i was given: fewer as messages grow. */
static int iters_for(size_t n, int small, int large)
{
    if (opt.iters > 0) return opt.iters;
    if (n <= 8192) return small;
    if (n <= (1u << 20)) return large;
    return large / 5 > 5 ? large / 5 : 5;
}

static int warmup_for(int iters)
{
    if (opt.warmup >= 0) return opt.warmup;
    return iters / 10 > 2 ? iters / 10 : 2;
}

/* ---- the tests --------------------------------------------------------- */

static void latency(size_t n, void *sbuf, void *rbuf)
{
    int iters = iters_for(n, 2000, 200), warm = warmup_for(iters);
    double *rtt = malloc(sizeof(double) * (size_t)iters);
    for (int i = -warm; i < iters; i++) {
        if (rank == 0) {
            if (opt.validate) {
                fill(sbuf, n, (uint32_t)(i + warm + n));
                clear(rbuf, n);
            }
            double t0 = MPI_Wtime();
            MPI_Send(sbuf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (i >= 0) rtt[i] = MPI_Wtime() - t0;
            /* Rank 1 echoes what it received, so this checks both ways. */
            if (opt.validate) check(rbuf, n, (uint32_t)(i + warm + n), "echo");
        } else if (rank == 1) {
            MPI_Recv(rbuf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(opt.validate ? rbuf : sbuf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) {
        double med = median(rtt, iters);
        printf("%-12zu %12.3f %12.3f %8d\n", n, med / 2 * 1e6, rtt[0] / 2 * 1e6, iters);
    }
    free(rtt);
}

/* Messages in flight per window for size n: the window, bounded by the
 * receive memory allowed (each message in flight has its own slot). */
static int window_for(size_t n)
{
    size_t w = (size_t)opt.window;
    if (n && w * n > opt.window_bytes) w = opt.window_bytes / n;
    return w ? (int)w : 1;
}

static void bandwidth(size_t n, int bidirectional, void *sbuf, void *rbuf)
{
    int iters = iters_for(n, 200, 50), warm = warmup_for(iters), w = window_for(n);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size_t)w);
    int peer = 1 - rank, ack = 0;
    double t0 = 0;
    for (int i = -warm; i < iters; i++) {
        uint32_t seed = (uint32_t)(i + warm) * 7919u + (uint32_t)n;
        if (i == 0) t0 = MPI_Wtime();
        int nreq = 0;
        int sends = rank == 0 || bidirectional, recvs = rank == 1 || bidirectional;
        if (opt.validate && sends) fill(sbuf, n, seed + (uint32_t)rank);
        if (recvs)
            for (int j = 0; j < w; j++)
                MPI_Irecv((char *)rbuf + (size_t)j * n, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                          &req[nreq++]);
        if (sends)
            for (int j = 0; j < w; j++)
                MPI_Isend(sbuf, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[nreq++]);
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        if (opt.validate && recvs)
            for (int j = 0; j < w; j++)
                check((char *)rbuf + (size_t)j * n, n, seed + (uint32_t)peer, "window message");
        /* The window is over when the receiver says so. */
        if (rank == 1) MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        else MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    double t = MPI_Wtime() - t0;
    if (rank == 0) {
        double bytes = (double)n * w * iters * (bidirectional ? 2 : 1);
        printf("%-12zu %12.3f %8d %8d\n", n, bytes / t / 1e9, w, iters);
    }
    free(req);
}

static void allreduce(size_t n, void *sbuf, void *rbuf)
{
    int count = (int)(n / sizeof(float)), iters = iters_for(n, 1000, 100), warm = warmup_for(iters);
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (opt.validate) {
        /* Small integers, so float sums are exact and order-independent. */
        float *h = opt.device ? (float *)scratch : sbuf;
        for (int j = 0; j < count; j++) h[j] = (float)((rank + j) % 97);
#ifdef GPUWIRE_BENCH_CUDA
        if (opt.device) cudaMemcpy(sbuf, scratch, n, cudaMemcpyHostToDevice);
#endif
    }
    for (int i = -warm; i < iters; i++) {
        if (opt.validate) clear(rbuf, n);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (i >= 0) t[i] = MPI_Wtime() - t0;
        if (opt.validate && i == iters - 1) {
            const float *h = rbuf;
#ifdef GPUWIRE_BENCH_CUDA
            if (opt.device) {
                cudaMemcpy(scratch, rbuf, n, cudaMemcpyDeviceToHost);
                h = (const float *)scratch;
            }
#endif
            for (int j = 0; j < count; j++) {
                float want = 0;
                for (int r = 0; r < nranks; r++) want += (float)((r + j) % 97);
                if (h[j] != want) {
                    if (failures++ < 10)
                        fprintf(stderr, "gwbench: rank %d: allreduce of %d floats: element %d is %g, not %g\n",
                                rank, count, j, h[j], want);
                    break;
                }
            }
        }
    }
    double med = median(t, iters), worst = 0, best = 0;
    MPI_Reduce(&med, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t[0], &best, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%-12zu %12.2f %12.2f %8d\n", n, worst * 1e6, best * 1e6, iters);
    free(t);
}

/* ---- options, peak memory, main ----------------------------------------- */

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    }
    return (size_t)v;
}

/* "MIN:MAX" gives the powers of two in between (and MIN, MAX); "a,b,c" a list. */
static void parse_sizes(const char *arg)
{
    opt.nsizes = 0;
    const char *colon = strchr(arg, ':');
    if (colon) {
        size_t lo = parse_size(arg), hi = parse_size(colon + 1);
        for (size_t s = lo; s <= hi && opt.nsizes < 64; s = s ? s * 2 : 1) opt.sizes[opt.nsizes++] = s;
        if (opt.nsizes && opt.sizes[opt.nsizes - 1] != hi && opt.nsizes < 64) opt.sizes[opt.nsizes++] = hi;
        return;
    }
    char *copy = strdup(arg), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && opt.nsizes < 64; tok = strtok_r(NULL, ",", &save))
        opt.sizes[opt.nsizes++] = parse_size(tok);
    free(copy);
}

static int parse_tests(const char *arg)
{
    int t = 0;
    char *copy = strdup(arg), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "latency") || !strcmp(tok, "lat")) t |= T_LATENCY;
        else if (!strcmp(tok, "bw")) t |= T_BW;
        else if (!strcmp(tok, "bibw")) t |= T_BIBW;
        else if (!strcmp(tok, "allreduce")) t |= T_ALLREDUCE;
        else if (!strcmp(tok, "all")) t |= T_LATENCY | T_BW | T_BIBW | T_ALLREDUCE;
        else die("unknown test (latency, bw, bibw, allreduce, all)");
    }
    free(copy);
    return t;
}

static const char usage[] =
    "usage: mpirun -np N gwbench [options]\n"
    "  -t, --tests LIST      latency,bw,bibw,allreduce (default: all)\n"
    "  -m, --sizes SPEC      MIN:MAX (powers of two) or a,b,c; K/M/G suffixes\n"
    "                        (default 1:64M)\n"
    "  -i, --iters N         timed iterations per size (default: by size)\n"
    "  -x, --warmup N        untimed iterations first (default: iters/10)\n"
    "  -W, --window N        messages in flight per bandwidth window (default 64)\n"
    "      --window-bytes B  receive memory per window; larger messages get a\n"
    "                        smaller window (default 256M)\n"
    "  -d, --device          buffers in GPU memory (CUDA builds)\n"
    "      --mem KINDS       each rank's buffers, one letter per rank (the last\n"
    "                        for the rest): D device, H pageable host, P pinned\n"
    "                        host (CUDA builds); e.g. DH: rank 0 device, 1 host\n"
    "  -c, --validate        check every received message (exit 1 on a mismatch)\n"
    "      --report-rss      print each rank's peak resident memory at exit\n";

static void parse_args(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"tests", required_argument, 0, 't'},  {"sizes", required_argument, 0, 'm'},
        {"iters", required_argument, 0, 'i'},  {"warmup", required_argument, 0, 'x'},
        {"window", required_argument, 0, 'W'}, {"window-bytes", required_argument, 0, 'B'},
        {"device", no_argument, 0, 'd'},       {"validate", no_argument, 0, 'c'},
        {"report-rss", no_argument, 0, 'R'},   {"help", no_argument, 0, 'h'},
        {"mem", required_argument, 0, 'M'},
        {0, 0, 0, 0}};
    int c;
    parse_sizes("1:64M");
    while ((c = getopt_long(argc, argv, "t:m:i:x:W:dch", longopts, NULL)) != -1) {
        switch (c) {
        case 't': opt.tests = parse_tests(optarg); break;
        case 'm': parse_sizes(optarg); break;
        case 'i': opt.iters = atoi(optarg); break;
        case 'x': opt.warmup = atoi(optarg); break;
        case 'W': opt.window = atoi(optarg); break;
        case 'B': opt.window_bytes = parse_size(optarg); break;
        case 'd': opt.device = 1; break;
        case 'c': opt.validate = 1; break;
        case 'R': opt.report_rss = 1; break;
        case 'M': opt.mem = optarg; break;
        default:
            if (rank == 0) fputs(usage, c == 'h' ? stdout : stderr);
            MPI_Finalize();
            exit(c == 'h' ? 0 : 2);
        }
    }
    if (opt.window < 1 || opt.nsizes == 0) die("bad --window or --sizes");
    if (opt.mem) {
        const size_t n = strlen(opt.mem);
        const char k = n ? opt.mem[(size_t)rank < n ? (size_t)rank : n - 1] : '?';
        if (n == 0 || strspn(opt.mem, "DHP") != n) die("--mem takes letters D, H, P");
        opt.device = k == 'D';
        opt.pinned = k == 'P';
    }
}

/* Peak resident set (VmHWM) of this process in KiB, or -1. */
static long peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static void report_rss(void)
{
    long mine = peak_rss_kib(), *all = malloc(sizeof(long) * (size_t)nranks), max = 0;
    MPI_Gather(&mine, 1, MPI_LONG, all, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# peak RSS (VmHWM, KiB) per rank:");
        for (int r = 0; r < nranks; r++) {
            printf(" %ld", all[r]);
            max = all[r] > max ? all[r] : max;
        }
        printf("\n# peak RSS max KiB: %ld\n", max);
    }
    free(all);
}

/* Picks the GPU by the node-local rank that the launcher exports, before
 * MPI_Init, so the MPI library sees the device already chosen. */
static void select_device(int argc, char **argv)
{
    int want = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-d") || !strcmp(argv[i], "--device") || !strcmp(argv[i], "--mem"))
            want = 1;
    /* (Combined short options like -cd are parsed later, after MPI_Init:
     * device 0 is used then.) */
    if (!want) return;
#ifdef GPUWIRE_BENCH_CUDA
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    int local = 0, ndev = 0;
    for (int i = 0; i < 3; i++)
        if (getenv(vars[i])) {
            local = atoi(getenv(vars[i]));
            break;
        }
    if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) cudaSetDevice(local % ndev);
#endif
}

static void header(const char *title, const char *columns)
{
    if (rank == 0) printf("#\n# %s\n%s\n", title, columns);
}

int main(int argc, char **argv)
{
    select_device(argc, argv);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    parse_args(argc, argv);
#ifndef GPUWIRE_BENCH_CUDA
    if (opt.device || opt.pinned) die("--device and --mem D/P need a build with CUDA");
#endif
    if (nranks < 2 && (opt.tests & (T_LATENCY | T_BW | T_BIBW))) die("point-to-point tests need 2 ranks");

    size_t max = 0;
    for (int i = 0; i < opt.nsizes; i++) max = opt.sizes[i] > max ? opt.sizes[i] : max;
    size_t rbytes = max * (size_t)window_for(max);
    for (int i = 0; i < opt.nsizes; i++) {
        size_t b = opt.sizes[i] * (size_t)window_for(opt.sizes[i]);
        rbytes = b > rbytes ? b : rbytes;
    }
    void *sbuf = buf_alloc(max), *rbuf = buf_alloc(rbytes > max ? rbytes : max);
    scratch_size = opt.device && opt.validate ? (rbytes > max ? rbytes : max) : 0;
    scratch = scratch_size ? malloc(scratch_size) : NULL;

    if (rank == 0) {
        const char *pml = getenv("OMPI_MCA_pml");
        printf("# gwbench: %d ranks, %s buffers, pml %s%s\n", nranks,
               opt.mem ? opt.mem : opt.device ? "device" : "host",
               pml ? pml : "(default)", opt.validate ? ", validating" : "");
    }
    int pt2pt = rank < 2;
    if (opt.tests & T_LATENCY) {
        header("latency: one-way, median of round trips / 2", "# size(B)    median(us)      min(us)    iters");
        for (int i = 0; i < opt.nsizes; i++)
            if (pt2pt) latency(opt.sizes[i], sbuf, rbuf);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (opt.tests & T_BW) {
        header("bw: unidirectional, windows of non-blocking sends", "# size(B)          GB/s   window    iters");
        for (int i = 0; i < opt.nsizes; i++)
            if (pt2pt) bandwidth(opt.sizes[i], 0, sbuf, rbuf);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (opt.tests & T_BIBW) {
        header("bibw: bidirectional, windows both ways at once", "# size(B)          GB/s   window    iters");
        for (int i = 0; i < opt.nsizes; i++)
            if (pt2pt) bandwidth(opt.sizes[i], 1, sbuf, rbuf);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (opt.tests & T_ALLREDUCE) {
        header("allreduce: MPI_FLOAT sum, slowest rank's median", "# size(B)    median(us)      min(us)    iters");
        for (int i = 0; i < opt.nsizes; i++)
            if (opt.sizes[i] >= sizeof(float)) allreduce(opt.sizes[i], sbuf, rbuf);
    }

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (opt.validate && rank == 0) printf("# validation: %s (%d bad)\n", total ? "FAIL" : "PASS", total);
    if (opt.report_rss) report_rss();
    buf_free(sbuf);
    buf_free(rbuf);
    free(scratch);
    MPI_Finalize();
    return total ? 1 : 0;
}
