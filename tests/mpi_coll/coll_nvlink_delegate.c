/*
 * The delegated NVLink calls of ranks that share one GPU under CUDA MPS:
 * Iallreduce, Ibcast and Iallgather from 8 bytes to 64 MiB, all three in
 * flight together with a blocking Allreduce initiated between them; a
 * buffer of a stream-ordered pool (CUDA IPC cannot export it: a temporary
 * on its rank); initiation, device synchronize, then the message the others
 * wait for before they initiate (must not hang); and a call that completes
 * while no rank enters MPI (the first MPI_Test after both ranks initiated
 * and computed finds it done). Every result checked against the host; the
 * MPI_T counters must show the non-blocking calls and the large blocking
 * ones on the team.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_pvar.h"
#include "device_test.h"
#include "mpitest.h"

static float val(int r, size_t e, unsigned salt) { return (float)((int)((e * 7 + r * 13 + salt) % 101) - 50); }

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static float *filled(size_t count, int r, unsigned salt)
{
    float *h = malloc(count * sizeof(float));
    for (size_t e = 0; e < count; ++e) h[e] = val(r, e, salt);
    return h;
}

static long count_bad_sum(const float *got, size_t count, int n, unsigned salt)
{
    long bad = 0;
    for (size_t e = 0; e < count; ++e) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += val(r, e, salt);
        bad += got[e] != want;
    }
    return bad;
}

static void to_dev(void *d, const void *h, size_t bytes)
{
    CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}

static void *from_dev(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

/* The three non-blocking calls of `bytes` each, a blocking Allreduce between
 * them, then every result. */
static void check_size(MPI_Comm comm, size_t bytes, unsigned salt)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const size_t count = bytes / sizeof(float);
    const int root = (int)(salt % (unsigned)n);
    const size_t per = bytes / (size_t)n; /* allgather: bytes per rank */
    float *h = filled(count, me, salt), *hb = filled(count, me, salt + 1);
    float *ar_in = dev_alloc(bytes), *ar_out = dev_alloc(bytes);
    float *b_in = dev_alloc(bytes), *b_out = dev_alloc(bytes);
    unsigned char *bc = dev_alloc(bytes), *ag_in = dev_alloc(per), *ag_out = dev_alloc(per * n);
    to_dev(ar_in, h, bytes);
    to_dev(b_in, hb, bytes);
    unsigned char *hc = malloc(bytes), *hg = malloc(per ? per : 1);
    for (size_t e = 0; e < bytes; ++e) hc[e] = me == root ? (unsigned char)(e * 3 + salt) : 0xee;
    for (size_t e = 0; e < per; ++e) hg[e] = (unsigned char)(e + 31 * me + salt);
    to_dev(bc, hc, bytes);
    to_dev(ag_in, hg, per);

    MPI_Request reqs[3];
    MT_CHECK_MPI(MPI_Iallreduce(ar_in, ar_out, (int)count, MPI_FLOAT, MPI_SUM, comm, &reqs[0]));
    MT_CHECK_MPI(MPI_Ibcast(bc, (int)bytes, MPI_BYTE, root, comm, &reqs[1]));
    MT_CHECK_MPI(MPI_Allreduce(b_in, b_out, (int)count, MPI_FLOAT, MPI_SUM, comm));
    MT_CHECK_MPI(MPI_Iallgather(ag_in, (int)per, MPI_BYTE, ag_out, (int)per, MPI_BYTE, comm, &reqs[2]));
    MT_CHECK_MPI(MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE));

    float *g = from_dev(ar_out, bytes), *gb = from_dev(b_out, bytes);
    unsigned char *gc = from_dev(bc, bytes), *gg = from_dev(ag_out, per * n);
    long bad[4] = {count_bad_sum(g, count, n, salt), 0, count_bad_sum(gb, count, n, salt + 1), 0};
    for (size_t e = 0; e < bytes; ++e) bad[1] += gc[e] != (unsigned char)(e * 3 + salt);
    for (int r = 0; r < n; ++r) {
        for (size_t e = 0; e < per; ++e) bad[3] += gg[r * per + e] != (unsigned char)(e + 31 * r + salt);
    }
    if (bad[0] || bad[1] || bad[2] || bad[3]) {
        mt_fail(__FILE__, __LINE__,
                "%zu bytes: iallreduce %ld, ibcast %ld, allreduce %ld, iallgather %ld wrong", bytes,
                bad[0], bad[1], bad[2], bad[3]);
    }
    void *all[] = {ar_in, ar_out, b_in, b_out, bc, ag_in, ag_out};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) CUDA_OK(cudaFree(all[i]));
    free(h);
    free(hb);
    free(hc);
    free(hg);
    free(g);
    free(gb);
    free(gc);
    free(gg);
}

/* In place, in a stream-ordered pool's memory (not exportable by CUDA IPC). */
static void check_pool(MPI_Comm comm, size_t count, unsigned salt)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const size_t bytes = count * sizeof(float);
    float *h = filled(count, me, salt), *d = NULL;
    CUDA_OK(cudaMallocAsync((void **)&d, bytes, 0));
    CUDA_OK(cudaStreamSynchronize(0));
    to_dev(d, h, bytes);
    MPI_Request req;
    MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, d, (int)count, MPI_FLOAT, MPI_SUM, comm, &req));
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    float *g = from_dev(d, bytes);
    const long bad = count_bad_sum(g, count, n, salt);
    if (bad) mt_fail(__FILE__, __LINE__, "pool memory, %zu floats: %ld wrong", count, bad);
    CUDA_OK(cudaFreeAsync(d, 0));
    CUDA_OK(cudaStreamSynchronize(0));
    free(h);
    free(g);
}

