/* Persistent requests: MPI_Send_init/Bsend_init/Ssend_init/Rsend_init with
 * MPI_Recv_init, started one by one (MPI_Start) and together (MPI_Startall)
 * many times over, with new data each round; an inactive persistent request
 * completes at once with an empty status, and MPI_Request_free of one sends
 * nothing; persistent operations on MPI_PROC_NULL.
 *
 * Option for a known deviation of a reference PML (none with pml gpuwire):
 *   --bsend-init-once  start each MPI_Bsend_init request only once (Open MPI
 *                      4.1 pml/ob1 packs a restarted buffered send from the
 *                      bsend space of its previous start, not from the user's
 *                      buffer, for messages it does not send inline). */
#include "p2p.h"

static int bsend_init_once = 0;

enum { NKINDS = 4, ROUNDS = 12 };
static const char *kind_name[NKINDS] = {"Send_init", "Bsend_init", "Ssend_init", "Rsend_init"};
static const size_t sizes[] = {0, 24, 70000, 1 * MiB + 3};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int send_init(int kind, void *buf, int n, int dst, int tag, MPI_Request *req)
{
    switch (kind) {
    case 0: return MPI_Send_init(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, req);
    case 1: return MPI_Bsend_init(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, req);
    case 2: return MPI_Ssend_init(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, req);
    default: return MPI_Rsend_init(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, req);
    }
}

static unsigned seed_of(int src, int kind, int round, size_t size_idx)
{
    return (unsigned)(src * 100000 + kind * 10000 + round * 100 + (int)size_idx);
}

/* All four send kinds to the next rank, with their four receives from the
 * previous one, each started ROUNDS times; the send buffers change every
 * round, so a request that kept the first round's data would show. Receives
 * are started before a barrier, which makes the ready-mode start legal. */
static void rounds(size_t size_idx, int use_startall)
{
    const size_t n = sizes[size_idx];
    unsigned char *out[NKINDS], *in[NKINDS];
    MPI_Request req[2 * NKINDS]; /* receives first, then sends */
    MPI_Status st[2 * NKINDS];
    size_t space = NKINDS * (n + MPI_BSEND_OVERHEAD + 64);
    char *attach = p2p_malloc(space);
    MT_CHECK_MPI(MPI_Buffer_attach(attach, (int)space));

    for (int k = 0; k < NKINDS; k++) {
        int tag = 10 * k + (int)size_idx;
        out[k] = p2p_malloc(n);
        in[k] = p2p_guarded_alloc(n, 0);
        MT_CHECK_MPI(MPI_Recv_init(in[k], (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &req[k]));
        MT_CHECK_MPI(send_init(k, out[k], (int)n, p2p_next(), tag, &req[NKINDS + k]));
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < NKINDS; k++) {
            mt_fill(out[k], n, seed_of(mt_rank, k, r, size_idx));
            memset(in[k], 0, n);
        }
        if (use_startall) {
            MT_CHECK_MPI(MPI_Startall(NKINDS, req));
        } else {
            for (int k = 0; k < NKINDS; k++) MT_CHECK_MPI(MPI_Start(&req[k]));
        }
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (use_startall) {
            MT_CHECK_MPI(MPI_Startall(NKINDS, req + NKINDS));
        } else {
            for (int k = 0; k < NKINDS; k++) MT_CHECK_MPI(MPI_Start(&req[NKINDS + k]));
        }
        MT_CHECK_MPI(MPI_Waitall(2 * NKINDS, req, st));
        for (int k = 0; k < NKINDS; k++) {
            int before = mt_failures;
            /* Completion leaves persistent requests allocated, only inactive. */
            MT_CHECK(req[k] != MPI_REQUEST_NULL && req[NKINDS + k] != MPI_REQUEST_NULL);
            P2P_CHECK_STATUS(&st[k], p2p_prev(), 10 * k + (int)size_idx, MPI_BYTE, (int)n);
            P2P_CHECK_DATA(in[k], n, seed_of(p2p_prev(), k, r, size_idx));
            P2P_CHECK_GUARDS(in[k], n);
            if (mt_failures != before)
                fprintf(stderr, "[rank %d]   in round %d of %s, %zu bytes, %s\n", mt_rank, r,
                        kind_name[k], n, use_startall ? "MPI_Startall" : "MPI_Start");
        }
        if (bsend_init_once) {
            MT_CHECK_MPI(MPI_Request_free(&req[NKINDS + 1]));
            MT_CHECK_MPI(send_init(1, out[1], (int)n, p2p_next(), 10 + (int)size_idx, &req[NKINDS + 1]));
        }
    }

    /* Waiting on or testing an inactive persistent request returns at once
     * with an empty status. */
    MPI_Status es;
    int flag = 0;
    MT_CHECK_MPI(MPI_Wait(&req[0], &es));
    P2P_CHECK_EMPTY_STATUS(&es);
    MT_CHECK_MPI(MPI_Test(&req[NKINDS], &flag, &es));
    MT_CHECK(flag);
    P2P_CHECK_EMPTY_STATUS(&es);

    for (int k = 0; k < 2 * NKINDS; k++) {
        MT_CHECK_MPI(MPI_Request_free(&req[k]));
        MT_CHECK(req[k] == MPI_REQUEST_NULL);
    }
    for (int k = 0; k < NKINDS; k++) {
        free(out[k]);
        p2p_guarded_free(in[k]);
    }
    void *d;
    int ds;
    MT_CHECK_MPI(MPI_Buffer_detach(&d, &ds));
    free(attach);
}

