/* Known traffic for the statistics table (pml_gpuwire_stats 1): on n
 * processes, process r sends to r+1 (mod n) 2+r messages of SMALL bytes and
 * one of LARGE bytes, and receives the same pattern from r-1. Nothing else
 * (no collective, no test harness), so that the counters of the table
 * process 0 prints at finalize are known exactly; check_stats_table.py
 * reads the table. Exit 1 when a received message is wrong. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SMALL = 64, LARGE = 128 * 1024 };

static int check(const unsigned char *buf, size_t len, int seed, int rank)
{
    for (size_t i = 0; i < len; ++i) {
        if (buf[i] != (unsigned char)(seed + i * 7)) {
            fprintf(stderr, "pml_stats: rank %d: byte %zu of a %zu-byte message is wrong\n", rank,
                    i, len);
            return 1;
        }
    }
    return 0;
}

static void fill(unsigned char *buf, size_t len, int seed)
{
    for (size_t i = 0; i < len; ++i) buf[i] = (unsigned char)(seed + i * 7);
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    unsigned char *out = malloc(LARGE), *in = malloc(LARGE);
    if (!out || !in) MPI_Abort(MPI_COMM_WORLD, 2);

    int nsend = 2 + rank, nrecv = 2 + left;
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)(nrecv + 1));
    unsigned char(*small_in)[SMALL] = malloc((size_t)(nrecv + 1) * SMALL);
    if (!reqs || !small_in) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < nrecv; ++i) {
        MPI_Irecv(small_in[i], SMALL, MPI_BYTE, left, i, MPI_COMM_WORLD, &reqs[i]);
    }
    MPI_Irecv(in, LARGE, MPI_BYTE, left, 1000, MPI_COMM_WORLD, &reqs[nrecv]);
    for (int i = 0; i < nsend; ++i) {
        unsigned char msg[SMALL];
        fill(msg, SMALL, rank * 100 + i);
        MPI_Send(msg, SMALL, MPI_BYTE, right, i, MPI_COMM_WORLD);
    }
    fill(out, LARGE, rank * 100 + 99);
    MPI_Send(out, LARGE, MPI_BYTE, right, 1000, MPI_COMM_WORLD);
    MPI_Waitall(nrecv + 1, reqs, MPI_STATUSES_IGNORE);
    for (int i = 0; i < nrecv; ++i) bad |= check(small_in[i], SMALL, left * 100 + i, rank);
    bad |= check(in, LARGE, left * 100 + 99, rank);

    free(reqs);
    free(small_in);
    free(out);
    free(in);
    MPI_Finalize();
    return bad;
}
