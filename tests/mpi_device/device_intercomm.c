/*
 * Collectives on an inter-communicator with device buffers. coll gpuwire
 * provides only the non-blocking reductions there (coll_inter_nb.c tests
 * them): Open MPI's coll/inter runs these blocking ones, composed
 * of collectives on each group's local (intra) communicator, where coll
 * gpuwire takes the device buffers, and point-to-point between the groups'
 * roots, which pml gpuwire carries. Groups: even and odd world ranks (2 and
 * 1 of 3 ranks). Allreduce (each group gets the other group's sum), Bcast
 * from each group in turn, Allgather (the other group's blocks in its rank
 * order); counts 1, odd and large.
 */
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "device_test.h"
#include "mpitest.h"

static int value(int wrank, long i) { return (int)(wrank * 100003L + i); }

static int *dev_alloc(long n, int fill_byte)
{
    int *d = NULL;
    CUDA_OK(cudaMalloc((void **)&d, (size_t)n * sizeof(int)));
    CUDA_OK(cudaMemset(d, fill_byte, (size_t)n * sizeof(int)));
    return d;
}

static void to_dev(int *d, const int *h, long n)
{
    CUDA_OK(cudaMemcpy(d, h, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
}

static void from_dev(int *h, const int *d, long n)
{
    CUDA_OK(cudaMemcpy(h, d, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost));
}

static void expect_ints(const int *got, const int *want, long n, const char *what, long c)
{
    for (long i = 0; i < n; ++i) {
        if (got[i] != want[i]) {
            mt_fail(__FILE__, __LINE__, "%s count %ld: int %ld is %d, not %d", what, c, i, got[i],
                    want[i]);
            return;
        }
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (device_test_select_gpu() < 0) return mt_skip("no GPU (CUDA driver or device absent)");
    int n, me;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (n < 2) return mt_skip("needs two ranks or more");
    const int color = me % 2;
    MPI_Comm local, inter;
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, me, &local));
    /* The other group's leader is world rank 1 - color. */
    MT_CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 7, &inter));
    int lrank, lsize, rsize;
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_size(local, &lsize);
    MPI_Comm_remote_size(inter, &rsize);
    /* World rank of remote rank q: the other color's q-th rank. */
    int *remote = malloc(sizeof(int) * rsize);
    for (int q = 0; q < rsize; ++q) remote[q] = 2 * q + (1 - color);

    const long counts[] = {1, 4097, 1 << 20};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
        const long c = counts[k];
        int *h = malloc(sizeof(int) * c * (rsize > 1 ? rsize : 1));
        int *want = malloc(sizeof(int) * c * (rsize > 1 ? rsize : 1));
        int *s = dev_alloc(c, 0), *r = dev_alloc(c * rsize, 0xff);

        for (long i = 0; i < c; ++i) h[i] = value(me, i);
        to_dev(s, h, c);
        MT_CHECK_MPI(MPI_Allreduce(s, r, (int)c, MPI_INT, MPI_SUM, inter));
        for (long i = 0; i < c; ++i) {
            want[i] = 0;
            for (int q = 0; q < rsize; ++q) want[i] += value(remote[q], i);
        }
        from_dev(h, r, c);
        expect_ints(h, want, c, "allreduce", c);

        for (int from = 0; from < 2; ++from) {
            const bool sending = from == color;
            if (sending && 0 == lrank) {
                for (long i = 0; i < c; ++i) h[i] = value(me + 1000, i);
                to_dev(r, h, c);
            }
            const int root = sending ? (0 == lrank ? MPI_ROOT : MPI_PROC_NULL) : 0;
            MT_CHECK_MPI(MPI_Bcast(r, (int)c, MPI_INT, root, inter));
            if (!sending) {
                for (long i = 0; i < c; ++i) want[i] = value(remote[0] + 1000, i);
                from_dev(h, r, c);
                expect_ints(h, want, c, "bcast", c);
            }
        }

        for (long i = 0; i < c; ++i) h[i] = value(me, i);
        to_dev(s, h, c);
        MT_CHECK_MPI(MPI_Allgather(s, (int)c, MPI_INT, r, (int)c, MPI_INT, inter));
        for (int q = 0; q < rsize; ++q) {
            for (long i = 0; i < c; ++i) want[q * c + i] = value(remote[q], i);
        }
        from_dev(h, r, c * rsize);
        expect_ints(h, want, c * rsize, "allgather", c);

        CUDA_OK(cudaFree(s));
        CUDA_OK(cudaFree(r));
        free(h);
        free(want);
    }
    free(remote);
    MT_CHECK_MPI(MPI_Comm_free(&inter));
    MT_CHECK_MPI(MPI_Comm_free(&local));
    return mt_finish();
}