/* Freeing a persistent send that was never started sends nothing: the next
 * message on that tag must be the sentinel sent afterwards. A persistent
 * receive freed without a start must not swallow a later message either. */
static void free_inactive(void)
{
    const int tag = 900;
    int never = 1, sentinel = 2, got = 0;
    MPI_Request sreq, rreq;
    MPI_Status st;
    MT_CHECK_MPI(MPI_Send_init(&never, 1, MPI_INT, p2p_next(), tag, MPI_COMM_WORLD, &sreq));
    MT_CHECK_MPI(MPI_Recv_init(&never, 1, MPI_INT, p2p_prev(), tag, MPI_COMM_WORLD, &rreq));
    MT_CHECK_MPI(MPI_Request_free(&sreq));
    MT_CHECK_MPI(MPI_Request_free(&rreq));
    MT_CHECK(sreq == MPI_REQUEST_NULL && rreq == MPI_REQUEST_NULL);
    MT_CHECK_MPI(MPI_Sendrecv(&sentinel, 1, MPI_INT, p2p_next(), tag, &got, 1, MPI_INT, p2p_prev(),
                              tag, MPI_COMM_WORLD, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_INT, 1);
    MT_CHECK_EQ(got, sentinel);
    MT_CHECK_EQ(never, 1);
}

/* Persistent operations with MPI_PROC_NULL complete at once each start, the
 * receive with the MPI_PROC_NULL status and its buffer untouched. */
static void proc_null(void)
{
    int buf[4] = {7, 7, 7, 7};
    MPI_Request req[2];
    MPI_Status st[2];
    MT_CHECK_MPI(MPI_Recv_init(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req[0]));
    MT_CHECK_MPI(MPI_Ssend_init(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req[1]));
    for (int r = 0; r < 3; r++) {
        MT_CHECK_MPI(MPI_Startall(2, req));
        MT_CHECK_MPI(MPI_Waitall(2, req, st));
        P2P_CHECK_PROC_NULL_STATUS(&st[0]);
        MT_CHECK(buf[0] == 7 && buf[3] == 7);
    }
    MT_CHECK_MPI(MPI_Request_free(&req[0]));
    MT_CHECK_MPI(MPI_Request_free(&req[1]));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--bsend-init-once")) bsend_init_once = 1;
    for (size_t i = 0; i < NSIZES; i++) {
        rounds(i, 0);
        rounds(i, 1);
    }
    free_inactive();
    proc_null();
    return mt_finish();
}
