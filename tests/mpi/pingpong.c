/* Ping-pong between rank 0 and each other rank in turn, over a list of
 * sizes, every message checked (data, source, tag, count). Rank 0 prints
 * the round-trip time per size, so a run between hosts also shows the path
 * works at a sane speed.
 *   -s SIZES  comma-separated byte counts (default 0,1,8,1000,4096,65536,
 *             1048576,4194304)
 *   -n ITERS  round trips per size and peer (default 20) */
#include "p2p.h"

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    size_t sizes[64] = {0, 1, 8, 1000, 4096, 65536, 1 * MiB, 4 * MiB};
    int nsizes = 8, iters = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n")) {
            iters = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "-s")) {
            nsizes = 0;
            for (char *tok = strtok(argv[i + 1], ","); tok && nsizes < 64; tok = strtok(NULL, ","))
                sizes[nsizes++] = (size_t)strtoull(tok, NULL, 0);
        }
    }
    size_t max = 0;
    for (int i = 0; i < nsizes; i++) max = sizes[i] > max ? sizes[i] : max;
    unsigned char *out = p2p_malloc(max), *in = p2p_guarded_alloc(max, 0);

    for (int peer = 1; peer < mt_size; peer++) {
        if (mt_rank != 0 && mt_rank != peer) continue;
        int other = mt_rank == 0 ? peer : 0;
        for (int i = 0; i < nsizes; i++) {
            size_t n = sizes[i], tail = max - n < 64 ? max - n : 64;
            int before = mt_failures;
            double t0 = MPI_Wtime();
            for (int it = 0; it < iters && mt_failures == before; it++) {
                /* Seeds differ per direction, size and round trip. */
                unsigned ping = (unsigned)(peer * 1000003 + i * 1009 + it * 2);
                unsigned mine = mt_rank == 0 ? ping : ping + 1, theirs = mt_rank == 0 ? ping + 1 : ping;
                MPI_Status st;
                mt_fill(out, n, mine);
                memset(in + n, 0x5C, tail);
                if (mt_rank == 0)
                    MT_CHECK_MPI(MPI_Send(out, (int)n, MPI_BYTE, other, i, MPI_COMM_WORLD));
                MT_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, other, i, MPI_COMM_WORLD, &st));
                P2P_CHECK_STATUS(&st, other, i, MPI_BYTE, (int)n);
                P2P_CHECK_DATA(in, n, theirs);
                MT_CHECK(p2p_find_not(in + n, tail, 0x5C) < 0); /* nothing past the message */
                P2P_CHECK_GUARDS(in, max);
                if (mt_rank != 0)
                    MT_CHECK_MPI(MPI_Send(out, (int)n, MPI_BYTE, other, i, MPI_COMM_WORLD));
            }
            double us = (MPI_Wtime() - t0) / iters * 1e6;
            if (mt_failures != before)
                fprintf(stderr, "[rank %d]   ping-pong of %zu bytes with rank %d\n", mt_rank, n, other);
            else if (mt_rank == 0)
                printf("rank 0 <-> %d: %10zu bytes  %10.1f us round trip\n", peer, n, us);
        }
    }
    free(out);
    p2p_guarded_free(in);
    return mt_finish();
}
