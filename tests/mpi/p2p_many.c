/* Many outstanding requests: hundreds of MPI_Isend/MPI_Irecv between all
 * pairs of ranks at once, completed with MPI_Waitany, MPI_Testsome,
 * MPI_Waitsome, MPI_Testany and MPI_Waitall; the completion calls on arrays
 * of null requests; and a flood of messages that arrive before any receive
 * is posted. */
#include "p2p.h"

enum { TARGET = 256 }; /* receives outstanding per rank */
enum completion { WAITANY, TESTSOME, WAITSOME, TESTANY, WAITALL, NCOMPLETION };
static const char *completion_name[] = {"MPI_Waitany", "MPI_Testsome", "MPI_Waitsome",
                                        "MPI_Testany", "MPI_Waitall"};

static size_t size_of(int k) { return k % 16 == 5 ? 65536 + (size_t)k : (size_t)(k * 37) % 2000; }
static unsigned seed_of(int src, int dst, int k) { return (unsigned)(src * 7919 + dst * 104729 + k); }

struct slot {
    int peer, k, is_recv;
    unsigned char *buf;
};

/* Completes requests one or several at a time; done[i] must flip exactly
 * once per request. Returns how many were completed. */
static int complete_all(enum completion how, int n, MPI_Request *req, MPI_Status *st, int *done_order)
{
    int completed = 0, *idx = p2p_malloc((size_t)n * sizeof(int));
    MPI_Status *some = p2p_malloc((size_t)n * sizeof(MPI_Status));
    while (completed < n) {
        int i = -1, flag = 0, out = 0;
        switch (how) {
        case WAITANY:
            MT_CHECK_MPI(MPI_Waitany(n, req, &i, &some[0]));
            idx[0] = i;
            out = 1;
            break;
        case TESTANY:
            MT_CHECK_MPI(MPI_Testany(n, req, &i, &flag, &some[0]));
            idx[0] = i;
            out = flag ? 1 : 0;
            break;
        case TESTSOME:
            MT_CHECK_MPI(MPI_Testsome(n, req, &out, idx, some));
            break;
        case WAITSOME:
            MT_CHECK_MPI(MPI_Waitsome(n, req, &out, idx, some));
            MT_CHECK(out >= 1);
            break;
        default:
            MT_CHECK_MPI(MPI_Waitall(n, req, some));
            for (i = 0; i < n; i++) idx[i] = i;
            out = n;
        }
        if (out == MPI_UNDEFINED || out < 0) {
            mt_fail(__FILE__, __LINE__, "%s found no active request with %d of %d left",
                    completion_name[how], n - completed, n);
            break;
        }
        for (int j = 0; j < out; j++) {
            i = idx[j];
            if (i < 0 || i >= n || done_order[i] >= 0) {
                mt_fail(__FILE__, __LINE__, "%s returned index %d twice or out of range",
                        completion_name[how], i);
                continue;
            }
            MT_CHECK(req[i] == MPI_REQUEST_NULL);
            done_order[i] = completed++;
            st[i] = some[j];
        }
    }
    free(idx);
    free(some);
    return completed;
}

/* K messages to and from every other rank, receives posted in reverse tag
 * order and mixed with the sends in one request array. */
static void all_pairs(enum completion how)
{
    int peers = mt_size - 1, K = TARGET / peers;
    int n = 2 * K * peers;
    struct slot *slot = p2p_malloc((size_t)n * sizeof(*slot));
    MPI_Request *req = p2p_malloc((size_t)n * sizeof(MPI_Request));
    MPI_Status *st = p2p_malloc((size_t)n * sizeof(MPI_Status));
    int *order = p2p_malloc((size_t)n * sizeof(int)), i = 0;

    for (int p = 0; p < mt_size; p++) {
        if (p == mt_rank) continue;
        for (int k = K - 1; k >= 0; k--, i++) {
            slot[i] = (struct slot){p, k, 1, p2p_malloc(size_of(k))};
            MT_CHECK_MPI(MPI_Irecv(slot[i].buf, (int)size_of(k), MPI_BYTE, p, k, MPI_COMM_WORLD, &req[i]));
        }
    }
    for (int p = 0; p < mt_size; p++) {
        if (p == mt_rank) continue;
        for (int k = 0; k < K; k++, i++) {
            slot[i] = (struct slot){p, k, 0, p2p_malloc(size_of(k))};
            mt_fill(slot[i].buf, size_of(k), seed_of(mt_rank, p, k));
            MT_CHECK_MPI(MPI_Isend(slot[i].buf, (int)size_of(k), MPI_BYTE, p, k, MPI_COMM_WORLD, &req[i]));
        }
    }
    for (i = 0; i < n; i++) order[i] = -1;
    int before = mt_failures;
    MT_CHECK_EQ(complete_all(how, n, req, st, order), n);
    for (i = 0; i < n; i++) {
        if (!slot[i].is_recv) continue;
        size_t sz = size_of(slot[i].k);
        P2P_CHECK_STATUS(&st[i], slot[i].peer, slot[i].k, MPI_BYTE, (int)sz);
        P2P_CHECK_DATA(slot[i].buf, sz, seed_of(slot[i].peer, mt_rank, slot[i].k));
    }
    if (mt_failures != before)
        fprintf(stderr, "[rank %d]   with %s over %d requests\n", mt_rank, completion_name[how], n);
    for (i = 0; i < n; i++) free(slot[i].buf);
    free(slot);
    free(req);
    free(st);
    free(order);
}

