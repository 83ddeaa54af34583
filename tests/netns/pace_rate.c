/* Throughput of large host messages between two ranks, checked against an
 * expected rate: with pml_gpuwire_pace_mbps set, the pacer must hold the
 * transfer to that rate; every byte is verified.
 *   pace_rate [-s BYTES] [-n MESSAGES] [-r EXPECTED_MBPS] [-t TOLERANCE] [-l LOW]
 *             [-c CONCURRENT] [-g RANK:PVAR]...
 * -c K: additionally, K messages in flight at once (MPI_Isend / MPI_Irecv),
 * every one checked (exercises the receive window across transfers).
 * -g R:NAME: the MPI_T counter NAME must be above 0 on rank R at the end (a
 * figure the test is about, e.g. pml_gpuwire_window_deferrals); up to 4.
 * Rank 0 sends, rank 1 receives and answers with one byte at the end; rank 0
 * prints the rate and fails when it is above expected * (1 + tolerance) or
 * below expected * LOW (LOW defaults to 1 - tolerance; no check when -r is 0).
 * Exit status 0 only when every check passed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_pvar.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t bytes = (size_t)16 << 20;
    int messages = 4;
    double expect = 0, tol = 0.10;
    double low = -1;
    int concurrent = 0, npv = 0, pv_rank[4];
    const char *pv_name[4];
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-l")) low = atof(argv[i + 1]);
        if (!strcmp(argv[i], "-g") && npv < 4 && strchr(argv[i + 1], ':')) {
            pv_rank[npv] = atoi(argv[i + 1]);
            pv_name[npv++] = strchr(argv[i + 1], ':') + 1;
        }
        if (!strcmp(argv[i], "-s")) bytes = (size_t)strtoull(argv[i + 1], NULL, 0);
        if (!strcmp(argv[i], "-n")) messages = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-r")) expect = atof(argv[i + 1]);
        if (!strcmp(argv[i], "-t")) tol = atof(argv[i + 1]);
        if (!strcmp(argv[i], "-c")) concurrent = atoi(argv[i + 1]);
    }
    /* A counter handle counts from its allocation: opened now, read at the end. */
    MPI_T_pvar_session pv_session = MPI_T_PVAR_SESSION_NULL;
    MPI_T_pvar_handle pv_handle[4];
    int pv_ok[4] = {0, 0, 0, 0}, provided = 0;
    if (npv && MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS &&
        MPI_T_pvar_session_create(&pv_session) == MPI_SUCCESS) {
        for (int k = 0; k < npv; ++k) {
            int idx = find_pvar(pv_name[k]), count = 0;
            pv_ok[k] = rank == pv_rank[k] && idx >= 0 &&
                       MPI_T_pvar_handle_alloc(pv_session, idx, NULL, &pv_handle[k], &count) ==
                           MPI_SUCCESS;
        }
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
                    if (low < 0) low = 1 - tol;
                    printf(" (expected %.1f to %.1f Mb/s)", expect * low, expect * (1 + tol));
                    if (mbps < expect * low || mbps > expect * (1 + tol)) ++failures;
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
    for (int k = 0; k < npv; ++k) {
        if (rank != pv_rank[k]) continue;
        unsigned long long v = 0;
        if (!pv_ok[k] || MPI_T_pvar_read(pv_session, pv_handle[k], &v) != MPI_SUCCESS) {
            printf("pace_rate: rank %d: %s cannot be read\n", rank, pv_name[k]);
            ++failures;
            continue;
        }
        printf("pace_rate: rank %d: %s = %llu%s\n", rank, pv_name[k], v, v ? "" : " (expected > 0)");
        if (!v) ++failures;
        MPI_T_pvar_handle_free(pv_session, &pv_handle[k]);
    }
    if (pv_session != MPI_T_PVAR_SESSION_NULL) {
        MPI_T_pvar_session_free(&pv_session);
        MPI_T_finalize();
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s: %d failure(s)\n", total ? "FAIL" : "PASS", total);
    free(buf);
    MPI_Finalize();
    return total ? 1 : 0;
}
