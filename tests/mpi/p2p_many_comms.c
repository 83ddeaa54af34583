/* Many communicators, each holding a pending message: 5,000 duplicates of
 * MPI_COMM_WORLD; every rank sends one message to the next rank on each
 * (tag and value depend on the communicator) before any is received; then
 * each is received in reverse order (every third with wildcards) and freed
 * while the others still hold theirs. Every value, tag and source must be
 * the one sent on that communicator. */
#include "p2p.h"

#define NCOMMS 5000

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    MPI_Comm *c = p2p_malloc(sizeof(MPI_Comm) * NCOMMS);
    MPI_Request *r = p2p_malloc(sizeof(MPI_Request) * NCOMMS);
    int *out = p2p_malloc(sizeof(int) * NCOMMS);
    for (int i = 0; i < NCOMMS; i++) MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c[i]));
    const int to = p2p_next(), from = p2p_prev();
    for (int i = 0; i < NCOMMS; i++) {
        out[i] = i * 7 + mt_rank;
        MT_CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, to, i % 11, c[i], &r[i]));
    }
    MT_CHECK_MPI(MPI_Waitall(NCOMMS, r, MPI_STATUSES_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD); /* every message is pending at its receiver */
    for (int i = NCOMMS - 1; i >= 0; i--) {
        int v = -1;
        MPI_Status st;
        const int any = i % 3 == 0;
        MT_CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, any ? MPI_ANY_SOURCE : from,
                              any ? MPI_ANY_TAG : i % 11, c[i], &st));
        if (v != i * 7 + from || st.MPI_TAG != i % 11 || st.MPI_SOURCE != from)
            mt_fail(__FILE__, __LINE__, "communicator %d: value %d tag %d source %d", i, v,
                    st.MPI_TAG, st.MPI_SOURCE);
        MT_CHECK_MPI(MPI_Comm_free(&c[i]));
    }
    free(c);
    free(r);
    free(out);
    return mt_finish();
}