/* The completion calls on arrays holding only null requests. */
static void null_arrays(void)
{
    MPI_Request req[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st, sts[3];
    int idx = 0, flag = 0, out = 0, idxs[3];
    MT_CHECK_MPI(MPI_Waitany(3, req, &idx, &st));
    MT_CHECK_EQ(idx, MPI_UNDEFINED);
    P2P_CHECK_EMPTY_STATUS(&st);
    MT_CHECK_MPI(MPI_Testany(3, req, &idx, &flag, &st));
    MT_CHECK(flag);
    MT_CHECK_EQ(idx, MPI_UNDEFINED);
    MT_CHECK_MPI(MPI_Testsome(3, req, &out, idxs, sts));
    MT_CHECK_EQ(out, MPI_UNDEFINED);
    MT_CHECK_MPI(MPI_Waitsome(3, req, &out, idxs, sts));
    MT_CHECK_EQ(out, MPI_UNDEFINED);
    MT_CHECK_MPI(MPI_Waitall(3, req, sts));
    P2P_CHECK_EMPTY_STATUS(&sts[1]);
    MT_CHECK_MPI(MPI_Testall(3, req, &flag, sts));
    MT_CHECK(flag);
}

/* FLOOD small messages reach each rank before it posts a receive (the
 * barrier); then they are received in order, in one batch. */
static void unexpected_flood(void)
{
    enum { FLOOD = 600 };
    int *out = p2p_malloc(FLOOD * 4 * sizeof(int)), *in = p2p_malloc(FLOOD * 4 * sizeof(int));
    MPI_Request *s = p2p_malloc(FLOOD * sizeof(MPI_Request)), *r = p2p_malloc(FLOOD * sizeof(MPI_Request));
    MPI_Status *st = p2p_malloc(FLOOD * sizeof(MPI_Status));
    for (int k = 0; k < FLOOD; k++) {
        int n = 1 + k % 4;
        for (int j = 0; j < n; j++) out[4 * k + j] = mt_rank * 100000 + k * 10 + j;
        MT_CHECK_MPI(MPI_Isend(&out[4 * k], n, MPI_INT, p2p_next(), 3, MPI_COMM_WORLD, &s[k]));
    }
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int k = 0; k < FLOOD; k++)
        MT_CHECK_MPI(MPI_Irecv(&in[4 * k], 4, MPI_INT, p2p_prev(), 3, MPI_COMM_WORLD, &r[k]));
    MT_CHECK_MPI(MPI_Waitall(FLOOD, r, st));
    MT_CHECK_MPI(MPI_Waitall(FLOOD, s, MPI_STATUSES_IGNORE));
    for (int k = 0, bad = 0; k < FLOOD && bad < 3; k++) {
        int n = 1 + k % 4, before = mt_failures;
        P2P_CHECK_STATUS(&st[k], p2p_prev(), 3, MPI_INT, n);
        for (int j = 0; j < n; j++) MT_CHECK_EQ(in[4 * k + j], p2p_prev() * 100000 + k * 10 + j);
        bad += mt_failures != before;
    }
    free(out);
    free(in);
    free(s);
    free(r);
    free(st);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    for (int how = 0; how < NCOMPLETION; how++) all_pairs((enum completion)how);
    null_arrays();
    unexpected_flood();
    return mt_finish();
}
