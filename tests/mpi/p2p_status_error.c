/* The single-completion calls (MPI_Recv, MPI_Mrecv, MPI_Wait, MPI_Test,
 * MPI_Probe, MPI_Iprobe, MPI_Mprobe, MPI_Improbe) fill a status's source,
 * tag and count but leave its MPI_ERROR field as the caller set it: only
 * the multiple-completion calls write MPI_ERROR (and then only with
 * MPI_ERR_IN_STATUS). Each call here gets a status whose MPI_ERROR holds a
 * sentinel, which must survive a successful call; the other fields must be
 * right. Contiguous and derived-type receives both. */
#include "p2p.h"

#define SENTINEL 12345
#define N 100

static MPI_Datatype strided;

static void send_pattern(int tag)
{
    int out[N];
    for (int i = 0; i < N; ++i) out[i] = mt_rank * 1000 + tag * 10 + i;
    MT_CHECK_MPI(MPI_Send(out, N, MPI_INT, p2p_next(), tag, MPI_COMM_WORLD));
}

#define CHECK_STATUS(st, tag)                                                         \
    do {                                                                              \
        int _c = -1;                                                                  \
        MT_CHECK_EQ((st).MPI_ERROR, SENTINEL);                                        \
        MT_CHECK_EQ((st).MPI_SOURCE, p2p_prev());                                     \
        MT_CHECK_EQ((st).MPI_TAG, (tag));                                             \
        MT_CHECK_MPI(MPI_Get_count(&(st), MPI_INT, &_c));                             \
        MT_CHECK_EQ(_c, N);                                                           \
    } while (0)

static void check_data(const int *in, int tag, int stride)
{
    for (int i = 0; i < N; ++i) MT_CHECK_EQ(in[i * stride], p2p_prev() * 1000 + tag * 10 + i);
}

static MPI_Status fresh(void)
{
    MPI_Status st;
    memset(&st, 0, sizeof(st));
    st.MPI_ERROR = SENTINEL;
    return st;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    MT_CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_INT, &strided));
    MT_CHECK_MPI(MPI_Type_commit(&strided));
    int in[2 * N];
    MPI_Status st;
    MPI_Message msg;
    MPI_Request req;
    int flag;
    /* Each rank sends to its successor, receives from its predecessor; the
     * sends are small (eager), so a blocking send before the receive is safe. */
    int tag = 1;
    send_pattern(tag); /* MPI_Recv, contiguous */
    st = fresh();
    MT_CHECK_MPI(MPI_Recv(in, N, MPI_INT, p2p_prev(), tag, MPI_COMM_WORLD, &st));
    CHECK_STATUS(st, tag);
    check_data(in, tag, 1);

    tag = 2; /* MPI_Recv, derived type: N ints every other int */
    send_pattern(tag);
    st = fresh();
    MT_CHECK_MPI(MPI_Recv(in, 1, strided, p2p_prev(), tag, MPI_COMM_WORLD, &st));
    MT_CHECK_EQ(st.MPI_ERROR, SENTINEL);
    check_data(in, tag, 2);

    tag = 3; /* MPI_Probe, MPI_Iprobe, then MPI_Mprobe + MPI_Mrecv */
    send_pattern(tag);
    st = fresh();
    MT_CHECK_MPI(MPI_Probe(p2p_prev(), tag, MPI_COMM_WORLD, &st));
    CHECK_STATUS(st, tag);
    st = fresh();
    flag = 0;
    while (!flag) MT_CHECK_MPI(MPI_Iprobe(p2p_prev(), tag, MPI_COMM_WORLD, &flag, &st));
    CHECK_STATUS(st, tag);
    st = fresh();
    MT_CHECK_MPI(MPI_Mprobe(p2p_prev(), tag, MPI_COMM_WORLD, &msg, &st));
    CHECK_STATUS(st, tag);
    st = fresh();
    MT_CHECK_MPI(MPI_Mrecv(in, N, MPI_INT, &msg, &st));
    CHECK_STATUS(st, tag);
    check_data(in, tag, 1);

    tag = 4; /* MPI_Improbe + MPI_Mrecv into a derived type */
    send_pattern(tag);
    st = fresh();
    flag = 0;
    while (!flag) MT_CHECK_MPI(MPI_Improbe(p2p_prev(), tag, MPI_COMM_WORLD, &flag, &msg, &st));
    CHECK_STATUS(st, tag);
    st = fresh();
    MT_CHECK_MPI(MPI_Mrecv(in, 1, strided, &msg, &st));
    MT_CHECK_EQ(st.MPI_ERROR, SENTINEL);
    check_data(in, tag, 2);

    tag = 5; /* MPI_Imrecv + MPI_Wait */
    send_pattern(tag);
    MT_CHECK_MPI(MPI_Mprobe(p2p_prev(), tag, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Imrecv(in, N, MPI_INT, &msg, &req));
    st = fresh();
    MT_CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_STATUS(st, tag);
    check_data(in, tag, 1);

    tag = 6; /* MPI_Irecv + MPI_Test */
    MT_CHECK_MPI(MPI_Irecv(in, N, MPI_INT, p2p_prev(), tag, MPI_COMM_WORLD, &req));
    send_pattern(tag);
    flag = 0;
    st = fresh();
    while (!flag) MT_CHECK_MPI(MPI_Test(&req, &flag, &st));
    CHECK_STATUS(st, tag);
    check_data(in, tag, 1);

    MT_CHECK_MPI(MPI_Type_free(&strided));
    return mt_finish();
}
