/* Throughput of large host messages between two ranks, checked against an
 * expected rate: with pml_gpuwire_pace_mbps set, the pacer must hold the
 * transfer to that rate (within the tolerance); every byte is verified.
 *   pace_rate [-s BYTES] [-n MESSAGES] [-r EXPECTED_MBPS] [-t TOLERANCE] [-c CONCURRENT]
 * -c K: additionally, K messages in flight at once (MPI_Isend / MPI_Irecv),
 * every one checked (exercises the receive window across transfers).
 * Rank 0 sends, rank 1 receives and answers with one byte at the end; rank 0
 * prints the rate and exits 1 when it is outside expected * (1 +- tolerance)
 * (no check when -r is 0). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t bytes = (size_t)16 << 20;
    int messages = 4;
    double expect = 0, tol = 0.10;
    int concurrent = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-s")) bytes = (size_t)strtoull(argv[i + 1], NULL, 0);
        if (!strcmp(argv[i], "-n")) messages = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-r")) expect = atof(argv[i + 1]);
        if (!strcmp(argv[i], "-t")) tol = atof(argv[i + 1]);
        if (!strcmp(argv[i], "-c")) concurrent = atoi(argv[i + 1]);
    }
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "pace_rate: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned char *buf = malloc(bytes);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
    int failures = 0;
    /* One message first: connections up, pages touched. */
    for (int m = -1; m < messages; ++m) {
        if (m == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        static double t0;
        if (m == 0) t0 = MPI_Wtime();
        if (rank == 0) {
            for (size_t i = 0; i < bytes; ++i) buf[i] = (unsigned char)(i * 13 + (size_t)m * 7);
            MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
        } else {
            MPI_Status st;
            int count = -1;
            memset(buf, 0, bytes);
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (count != (int)bytes || st.MPI_SOURCE != 0 || st.MPI_TAG != 5) ++failures;
            for (size_t i = 0; i < bytes; ++i) {
                if (buf[i] != (unsigned char)(i * 13 + (size_t)m * 7)) {
                    ++failures;
                    break;
                }
            }
        }
        if (m == messages - 1) {
            char done = 1;
            if (rank == 1) {
                MPI_Send(&done, 1, MPI_CHAR, 0, 6, MPI_COMM_WORLD);
            } else {
                MPI_Recv(&done, 1, MPI_CHAR, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double secs = MPI_Wtime() - t0;
                double mbps = (double)bytes * messages * 8 / secs / 1e6;
                printf("pace_rate: %d x %zu bytes in %.3f s: %.1f Mb/s", messages, bytes, secs,
                       mbps);
                if (expect > 0) {
                    printf(" (expected %.1f Mb/s +- %.0f%%)", expect, tol * 100);
                    if (mbps < expect * (1 - tol) || mbps > expect * (1 + tol)) ++failures;
                }
                printf("\n");
            }
        }
    }
    if (concurrent > 0) {
        unsigned char *many = malloc(bytes * (size_t)concurrent);
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)concurrent);
        if (!many || !reqs) MPI_Abort(MPI_COMM_WORLD, 2);
        for (int k = 0; k < concurrent; ++k) {
            unsigned char *b = many + (size_t)k * bytes;
            if (rank == 0) {
                for (size_t i = 0; i < bytes; ++i) b[i] = (unsigned char)(i * 31 + (size_t)k);
                MPI_Isend(b, (int)bytes, MPI_BYTE, 1, 100 + k, MPI_COMM_WORLD, &reqs[k]);
            } else {
                memset(b, 0, bytes);
                MPI_Irecv(b, (int)bytes, MPI_BYTE, 0, 100 + k, MPI_COMM_WORLD, &reqs[k]);
            }
        }
        MPI_Waitall(concurrent, reqs, MPI_STATUSES_IGNORE);
        if (rank == 1) {
            for (int k = 0; k < concurrent; ++k) {
                const unsigned char *b = many + (size_t)k * bytes;
                for (size_t i = 0; i < bytes; ++i) {
                    if (b[i] != (unsigned char)(i * 31 + (size_t)k)) {
                        ++failures;
                        break;
                    }
                }
            }
        }
        free(many);
        free(reqs);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s: %d failure(s)\n", total ? "FAIL" : "PASS", total);
    free(buf);
    MPI_Finalize();
    return total ? 1 : 0;
}
