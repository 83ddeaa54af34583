/* Large non-contiguous host messages: 64 blocks of 64 KiB at a stride of
 * 80 KiB (4 MiB of data), which pml gpuwire packs and unpacks piece by
 * piece as UCX moves them rather than staging them whole. Blocking,
 * non-blocking and synchronous sends; a vector received as contiguous bytes
 * and back; a receive after a probe (then staged); a truncated receive.
 * Every byte the type covers must hold the data, every byte in its gaps
 * must keep the receiver's marker. Correctness only: the time is measured
 * by ci/bench_scale.sh. */
#include "p2p.h"

#define BLOCKS 64
#define BLOCK (64 * KiB)
#define STRIDE (80 * KiB)
#define SPAN ((BLOCKS - 1) * STRIDE + BLOCK)
#define MARK 0x5C

static MPI_Datatype vec;

/* Checks a received vector: block b holds bytes [b*BLOCK, (b+1)*BLOCK) of
 * the sender's pattern (seed), gaps keep MARK; only the first nblocks. */
static void check_vector(const unsigned char *buf, int nblocks, unsigned seed, const char *what)
{
    unsigned char *want = p2p_malloc((size_t)BLOCKS * BLOCK);
    mt_fill(want, (size_t)BLOCKS * BLOCK, seed);
    for (size_t b = 0; b < BLOCKS; b++) {
        const unsigned char *got = buf + b * STRIDE;
        if ((int)b < nblocks && memcmp(got, want + b * BLOCK, BLOCK) != 0)
            mt_fail(__FILE__, __LINE__, "%s: block %zu wrong", what, b);
        if ((int)b >= nblocks && p2p_find_not(got, BLOCK, MARK) >= 0)
            mt_fail(__FILE__, __LINE__, "%s: block %zu written past the message", what, b);
        if (b + 1 < BLOCKS && p2p_find_not(got + BLOCK, STRIDE - BLOCK, MARK) >= 0)
            mt_fail(__FILE__, __LINE__, "%s: gap after block %zu written", what, b);
    }
    free(want);
}

/* A vector buffer holding the pattern of seed in its blocks, MARK in the gaps. */
static unsigned char *vector_source(unsigned seed)
{
    unsigned char *packed = p2p_malloc((size_t)BLOCKS * BLOCK);
    unsigned char *buf = p2p_malloc(SPAN);
    mt_fill(packed, (size_t)BLOCKS * BLOCK, seed);
    memset(buf, MARK, SPAN);
    for (size_t b = 0; b < BLOCKS; b++) memcpy(buf + b * STRIDE, packed + b * BLOCK, BLOCK);
    free(packed);
    return buf;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    MT_CHECK_MPI(MPI_Type_vector(BLOCKS, (int)BLOCK, (int)STRIDE, MPI_BYTE, &vec));
    MT_CHECK_MPI(MPI_Type_commit(&vec));
    const int to = p2p_next(), from = p2p_prev();
    unsigned char *src = vector_source(11 + mt_rank);
    unsigned char *dst = p2p_malloc(SPAN);
    const unsigned seed_from = 11 + from;
    MPI_Status st;
    int count;

    /* Blocking, both ends a vector. */
    memset(dst, MARK, SPAN);
    MT_CHECK_MPI(MPI_Sendrecv(src, 1, vec, to, 1, dst, 1, vec, from, 1, MPI_COMM_WORLD, &st));
    MT_CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
    MT_CHECK_EQ(count, BLOCKS * BLOCK);
    check_vector(dst, BLOCKS, seed_from, "sendrecv");

    /* Non-blocking, the receive posted first; then synchronous mode. */
    for (int sync = 0; sync < 2; sync++) {
        MPI_Request r[2];
        memset(dst, MARK, SPAN);
        MT_CHECK_MPI(MPI_Irecv(dst, 1, vec, from, 2, MPI_COMM_WORLD, &r[0]));
        MPI_Barrier(MPI_COMM_WORLD);
        if (sync)
            MT_CHECK_MPI(MPI_Issend(src, 1, vec, to, 2, MPI_COMM_WORLD, &r[1]));
        else
            MT_CHECK_MPI(MPI_Isend(src, 1, vec, to, 2, MPI_COMM_WORLD, &r[1]));
        MT_CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        check_vector(dst, BLOCKS, seed_from, sync ? "issend" : "isend");
    }

    /* A vector into contiguous bytes, and contiguous bytes into a vector. */
    unsigned char *flat = p2p_malloc((size_t)BLOCKS * BLOCK);
    MT_CHECK_MPI(MPI_Sendrecv(src, 1, vec, to, 3, flat, BLOCKS * (int)BLOCK, MPI_BYTE, from, 3,
                              MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MT_CHECK_EQ(mt_check_fill(flat, (size_t)BLOCKS * BLOCK, seed_from), -1);
    mt_fill(flat, (size_t)BLOCKS * BLOCK, 11 + mt_rank);
    memset(dst, MARK, SPAN);
    MT_CHECK_MPI(MPI_Sendrecv(flat, BLOCKS * (int)BLOCK, MPI_BYTE, to, 4, dst, 1, vec, from, 4,
                              MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    check_vector(dst, BLOCKS, seed_from, "contiguous into vector");

    /* Received after a probe. */
    MPI_Request sr;
    memset(dst, MARK, SPAN);
    MT_CHECK_MPI(MPI_Isend(src, 1, vec, to, 5, MPI_COMM_WORLD, &sr));
    MT_CHECK_MPI(MPI_Probe(from, 5, MPI_COMM_WORLD, &st));
    MT_CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
    MT_CHECK_EQ(count, BLOCKS * BLOCK);
    MT_CHECK_MPI(MPI_Recv(dst, 1, vec, from, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    check_vector(dst, BLOCKS, seed_from, "after a probe");

    /* Half the blocks sent, the whole vector posted: the rest stays untouched. */
    MPI_Datatype half;
    MT_CHECK_MPI(MPI_Type_vector(BLOCKS / 2, (int)BLOCK, (int)STRIDE, MPI_BYTE, &half));
    MT_CHECK_MPI(MPI_Type_commit(&half));
    memset(dst, MARK, SPAN);
    MT_CHECK_MPI(MPI_Sendrecv(src, 1, half, to, 6, dst, 1, vec, from, 6, MPI_COMM_WORLD, &st));
    MT_CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
    MT_CHECK_EQ(count, BLOCKS / 2 * BLOCK);
    check_vector(dst, BLOCKS / 2, seed_from, "shorter message");

    /* The whole vector into half of one: truncated. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MT_CHECK_MPI(MPI_Isend(src, 1, vec, to, 7, MPI_COMM_WORLD, &sr));
    int rc = MPI_Recv(dst, 1, half, from, 7, MPI_COMM_WORLD, &st);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    MT_CHECK_EQ(cls, MPI_ERR_TRUNCATE);
    MT_CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));

    MPI_Type_free(&half);
    MPI_Type_free(&vec);
    free(flat);
    free(src);
    free(dst);
    return mt_finish();
}
