/* Wildcards and the null process: MPI_ANY_SOURCE receives from every other
 * rank and reports who sent; MPI_ANY_TAG reports the tag, including 0 and
 * MPI_TAG_UB; a receive with a specific tag skips messages with other tags;
 * operations on MPI_PROC_NULL complete at once with source MPI_PROC_NULL,
 * tag MPI_ANY_TAG and count 0, touching no buffer. */
#include "p2p.h"

static int tag_ub;

/* Every rank sends K messages to rank 0 (which sends none); rank 0 receives
 * them with MPI_ANY_SOURCE, half posted before the sends start and half
 * after, and checks each by the status' source and tag. */
static void any_source_gather(void)
{
    enum { K = 12 };
    const size_t n = 3000;
    const int tag = 7;
    if (mt_rank == 0) {
        int total = K * (mt_size - 1);
        int *next_k = calloc((size_t)mt_size, sizeof(int));
        unsigned char *in = p2p_malloc((size_t)total * n);
        MPI_Request *r = p2p_malloc((size_t)total * sizeof(MPI_Request));
        MPI_Status *st = p2p_malloc((size_t)total * sizeof(MPI_Status));
        for (int i = 0; i < total / 2; i++)
            MT_CHECK_MPI(MPI_Irecv(in + i * n, (int)n, MPI_BYTE, MPI_ANY_SOURCE, tag,
                                   MPI_COMM_WORLD, &r[i]));
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = total / 2; i < total; i++)
            MT_CHECK_MPI(MPI_Irecv(in + i * n, (int)n, MPI_BYTE, MPI_ANY_SOURCE, tag,
                                   MPI_COMM_WORLD, &r[i]));
        MT_CHECK_MPI(MPI_Waitall(total, r, st));
        for (int i = 0; i < total; i++) {
            int src = st[i].MPI_SOURCE;
            if (src <= 0 || src >= mt_size) {
                mt_fail(__FILE__, __LINE__, "receive %d: MPI_SOURCE %d", i, src);
                continue;
            }
            /* Messages of one source arrive in their sending order. */
            int k = next_k[src]++;
            P2P_CHECK_STATUS(&st[i], src, tag, MPI_BYTE, (int)n);
            P2P_CHECK_DATA(in + i * n, n, (unsigned)(src * 100 + k));
        }
        for (int s = 1; s < mt_size; s++) MT_CHECK_EQ(next_k[s], K);
        free(next_k);
        free(in);
        free(r);
        free(st);
    } else {
        unsigned char *out = p2p_malloc(K * n);
        MPI_Request r[K];
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int k = 0; k < K; k++) {
            mt_fill(out + k * n, n, (unsigned)(mt_rank * 100 + k));
            MT_CHECK_MPI(MPI_Isend(out + k * n, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &r[k]));
        }
        MT_CHECK_MPI(MPI_Waitall(K, r, MPI_STATUSES_IGNORE));
        free(out);
    }
}

/* Tags 0, 1, a middle one and MPI_TAG_UB, received with MPI_ANY_TAG (and
 * MPI_ANY_SOURCE) in sending order; then the same tags sent in one order and
 * received by specific tag in the reverse order. */
static void tags(void)
{
    const int t[4] = {0, 1, tag_ub / 2 + 1, tag_ub};
    int out[4], in = -1;
    MPI_Request r[4];
    MPI_Status st;
    for (int i = 0; i < 4; i++) {
        out[i] = mt_rank * 10 + i;
        MT_CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, p2p_next(), t[i], MPI_COMM_WORLD, &r[i]));
    }
    for (int i = 0; i < 4; i++) {
        int src = i % 2 ? MPI_ANY_SOURCE : p2p_prev();
        MT_CHECK_MPI(MPI_Recv(&in, 1, MPI_INT, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        P2P_CHECK_STATUS(&st, p2p_prev(), t[i], MPI_INT, 1);
        MT_CHECK_EQ(in, p2p_prev() * 10 + i);
    }
    MT_CHECK_MPI(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));

    for (int i = 0; i < 4; i++)
        MT_CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, p2p_next(), t[i], MPI_COMM_WORLD, &r[i]));
    for (int i = 3; i >= 0; i--) {
        MT_CHECK_MPI(MPI_Recv(&in, 1, MPI_INT, MPI_ANY_SOURCE, t[i], MPI_COMM_WORLD, &st));
        P2P_CHECK_STATUS(&st, p2p_prev(), t[i], MPI_INT, 1);
        MT_CHECK_EQ(in, p2p_prev() * 10 + i);
    }
    MT_CHECK_MPI(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
}

