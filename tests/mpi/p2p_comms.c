/* Communicators keep messages apart: the same source and tag in flight on
 * MPI_COMM_WORLD and on duplicates, splits (ranks renumbered) and
 * MPI_Comm_create subsets at once; a receive on one never matches a message
 * of another, even with wildcards, and statuses report ranks of the
 * communicator used. Also an inter-communicator between two halves. */
#include "p2p.h"

/* One message per communicator around its ring (ranks of that
 * communicator), the same tag on all, sent on all of them (in reverse order
 * of the receives) before any receive is posted; each communicator's
 * receive must get its own data. */
static void same_tag_everywhere(MPI_Comm *comms, int ncomm, size_t n, int use_wild)
{
    const int tag = 5;
    unsigned char **out = p2p_malloc(ncomm * sizeof(*out)), **in = p2p_malloc(ncomm * sizeof(*in));
    MPI_Request *s = p2p_malloc(ncomm * sizeof(*s)), *r = p2p_malloc(ncomm * sizeof(*r));
    MPI_Status *st = p2p_malloc(ncomm * sizeof(*st));
    int *prev = p2p_malloc(ncomm * sizeof(int));

    for (int c = ncomm - 1; c >= 0; c--) {
        int rank, size;
        MPI_Comm_rank(comms[c], &rank);
        MPI_Comm_size(comms[c], &size);
        out[c] = p2p_malloc(n);
        in[c] = p2p_guarded_alloc(n, 0);
        prev[c] = (rank + size - 1) % size;
        mt_fill(out[c], n, (unsigned)(c * 1000 + rank));
        MT_CHECK_MPI(MPI_Isend(out[c], (int)n, MPI_BYTE, (rank + 1) % size, tag, comms[c], &s[c]));
    }
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int c = 0; c < ncomm; c++) {
        int src = use_wild ? MPI_ANY_SOURCE : prev[c], t = use_wild ? MPI_ANY_TAG : tag;
        MT_CHECK_MPI(MPI_Irecv(in[c], (int)n, MPI_BYTE, src, t, comms[c], &r[c]));
    }
    MT_CHECK_MPI(MPI_Waitall(ncomm, r, st));
    MT_CHECK_MPI(MPI_Waitall(ncomm, s, MPI_STATUSES_IGNORE));
    for (int c = 0; c < ncomm; c++) {
        int before = mt_failures;
        P2P_CHECK_STATUS(&st[c], prev[c], tag, MPI_BYTE, (int)n);
        P2P_CHECK_DATA(in[c], n, (unsigned)(c * 1000 + prev[c]));
        P2P_CHECK_GUARDS(in[c], n);
        if (mt_failures != before)
            fprintf(stderr, "[rank %d]   on communicator %d of %d, %zu bytes%s\n", mt_rank, c,
                    ncomm, n, use_wild ? ", wildcards" : "");
        free(out[c]);
        p2p_guarded_free(in[c]);
    }
    free(out);
    free(in);
    free(s);
    free(r);
    free(st);
    free(prev);
}

static void ring_peers(MPI_Comm c, int *next, int *prev)
{
    int rank, size;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    *next = (rank + 1) % size;
    *prev = (rank + size - 1) % size;
}

/* A wildcard receive posted on communicator a while b's message with the
 * same tag arrives stays pending (the barrier after the test keeps a's
 * message from being sent before every rank has tested). */
static void posted_recv_not_stolen(MPI_Comm a, MPI_Comm b)
{
    int x = -1, y = -1, one = 1, two = 2, flag = 1, anext, aprev, bnext, bprev;
    MPI_Request r, s;
    MPI_Status st;
    ring_peers(a, &anext, &aprev);
    ring_peers(b, &bnext, &bprev);
    MT_CHECK_MPI(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, a, &r));
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Isend(&two, 1, MPI_INT, bnext, 8, b, &s));
    MT_CHECK_MPI(MPI_Recv(&y, 1, MPI_INT, bprev, 8, b, &st));
    P2P_CHECK_STATUS(&st, bprev, 8, MPI_INT, 1);
    MT_CHECK_EQ(y, 2);
    MT_CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Test(&r, &flag, &st));
    MT_CHECK(!flag);
    MT_CHECK_EQ(x, -1);
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Send(&one, 1, MPI_INT, anext, 8, a));
    MT_CHECK_MPI(MPI_Wait(&r, &st));
    P2P_CHECK_STATUS(&st, aprev, 8, MPI_INT, 1);
    MT_CHECK_EQ(x, 1);
}

/* Between the lower and the upper half of MPI_COMM_WORLD: each rank sends
 * to the remote rank of its index (mod the remote size) and receives from
 * every remote rank that maps to it; sources are remote-group ranks. */
static void intercomm(void)
{
    int lower = mt_rank < mt_size / 2, local_rank, local_size, remote_size;
    MPI_Comm half, inter;
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, lower, mt_rank, &half));
    MT_CHECK_MPI(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, lower ? mt_size / 2 : 0, 77, &inter));
    MPI_Comm_rank(inter, &local_rank);
    MPI_Comm_size(inter, &local_size);
    MPI_Comm_remote_size(inter, &remote_size);
    int out = 1000 * lower + local_rank;
    MPI_Request s;
    MT_CHECK_MPI(MPI_Isend(&out, 1, MPI_INT, local_rank % remote_size, 3, inter, &s));
    for (int src = 0; src < remote_size; src++) {
        if (src % local_size != local_rank) continue;
        int in = -1;
        MPI_Status st;
        MT_CHECK_MPI(MPI_Recv(&in, 1, MPI_INT, src, 3, inter, &st));
        P2P_CHECK_STATUS(&st, src, 3, MPI_INT, 1);
        MT_CHECK_EQ(in, 1000 * !lower + src);
    }
    MT_CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Comm_free(&inter));
    MT_CHECK_MPI(MPI_Comm_free(&half));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    MPI_Comm comms[5], sub;
    int ncomm = 0;
    comms[ncomm++] = MPI_COMM_WORLD;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[ncomm++]));
    MT_CHECK_MPI(MPI_Comm_dup(comms[1], &comms[ncomm++]));
    /* One communicator of all ranks in reverse order: rank numbers differ. */
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &comms[ncomm++]));
    /* MPI_Comm_create from a group of world in reverse order too. */
    MPI_Group world, rev;
    int ranges[1][3] = {{mt_size - 1, 0, -1}};
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_range_incl(world, 1, ranges, &rev);
    MT_CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, rev, &comms[ncomm++]));
    int split_rank = -1;
    MPI_Comm_rank(comms[3], &split_rank);
    MT_CHECK_EQ(split_rank, mt_size - 1 - mt_rank);

    const size_t sizes[] = {0, 8, 65537, 2 * MiB};
    for (int i = 0; i < 4; i++) {
        same_tag_everywhere(comms, ncomm, sizes[i], 0);
        same_tag_everywhere(comms, ncomm, sizes[i], 1);
    }
    posted_recv_not_stolen(comms[1], comms[2]);
    posted_recv_not_stolen(comms[3], MPI_COMM_WORLD);

    /* A split into halves: ranks of the sub-communicator, which only some
     * world ranks share, carry their own traffic. */
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &sub));
    same_tag_everywhere(&sub, 1, 100, 0);
    MT_CHECK_MPI(MPI_Comm_free(&sub));
    if (mt_size >= 2) intercomm();

    for (int c = 1; c < ncomm; c++) MT_CHECK_MPI(MPI_Comm_free(&comms[c]));
    MPI_Group_free(&rev);
    MPI_Group_free(&world);
    return mt_finish();
}
