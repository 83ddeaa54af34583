/* MPI_THREAD_MULTIPLE traffic shared by the host test (p2p_threads.c) and
 * the device test (tests/mpi_device/device_threads.c): P2P_NTHREADS threads
 * per rank exchange messages around the ring at the same time, either each
 * on its own duplicate of MPI_COMM_WORLD or all on one shared communicator
 * where only the tags tell the threads apart (with MPI_ANY_SOURCE receives
 * and matched probes). Every message's source, tag, count and bytes are
 * checked. Where the buffers live is up to the caller (p2p_thread_mem_t). */
#ifndef GPUWIRE_TESTS_P2P_THREADS_H
#define GPUWIRE_TESTS_P2P_THREADS_H
#include "p2p.h"

#include <pthread.h>

enum { P2P_NTHREADS = 4, P2P_ITERS = 40 };

/* A kind of memory. Each function returns 0 on success; alloc and free run
 * on the thread that uses the buffer, after thread_init. */
typedef struct {
    const char *name;
    int (*thread_init)(void);                        /* may be NULL */
    int (*alloc)(void **p, size_t n);
    int (*release)(void *p);
    int (*put)(void *dst, const void *src, size_t n); /* host -> this memory */
    int (*get)(void *dst, const void *src, size_t n); /* this memory -> host */
} p2p_thread_mem_t;

/* Message sizes, cycled through by thread id and iteration. */
typedef struct {
    const size_t *sizes;
    int n;
} p2p_thread_sizes_t;

static pthread_mutex_t p2p_fail_lock = PTHREAD_MUTEX_INITIALIZER;
/* mt_fail is not thread-safe; checks from threads go through this lock. */
#define T_CHECK(cond)                                                                       \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            pthread_mutex_lock(&p2p_fail_lock);                                             \
            mt_fail(__FILE__, __LINE__, "thread %d (%s -> %s): check failed: %s", t->id,    \
                    t->send_mem->name, t->recv_mem->name, #cond);                           \
            pthread_mutex_unlock(&p2p_fail_lock);                                           \
        }                                                                                   \
    } while (0)
#define T_CHECK_MPI(call) T_CHECK((call) == MPI_SUCCESS)

struct p2p_thread_arg {
    int id;
    MPI_Comm comm;
    int shared; /* comm is shared by all threads */
    const p2p_thread_mem_t *send_mem, *recv_mem;
    p2p_thread_sizes_t sizes;
};

static inline unsigned p2p_thread_seed(int rank, int id, int it)
{
    return (unsigned)(rank * 100000 + id * 1000 + it);
}

static void *p2p_thread_worker(void *p)
{
    struct p2p_thread_arg *t = p;
    const int base = t->shared ? 1000 * (t->id + 1) : 0;
    size_t max = 0;
    for (int i = 0; i < t->sizes.n; ++i)
        if (t->sizes.sizes[i] > max) max = t->sizes.sizes[i];
    if (t->send_mem->thread_init) T_CHECK(t->send_mem->thread_init() == 0);
    if (t->recv_mem->thread_init) T_CHECK(t->recv_mem->thread_init() == 0);
    unsigned char *host = p2p_malloc(max);
    void *out = NULL, *in = NULL;
    T_CHECK(t->send_mem->alloc(&out, max) == 0);
    T_CHECK(t->recv_mem->alloc(&in, max) == 0);
    if (!out || !in) {
        fprintf(stderr, "[rank %d] thread %d: no %zu-byte buffers (%s, %s)\n", mt_rank, t->id,
                max, t->send_mem->name, t->recv_mem->name);
        MPI_Abort(MPI_COMM_WORLD, 1); /* the peers would wait for this thread forever */
    }
    for (int it = 0; it < P2P_ITERS; it++) {
        size_t n = t->sizes.sizes[(t->id + it) % t->sizes.n];
        int tag = base + it % 7;
        MPI_Request r[2];
        MPI_Status st;
        mt_fill(host, n, p2p_thread_seed(mt_rank, t->id, it));
        T_CHECK(t->send_mem->put(out, host, n) == 0);
        memset(host, 0, n);
        T_CHECK(t->recv_mem->put(in, host, n) == 0);
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
        T_CHECK(t->recv_mem->get(host, in, n) == 0);
        T_CHECK(mt_check_fill(host, n, p2p_thread_seed(p2p_prev(), t->id, it)) < 0);
    }
    T_CHECK(t->send_mem->release(out) == 0);
    T_CHECK(t->recv_mem->release(in) == 0);
    free(host);
    return NULL;
}

/* Runs the threads once; mem_of(thread id, &send, &recv) picks each
 * thread's memory. */
typedef void (*p2p_thread_mem_of_t)(int id, const p2p_thread_mem_t **send,
                                    const p2p_thread_mem_t **recv);

static void p2p_run_threads(int shared, p2p_thread_mem_of_t mem_of, p2p_thread_sizes_t sizes)
{
    pthread_t th[P2P_NTHREADS];
    struct p2p_thread_arg args[P2P_NTHREADS];
    MPI_Comm shared_comm = MPI_COMM_NULL;
    if (shared) MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &shared_comm));
    for (int i = 0; i < P2P_NTHREADS; i++) {
        args[i].id = i;
        args[i].shared = shared;
        args[i].comm = shared_comm;
        args[i].sizes = sizes;
        mem_of(i, &args[i].send_mem, &args[i].recv_mem);
        if (!shared) MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &args[i].comm));
    }
    for (int i = 0; i < P2P_NTHREADS; i++)
        if (pthread_create(&th[i], NULL, p2p_thread_worker, &args[i]))
            mt_fail(__FILE__, __LINE__, "pthread_create");
    for (int i = 0; i < P2P_NTHREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < P2P_NTHREADS; i++)
        if (!shared) MT_CHECK_MPI(MPI_Comm_free(&args[i].comm));
    if (shared) MT_CHECK_MPI(MPI_Comm_free(&shared_comm));
}

/* Host memory. */
static int p2p_host_alloc(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    return *p ? 0 : -1;
}
static int p2p_host_release(void *p)
{
    free(p);
    return 0;
}
static int p2p_host_copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
    return 0;
}
static const p2p_thread_mem_t p2p_host_mem = {"host", NULL, p2p_host_alloc, p2p_host_release,
                                              p2p_host_copy, p2p_host_copy};

#endif
