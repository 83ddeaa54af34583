/*
 * Neighborhood collectives on device buffers. coll gpuwire does not provide
 * them: Open MPI's own modules run them (basic blocking, libnbc
 * non-blocking) as point-to-point messages on the application's buffers,
 * which pml gpuwire carries. A 1-D ring (periodic) and a 1-D line (the ends
 * have MPI_PROC_NULL neighbours, whose blocks must stay untouched);
 * allgather and alltoall, blocking and not, counts 1, odd and large.
 *
 * Rank q's block b, element i: value(q, b, i). In allgather every rank sends
 * block 0; in alltoall block 0 goes to the lower neighbour, 1 to the higher.
 */
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "device_test.h"
#include "mpitest.h"

#define UNTOUCHED (-7)

static int value(int q, int b, long i) { return (int)((q * 31 + b) * 100003L + i); }

/* Device buffer of n ints, set from the host image. */
static int *dev_from(const int *img, long n)
{
    int *d = NULL;
    CUDA_OK(cudaMalloc((void **)&d, (size_t)n * sizeof(int)));
    CUDA_OK(cudaMemcpy(d, img, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
    return d;
}

static void run(MPI_Comm cart, bool alltoall, bool nb, long c, const char *shape)
{
    int me, lo, hi;
    MPI_Comm_rank(cart, &me);
    MT_CHECK_MPI(MPI_Cart_shift(cart, 0, 1, &lo, &hi));
    int *simg = malloc(2 * c * sizeof(int)), *rimg = malloc(2 * c * sizeof(int));
    for (long i = 0; i < 2 * c; ++i) {
        simg[i] = value(me, (int)(i / c), i % c);
        rimg[i] = UNTOUCHED;
    }
    int *sd = dev_from(simg, 2 * c), *rd = dev_from(rimg, 2 * c);
    MPI_Request req = MPI_REQUEST_NULL;
    if (alltoall && nb) {
        MT_CHECK_MPI(MPI_Ineighbor_alltoall(sd, (int)c, MPI_INT, rd, (int)c, MPI_INT, cart, &req));
    } else if (alltoall) {
        MT_CHECK_MPI(MPI_Neighbor_alltoall(sd, (int)c, MPI_INT, rd, (int)c, MPI_INT, cart));
    } else if (nb) {
        MT_CHECK_MPI(MPI_Ineighbor_allgather(sd, (int)c, MPI_INT, rd, (int)c, MPI_INT, cart,
                                             &req));
    } else {
        MT_CHECK_MPI(MPI_Neighbor_allgather(sd, (int)c, MPI_INT, rd, (int)c, MPI_INT, cart));
    }
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CUDA_OK(cudaMemcpy(rimg, rd, 2 * c * sizeof(int), cudaMemcpyDeviceToHost));
    /* Block 0 comes from the lower neighbour, block 1 from the higher. */
    const int from[2] = {lo, hi};
    long bad = 0, first = -1;
    for (long i = 0; i < 2 * c; ++i) {
        const int b = (int)(i / c), q = from[b];
        const int want = MPI_PROC_NULL == q ? UNTOUCHED : value(q, alltoall ? 1 - b : 0, i % c);
        if (rimg[i] != want && 0 == bad++) first = i;
    }
    if (bad) {
        mt_fail(__FILE__, __LINE__, "%s neighbor_%s%s count %ld: %ld wrong ints, first at %ld",
                shape, nb ? "i" : "", alltoall ? "alltoall" : "allgather", c, bad, first);
    }
    CUDA_OK(cudaMemcpy(simg + c, sd + c, c * sizeof(int), cudaMemcpyDeviceToHost));
    for (long i = 0; i < c; ++i) {
        if (simg[c + i] != value(me, 1, i)) {
            mt_fail(__FILE__, __LINE__, "%s: send buffer changed at %ld", shape, c + i);
            break;
        }
    }
    CUDA_OK(cudaFree(sd));
    CUDA_OK(cudaFree(rd));
    free(simg);
    free(rimg);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (device_test_select_gpu() < 0) return mt_skip("no GPU (CUDA driver or device absent)");
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const long counts[] = {1, 4097, 1 << 20};
    for (int periodic = 0; periodic < 2; ++periodic) {
        MPI_Comm cart;
        const int dims[1] = {n}, periods[1] = {periodic};
        MT_CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart));
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
            for (int form = 0; form < 4; ++form) {
                run(cart, form & 1, form & 2, counts[k], periodic ? "ring" : "line");
            }
        }
        MT_CHECK_MPI(MPI_Comm_free(&cart));
    }
    return mt_finish();
}
