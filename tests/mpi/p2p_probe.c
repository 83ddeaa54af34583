/* Probing: MPI_Iprobe/MPI_Probe report a message's source, tag and payload
 * size (also of messages sent by rendezvous) without receiving it;
 * MPI_Improbe/MPI_Mprobe take the message out of matching, so that nothing
 * else can receive it, and MPI_Mrecv/MPI_Imrecv receive exactly that
 * message, in any order; MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC. A probed
 * synchronous send does not complete before its receive is posted. */
#include "p2p.h"

static const size_t sizes[] = {0, 1, 4000, 65537, 1 * MiB, 4 * MiB + 1};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static unsigned seed_of(int src, int tag) { return (unsigned)(src * 1000 + tag); }

static MPI_Request isend_pattern(unsigned char *buf, size_t n, int tag)
{
    MPI_Request req;
    mt_fill(buf, n, seed_of(mt_rank, tag));
    MT_CHECK_MPI(MPI_Isend(buf, (int)n, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &req));
    return req;
}

/* Iprobe finds nothing before the peer sends (it sends after the barrier);
 * then Probe and Iprobe, with exact and wildcard source and tag, report the
 * message, repeatedly, and the receive gets it. */
static void probe_then_recv(size_t n, int tag)
{
    unsigned char *out = p2p_malloc(n), *in = p2p_guarded_alloc(n, 0);
    MPI_Status st;
    int flag = 1;
    MT_CHECK_MPI(MPI_Iprobe(p2p_prev(), tag, MPI_COMM_WORLD, &flag, &st));
    MT_CHECK(!flag);
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Request sreq = isend_pattern(out, n, tag);

    MT_CHECK_MPI(MPI_Probe(p2p_prev(), tag, MPI_COMM_WORLD, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    /* Another probe with wildcards sees the same message again. */
    flag = 0;
    while (!flag) MT_CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    if (n % sizeof(int)) {
        int count = 0;
        MT_CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        MT_CHECK_EQ(count, MPI_UNDEFINED);
    }
    MT_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    P2P_CHECK_DATA(in, n, seed_of(p2p_prev(), tag));
    P2P_CHECK_GUARDS(in, n);
    MT_CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    /* Nothing left on this tag: the barrier orders this probe after every
     * send of it (later tests may already be sending on other tags). */
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st));
    MT_CHECK(!flag);
    free(out);
    p2p_guarded_free(in);
}

/* Two messages with the same source and tag: Mprobe matches them in order
 * and each handle receives its own message, whichever is received first and
 * however (Mrecv, Imrecv). A matched message is invisible to probes. */
static void mprobe_pair(size_t n1, size_t n2, int tag, int use_improbe, int use_imrecv)
{
    unsigned char *out1 = p2p_malloc(n1), *out2 = p2p_malloc(n2);
    unsigned char *in1 = p2p_guarded_alloc(n1, 0), *in2 = p2p_guarded_alloc(n2, 0);
    MPI_Request s[2];
    MPI_Message m[2];
    MPI_Status st;
    s[0] = isend_pattern(out1, n1, tag);
    mt_fill(out2, n2, seed_of(mt_rank, tag) + 1);
    MT_CHECK_MPI(MPI_Isend(out2, (int)n2, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &s[1]));

    for (int i = 0; i < 2; i++) {
        size_t n = i ? n2 : n1;
        if (use_improbe) {
            int flag = 0;
            while (!flag)
                MT_CHECK_MPI(MPI_Improbe(p2p_prev(), tag, MPI_COMM_WORLD, &flag, &m[i], &st));
        } else {
            MT_CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &m[i], &st));
        }
        MT_CHECK(m[i] != MPI_MESSAGE_NULL && m[i] != MPI_MESSAGE_NO_PROC);
        P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    }
    int flag = 1;
    /* Both sends are known to have arrived (matched above); nothing else is. */
    MT_CHECK_MPI(MPI_Iprobe(p2p_prev(), tag, MPI_COMM_WORLD, &flag, &st));
    MT_CHECK(!flag);

    /* The second message is received first. */
    for (int i = 1; i >= 0; i--) {
        size_t n = i ? n2 : n1;
        unsigned char *in = i ? in2 : in1;
        if (use_imrecv) {
            MPI_Request r;
            MT_CHECK_MPI(MPI_Imrecv(in, (int)n, MPI_BYTE, &m[i], &r));
            MT_CHECK_MPI(MPI_Wait(&r, &st));
        } else {
            MT_CHECK_MPI(MPI_Mrecv(in, (int)n, MPI_BYTE, &m[i], &st));
        }
        MT_CHECK(m[i] == MPI_MESSAGE_NULL);
        P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
        P2P_CHECK_DATA(in, n, seed_of(p2p_prev(), tag) + (unsigned)i);
        P2P_CHECK_GUARDS(in, n);
    }
    MT_CHECK_MPI(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));
    free(out1);
    free(out2);
    p2p_guarded_free(in1);
    p2p_guarded_free(in2);
}

