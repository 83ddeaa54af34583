/* Message sizes: 0, 1, odd sizes, powers of two from 1 KiB to 1 MiB and one
 * byte either side (where transports switch protocols), and 64 MiB; around
 * the ring and from a rank to itself. The receive buffer is 100 bytes larger
 * than the message: those bytes must stay as they were. */
#include "p2p.h"

#define SLACK 100

static size_t sizes[64];
static int nsizes;
static size_t capacity; /* of the guarded receive buffer */

static void make_sizes(void)
{
    static const size_t small[] = {0, 1, 2, 3, 7, 13, 31, 63, 127, 255, 511, 1000, 1023};
    for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++) sizes[nsizes++] = small[i];
    for (size_t p = 1 * KiB; p <= 1 * MiB; p *= 2) {
        sizes[nsizes++] = p - 1;
        sizes[nsizes++] = p;
        sizes[nsizes++] = p + 1;
    }
    sizes[nsizes++] = 3 * MiB + 333;
    sizes[nsizes++] = 64 * MiB;
}

static void check_received(const unsigned char *in, const MPI_Status *st, int src, int tag,
                           size_t n, unsigned seed)
{
    P2P_CHECK_STATUS(st, src, tag, MPI_BYTE, (int)n);
    P2P_CHECK_DATA(in, n, seed);
    long bad = p2p_find_not(in + n, SLACK, 0x5C);
    if (bad >= 0) mt_fail(__FILE__, __LINE__, "byte %ld past a %zu-byte message written", bad, n);
    P2P_CHECK_GUARDS(in, capacity);
}

/* One message around the ring; big ones on the world-wide buffer pair. */
static void ring(unsigned char *out, unsigned char *in, size_t n, int tag)
{
    MPI_Request r;
    MPI_Status st;
    mt_fill(out, n, (unsigned)(mt_rank * 65599 + n));
    memset(in, 0x5C, n + SLACK);
    MT_CHECK_MPI(MPI_Irecv(in, (int)(n + SLACK), MPI_BYTE, p2p_prev(), tag, MPI_COMM_WORLD, &r));
    MT_CHECK_MPI(MPI_Send(out, (int)n, MPI_BYTE, p2p_next(), tag, MPI_COMM_WORLD));
    MT_CHECK_MPI(MPI_Wait(&r, &st));
    int before = mt_failures;
    check_received(in, &st, p2p_prev(), tag, n, (unsigned)(p2p_prev() * 65599 + n));
    if (mt_failures != before) fprintf(stderr, "[rank %d]   ring, %zu bytes\n", mt_rank, n);
}

/* To itself: receive posted first, send first (non-blocking), and a
 * synchronous one that can only complete once the receive is posted. */
static void self(unsigned char *out, unsigned char *in, size_t n, int tag)
{
    MPI_Request r, s;
    MPI_Status st;
    int before = mt_failures;
    for (int variant = 0; variant < 3; variant++) {
        unsigned seed = (unsigned)(n * 3 + variant);
        mt_fill(out, n, seed);
        memset(in, 0x5C, n + SLACK);
        if (variant == 0) {
            MT_CHECK_MPI(MPI_Irecv(in, (int)(n + SLACK), MPI_BYTE, mt_rank, tag, MPI_COMM_WORLD, &r));
            MT_CHECK_MPI(MPI_Send(out, (int)n, MPI_BYTE, mt_rank, tag, MPI_COMM_WORLD));
            MT_CHECK_MPI(MPI_Wait(&r, &st));
        } else {
            if (variant == 1)
                MT_CHECK_MPI(MPI_Isend(out, (int)n, MPI_BYTE, mt_rank, tag, MPI_COMM_WORLD, &s));
            else
                MT_CHECK_MPI(MPI_Issend(out, (int)n, MPI_BYTE, mt_rank, tag, MPI_COMM_WORLD, &s));
            MT_CHECK_MPI(MPI_Recv(in, (int)(n + SLACK), MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
            MT_CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        }
        check_received(in, &st, mt_rank, tag, n, seed);
    }
    if (mt_failures != before) fprintf(stderr, "[rank %d]   to itself, %zu bytes\n", mt_rank, n);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    make_sizes();
    size_t max = sizes[nsizes - 1];
    capacity = max + SLACK;
    unsigned char *out = p2p_malloc(max), *in = p2p_guarded_alloc(capacity, 0);
    for (int i = 0; i < nsizes; i++) ring(out, in, sizes[i], i);
    for (int i = 0; i < nsizes; i++) self(out, in, sizes[i], 1000 + i);
    /* The same sizes with MPI_Sendrecv. */
    for (int i = 0; i < nsizes; i += 5) {
        MPI_Status st;
        size_t n = sizes[i];
        mt_fill(out, n, (unsigned)(mt_rank + 17 * n));
        memset(in, 0x5C, n + SLACK);
        MT_CHECK_MPI(MPI_Sendrecv(out, (int)n, MPI_BYTE, p2p_next(), 7, in, (int)(n + SLACK), MPI_BYTE,
                                  p2p_prev(), 7, MPI_COMM_WORLD, &st));
        check_received(in, &st, p2p_prev(), 7, n, (unsigned)(p2p_prev() + 17 * n));
    }
    free(out);
    p2p_guarded_free(in);
    return mt_finish();
}
