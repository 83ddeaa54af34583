/*
 * One rank of two kills itself (SIGKILL) while a large host transfer between
 * them is in flight; kill_rank.sh checks that the job then ends, nonzero and
 * in bounded time, and that no process is left.
 *
 *   kill_rank <sender|receiver|probe> <pid folder> [MiB, default 256] [host|device]
 *
 * Rank 0 sends to rank 1. The victim polls its request for a few
 * milliseconds after both have posted, then kills itself, whether or not the
 * transfer has finished (it says which). The survivor waits with
 * MPI_ERRORS_RETURN: it either gets an error (with peer failure detection,
 * pml_gpuwire_err_handling 1) and exits with 3, or is ended by mpirun. A
 * receiver whose transfer completes checks every byte it got.
 * Every rank writes its pid to <pid folder>/rank<N>.pid first. With
 * "device" the buffers are GPU memory (rank r on GPU r modulo the count);
 * without a GPU the program says so and exits 77 before MPI_Init.
 *
 * "probe": rank 0 sends rank 1 a small message, then kills itself; rank 1
 * probes for a message of rank 0 that will never come (MPI_Probe must
 * return an error once the death is known, not wait for good), then must
 * still probe and receive the message that arrived before the death.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef GPUWIRE_KILL_RANK_CUDA
#include <cuda_runtime_api.h>
#endif

static void write_pid(const char *dir, int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.pid", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
}

#define PROBE_INTS 64

/* A survivor that saw the failure stays until mpirun ends it: were it to exit
 * first, a launcher that notices its exit before the victim's death (Open MPI
 * 5's prterun on a busy machine) would name the survivor, not the killed
 * rank. kill_rank.sh's 30 s limit still bounds the job. */
static int survivor_exit(int code)
{
    fflush(stdout);
    for (int i = 0; i < 20; i++) sleep(1);
    return code;
}

