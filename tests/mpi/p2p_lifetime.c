/* Handles freed while operations on them are pending: MPI lets the
 * application free a datatype (and a communicator) right after posting
 * non-blocking operations with it; they must complete with the layout they
 * were posted with. Each rank posts 128 receives from its predecessor with a
 * derived type, on a duplicate of MPI_COMM_WORLD, frees the type and the
 * communicator, then 128 sends (Isend, Issend, Irsend) to its successor with
 * another such type, frees it, and only then waits. Also persistent
 * requests whose type and communicator are freed before MPI_Start. */
#include "p2p.h"

#define NMSG 128
#define NBLK 4
#define BLKLEN 3
/* Displacements in ints: gaps between the blocks, so the layout is not contiguous. */
static const int displs[NBLK] = {0, 5, 11, 20};
#define SPAN 23 /* ints covered by one element */
#define COUNT 2 /* elements per message */

static MPI_Datatype make_type(void)
{
    MPI_Datatype t;
    MT_CHECK_MPI(MPI_Type_create_indexed_block(NBLK, BLKLEN, displs, MPI_INT, &t));
    MT_CHECK_MPI(MPI_Type_commit(&t));
    return t;
}

static int value(int src, int msg, int elem, int i) { return src * 1000000 + msg * 1000 + elem * 100 + i; }

static void fill_send(int *buf, int msg)
{
    for (int e = 0; e < COUNT; ++e)
        for (int b = 0; b < NBLK; ++b)
            for (int k = 0; k < BLKLEN; ++k) buf[e * SPAN + displs[b] + k] = value(mt_rank, msg, e, b * BLKLEN + k);
}

/* The received layout: the blocks hold the sender's values, the gaps keep -1. */
static void check_recv(const int *buf, int msg, int src)
{
    int expect[COUNT * SPAN];
    for (int i = 0; i < COUNT * SPAN; ++i) expect[i] = -1;
    for (int e = 0; e < COUNT; ++e)
        for (int b = 0; b < NBLK; ++b)
            for (int k = 0; k < BLKLEN; ++k) expect[e * SPAN + displs[b] + k] = value(src, msg, e, b * BLKLEN + k);
    for (int i = 0; i < COUNT * SPAN; ++i) {
        if (buf[i] != expect[i]) {
            mt_fail(__FILE__, __LINE__, "message %d from %d: int %d is %d, expected %d", msg, src, i,
                    buf[i], expect[i]);
            return;
        }
    }
}

typedef int (*post_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

static void round_trip(post_fn post, const char *name)
{
    static int rbuf[NMSG][COUNT * SPAN], sbuf[NMSG][COUNT * SPAN];
    MPI_Request rreq[NMSG], sreq[NMSG];
    MPI_Status st[NMSG];
    MPI_Comm comm;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_Datatype rtype = make_type(), stype = make_type();
    for (int m = 0; m < NMSG; ++m) {
        for (int i = 0; i < COUNT * SPAN; ++i) rbuf[m][i] = -1;
        MT_CHECK_MPI(MPI_Irecv(rbuf[m], COUNT, rtype, p2p_prev(), m, comm, &rreq[m]));
    }
    MT_CHECK_MPI(MPI_Type_free(&rtype));
    /* Every receive is posted before any send (MPI_Irsend needs it). */
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int m = 0; m < NMSG; ++m) {
        fill_send(sbuf[m], m);
        MT_CHECK_MPI(post(sbuf[m], COUNT, stype, p2p_next(), m, comm, &sreq[m]));
    }
    MT_CHECK_MPI(MPI_Type_free(&stype));
    MT_CHECK_MPI(MPI_Comm_free(&comm));
    MT_CHECK_MPI(MPI_Waitall(NMSG, sreq, st));
    MT_CHECK_MPI(MPI_Waitall(NMSG, rreq, st));
    for (int m = 0; m < NMSG; ++m) {
        MT_CHECK_EQ(st[m].MPI_SOURCE, p2p_prev());
        MT_CHECK_EQ(st[m].MPI_TAG, m);
        int count = -1;
        MT_CHECK_MPI(MPI_Get_count(&st[m], MPI_INT, &count));
        MT_CHECK_EQ(count, COUNT * NBLK * BLKLEN);
        check_recv(rbuf[m], m, p2p_prev());
    }
    if (mt_failures) fprintf(stderr, "[rank %d] %s with freed types failed\n", mt_rank, name);
}

/* Persistent requests keep their type and communicator across MPI_Start. */
static void persistent(void)
{
    static int rbuf[COUNT * SPAN], sbuf[COUNT * SPAN];
    MPI_Request req[2];
    MPI_Status st[2];
    MPI_Comm comm;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_Datatype rtype = make_type(), stype = make_type();
    MT_CHECK_MPI(MPI_Recv_init(rbuf, COUNT, rtype, p2p_prev(), 7, comm, &req[0]));
    MT_CHECK_MPI(MPI_Send_init(sbuf, COUNT, stype, p2p_next(), 7, comm, &req[1]));
    MT_CHECK_MPI(MPI_Type_free(&rtype));
    MT_CHECK_MPI(MPI_Type_free(&stype));
    MT_CHECK_MPI(MPI_Comm_free(&comm));
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < COUNT * SPAN; ++i) rbuf[i] = -1;
        fill_send(sbuf, round);
        MT_CHECK_MPI(MPI_Startall(2, req));
        MT_CHECK_MPI(MPI_Waitall(2, req, st));
        MT_CHECK_EQ(st[0].MPI_SOURCE, p2p_prev());
        check_recv(rbuf, round, p2p_prev());
    }
    MT_CHECK_MPI(MPI_Request_free(&req[0]));
    MT_CHECK_MPI(MPI_Request_free(&req[1]));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    round_trip(MPI_Isend, "MPI_Isend");
    round_trip(MPI_Issend, "MPI_Issend");
    round_trip(MPI_Irsend, "MPI_Irsend");
    persistent();
    return mt_finish();
}
