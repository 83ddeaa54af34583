/*
 * A 2-rank ping-pong that checks it went through pml gpuwire: the messages
 * must arrive intact, and the PML's own counter (the MPI_T performance
 * variable pml_gpuwire_sends) must exist and have grown by at least what
 * this rank sent. Used by ci/deb_chroot.sh against an installed package.
 *
 *   deb_pingpong [<expected MPIX_Query_cuda_support() after MPI_Init>]
 *
 * The argument, when given, is compared with MPIX_Query_cuda_support()
 * (1 under -x LD_PRELOAD=libgpuwire_mpi.so with pml gpuwire).
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_pvar.h"

static int rank = -1;
static int failures = 0;

static void fail(const char *what)
{
    fprintf(stderr, "deb_pingpong: rank %d: FAIL: %s\n", rank, what);
    failures++;
}

/* Sends and receives `rounds` messages of `len` bytes each way; returns the
 * number this rank sent. */
static int pingpong(char *buf, int len, int rounds)
{
    int peer = 1 - rank, sent = 0;
    for (int r = 0; r < rounds; ++r) {
        char fill = (char)(r * 7 + len);
        if (rank == 0) {
            memset(buf, fill, (size_t)len);
            if (MPI_Send(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD) != MPI_SUCCESS)
                fail("MPI_Send");
            sent++;
            memset(buf, 0, (size_t)len);
            if (MPI_Recv(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS)
                fail("MPI_Recv");
        } else {
            if (MPI_Recv(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS)
                fail("MPI_Recv");
            if (MPI_Send(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD) != MPI_SUCCESS)
                fail("MPI_Send");
            sent++;
        }
        for (int i = 0; i < len; ++i) {
            if (buf[i] != fill) {
                fprintf(stderr, "deb_pingpong: rank %d: byte %d of a %d-byte message is %d, "
                        "expected %d\n", rank, i, len, buf[i], fill);
                failures++;
                break;
            }
        }
    }
    return sent;
}

int main(int argc, char **argv)
{
    int provided = 0, size = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "deb_pingpong: needs exactly 2 ranks, got %d\n", size);
        MPI_Finalize();
        return 2;
    }
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) fail("MPI_T_init_thread");

    int idx = find_pvar("pml_gpuwire_sends");
    MPI_T_pvar_session session = MPI_T_PVAR_SESSION_NULL;
    MPI_T_pvar_handle handle = MPI_T_PVAR_HANDLE_NULL;
    unsigned long long before = 0, after = 0;
    if (idx < 0) {
        fail("no MPI_T performance variable pml_gpuwire_sends: pml gpuwire is not loaded");
    } else {
        int count = 0;
        if (MPI_T_pvar_session_create(&session) != MPI_SUCCESS ||
            MPI_T_pvar_handle_alloc(session, idx, NULL, &handle, &count) != MPI_SUCCESS ||
            MPI_T_pvar_read(session, handle, &before) != MPI_SUCCESS)
            fail("reading pml_gpuwire_sends");
    }

    static const int lens[] = {1, 1000, 65536, 1 << 20};
    char *buf = malloc(1 << 20);
    int sent = 0;
    if (!buf) fail("malloc");
    for (size_t k = 0; buf && k < sizeof(lens) / sizeof(lens[0]); ++k)
        sent += pingpong(buf, lens[k], 10);
    free(buf);

    if (idx >= 0 && handle != MPI_T_PVAR_HANDLE_NULL) {
        if (MPI_T_pvar_read(session, handle, &after) != MPI_SUCCESS) {
            fail("reading pml_gpuwire_sends");
        } else if (after - before < (unsigned long long)sent) {
            fprintf(stderr, "deb_pingpong: rank %d: FAIL: pml_gpuwire_sends grew by %llu, "
                    "but this rank sent %d messages: pml gpuwire did not carry them\n",
                    rank, after - before, sent);
            failures++;
        }
        MPI_T_pvar_handle_free(session, &handle);
        MPI_T_pvar_session_free(&session);
    }

    if (argc > 1) {
        int want = atoi(argv[1]), got = MPIX_Query_cuda_support();
        if (got != want) {
            fprintf(stderr, "deb_pingpong: rank %d: FAIL: MPIX_Query_cuda_support() is %d, "
                    "expected %d\n", rank, got, want);
            failures++;
        }
    }

    /* Open MPI 4.1.4 crashes in MPI_T_finalize after MPI_Finalize: end MPI_T first. */
    MPI_T_finalize();
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf("deb_pingpong: ok: %d messages each way through pml gpuwire, "
               "pml_gpuwire_sends grew by %llu on rank 0\n", sent, after - before);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
