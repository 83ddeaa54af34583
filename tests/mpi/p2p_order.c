/* Non-overtaking order: messages from one source on one communicator and tag
 * are received in the order they were sent, whatever their sizes (0 B to
 * 4 MiB, so eager and rendezvous ones interleave) and send modes (Isend,
 * Issend, Send, Ssend), with receives that are specific or wildcard, posted
 * before the sends, after them, or as they arrive. With MPI_ANY_TAG the
 * order holds across tags too. Every message carries its sequence number. */
#include "p2p.h"

enum { NMSG = 24 };
static size_t size_of(int k)
{
    static const size_t sz[NMSG] = {0,     1,     4 * MiB, 8,  1000, 65539, 0,    17,
                                    262144, 3,    1 * MiB, 4096, 2, 8192,  0,    12345,
                                    5,     100000, 64,      1,    4095, 0,     33,   7};
    return sz[k];
}
#define MAXSZ (4 * MiB)

/* Where message k's data starts in the sender's buffer of all messages. */
static size_t offset_of(int k)
{
    size_t off = 0;
    for (int i = 0; i < k; i++) off += size_of(i);
    return off;
}
#define SEND_BYTES offset_of(NMSG)

enum when { POSTED_BEFORE, POSTED_AFTER, AS_THEY_COME };
static const char *when_name[] = {"posted before", "posted after", "posted as they come"};

/* Sends NMSG messages to dst with a mix of send calls; blocking ones only
 * where the receiver receives while we send. tag < 0: tag varies by k. */
static void send_all(int dst, int tag, int allow_blocking, unsigned char *out, MPI_Request *r)
{
    for (int k = 0; k < NMSG; k++) {
        size_t n = size_of(k);
        int t = tag >= 0 ? tag : 100 + k % 5;
        unsigned char *p = out + offset_of(k);
        r[k] = MPI_REQUEST_NULL;
        mt_fill(p, n, (unsigned)(mt_rank * 1000 + k));
        switch (k % 4) {
        case 0: MT_CHECK_MPI(MPI_Isend(p, (int)n, MPI_BYTE, dst, t, MPI_COMM_WORLD, &r[k])); break;
        case 1: MT_CHECK_MPI(MPI_Issend(p, (int)n, MPI_BYTE, dst, t, MPI_COMM_WORLD, &r[k])); break;
        case 2:
            if (allow_blocking) MT_CHECK_MPI(MPI_Ssend(p, (int)n, MPI_BYTE, dst, t, MPI_COMM_WORLD));
            else MT_CHECK_MPI(MPI_Issend(p, (int)n, MPI_BYTE, dst, t, MPI_COMM_WORLD, &r[k]));
            break;
        default:
            if (allow_blocking) MT_CHECK_MPI(MPI_Send(p, (int)n, MPI_BYTE, dst, t, MPI_COMM_WORLD));
            else MT_CHECK_MPI(MPI_Isend(p, (int)n, MPI_BYTE, dst, t, MPI_COMM_WORLD, &r[k]));
        }
    }
}

/* Message k of a source must carry that source's pattern number k. */
static void check_kth(const unsigned char *in, const MPI_Status *st, int src, int k, int tag)
{
    size_t n = size_of(k);
    int t = tag >= 0 ? tag : 100 + k % 5;
    P2P_CHECK_STATUS(st, src, t, MPI_BYTE, (int)n);
    long bad = mt_check_fill(in, n, (unsigned)(src * 1000 + k));
    if (bad >= 0) mt_fail(__FILE__, __LINE__, "message %d from %d wrong at byte %ld", k, src, bad);
}

/* Around the ring: each rank sends to the next and receives from the
 * previous one. */