/* Rank 0 initiates, synchronizes its device, and only then sends what the
 * others wait for before they initiate. */
static void check_late(MPI_Comm comm, size_t count, unsigned salt)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const size_t bytes = count * sizeof(float);
    float *h = filled(count, me, salt), *in = dev_alloc(bytes), *out = dev_alloc(bytes);
    to_dev(in, h, bytes);
    MPI_Request req;
    int token = 1;
    if (me == 0) {
        MT_CHECK_MPI(MPI_Iallreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, comm, &req));
        const double t0 = MPI_Wtime();
        CUDA_OK(cudaDeviceSynchronize());
        if (MPI_Wtime() - t0 > 2.0) {
            mt_fail(__FILE__, __LINE__, "cudaDeviceSynchronize after MPI_Iallreduce took %.1f s",
                    MPI_Wtime() - t0);
        }
        for (int r = 1; r < n; ++r) MT_CHECK_MPI(MPI_Send(&token, 1, MPI_INT, r, 5, comm));
    } else {
        MT_CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, 0, 5, comm, MPI_STATUS_IGNORE));
        MT_CHECK_MPI(MPI_Iallreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, comm, &req));
    }
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    float *g = from_dev(out, bytes);
    const long bad = count_bad_sum(g, count, n, salt);
    if (bad) mt_fail(__FILE__, __LINE__, "late initiation, %zu floats: %ld wrong", count, bad);
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
    free(h);
    free(g);
}

static void compute_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Both ranks initiate, then compute without MPI: the call runs meanwhile,
 * so the first MPI_Test finds it done. */
static void check_overlap(MPI_Comm comm, size_t count, unsigned salt)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const size_t bytes = count * sizeof(float);
    float *h = filled(count, me, salt), *in = dev_alloc(bytes), *out = dev_alloc(bytes);
    to_dev(in, h, bytes);
    MT_CHECK_MPI(MPI_Barrier(comm));
    MPI_Request req;
    MT_CHECK_MPI(MPI_Iallreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, comm, &req));
    compute_ms(300);
    int flag = 0;
    MT_CHECK_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    if (!flag) {
        mt_fail(__FILE__, __LINE__, "%zu bytes: not done after 300 ms without MPI", bytes);
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }
    float *g = from_dev(out, bytes);
    const long bad = count_bad_sum(g, count, n, salt);
    if (bad) mt_fail(__FILE__, __LINE__, "overlapped, %zu floats: %ld wrong", count, bad);
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
    free(h);
    free(g);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (device_test_select_gpu() < 0) return mt_skip("no GPU (CUDA driver or device absent)");
    int provided;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MPI_T_pvar_session session;
    MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
    MPI_T_pvar_handle calls = coll_pvar_open(session, "coll_gpuwire_nvlink_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle nb_calls =
        coll_pvar_open(session, "coll_gpuwire_nvlink_nb_calls", MPI_T_PVAR_CLASS_COUNTER);

    /* A blocking call sets the team up; the non-blocking ones then go by it. */
    MPI_Comm comm;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    check_late(comm, 1000, 1); /* before any set-up: one-shot, per-rank kernels */
    unsigned salt = 10;
    for (size_t bytes = 8; bytes <= ((size_t)16 << 20); bytes *= 8) check_size(comm, bytes, salt++);
    check_size(comm, (size_t)64 << 20, salt++);
    check_pool(comm, 4099, salt++);
    check_pool(comm, (size_t)3 << 20, salt++);
    check_late(comm, 1000, salt++);
    check_late(comm, (size_t)16 << 20, salt++);
    check_overlap(comm, 16384, salt++);
    check_overlap(comm, (size_t)16 << 20, salt++);
    MT_CHECK_MPI(MPI_Comm_free(&comm));

    const unsigned long long used = coll_pvar_read(session, calls);
    const unsigned long long nb_used = coll_pvar_read(session, nb_calls);
    /* 9 sizes, 3 non-blocking each; 2 x pool, 3 x late, 2 x overlap; the
     * blocking ones above 1 MiB: 2, 16 and 64 MiB. */
    if (nb_used < 9 * 3 + 7) {
        mt_fail(__FILE__, __LINE__, "%llu non-blocking calls on the team, want 34", nb_used);
    }
    if (used < 3) mt_fail(__FILE__, __LINE__, "%llu blocking calls on the team, want at least 3", used);
    if (mt_rank == 0) {
        printf("coll_nvlink_delegate: %llu blocking, %llu non-blocking calls on the team\n", used,
               nb_used);
    }
    if (calls != MPI_T_PVAR_HANDLE_NULL) MT_CHECK_MPI(MPI_T_pvar_handle_free(session, &calls));
    if (nb_calls != MPI_T_PVAR_HANDLE_NULL) MT_CHECK_MPI(MPI_T_pvar_handle_free(session, &nb_calls));
    MT_CHECK_MPI(MPI_T_pvar_session_free(&session));
    MT_CHECK_MPI(MPI_T_finalize());
    return mt_finish();
}