/* Large messages of different tags: a posted ANY_TAG receive takes the
 * first; a specific-tag receive posted before it skips to its own tag. */
static void tag_selection_large(void)
{
    const size_t n = 1 * MiB;
    unsigned char *out[2], *in[2];
    MPI_Request s[2], r[2];
    MPI_Status st[2];
    for (int i = 0; i < 2; i++) {
        out[i] = p2p_malloc(n);
        in[i] = p2p_guarded_alloc(n, 0);
        mt_fill(out[i], n, (unsigned)(mt_rank * 2 + i));
    }
    MT_CHECK_MPI(MPI_Irecv(in[1], (int)n, MPI_BYTE, p2p_prev(), 51, MPI_COMM_WORLD, &r[1]));
    MT_CHECK_MPI(MPI_Irecv(in[0], (int)n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]));
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Isend(out[0], (int)n, MPI_BYTE, p2p_next(), 50, MPI_COMM_WORLD, &s[0]));
    MT_CHECK_MPI(MPI_Isend(out[1], (int)n, MPI_BYTE, p2p_next(), 51, MPI_COMM_WORLD, &s[1]));
    MT_CHECK_MPI(MPI_Waitall(2, r, st));
    for (int i = 0; i < 2; i++) {
        P2P_CHECK_STATUS(&st[i], p2p_prev(), 50 + i, MPI_BYTE, (int)n);
        P2P_CHECK_DATA(in[i], n, (unsigned)(p2p_prev() * 2 + i));
        P2P_CHECK_GUARDS(in[i], n);
    }
    MT_CHECK_MPI(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 2; i++) {
        free(out[i]);
        p2p_guarded_free(in[i]);
    }
}

static void proc_null(void)
{
    unsigned char buf[16];
    MPI_Request r[4];
    MPI_Status st, sts[4];
    memset(buf, 0x3C, sizeof buf);
    MT_CHECK_MPI(MPI_Send(buf, 16, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Ssend(buf, 16, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Rsend(buf, 16, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Recv(buf, 16, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
    P2P_CHECK_PROC_NULL_STATUS(&st);
    MT_CHECK_MPI(MPI_Recv(buf, 16, MPI_BYTE, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    P2P_CHECK_PROC_NULL_STATUS(&st);

    MT_CHECK_MPI(MPI_Isend(buf, 16, MPI_BYTE, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &r[0]));
    MT_CHECK_MPI(MPI_Issend(buf, 16, MPI_BYTE, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &r[1]));
    MT_CHECK_MPI(MPI_Irecv(buf, 16, MPI_BYTE, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &r[2]));
    MT_CHECK_MPI(MPI_Irecv(buf, 16, MPI_BYTE, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &r[3]));
    MT_CHECK_MPI(MPI_Waitall(4, r, sts));
    P2P_CHECK_PROC_NULL_STATUS(&sts[2]);
    P2P_CHECK_PROC_NULL_STATUS(&sts[3]);

    int peer_rank = -1;
    MT_CHECK_MPI(MPI_Sendrecv(&mt_rank, 1, MPI_INT, MPI_PROC_NULL, 3, &peer_rank, 1, MPI_INT,
                              MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
    P2P_CHECK_PROC_NULL_STATUS(&st);
    MT_CHECK_EQ(peer_rank, -1);
    MT_CHECK(p2p_find_not(buf, sizeof buf, 0x3C) < 0);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int *ub = NULL, flag = 0;
    MT_CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    MT_CHECK(flag && ub);
    tag_ub = flag && ub ? *ub : 32767;
    MT_CHECK(tag_ub >= 32767); /* the least MPI allows */
    any_source_gather();
    tags();
    tag_selection_large();
    proc_null();
    return mt_finish();
}
