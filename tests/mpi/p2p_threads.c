/* MPI_THREAD_MULTIPLE on host memory: four threads per rank exchange
 * messages at the same time around the ring, first each on its own
 * duplicate of MPI_COMM_WORLD, then all on one shared communicator where
 * only the tags tell the threads apart (p2p_threads.h). Skipped when the
 * library does not provide MPI_THREAD_MULTIPLE. */
#include "p2p_threads.h"

static void host_only(int id, const p2p_thread_mem_t **send, const p2p_thread_mem_t **recv)
{
    (void)id;
    *send = *recv = &p2p_host_mem;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {0, 1, 100, 4096, 9000, 70000, 300000};
    const p2p_thread_sizes_t sz = {sizes, (int)(sizeof(sizes) / sizeof(sizes[0]))};
    mt_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) return mt_skip("MPI_THREAD_MULTIPLE not provided");
    p2p_run_threads(0, host_only, sz);
    p2p_run_threads(1, host_only, sz);
    return mt_finish();
}