static void ring(enum when when, int wild_src, int wild_tag, int tag)
{
    unsigned char *out = p2p_malloc(SEND_BYTES);
    unsigned char *in = p2p_malloc((size_t)NMSG * MAXSZ);
    MPI_Request sr[NMSG], rr[NMSG];
    MPI_Status st[NMSG];
    int src = wild_src ? MPI_ANY_SOURCE : p2p_prev(), rtag = wild_tag ? MPI_ANY_TAG : tag;
    int before = mt_failures;

    if (when == POSTED_BEFORE) {
        for (int k = 0; k < NMSG; k++)
            MT_CHECK_MPI(MPI_Irecv(in + (size_t)k * MAXSZ, MAXSZ, MPI_BYTE, src, rtag,
                                   MPI_COMM_WORLD, &rr[k]));
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        send_all(p2p_next(), tag, 1, out, sr);
        MT_CHECK_MPI(MPI_Waitall(NMSG, rr, st));
    } else if (when == POSTED_AFTER) {
        send_all(p2p_next(), tag, 0, out, sr);
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int k = 0; k < NMSG; k++)
            MT_CHECK_MPI(MPI_Recv(in + (size_t)k * MAXSZ, MAXSZ, MPI_BYTE, src, rtag,
                                  MPI_COMM_WORLD, &st[k]));
    } else {
        /* Blocking sends on even ranks would leave nobody receiving on a
         * ring of one parity; odd ranks receive first. */
        int blocking = mt_rank % 2 == 0;
        if (blocking) {
            for (int k = 0; k < NMSG; k++)
                MT_CHECK_MPI(MPI_Irecv(in + (size_t)k * MAXSZ, MAXSZ, MPI_BYTE, src, rtag,
                                       MPI_COMM_WORLD, &rr[k]));
            send_all(p2p_next(), tag, 1, out, sr);
            MT_CHECK_MPI(MPI_Waitall(NMSG, rr, st));
        } else {
            send_all(p2p_next(), tag, 0, out, sr);
            for (int k = 0; k < NMSG; k++)
                MT_CHECK_MPI(MPI_Recv(in + (size_t)k * MAXSZ, MAXSZ, MPI_BYTE, src, rtag,
                                      MPI_COMM_WORLD, &st[k]));
        }
    }
    MT_CHECK_MPI(MPI_Waitall(NMSG, sr, MPI_STATUSES_IGNORE));
    for (int k = 0; k < NMSG; k++) check_kth(in + (size_t)k * MAXSZ, &st[k], p2p_prev(), k, tag);
    if (mt_failures != before)
        fprintf(stderr, "[rank %d]   in ring, receives %s, source %s, tag %s\n", mt_rank,
                when_name[when], wild_src ? "ANY" : "given", wild_tag ? "ANY" : "given");
    free(out);
    free(in);
}

/* Every other rank sends to rank 0 at once; rank 0 receives all with
 * MPI_ANY_SOURCE and checks the order per source. */
static void fan_in(int tag)
{
    if (mt_rank != 0) {
        unsigned char *out = p2p_malloc(SEND_BYTES);
        MPI_Request sr[NMSG];
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        send_all(0, tag, 0, out, sr);
        MT_CHECK_MPI(MPI_Waitall(NMSG, sr, MPI_STATUSES_IGNORE));
        free(out);
        return;
    }
    unsigned char *in = p2p_malloc(MAXSZ);
    int *next = calloc((size_t)mt_size, sizeof(int));
    MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < NMSG * (mt_size - 1); i++) {
        MPI_Status st;
        MT_CHECK_MPI(MPI_Recv(in, MAXSZ, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
        int src = st.MPI_SOURCE;
        if (src <= 0 || src >= mt_size) {
            mt_fail(__FILE__, __LINE__, "MPI_SOURCE %d", src);
            break;
        }
        check_kth(in, &st, src, next[src]++, tag);
    }
    free(next);
    free(in);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    for (int when = 0; when < 3; when++) {
        ring((enum when)when, 0, 0, 7);
        ring((enum when)when, 1, 1, 7);
        ring((enum when)when, 1, 1, -1); /* tags vary: order across tags */
    }
    ring(AS_THEY_COME, 0, 1, -1);
    fan_in(9);
    return mt_finish();
}
