/*
 * Allreduce, Bcast and Allgather on cudaMalloc'd buffers through coll
 * gpuwire's NVLink kernels: one-shot and direct sizes, in place and not,
 * every root, repeated calls (the one-shot slots alternate), a communicator
 * of the odd-even split and a reversed one. Data checked against values
 * computed on the host. With a GPU per rank the MPI_T counter
 * coll_gpuwire_nvlink_calls must grow; with ranks sharing a GPU (or
 * coll_gpuwire_nvlink 0) it must stay 0 and every result must still be right
 * (the communicator's calls go to the algorithms over point-to-point).
 * The non-blocking forms (check_nonblocking) run first on a fresh
 * communicator (its team set up from their progress) and again after the
 * blocking calls, with coll_gpuwire_nvlink_nb_calls growing or staying 0
 * alike.
 * GW_TEST_SAME_GPU=1 puts every rank on GPU 0; with
 * coll_gpuwire_nvlink_shared_gpu 1 they still form a team (expect-nvlink).
 *   argv[1]: "expect-nvlink" or "expect-fallback"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_pvar.h"
#include "device_test.h"
#include "mpitest.h"

static const long kCounts[] = {1, 2, 7, 33, 1000, 4099, 65536, 262147, 1 << 22};

/* Element e of rank r's input, as an int64 that every type below holds. */
static int64_t val(int r, long e, unsigned salt) { return (int64_t)((e * 7 + r * 13 + salt) % 101) - 50; }

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void check_allreduce(MPI_Comm comm, long count, int in_place, unsigned salt)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const size_t bytes = (size_t)count * sizeof(int32_t);
    int32_t *h = malloc(bytes), *want = malloc(bytes);
    int64_t *dh = malloc((size_t)count * sizeof(int64_t));
    for (long e = 0; e < count; ++e) {
        h[e] = (int32_t)val(me, e, salt);
        int32_t s = 0;
        for (int r = 0; r < n; ++r) s += (int32_t)val(r, e, salt);
        want[e] = s;
    }
    int32_t *in = dev_alloc(bytes), *out = dev_alloc(bytes);
    CUDA_OK(cudaMemcpy(in_place ? out : in, h, bytes, cudaMemcpyHostToDevice));
    MT_CHECK_MPI(MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, (int)count, MPI_INT32_T, MPI_SUM,
                               comm));
    memset(h, 0, bytes);
    CUDA_OK(cudaMemcpy(h, out, bytes, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (long e = 0; e < count; ++e) bad += h[e] != want[e];
    if (bad) {
        mt_fail(__FILE__, __LINE__, "allreduce SUM int32 count %ld in_place %d: %ld wrong", count,
                in_place, bad);
    }
    /* The result buffer through the pml to the next rank: a buffer the
     * direct form mapped is mapped by the pml too (one mapping per process). */
    int32_t *back = dev_alloc(bytes);
    MT_CHECK_MPI(MPI_Sendrecv(out, (int)count, MPI_INT32_T, (me + 1) % n, 77, back, (int)count,
                              MPI_INT32_T, (me + n - 1) % n, 77, comm, MPI_STATUS_IGNORE));
    memset(h, 0, bytes);
    CUDA_OK(cudaMemcpy(h, back, bytes, cudaMemcpyDeviceToHost));
    bad = 0;
    for (long e = 0; e < count; ++e) bad += h[e] != want[e];
    if (bad) mt_fail(__FILE__, __LINE__, "allreduce result sent on, count %ld: %ld wrong", count, bad);
    CUDA_OK(cudaFree(back));
    /* MAX on doubles, into the same buffers. */
    double *g = (double *)dh, *gw = malloc((size_t)count * sizeof(double));
    const size_t dbytes = (size_t)count * sizeof(double);
    double *din = dev_alloc(dbytes), *dout = dev_alloc(dbytes);
    for (long e = 0; e < count; ++e) {
        g[e] = (double)val(me, e, salt + 3) / 4.0;
        gw[e] = -1e300;
        for (int r = 0; r < n; ++r) {
            double v = (double)val(r, e, salt + 3) / 4.0;
            if (v > gw[e]) gw[e] = v;
        }
    }
    CUDA_OK(cudaMemcpy(din, g, dbytes, cudaMemcpyHostToDevice));
    MT_CHECK_MPI(MPI_Allreduce(din, dout, (int)count, MPI_DOUBLE, MPI_MAX, comm));
    CUDA_OK(cudaMemcpy(g, dout, dbytes, cudaMemcpyDeviceToHost));
    bad = 0;
    for (long e = 0; e < count; ++e) bad += g[e] != gw[e];
    if (bad) mt_fail(__FILE__, __LINE__, "allreduce MAX double count %ld: %ld wrong", count, bad);
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
    CUDA_OK(cudaFree(din));
    CUDA_OK(cudaFree(dout));
    free(h);
    free(want);
    free(dh);
    free(gw);
}

static void check_bcast(MPI_Comm comm, long count, int root, unsigned salt)
{
    int me;
    MPI_Comm_rank(comm, &me);
    const size_t bytes = (size_t)count;
    unsigned char *h = malloc(bytes);
    for (long e = 0; e < count; ++e) h[e] = (unsigned char)(me == root ? val(root, e, salt) : 0xee);
    unsigned char *d = dev_alloc(bytes);
    CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    MT_CHECK_MPI(MPI_Bcast(d, (int)count, MPI_BYTE, root, comm));
    CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (long e = 0; e < count; ++e) bad += h[e] != (unsigned char)val(root, e, salt);
    if (bad) mt_fail(__FILE__, __LINE__, "bcast %ld bytes root %d: %ld wrong", count, root, bad);
    CUDA_OK(cudaFree(d));
    free(h);
}

static void check_allgather(MPI_Comm comm, long count, int in_place, unsigned salt)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const size_t bytes = (size_t)count * sizeof(int16_t);
    int16_t *h = malloc(bytes * n);
    for (long i = 0; i < count * n; ++i) h[i] = (int16_t)-7;
    for (long e = 0; e < count; ++e) h[(in_place ? me * count : 0) + e] = (int16_t)val(me, e, salt);
    int16_t *in = dev_alloc(bytes), *out = dev_alloc(bytes * n);
    if (in_place) {
        CUDA_OK(cudaMemcpy(out, h, bytes * n, cudaMemcpyHostToDevice));
    } else {
        CUDA_OK(cudaMemcpy(in, h, bytes, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(out, 0x5a, bytes * n));
    }
    MT_CHECK_MPI(MPI_Allgather(in_place ? MPI_IN_PLACE : in, (int)count, MPI_SHORT, out,
                               (int)count, MPI_SHORT, comm));
    CUDA_OK(cudaMemcpy(h, out, bytes * n, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int r = 0; r < n; ++r) {
        for (long e = 0; e < count; ++e) bad += h[r * count + e] != (int16_t)val(r, e, salt);
    }
    if (bad) {
        mt_fail(__FILE__, __LINE__, "allgather %ld shorts in_place %d: %ld wrong", count, in_place,
                bad);
    }
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
    free(h);
}

static void run_all(MPI_Comm comm, unsigned salt)
{
    int n;
    MPI_Comm_size(comm, &n);
    for (size_t i = 0; i < sizeof(kCounts) / sizeof(kCounts[0]); ++i) {
        const long c = kCounts[i];
        for (int rep = 0; rep < 3; ++rep) {
            check_allreduce(comm, c, rep == 1, salt + rep);
            check_bcast(comm, c, (int)((i + rep) % n), salt + rep);
            check_allgather(comm, c, rep == 2, salt + rep);
        }
    }
}

/* The non-blocking forms (one-shot sizes): several of each kind in flight,
 * completed together; then an initiation followed by the application's
 * cudaDeviceSynchronize before the other ranks have initiated (they wait
 * for a message sent after it): the kernel must not be running yet, or the
 * synchronize waits for a peer that waits for this rank. */
enum { NB_CALLS = 6 };

static void check_nonblocking(MPI_Comm comm, unsigned salt)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    static const long counts[NB_CALLS] = {1, 7, 1000, 4099, 65536, 200000};
    int32_t *ar_in[NB_CALLS], *ar_out[NB_CALLS];
    unsigned char *bc[NB_CALLS];
    int16_t *ag_in[NB_CALLS], *ag_out[NB_CALLS];
    MPI_Request reqs[3 * NB_CALLS];
    for (int k = 0; k < NB_CALLS; ++k) {
        const long c = counts[k];
        int32_t *h = malloc((size_t)c * sizeof(int32_t));
        for (long e = 0; e < c; ++e) h[e] = (int32_t)val(me, e, salt + k);
        ar_in[k] = dev_alloc((size_t)c * sizeof(int32_t));
        ar_out[k] = dev_alloc((size_t)c * sizeof(int32_t));
        CUDA_OK(cudaMemcpy(ar_in[k], h, (size_t)c * sizeof(int32_t), cudaMemcpyHostToDevice));
        unsigned char *b = malloc((size_t)c);
        for (long e = 0; e < c; ++e) b[e] = (unsigned char)(me == k % n ? val(k % n, e, salt) : 0xee);
        bc[k] = dev_alloc((size_t)c);
        CUDA_OK(cudaMemcpy(bc[k], b, (size_t)c, cudaMemcpyHostToDevice));
        int16_t *g = malloc((size_t)c * sizeof(int16_t));
        for (long e = 0; e < c; ++e) g[e] = (int16_t)val(me, e, salt + 2 * k);
        ag_in[k] = dev_alloc((size_t)c * sizeof(int16_t));
        ag_out[k] = dev_alloc((size_t)c * n * sizeof(int16_t));
        CUDA_OK(cudaMemcpy(ag_in[k], g, (size_t)c * sizeof(int16_t), cudaMemcpyHostToDevice));
        free(h);
        free(b);
        free(g);
    }
    for (int k = 0; k < NB_CALLS; ++k) {
        const int c = (int)counts[k];
        MT_CHECK_MPI(MPI_Iallreduce(ar_in[k], ar_out[k], c, MPI_INT32_T, MPI_SUM, comm, &reqs[3 * k]));
        MT_CHECK_MPI(MPI_Ibcast(bc[k], c, MPI_BYTE, k % n, comm, &reqs[3 * k + 1]));
        MT_CHECK_MPI(MPI_Iallgather(ag_in[k], c, MPI_SHORT, ag_out[k], c, MPI_SHORT, comm,
                                    &reqs[3 * k + 2]));
    }
    MT_CHECK_MPI(MPI_Waitall(3 * NB_CALLS, reqs, MPI_STATUSES_IGNORE));
    for (int k = 0; k < NB_CALLS; ++k) {
        const long c = counts[k];
        int32_t *h = malloc((size_t)c * sizeof(int32_t));
        unsigned char *b = malloc((size_t)c);
        int16_t *g = malloc((size_t)c * n * sizeof(int16_t));
        CUDA_OK(cudaMemcpy(h, ar_out[k], (size_t)c * sizeof(int32_t), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(b, bc[k], (size_t)c, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(g, ag_out[k], (size_t)c * n * sizeof(int16_t), cudaMemcpyDeviceToHost));
        long bad[3] = {0, 0, 0};
        for (long e = 0; e < c; ++e) {
            int32_t want = 0;
            for (int r = 0; r < n; ++r) want += (int32_t)val(r, e, salt + k);
            bad[0] += h[e] != want;
            bad[1] += b[e] != (unsigned char)val(k % n, e, salt);
            for (int r = 0; r < n; ++r) bad[2] += g[r * c + e] != (int16_t)val(r, e, salt + 2 * k);
        }
        if (bad[0] || bad[1] || bad[2]) {
            mt_fail(__FILE__, __LINE__,
                    "in flight together, count %ld: iallreduce %ld, ibcast %ld, iallgather %ld wrong",
                    c, bad[0], bad[1], bad[2]);
        }
        CUDA_OK(cudaFree(ar_in[k]));
        CUDA_OK(cudaFree(ar_out[k]));
        CUDA_OK(cudaFree(bc[k]));
        CUDA_OK(cudaFree(ag_in[k]));
        CUDA_OK(cudaFree(ag_out[k]));
        free(h);
        free(b);
        free(g);
    }

    /* Initiation, then the application's device synchronize, then the
     * message the other ranks wait for before they initiate. */
    const long c = 4099;
    int32_t *h = malloc((size_t)c * sizeof(int32_t));
    for (long e = 0; e < c; ++e) h[e] = (int32_t)val(me, e, salt + 99);
    int32_t *in = dev_alloc((size_t)c * sizeof(int32_t)), *out = dev_alloc((size_t)c * sizeof(int32_t));
    CUDA_OK(cudaMemcpy(in, h, (size_t)c * sizeof(int32_t), cudaMemcpyHostToDevice));
    MPI_Request req;
    int token = 1;
    if (me == 0) {
        MT_CHECK_MPI(MPI_Iallreduce(in, out, (int)c, MPI_INT32_T, MPI_SUM, comm, &req));
        const double t0 = MPI_Wtime();
        CUDA_OK(cudaDeviceSynchronize());
        const double took = MPI_Wtime() - t0;
        if (took > 2.0) {
            mt_fail(__FILE__, __LINE__, "cudaDeviceSynchronize after MPI_Iallreduce took %.1f s",
                    took);
        }
        for (int r = 1; r < n; ++r) MT_CHECK_MPI(MPI_Send(&token, 1, MPI_INT, r, 5, comm));
    } else {
        MT_CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, 0, 5, comm, MPI_STATUS_IGNORE));
        MT_CHECK_MPI(MPI_Iallreduce(in, out, (int)c, MPI_INT32_T, MPI_SUM, comm, &req));
    }
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CUDA_OK(cudaMemcpy(h, out, (size_t)c * sizeof(int32_t), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (long e = 0; e < c; ++e) {
        int32_t want = 0;
        for (int r = 0; r < n; ++r) want += (int32_t)val(r, e, salt + 99);
        bad += h[e] != want;
    }
    if (bad) mt_fail(__FILE__, __LINE__, "iallreduce after a late initiation: %ld wrong", bad);
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
    free(h);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (device_test_select_gpu() < 0) return mt_skip("no GPU (CUDA driver or device absent)");
    const int expect_nvlink = argc > 1 && strcmp(argv[1], "expect-nvlink") == 0;
    int ndev = 0;
    CUDA_OK(cudaGetDeviceCount(&ndev));
    const char *same = getenv("GW_TEST_SAME_GPU");
    const int one_gpu = same && same[0] == '1'; /* a team on one GPU (shared_gpu) */
    if (expect_nvlink && !one_gpu && ndev < mt_size) return mt_skip("fewer GPUs than ranks");

    int provided;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MPI_T_pvar_session session;
    MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
    MPI_T_pvar_handle calls = coll_pvar_open(session, "coll_gpuwire_nvlink_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle nb_calls =
        coll_pvar_open(session, "coll_gpuwire_nvlink_nb_calls", MPI_T_PVAR_CLASS_COUNTER);

    /* Non-blocking calls first on a fresh communicator: its team is set up
     * from their progress. */
    MPI_Comm fresh;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &fresh));
    check_nonblocking(fresh, 3);
    MT_CHECK_MPI(MPI_Comm_free(&fresh));
    run_all(MPI_COMM_WORLD, 1);
    /* After the blocking calls, which set the team up. */
    check_nonblocking(MPI_COMM_WORLD, 5);
    const unsigned long long nb_used = coll_pvar_read(session, nb_calls);
    if (expect_nvlink && nb_used == 0) {
        mt_fail(__FILE__, __LINE__, "no non-blocking collective ran over NVLink");
    } else if (!expect_nvlink && nb_used != 0) {
        mt_fail(__FILE__, __LINE__, "%llu non-blocking collectives ran over NVLink", nb_used);
    }
    MPI_Comm split, rev;
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &split));
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &rev));
    run_all(split, 11);
    run_all(rev, 21);
    MT_CHECK_MPI(MPI_Comm_free(&split));
    MT_CHECK_MPI(MPI_Comm_free(&rev));

    const unsigned long long used = coll_pvar_read(session, calls);
    if (expect_nvlink) {
        if (used == 0) mt_fail(__FILE__, __LINE__, "no collective ran over NVLink");
    } else if (used != 0) {
        mt_fail(__FILE__, __LINE__, "%llu collectives ran over NVLink where none should", used);
    }
    if (mt_rank == 0) {
        printf("coll_nvlink: %llu collectives over NVLink on rank 0, %llu of them non-blocking\n",
               used + nb_used, nb_used);
    }
    if (calls != MPI_T_PVAR_HANDLE_NULL) MT_CHECK_MPI(MPI_T_pvar_handle_free(session, &calls));
    if (nb_calls != MPI_T_PVAR_HANDLE_NULL) MT_CHECK_MPI(MPI_T_pvar_handle_free(session, &nb_calls));
    MT_CHECK_MPI(MPI_T_pvar_session_free(&session));
    MT_CHECK_MPI(MPI_T_finalize());
    return mt_finish();
}