/* A receive posted while a message is held by an Mprobe handle must not get
 * that message but the next one. */
static void mprobe_hides_from_recv(int tag)
{
    int a = 11, b = 22, got = 0;
    MPI_Request s[2];
    MPI_Message m;
    MPI_Status st;
    MT_CHECK_MPI(MPI_Isend(&a, 1, MPI_INT, p2p_next(), tag, MPI_COMM_WORLD, &s[0]));
    MT_CHECK_MPI(MPI_Mprobe(p2p_prev(), tag, MPI_COMM_WORLD, &m, &st));
    MT_CHECK_MPI(MPI_Isend(&b, 1, MPI_INT, p2p_next(), tag, MPI_COMM_WORLD, &s[1]));
    MT_CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_INT, 1);
    MT_CHECK_EQ(got, 22);
    MT_CHECK_MPI(MPI_Mrecv(&got, 1, MPI_INT, &m, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_INT, 1);
    MT_CHECK_EQ(got, 11);
    MT_CHECK_MPI(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));
}

/* Probing MPI_PROC_NULL succeeds at once with the MPI_PROC_NULL status;
 * matched probes give MPI_MESSAGE_NO_PROC, whose receive is a no-op. */
static void proc_null(void)
{
    MPI_Status st;
    MPI_Message m = MPI_MESSAGE_NULL;
    int flag = 0, buf = 5;
    MT_CHECK_MPI(MPI_Probe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
    P2P_CHECK_PROC_NULL_STATUS(&st);
    MT_CHECK_MPI(MPI_Iprobe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    MT_CHECK(flag);
    P2P_CHECK_PROC_NULL_STATUS(&st);

    MT_CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &m, &st));
    MT_CHECK(m == MPI_MESSAGE_NO_PROC);
    P2P_CHECK_PROC_NULL_STATUS(&st);
    MT_CHECK_MPI(MPI_Mrecv(&buf, 1, MPI_INT, &m, &st));
    MT_CHECK(m == MPI_MESSAGE_NULL);
    P2P_CHECK_PROC_NULL_STATUS(&st);

    flag = 0;
    MT_CHECK_MPI(MPI_Improbe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &m, &st));
    MT_CHECK(flag);
    MT_CHECK(m == MPI_MESSAGE_NO_PROC);
    P2P_CHECK_PROC_NULL_STATUS(&st);
    MPI_Request r;
    MT_CHECK_MPI(MPI_Imrecv(&buf, 1, MPI_INT, &m, &r));
    MT_CHECK(m == MPI_MESSAGE_NULL);
    MT_CHECK_MPI(MPI_Wait(&r, &st));
    P2P_CHECK_PROC_NULL_STATUS(&st);
    MT_CHECK_EQ(buf, 5);
}

/* MPI_Issend to the next rank; once every rank's receiver has probed it
 * (MPI_Iprobe, then MPI_Probe), no send may complete: only a matching
 * receive completes a synchronous send, a probe is none. The 32- and
 * 152-byte messages have the sizes of the engine's own messages, which a
 * probe must read to tell apart. */
static void probed_ssend_waits(size_t n, int tag)
{
    unsigned char *out = p2p_malloc(n), *in = p2p_guarded_alloc(n, 0);
    MPI_Request sreq;
    MPI_Status st;
    int flag = 0;
    mt_fill(out, n, seed_of(mt_rank, tag));
    MT_CHECK_MPI(MPI_Issend(out, (int)n, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD, &sreq));
    while (!flag) MT_CHECK_MPI(MPI_Iprobe(p2p_prev(), tag, MPI_COMM_WORLD, &flag, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    MT_CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* every message probed */
    flag = 0;
    for (int i = 0; i < 200 && !flag; i++) {
        MT_CHECK_MPI(MPI_Test(&sreq, &flag, MPI_STATUS_IGNORE));
        if (flag) {
            fprintf(stderr, "rank %d: MPI_Issend of %zu bytes completed before its receive\n",
                    mt_rank, n);
        }
    }
    MT_CHECK(!flag);
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* every send tested */
    MT_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)n);
    P2P_CHECK_DATA(in, n, seed_of(p2p_prev(), tag));
    P2P_CHECK_GUARDS(in, n);
    if (!flag) MT_CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    free(out);
    p2p_guarded_free(in);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int tag = 1;
    for (size_t i = 0; i < NSIZES; i++) probe_then_recv(sizes[i], tag++);
    for (size_t i = 0; i < NSIZES; i++) {
        size_t other = sizes[NSIZES - 1 - i];
        for (int v = 0; v < 4; v++) mprobe_pair(sizes[i], other, tag++, v & 1, v >> 1);
    }
    mprobe_hides_from_recv(tag++);
    proc_null();
    static const size_t ssend_sizes[] = {0, 1, 31, 32, 33, 152, 4000, 65537, 1 * MiB};
    for (size_t i = 0; i < sizeof(ssend_sizes) / sizeof(ssend_sizes[0]); i++)
        probed_ssend_waits(ssend_sizes[i], tag++);
    return mt_finish();
}
