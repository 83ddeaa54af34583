/*
 * gwscale: costs that must grow no faster than the work, two ranks.
 *
 *   gwscale noncontig BLOCKS   one MPI_Send of a vector of BLOCKS x 1 MiB
 *                              blocks, stride 1.25 MiB, timed on the sender
 *                              after a barrier; the receiver takes the same
 *                              vector and checks every byte
 *   gwscale comms N            N communicators (MPI_Comm_dup), one message
 *                              pending on each before any is received, then
 *                              received in reverse order and checked, each
 *                              freed once received; times the whole phase
 *                              (sends, receives, frees).
 *                              GWSCALE_ANY set: the receives take any source
 *                              and any tag
 *
 * Prints one line: "<mode> <n> <seconds>". Exit 0 when the data was right.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
#define BLOCK MiB
#define STRIDE (MiB + MiB / 4)

static int rank;

static void die(const char *what)
{
    fprintf(stderr, "gwscale [rank %d]: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* A byte that depends on its block and offset: a misplaced block shows. */
static inline unsigned char pattern(size_t block, size_t off)
{
    return (unsigned char)(block * 131 + off / 4096 + 1);
}

static int noncontig(int blocks)
{
    MPI_Datatype vec;
    /* GWSCALE_CONTIG: the blocks back to back (a contiguous send, for comparison). */
    const size_t stride = getenv("GWSCALE_CONTIG") ? BLOCK : STRIDE;
    if (MPI_SUCCESS != MPI_Type_vector(blocks, (int)BLOCK, (int)stride, MPI_BYTE, &vec) ||
        MPI_SUCCESS != MPI_Type_commit(&vec))
        die("cannot build the vector type");
    size_t extent = (size_t)(blocks - 1) * stride + BLOCK;
    unsigned char *buf = malloc(extent);
    if (!buf) die("out of memory");
    int bad = 0;
    if (rank == 0) {
        for (size_t b = 0; b < (size_t)blocks; b++)
            for (size_t o = 0; o < BLOCK; o += 4096) memset(buf + b * stride + o, pattern(b, o), 4096);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (MPI_SUCCESS != MPI_Send(buf, 1, vec, 1, 7, MPI_COMM_WORLD)) die("MPI_Send failed");
        double t = MPI_Wtime() - t0;
        MPI_Recv(&bad, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("noncontig %d %.4f\n", blocks, t);
    } else {
        memset(buf, 0, extent);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Status st;
        if (MPI_SUCCESS != MPI_Recv(buf, 1, vec, 0, 7, MPI_COMM_WORLD, &st)) die("MPI_Recv failed");
        int count;
        MPI_Get_count(&st, MPI_BYTE, &count);
        if ((size_t)count != (size_t)blocks * BLOCK) bad = 1;
        for (size_t b = 0; b < (size_t)blocks && !bad; b++)
            for (size_t o = 0; o < BLOCK; o++)
                if (buf[b * stride + o] != pattern(b, o)) {
                    fprintf(stderr, "gwscale: block %zu byte %zu wrong\n", b, o);
                    bad = 1;
                    break;
                }
        MPI_Send(&bad, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
    }
    free(buf);
    MPI_Type_free(&vec);
    return bad;
}

static int comms(int n)
{
    MPI_Comm *c = malloc(sizeof(MPI_Comm) * (size_t)n);
    MPI_Request *r = malloc(sizeof(MPI_Request) * (size_t)n);
    int *v = malloc(sizeof(int) * (size_t)n);
    if (!c || !r || !v) die("out of memory");
    for (int i = 0; i < n; i++)
        if (MPI_SUCCESS != MPI_Comm_dup(MPI_COMM_WORLD, &c[i])) die("MPI_Comm_dup failed");
    int bad = 0;
    const int any = getenv("GWSCALE_ANY") != NULL; /* wildcard receives */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank == 0) {
        for (int i = 0; i < n; i++) {
            v[i] = i ^ 0x5a5a;
            MPI_Isend(&v[i], 1, MPI_INT, 1, i % 7, c[i], &r[i]);
        }
        MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD); /* every message is pending at rank 1 */
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = n - 1; i >= 0; i--) {
            MPI_Status st;
            if (any)
                MPI_Recv(&v[i], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c[i], &st);
            else
                MPI_Recv(&v[i], 1, MPI_INT, 0, i % 7, c[i], &st);
            if (v[i] != (i ^ 0x5a5a) || st.MPI_TAG != i % 7) bad = 1;
            /* Done with it while the others still hold their message. */
            MPI_Comm_free(&c[i]);
        }
    }
    if (rank == 0)
        for (int i = 0; i < n; i++) MPI_Comm_free(&c[i]);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    if (rank == 0) printf("comms %d %.4f\n", n, t);
    free(c);
    free(r);
    free(v);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 gwscale noncontig|comms N\n");
        MPI_Finalize();
        return 2;
    }
    int n = atoi(argv[2]);
    int bad = strcmp(argv[1], "comms") == 0 ? comms(n) : noncontig(n);
    if (bad && rank == 0) fprintf(stderr, "gwscale: %s %d: data wrong\n", argv[1], n);
    MPI_Finalize();
    return bad ? 1 : 0;
}
