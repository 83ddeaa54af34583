/* MPI_Cancel. A posted receive that no message matches is cancelled
 * (MPI_Test_cancelled true) and never gets data; later messages go to later
 * receives. A send may or may not be cancelled, but the outcome must be
 * consistent: a cancelled send is never received, one that was not cancelled
 * is received intact. The same holds for a receive racing with its message. */
#include "p2p.h"

static const size_t sizes[] = {8, 65537, 4 * MiB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int cancelled_of(MPI_Status *st)
{
    int c = -1;
    MT_CHECK_MPI(MPI_Test_cancelled(st, &c));
    return c;
}

/* The peer sends on the tag only after it was told the receive is gone. */
static void cancel_posted_recv(size_t n, int tag, int src_any)
{
    unsigned char *dead = p2p_guarded_alloc(n, 0xEE), *in = p2p_guarded_alloc(n, 0);
    unsigned char *out = p2p_malloc(n);
    MPI_Request r;
    MPI_Status st;
    int go = 1;
    MT_CHECK_MPI(MPI_Irecv(dead, (int)n, MPI_BYTE, src_any ? MPI_ANY_SOURCE : p2p_prev(), tag,
                           MPI_COMM_WORLD, &r));
    MT_CHECK_MPI(MPI_Cancel(&r));
    MT_CHECK_MPI(MPI_Wait(&r, &st));
    MT_CHECK(r == MPI_REQUEST_NULL);
    MT_CHECK_EQ(cancelled_of(&st), 1);

    MT_CHECK_MPI(MPI_Sendrecv(&go, 1, MPI_INT, p2p_prev(), tag + 1, &go, 1, MPI_INT, p2p_next(),
                              tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    mt_fill(out, n, (unsigned)(mt_rank + tag));
    MT_CHECK_MPI(MPI_Sendrecv(out, (int)n, MPI_BYTE, p2p_next(), tag, in, (int)n, MPI_BYTE,
                              p2p_prev(), tag, MPI_COMM_WORLD, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    P2P_CHECK_DATA(in, n, (unsigned)(p2p_prev() + tag));
    MT_CHECK(p2p_find_not(dead, n, 0xEE) < 0);
    P2P_CHECK_GUARDS(dead, n);
    p2p_guarded_free(dead);
    p2p_guarded_free(in);
    free(out);
}

/* An active persistent receive is cancelled, then started again and used. */
static void cancel_persistent_recv(int tag)
{
    int buf = -1, out = mt_rank, go = 0;
    MPI_Request r;
    MPI_Status st;
    MT_CHECK_MPI(MPI_Recv_init(&buf, 1, MPI_INT, p2p_prev(), tag, MPI_COMM_WORLD, &r));
    MT_CHECK_MPI(MPI_Start(&r));
    MT_CHECK_MPI(MPI_Cancel(&r));
    MT_CHECK_MPI(MPI_Wait(&r, &st));
    MT_CHECK(r != MPI_REQUEST_NULL);
    MT_CHECK_EQ(cancelled_of(&st), 1);
    MT_CHECK_EQ(buf, -1);
    MT_CHECK_MPI(MPI_Sendrecv(&go, 1, MPI_INT, p2p_prev(), tag + 1, &go, 1, MPI_INT, p2p_next(),
                              tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Start(&r));
    MT_CHECK_MPI(MPI_Send(&out, 1, MPI_INT, p2p_next(), tag, MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Wait(&r, &st));
    MT_CHECK_EQ(cancelled_of(&st), 0);
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_INT, 1);
    MT_CHECK_EQ(buf, p2p_prev());
    MT_CHECK_MPI(MPI_Request_free(&r));
}

/* A send is cancelled before its receiver has posted anything; the
 * receiver is told so and only then posts two receives on the tag. The
 * sender completes the send, then sends a sentinel, and a second one if the
 * send was cancelled, and then the outcome. The receives must hold [data,
 * sentinel] if the send was not cancelled, [sentinel, sentinel 2] if it was.
 * (MPI_Wait on a send marked for cancellation is local by the standard, but
 * Open MPI's PMLs do not cancel sends and wait for the receiver, so the
 * receives are posted before the sender's wait.) */
static void cancel_send(size_t n, int tag, int synchronous)
{
    unsigned char *out = p2p_malloc(n), *in[2];
    unsigned char sentinel[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
    MPI_Request r, rr[2], ss[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st, rst[2];
    int asked = 1, mine, theirs = -1;
    mt_fill(out, n, (unsigned)(mt_rank * 7 + tag));
    if (synchronous)
        MT_CHECK_MPI(MPI_Issend(out, (int)n, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &r));
    else
        MT_CHECK_MPI(MPI_Isend(out, (int)n, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &r));
    MT_CHECK_MPI(MPI_Cancel(&r));
    MT_CHECK_MPI(MPI_Sendrecv(&asked, 1, MPI_INT, p2p_next(), tag + 1, &asked, 1, MPI_INT,
                              p2p_prev(), tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int i = 0; i < 2; i++) {
        in[i] = p2p_guarded_alloc(n, 0);
        MT_CHECK_MPI(MPI_Irecv(in[i], (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &rr[i]));
    }
    MT_CHECK_MPI(MPI_Wait(&r, &st));
    mine = cancelled_of(&st);
    MT_CHECK_MPI(MPI_Isend(sentinel[0], 4, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &ss[0]));
    if (mine)
        MT_CHECK_MPI(MPI_Isend(sentinel[1], 4, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &ss[1]));
    MT_CHECK_MPI(MPI_Sendrecv(&mine, 1, MPI_INT, p2p_next(), tag + 1, &theirs, 1, MPI_INT,
                              p2p_prev(), tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Waitall(2, rr, rst));
    if (!theirs) {
        P2P_CHECK_STATUS(&rst[0], p2p_prev(), tag, MPI_BYTE, (int)n);
        P2P_CHECK_DATA(in[0], n, (unsigned)(p2p_prev() * 7 + tag));
    } else {
        P2P_CHECK_STATUS(&rst[0], p2p_prev(), tag, MPI_BYTE, 4);
        MT_CHECK(!memcmp(in[0], sentinel[0], 4));
    }
    P2P_CHECK_STATUS(&rst[1], p2p_prev(), tag, MPI_BYTE, 4);
    MT_CHECK(!memcmp(in[1], sentinel[theirs ? 1 : 0], 4));
    MT_CHECK_MPI(MPI_Waitall(2, ss, MPI_STATUSES_IGNORE));
    if (mt_rank == 0)
        printf("cancel of a %zu-byte %s: %s\n", n, synchronous ? "Issend" : "Isend",
               mine ? "cancelled" : "not cancelled");
    for (int i = 0; i < 2; i++) {
        P2P_CHECK_GUARDS(in[i], n);
        p2p_guarded_free(in[i]);
    }
    free(out);
}

/* A receive whose message has been sent (the barrier orders the send before
 * the cancel) is cancelled: either it was matched already and holds the
 * data, or it was cancelled and the message goes to the next receive. */
static void cancel_racing_recv(size_t n, int tag)
{
    unsigned char *out = p2p_malloc(n), *in = p2p_guarded_alloc(n, 0);
    MPI_Request r, s;
    MPI_Status st;
    mt_fill(out, n, (unsigned)(mt_rank * 3 + tag));
    MT_CHECK_MPI(MPI_Irecv(in, (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &r));
    MT_CHECK_MPI(MPI_Isend(out, (int)n, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &s));
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Cancel(&r));
    MT_CHECK_MPI(MPI_Wait(&r, &st));
    if (cancelled_of(&st)) {
        MT_CHECK(p2p_find_not(in, n, 0) < 0);
        MT_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &st));
    }
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    P2P_CHECK_DATA(in, n, (unsigned)(p2p_prev() * 3 + tag));
    P2P_CHECK_GUARDS(in, n);
    MT_CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    free(out);
    p2p_guarded_free(in);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int tag = 0;
    for (size_t i = 0; i < NSIZES; i++) {
        cancel_posted_recv(sizes[i], tag += 2, 0);
        cancel_posted_recv(sizes[i], tag += 2, 1);
    }
    cancel_persistent_recv(tag += 2);
    for (size_t i = 0; i < NSIZES; i++) {
        cancel_send(sizes[i], tag += 2, 0);
        cancel_send(sizes[i], tag += 2, 1);
        cancel_racing_recv(sizes[i], tag += 2);
    }
    return mt_finish();
}
