/* MPI_THREAD_MULTIPLE: four threads per rank exchange messages at the same
 * time around the ring, first each on its own duplicate of
 * MPI_COMM_WORLD, then all on one shared communicator where only the tags
 * tell the threads apart (with MPI_ANY_SOURCE receives and probes). Every
 * message is checked. Skipped when the library does not provide
 * MPI_THREAD_MULTIPLE. */
#include "p2p.h"

#include <pthread.h>

enum { NTHREADS = 4, ITERS = 40 };

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
/* mt_fail is not thread-safe; checks from threads go through this lock. */
#define T_CHECK(cond)                                                             \
    do {                                                                          \
        if (!(cond)) {                                                            \
            pthread_mutex_lock(&fail_lock);                                       \
            mt_fail(__FILE__, __LINE__, "thread %d: check failed: %s", t->id, #cond); \
            pthread_mutex_unlock(&fail_lock);                                     \
        }                                                                         \
    } while (0)
#define T_CHECK_MPI(call) T_CHECK((call) == MPI_SUCCESS)

struct thread_arg {
    int id;
    MPI_Comm comm;
    int shared; /* comm is shared by all threads */
};

static size_t size_of(int id, int it)
{
    static const size_t sz[] = {0, 1, 100, 4096, 9000, 70000, 300000};
    return sz[(id + it) % 7];
}

static unsigned seed_of(int rank, int id, int it) { return (unsigned)(rank * 100000 + id * 1000 + it); }

static void *worker(void *p)
{
    struct thread_arg *t = p;
    const int base = t->shared ? 1000 * (t->id + 1) : 0;
    unsigned char *out = p2p_malloc(300000), *in = p2p_malloc(300000);
    for (int it = 0; it < ITERS; it++) {
        size_t n = size_of(t->id, it);
        int tag = base + it % 7;
        MPI_Request r[2];
        MPI_Status st;
        mt_fill(out, n, seed_of(mt_rank, t->id, it));
        memset(in, 0, n);
        switch (it % 3) {
        case 0: /* non-blocking both ways */
            T_CHECK_MPI(MPI_Irecv(in, (int)n, MPI_BYTE, p2p_prev(), tag, t->comm, &r[0]));
            T_CHECK_MPI(MPI_Isend(out, (int)n, MPI_BYTE, p2p_next(), tag, t->comm, &r[1]));
            T_CHECK_MPI(MPI_Wait(&r[0], &st));
            T_CHECK_MPI(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
            break;
        case 1: /* synchronous send, wildcard source */
            T_CHECK_MPI(MPI_Issend(out, (int)n, MPI_BYTE, p2p_next(), tag, t->comm, &r[1]));
            T_CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, MPI_ANY_SOURCE, tag, t->comm, &st));
            T_CHECK_MPI(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
            break;
        default: { /* matched probe, so no other thread can take the message */
            MPI_Message m;
            T_CHECK_MPI(MPI_Isend(out, (int)n, MPI_BYTE, p2p_next(), tag, t->comm, &r[1]));
            T_CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, tag, t->comm, &m, &st));
            int count = -1;
            MPI_Get_count(&st, MPI_BYTE, &count);
            T_CHECK(count == (int)n);
            T_CHECK_MPI(MPI_Mrecv(in, (int)n, MPI_BYTE, &m, &st));
            T_CHECK_MPI(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        }
        }
        int count = -1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        T_CHECK(st.MPI_SOURCE == p2p_prev());
        T_CHECK(st.MPI_TAG == tag);
        T_CHECK(count == (int)n);
        T_CHECK(mt_check_fill(in, n, seed_of(p2p_prev(), t->id, it)) < 0);
    }
    free(out);
    free(in);
    return NULL;
}

static void run_threads(int shared)
{
    pthread_t th[NTHREADS];
    struct thread_arg args[NTHREADS];
    MPI_Comm shared_comm = MPI_COMM_NULL;
    if (shared) MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &shared_comm));
    for (int i = 0; i < NTHREADS; i++) {
        args[i].id = i;
        args[i].shared = shared;
        args[i].comm = shared_comm;
        if (!shared) MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &args[i].comm));
    }
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&th[i], NULL, worker, &args[i])) mt_fail(__FILE__, __LINE__, "pthread_create");
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        if (!shared) MT_CHECK_MPI(MPI_Comm_free(&args[i].comm));
    if (shared) MT_CHECK_MPI(MPI_Comm_free(&shared_comm));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) return mt_skip("MPI_THREAD_MULTIPLE not provided");
    run_threads(0);
    run_threads(1);
    return mt_finish();
}
