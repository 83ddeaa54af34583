/* The engine's counters are MPI_T performance variables: find
 * pml_gpuwire_sends and _bytes_sent, read them, send messages, and check the
 * counters grew by at least what was sent. */
#include <string.h>

#include "mpitest.h"
#include "mpi_pvar.h"

static unsigned long long read_pvar(MPI_T_pvar_session session, MPI_T_pvar_handle handle)
{
    unsigned long long v = 0;
    MT_CHECK_EQ(MPI_T_pvar_read(session, handle, &v), MPI_SUCCESS);
    return v;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MT_CHECK_EQ(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided), MPI_SUCCESS);
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);

    int idx_sends = find_pvar("pml_gpuwire_sends");
    int idx_bytes = find_pvar("pml_gpuwire_bytes_sent");
    MT_CHECK(idx_sends >= 0);
    MT_CHECK(idx_bytes >= 0);
    if (idx_sends >= 0 && idx_bytes >= 0) {
        MPI_T_pvar_session session;
        MPI_T_pvar_handle hs, hb;
        int count = 0;
        MT_CHECK_EQ(MPI_T_pvar_session_create(&session), MPI_SUCCESS);
        MT_CHECK_EQ(MPI_T_pvar_handle_alloc(session, idx_sends, NULL, &hs, &count), MPI_SUCCESS);
        MT_CHECK_EQ(MPI_T_pvar_handle_alloc(session, idx_bytes, NULL, &hb, &count), MPI_SUCCESS);
        unsigned long long s0 = read_pvar(session, hs), b0 = read_pvar(session, hb);

        const int n = 25;
        char buf[1000];
        memset(buf, 7, sizeof(buf));
        int peer = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
        for (int i = 0; i < n; ++i) {
            MT_CHECK_MPI(MPI_Sendrecv_replace(buf, sizeof(buf), MPI_BYTE, peer, i, from, i,
                                              MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
        unsigned long long s1 = read_pvar(session, hs), b1 = read_pvar(session, hb);
        if (s1 - s0 < (unsigned long long)n || b1 - b0 < (unsigned long long)n * sizeof(buf)) {
            mt_fail(__FILE__, __LINE__, "counters grew by %llu sends / %llu bytes, expected >= %d / %zu",
                    s1 - s0, b1 - b0, n, n * sizeof(buf));
        }
        MPI_T_pvar_handle_free(session, &hs);
        MPI_T_pvar_handle_free(session, &hb);
        MPI_T_pvar_session_free(&session);
    }
    /* MPI_T_finalize after MPI_Finalize crashes Open MPI 4.1.4 itself (even
     * with pml ob1 and a program that does nothing else): end MPI_T first. */
    MPI_T_finalize();
    return mt_finish();
}
