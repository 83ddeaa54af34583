/*
 * Neighborhood collectives on device buffers. coll gpuwire does not provide
 * them: Open MPI's own modules run them (basic blocking, libnbc
 * non-blocking) as point-to-point messages on the application's buffers,
 * which pml gpuwire carries. A 1-D ring (periodic) and a 1-D line (the ends
 * have MPI_PROC_NULL neighbours, whose blocks must stay untouched);
 * allgather and alltoall, their v forms and alltoallw, blocking and not,
 * counts 1, odd and large.
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

enum form { F_PLAIN, F_V, F_W };
static const char *form_name[] = {"", "v", "w"};

/* One call of the kind asked for; the v and w forms describe the same
 * blocks as the plain ones (counts c, displacements 0 and c elements). */
static void call(MPI_Comm cart, bool alltoall, enum form f, bool nb, long c, int *sd, int *rd,
                 MPI_Request *req)
{
    const int n = (int)c, counts[2] = {n, n}, displs[2] = {0, n};
    const int bytes[2] = {0, n * (int)sizeof(int)};
    const MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    if (F_W == f) {
        MT_CHECK_MPI(nb ? MPI_Ineighbor_alltoallw(sd, counts, (const MPI_Aint[]){bytes[0], bytes[1]},
                                                  types, rd, counts,
                                                  (const MPI_Aint[]){bytes[0], bytes[1]}, types,
                                                  cart, req)
                        : MPI_Neighbor_alltoallw(sd, counts, (const MPI_Aint[]){bytes[0], bytes[1]},
                                                 types, rd, counts,
                                                 (const MPI_Aint[]){bytes[0], bytes[1]}, types,
                                                 cart));
    } else if (F_V == f && alltoall) {
        MT_CHECK_MPI(nb ? MPI_Ineighbor_alltoallv(sd, counts, displs, MPI_INT, rd, counts, displs,
                                                  MPI_INT, cart, req)
                        : MPI_Neighbor_alltoallv(sd, counts, displs, MPI_INT, rd, counts, displs,
                                                 MPI_INT, cart));
    } else if (F_V == f) {
        MT_CHECK_MPI(nb ? MPI_Ineighbor_allgatherv(sd, n, MPI_INT, rd, counts, displs, MPI_INT,
                                                   cart, req)
                        : MPI_Neighbor_allgatherv(sd, n, MPI_INT, rd, counts, displs, MPI_INT,
                                                  cart));
    } else if (alltoall) {
        MT_CHECK_MPI(nb ? MPI_Ineighbor_alltoall(sd, n, MPI_INT, rd, n, MPI_INT, cart, req)
                        : MPI_Neighbor_alltoall(sd, n, MPI_INT, rd, n, MPI_INT, cart));
    } else {
        MT_CHECK_MPI(nb ? MPI_Ineighbor_allgather(sd, n, MPI_INT, rd, n, MPI_INT, cart, req)
                        : MPI_Neighbor_allgather(sd, n, MPI_INT, rd, n, MPI_INT, cart));
    }
}

static void run(MPI_Comm cart, bool alltoall, enum form f, bool nb, long c, const char *shape)
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
    call(cart, alltoall, f, nb, c, sd, rd, &req);
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
        mt_fail(__FILE__, __LINE__, "%s neighbor_%s%s%s count %ld: %ld wrong ints, first at %ld",
                shape, nb ? "i" : "", alltoall ? "alltoall" : "allgather", form_name[f], c, bad,
                first);
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
            /* allgather, alltoall, allgatherv, alltoallv, alltoallw; each
             * blocking and not */
            for (int form = 0; form < 10; ++form) {
                const int kind = form / 2;
                const enum form f = kind < 2 ? F_PLAIN : kind < 4 ? F_V : F_W;
                run(cart, kind == 1 || kind == 3 || kind == 4, f, form & 1, counts[k],
                    periodic ? "ring" : "line");
            }
        }
        MT_CHECK_MPI(MPI_Comm_free(&cart));
    }
    return mt_finish();
}
