/* Send modes: standard, synchronous and ready, blocking and non-blocking,
 * received with MPI_Recv and MPI_Irecv around a ring (each rank sends to the
 * next and receives from the previous one). Synchronous sends are also
 * checked not to complete before the matching receive is posted. */
#include "p2p.h"

enum mode { STANDARD, SYNCHRONOUS, READY, NMODES };
static const char *mode_name[] = {"standard", "synchronous", "ready"};

/* Around the usual eager/rendezvous switch points of shared memory and
 * network transports. */
static const size_t sizes[] = {0, 1, 8, 1000, 4096, 8193, 65536, 65537, 1 * MiB + 5};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int start_send(enum mode m, int blocking, const void *buf, int n, int dst, int tag,
                      MPI_Request *req)
{
    *req = MPI_REQUEST_NULL;
    switch (m) {
    case STANDARD:
        return blocking ? MPI_Send(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD)
                        : MPI_Isend(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, req);
    case SYNCHRONOUS:
        return blocking ? MPI_Ssend(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD)
                        : MPI_Issend(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, req);
    default:
        return blocking ? MPI_Rsend(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD)
                        : MPI_Irsend(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, req);
    }
}

/* One message per rank around the ring. With a non-blocking receive, it is
 * posted before the send (for the ready mode, before a barrier that makes
 * the ready send legal); blocking receives come first on odd ranks only. */
static void ring_exchange(enum mode m, int blocking, int blocking_recv, size_t n, int tag)
{
    unsigned seed_out = (unsigned)(mt_rank * 1000 + tag);
    unsigned seed_in = (unsigned)(p2p_prev() * 1000 + tag);
    unsigned char *out = p2p_malloc(n);
    unsigned char *in = p2p_guarded_alloc(n, 0);
    MPI_Request rreq = MPI_REQUEST_NULL, sreq;
    MPI_Status st;
    mt_fill(out, n, seed_out);

    if (!blocking_recv)
        MT_CHECK_MPI(MPI_Irecv(in, (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &rreq));
    if (m == READY) MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (blocking_recv) {
        /* Odd ranks receive first, so every rank's blocking send finds a
         * receive eventually. */
        if (mt_rank % 2) {
            MT_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &st));
            P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
        }
        MT_CHECK_MPI(start_send(m, 1, out, (int)n, p2p_next(), tag, &sreq));
        if (mt_rank % 2 == 0) {
            MT_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &st));
            P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
        }
    } else {
        MT_CHECK_MPI(start_send(m, blocking, out, (int)n, p2p_next(), tag, &sreq));
        MT_CHECK_MPI(MPI_Wait(&rreq, &st));
        MT_CHECK(rreq == MPI_REQUEST_NULL);
        P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    }
    if (!blocking) {
        MPI_Status sst;
        MT_CHECK_MPI(MPI_Wait(&sreq, &sst));
        MT_CHECK(sreq == MPI_REQUEST_NULL);
    }
    P2P_CHECK_DATA(in, n, seed_in);
    P2P_CHECK_GUARDS(in, n);
    /* The user's send buffer is read-only to MPI. */
    P2P_CHECK_DATA(out, n, seed_out);
    free(out);
    p2p_guarded_free(in);
}

/* An MPI_Issend must stay incomplete while its receive is not posted: the
 * receiver posts it only after a "go" message that the sender sends once it
 * has polled MPI_Test for a while. */
static void issend_waits_for_receive(size_t n, int tag)
{
    const int go_tag = tag + 1;
    unsigned char *out = p2p_malloc(n), *in = p2p_guarded_alloc(n, 0);
    MPI_Request sreq, goreq;
    MPI_Status st;
    int flag = 0, go = 1;
    mt_fill(out, n, (unsigned)tag);

    MT_CHECK_MPI(MPI_Issend(out, (int)n, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &sreq));
    double until = MPI_Wtime() + 0.03;
    while (MPI_Wtime() < until && !flag) MT_CHECK_MPI(MPI_Test(&sreq, &flag, &st));
    if (flag) mt_fail(__FILE__, __LINE__, "MPI_Issend of %zu bytes completed before its receive was posted", n);
    MT_CHECK_MPI(MPI_Isend(&go, 1, MPI_INT, p2p_next(), go_tag, MPI_COMM_WORLD, &goreq));

    int got = 0;
    MT_CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, p2p_prev(), go_tag, MPI_COMM_WORLD, &st));
    MT_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    P2P_CHECK_DATA(in, n, (unsigned)tag);
    P2P_CHECK_GUARDS(in, n);
    if (!flag) MT_CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Wait(&goreq, MPI_STATUS_IGNORE));
    free(out);
    p2p_guarded_free(in);
}

/* A blocking MPI_Ssend returns only after the receive is posted. The sender
 * reads the clock before telling the receiver to start, and the receiver
 * sleeps delay_ms before posting, so the Ssend must take at least that long,
 * whatever the relation between the two ranks' clocks. One pair at a time,
 * so that no rank is blocked in its own Ssend while it should receive. */
static void ssend_waits_for_receive(size_t n, int tag, int delay_ms)
{
    unsigned char *out = p2p_malloc(n), *in = p2p_guarded_alloc(n, 0);
    int start = 1;
    MPI_Status st;
    mt_fill(out, n, (unsigned)tag);
    for (int turn = 0; turn < mt_size; turn++) {
        if (mt_rank == turn) {
            double t0 = MPI_Wtime();
            MT_CHECK_MPI(MPI_Send(&start, 1, MPI_INT, p2p_next(), tag + 1, MPI_COMM_WORLD));
            MT_CHECK_MPI(MPI_Ssend(out, (int)n, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD));
            double took = MPI_Wtime() - t0;
            if (took < delay_ms * 1e-3)
                mt_fail(__FILE__, __LINE__,
                        "MPI_Ssend of %zu bytes returned after %.1f ms, before the receive was "
                        "posted (%d ms)", n, took * 1e3, delay_ms);
        } else if (p2p_prev() == turn) {
            MT_CHECK_MPI(MPI_Recv(&start, 1, MPI_INT, turn, tag + 1, MPI_COMM_WORLD, &st));
            p2p_sleep_ms(delay_ms);
            MT_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, turn, tag, MPI_COMM_WORLD, &st));
            P2P_CHECK_STATUS(&st, turn, tag, MPI_BYTE, (int)n);
            P2P_CHECK_DATA(in, n, (unsigned)tag);
            P2P_CHECK_GUARDS(in, n);
        }
    }
    free(out);
    p2p_guarded_free(in);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int tag = 0;
    for (int m = 0; m < NMODES; m++) {
        for (size_t i = 0; i < NSIZES; i++) {
            for (int variant = 0; variant < 4; variant++) {
                int blocking = variant & 1, blocking_recv = variant >> 1;
                if (m == READY && blocking_recv) continue; /* needs a posted receive */
                int before = mt_failures;
                ring_exchange((enum mode)m, blocking, blocking_recv, sizes[i], ++tag);
                if (mt_failures != before)
                    fprintf(stderr, "[rank %d]   in %s%s send of %zu bytes, %s receive\n", mt_rank,
                            blocking ? "" : "non-blocking ", mode_name[m], sizes[i],
                            blocking_recv ? "blocking" : "non-blocking");
            }
        }
    }
    const size_t sync_sizes[] = {0, 8, 65537, 4 * MiB};
    for (size_t i = 0; i < 4; i++) {
        tag += 2;
        issend_waits_for_receive(sync_sizes[i], tag);
        tag += 2;
        ssend_waits_for_receive(sync_sizes[i], tag, 40);
    }
    return mt_finish();
}
