/*
 * Processes of another job (MPI_Comm_spawn): two parents spawn two children
 * and talk to them through pml gpuwire. Each parent sends its child a small
 * and a 1 MiB message, the child sends both back plus one; the parents'
 * rank 0 broadcasts over the intercommunicator (MPI_ROOT); then the merged
 * intracommunicator of the four runs an Allreduce, which also sums every
 * process's failures; MPI_Comm_disconnect last. Every value and return code
 * is checked; a failure makes the process exit non-zero.
 *
 * Built twice: host buffers, and with SPAWN_DEVICE buffers from cudaMalloc
 * (exits 77 without a GPU).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef SPAWN_DEVICE
#include <cuda_runtime_api.h>
#endif

enum { SMALL = 100, LARGE = 1 << 18 }; /* ints: 400 B and 1 MiB */

static int failures;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
            failures++;                                                                         \
        }                                                                                       \
    } while (0)
#define CHECK_MPI(call) CHECK(MPI_SUCCESS == (call), "%s:%d: %s failed", __FILE__, __LINE__, #call)

static int *buf_new(int n)
{
    int *p = NULL;
#ifdef SPAWN_DEVICE
    if (cudaSuccess != cudaMalloc((void **)&p, (size_t)n * sizeof(int))) abort();
#else
    p = malloc((size_t)n * sizeof(int));
    if (NULL == p) abort();
#endif
    return p;
}

static void buf_free(int *p)
{
#ifdef SPAWN_DEVICE
    cudaFree(p);
#else
    free(p);
#endif
}

static void buf_put(int *dst, const int *host, int n)
{
#ifdef SPAWN_DEVICE
    if (cudaSuccess != cudaMemcpy(dst, host, (size_t)n * sizeof(int), cudaMemcpyHostToDevice))
        abort();
#else
    memcpy(dst, host, (size_t)n * sizeof(int));
#endif
}

static void buf_get(int *host, const int *src, int n)
{
#ifdef SPAWN_DEVICE
    if (cudaSuccess != cudaMemcpy(host, src, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost))
        abort();
#else
    memcpy(host, src, (size_t)n * sizeof(int));
#endif
}

static int value(int who, int k) { return who * 1000003 + k; }

/* One message of n ints each way between a parent and its child. */
static void exchange(MPI_Comm inter, int peer, int n, int tag, int parent, int me)
{
    int *host = malloc((size_t)n * sizeof(int));
    int *dev = buf_new(n);
    if (NULL == host) abort();
    if (parent) {
        for (int k = 0; k < n; ++k) host[k] = value(me, k);
        buf_put(dev, host, n);
        CHECK_MPI(MPI_Send(dev, n, MPI_INT, peer, tag, inter));
        buf_put(dev, (int[]){-1}, 1);
        MPI_Status st;
        CHECK_MPI(MPI_Recv(dev, n, MPI_INT, peer, tag + 1, inter, &st));
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == tag + 1, "parent %d: status %d/%d", me,
              st.MPI_SOURCE, st.MPI_TAG);
        buf_get(host, dev, n);
        for (int k = 0; k < n; ++k) {
            if (host[k] != value(me, k) + 1) {
                CHECK(0, "parent %d: element %d of %d is %d, not %d", me, k, n, host[k],
                      value(me, k) + 1);
                break;
            }
        }
    } else {
        MPI_Request r;
        CHECK_MPI(MPI_Irecv(dev, n, MPI_INT, peer, tag, inter, &r));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        buf_get(host, dev, n);
        for (int k = 0; k < n; ++k) host[k] += 1;
        buf_put(dev, host, n);
        CHECK_MPI(MPI_Send(dev, n, MPI_INT, peer, tag + 1, inter));
    }
    buf_free(dev);
    free(host);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent_comm, inter;
    MPI_Comm_get_parent(&parent_comm);
    const int parent = MPI_COMM_NULL == parent_comm;
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
#ifdef SPAWN_DEVICE
    int ndev = 0;
    if (cudaSuccess != cudaGetDeviceCount(&ndev) || ndev < 1) {
        if (parent && 0 == me) printf("SKIP: no GPU\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(me % ndev);
#endif
    if (parent) {
        int errs[2] = {0, 0};
        CHECK_MPI(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                                 &inter, errs));
        for (int i = 0; i < n && i < 2; ++i) CHECK(MPI_SUCCESS == errs[i], "spawn error %d", errs[i]);
    } else {
        inter = parent_comm;
    }
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int remote = 0;
    MPI_Comm_remote_size(inter, &remote);
    CHECK(remote == n, "rank %d: remote group of %d, not %d", me, remote, n);

    /* Parent i and child i. */
    exchange(inter, me, SMALL, 10, parent, me);
    exchange(inter, me, LARGE, 20, parent, me);

    /* Bcast from the parents' rank 0 to the children. */
    int *b = buf_new(SMALL), host[SMALL];
    if (parent) {
        for (int k = 0; k < SMALL; ++k) host[k] = value(77, k);
        buf_put(b, host, SMALL);
        CHECK_MPI(MPI_Bcast(b, SMALL, MPI_INT, 0 == me ? MPI_ROOT : MPI_PROC_NULL, inter));
    } else {
        CHECK_MPI(MPI_Bcast(b, SMALL, MPI_INT, 0, inter));
        buf_get(host, b, SMALL);
        for (int k = 0; k < SMALL; ++k) {
            if (host[k] != value(77, k)) {
                CHECK(0, "child %d: bcast element %d is %d", me, k, host[k]);
                break;
            }
        }
    }
    buf_free(b);

    /* The four together: a sum of ranks + 1, and of the failures so far. */
    MPI_Comm all;
    CHECK_MPI(MPI_Intercomm_merge(inter, !parent, &all));
    int size = 0, rank = 0;
    MPI_Comm_size(all, &size);
    MPI_Comm_rank(all, &rank);
    int mine[2] = {rank + 1, failures}, sum[2] = {0, 0};
    int *dm = buf_new(2), *ds = buf_new(2);
    buf_put(dm, mine, 2);
    CHECK_MPI(MPI_Allreduce(dm, ds, 2, MPI_INT, MPI_SUM, all));
    buf_get(sum, ds, 2);
    buf_free(dm);
    buf_free(ds);
    CHECK(sum[0] == size * (size + 1) / 2, "rank %d of merged: sum %d", rank, sum[0]);
    CHECK(0 == sum[1], "rank %d of merged: %d failure(s) in the job", rank, sum[1]);
    CHECK(size == 2 * n, "merged size %d", size);
    CHECK_MPI(MPI_Comm_free(&all));
    CHECK_MPI(MPI_Comm_disconnect(&inter));
    if (parent && 0 == me) printf("%s: %d failure(s) on %d + %d processes\n",
                                  failures ? "FAIL" : "PASS", failures, n, n);
    MPI_Finalize();
    return failures ? 1 : 0;
}