/* The "probe" case, after MPI_Init; rank 0 is the victim. */
static int probe_dead_source(int rank)
{
    int msg[PROBE_INTS];
    if (rank == 0) {
        for (int i = 0; i < PROBE_INTS; i++) msg[i] = 1000 + i;
        MPI_Send(msg, PROBE_INTS, MPI_INT, 1, 5, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD); /* the message is ahead of the barrier's */
        printf("kill_rank: rank 0 kills itself after sending %d ints\n", PROBE_INTS);
        fflush(stdout);
        raise(SIGKILL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    MPI_Status st;
    const int rc = MPI_Probe(0, 7, MPI_COMM_WORLD, &st); /* never sent */
    if (rc == MPI_SUCCESS) {
        printf("kill_rank: rank 1: FAIL: MPI_Probe found a message rank 0 never sent (tag %d)\n",
               st.MPI_TAG);
        return 4;
    }
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    /* What rank 0 sent before it died is still there. */
    int count = -1;
    memset(msg, 0, sizeof msg);
    if (MPI_Probe(0, 5, MPI_COMM_WORLD, &st) != MPI_SUCCESS ||
        MPI_Get_count(&st, MPI_INT, &count) != MPI_SUCCESS || count != PROBE_INTS ||
        MPI_Recv(msg, PROBE_INTS, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS) {
        printf("kill_rank: rank 1: FAIL: the message sent before the death was lost (count %d)\n",
               count);
        return 5;
    }
    for (int i = 0; i < PROBE_INTS; i++) {
        if (msg[i] != 1000 + i) {
            printf("kill_rank: rank 1: the transfer completed, data CORRUPT at int %d\n", i);
            return 6;
        }
    }
    printf("kill_rank: rank 1: the transfer failed after %.2f s: %s (MPI_Probe); the message "
           "sent before the death received intact\n", MPI_Wtime() - start, text);
    return survivor_exit(3);
}

int main(int argc, char **argv)
{
    const int probe = argc >= 3 && strcmp(argv[1], "probe") == 0;
    if (argc < 3 ||
        (!probe && strcmp(argv[1], "sender") != 0 && strcmp(argv[1], "receiver") != 0)) {
        fprintf(stderr, "usage: %s <sender|receiver|probe> <pid folder> [MiB]\n", argv[0]);
        return 2;
    }
    const int victim = strcmp(argv[1], "sender") == 0 ? 0 : 1;
    const size_t bytes = (size_t)(argc > 3 ? atoi(argv[3]) : 256) << 20;
    const int on_device = argc > 4 && strcmp(argv[4], "device") == 0;
    if (on_device) {
#ifdef GPUWIRE_KILL_RANK_CUDA
        int ndev = 0;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            printf("kill_rank: skip: no GPU (CUDA driver or device absent)\n");
            return 77;
        }
#else
        printf("kill_rank: skip: no CUDA (built without the CUDA toolkit)\n");
        return 77;
#endif
    }

    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "kill_rank: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    write_pid(argv[2], rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (probe) return probe_dead_source(rank);

    char *buf = NULL;
    if (on_device) {
#ifdef GPUWIRE_KILL_RANK_CUDA
        int ndev = 1;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || cudaSetDevice(rank % ndev) != cudaSuccess ||
            cudaMalloc((void **)&buf, bytes) != cudaSuccess ||
            cudaMemset(buf, rank + 1, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
            fprintf(stderr, "kill_rank: rank %d: GPU buffer of %zu bytes failed\n", rank, bytes);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
#endif
    } else {
        buf = malloc(bytes);
        if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
        memset(buf, rank + 1, bytes); /* touch every page before the clock starts */
    }
    MPI_Barrier(MPI_COMM_WORLD);

    MPI_Request req;
    /* MPI counts are int: send as 1 MiB elements. */
    MPI_Datatype mib;
    MPI_Type_contiguous(1 << 20, MPI_BYTE, &mib);
    MPI_Type_commit(&mib);
    const int count = (int)(bytes >> 20);
    if (rank == 0)
        MPI_Isend(buf, count, mib, 1, 7, MPI_COMM_WORLD, &req);
    else
        MPI_Irecv(buf, count, mib, 0, 7, MPI_COMM_WORLD, &req);

    const double start = MPI_Wtime();
    if (rank == victim) {
        int done = 0;
        long polls = 0;
        while (!done && MPI_Wtime() - start < 0.005) {
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            ++polls;
        }
        printf("kill_rank: rank %d kills itself %.1f ms after posting, %ld polls, transfer %s\n",
               rank, (MPI_Wtime() - start) * 1e3, polls, done ? "already done" : "in flight");
        fflush(stdout);
        raise(SIGKILL);
    }

    const int rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        printf("kill_rank: rank %d: the transfer failed after %.2f s: %s\n", rank,
               MPI_Wtime() - start, text);
        return survivor_exit(3);
    }
    /* Completed: the victim was the receiver and the bytes had left, or it
     * was the sender and had finished. Either way the job must still end.
     * A receiver that completes must hold the sender's bytes (all 1): a
     * transfer cut short must never look like a finished one. */
    const char *data = "not checked (device buffer)";
    if (rank == 1 && !on_device) {
        size_t bad = bytes;
        for (size_t i = 0; i < bytes && bad == bytes; ++i)
            if (buf[i] != 1) bad = i;
        data = bad == bytes ? "intact" : "CORRUPT";
        if (bad != bytes) printf("kill_rank: rank 1: byte %zu is %d, expected 1\n", bad, buf[bad]);
    }
    printf("kill_rank: rank %d: the transfer completed after %.2f s, data %s; waiting in a barrier\n",
           rank, MPI_Wtime() - start, data);
    fflush(stdout);
    const int brc = MPI_Barrier(MPI_COMM_WORLD);
    printf("kill_rank: rank %d: the barrier returned %s\n", rank,
           brc == MPI_SUCCESS ? "MPI_SUCCESS" : "an error");
    /* The victim died meanwhile: as on the error paths, stay until mpirun
     * ends the job, so that it names the killed rank, not this one. */
    return survivor_exit(4);
}
