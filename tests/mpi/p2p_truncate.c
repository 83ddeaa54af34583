/* MPI_ERR_TRUNCATE: a message longer than the receive buffer completes the
 * receive with that error class, through the communicator's error handler
 * (MPI_ERRORS_RETURN here, and a handler of the test's own), writes nothing
 * past the buffer, completes the sender normally, and leaves the pair able
 * to exchange messages afterwards. Small (eager) and large (4 MiB) host
 * messages, received by MPI_Recv, MPI_Irecv + MPI_Wait/MPI_Waitall,
 * MPI_ANY_SOURCE and MPI_Mprobe + MPI_Mrecv. */
#include "p2p.h"

enum how { RECV, IRECV_WAIT, IRECV_WAITALL, ANY_SOURCE, MRECV, NHOW };
static const char *how_name[] = {"MPI_Recv", "MPI_Irecv+MPI_Wait", "MPI_Irecv+MPI_Waitall",
                                 "MPI_Recv(MPI_ANY_SOURCE)", "MPI_Mprobe+MPI_Mrecv"};

struct sizepair {
    size_t msg, buf;
};
static const struct sizepair pairs[] = {
    {1, 0}, {100, 64}, {100, 99}, {8193, 8192}, {4 * MiB, 1 * MiB}, {4 * MiB, 4 * MiB - 1},
};
#define NPAIRS (sizeof(pairs) / sizeof(pairs[0]))

static int handler_calls, handler_class;
static void record_error(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    MPI_Error_class(*code, &handler_class);
}

/* Receives into a buffer of buf bytes what the previous rank sent with tag;
 * returns the receive's return code, sets *st when the call fills one. */
static int truncated_receive(enum how how, unsigned char *in, size_t buf, int tag, MPI_Comm comm,
                             MPI_Status *st)
{
    MPI_Request r[2];
    MPI_Status sts[2];
    MPI_Message m;
    int rc, ok = 0x55AA;
    switch (how) {
    case RECV:
        return MPI_Recv(in, (int)buf, MPI_BYTE, p2p_prev(), tag, comm, st);
    case ANY_SOURCE:
        return MPI_Recv(in, (int)buf, MPI_BYTE, MPI_ANY_SOURCE, tag, comm, st);
    case IRECV_WAIT:
        MT_CHECK_MPI(MPI_Irecv(in, (int)buf, MPI_BYTE, p2p_prev(), tag, comm, &r[0]));
        return MPI_Wait(&r[0], st);
    case MRECV:
        MT_CHECK_MPI(MPI_Mprobe(p2p_prev(), tag, comm, &m, st));
        return MPI_Mrecv(in, (int)buf, MPI_BYTE, &m, st);
    default:
        /* With a second, fitting receive that is complete before the
         * wait (Open MPI's MPI_Waitall, on an error, may report a request
         * still running as MPI_ERR_PENDING yet free its handle): the wait
         * returns MPI_ERR_IN_STATUS and each status says how its request
         * ended. */
        MT_CHECK_MPI(MPI_Irecv(&ok, 1, MPI_INT, p2p_prev(), tag + 1, comm, &r[0]));
        for (int done = 0; !done;) MT_CHECK_MPI(MPI_Request_get_status(r[0], &done, &sts[0]));
        MT_CHECK_MPI(MPI_Irecv(in, (int)buf, MPI_BYTE, p2p_prev(), tag, comm, &r[1]));
        sts[0].MPI_ERROR = sts[1].MPI_ERROR = -1;
        rc = MPI_Waitall(2, r, sts);
        P2P_CHECK_ERRCLASS(rc, MPI_ERR_IN_STATUS);
        P2P_CHECK_ERRCLASS(sts[1].MPI_ERROR, MPI_ERR_TRUNCATE);
        MT_CHECK_EQ(sts[0].MPI_ERROR, MPI_SUCCESS);
        P2P_CHECK_STATUS(&sts[0], p2p_prev(), tag + 1, MPI_INT, 1);
        MT_CHECK_EQ(ok, p2p_prev());
        *st = sts[1];
        return sts[1].MPI_ERROR;
    }
}

static void one_case(enum how how, struct sizepair sp, int tag, MPI_Comm comm)
{
    unsigned char *out = p2p_malloc(sp.msg), *in = p2p_guarded_alloc(sp.msg, 0);
    MPI_Request s[2];
    MPI_Status st;
    mt_fill(out, sp.msg, (unsigned)(mt_rank + tag));
    MT_CHECK_MPI(MPI_Isend(out, (int)sp.msg, MPI_BYTE, p2p_next(), tag, comm, &s[0]));
    MT_CHECK_MPI(MPI_Isend(&mt_rank, 1, MPI_INT, p2p_next(), tag + 1, comm, &s[1]));

    /* The buffer is the first sp.buf bytes of a guarded sp.msg-byte area:
     * the bytes after it must stay as they were. */
    memset(in + sp.buf, 0x77, sp.msg - sp.buf);
    st.MPI_SOURCE = st.MPI_TAG = -99;
    int rc = truncated_receive(how, in, sp.buf, tag, comm, &st);
    P2P_CHECK_ERRCLASS(rc, MPI_ERR_TRUNCATE);
    long bad = p2p_find_not(in + sp.buf, sp.msg - sp.buf, 0x77);
    if (bad >= 0)
        mt_fail(__FILE__, __LINE__, "byte %zu past the %zu-byte buffer written", sp.buf + bad, sp.buf);
    P2P_CHECK_GUARDS(in, sp.msg);
    MT_CHECK_EQ(st.MPI_SOURCE, p2p_prev());
    MT_CHECK_EQ(st.MPI_TAG, tag);
    if (how != IRECV_WAITALL) {
        int ok = 0;
        MT_CHECK_MPI(MPI_Recv(&ok, 1, MPI_INT, p2p_prev(), tag + 1, comm, MPI_STATUS_IGNORE));
        MT_CHECK_EQ(ok, p2p_prev());
    }
    /* The sender's side of a truncated message completes without error. */
    MT_CHECK_MPI(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));

    /* The same pair, tag and size still work. */
    mt_fill(out, sp.msg, (unsigned)(mt_rank + tag + 1));
    MT_CHECK_MPI(MPI_Sendrecv(out, (int)sp.msg, MPI_BYTE, p2p_next(), tag, in, (int)sp.msg, MPI_BYTE,
                              p2p_prev(), tag, comm, &st));
    P2P_CHECK_STATUS(&st, p2p_prev(), tag, MPI_BYTE, (int)sp.msg);
    P2P_CHECK_DATA(in, sp.msg, (unsigned)(p2p_prev() + tag + 1));
    P2P_CHECK_GUARDS(in, sp.msg);
    free(out);
    p2p_guarded_free(in);
}

/* An error handler of the test's own is called once with the error, and the
 * call still returns the code. */
static void own_handler(void)
{
    MPI_Comm comm;
    MPI_Errhandler eh;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MT_CHECK_MPI(MPI_Comm_create_errhandler(record_error, &eh));
    MT_CHECK_MPI(MPI_Comm_set_errhandler(comm, eh));
    int out[4] = {1, 2, 3, 4}, in[2];
    MPI_Request s;
    MT_CHECK_MPI(MPI_Isend(out, 4, MPI_INT, p2p_next(), 1, comm, &s));
    int rc = MPI_Recv(in, 2, MPI_INT, p2p_prev(), 1, comm, MPI_STATUS_IGNORE);
    P2P_CHECK_ERRCLASS(rc, MPI_ERR_TRUNCATE);
    MT_CHECK_EQ(handler_calls, 1);
    MT_CHECK_EQ(handler_class, MPI_ERR_TRUNCATE);
    MT_CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    MT_CHECK_EQ(handler_calls, 1);
    MT_CHECK_MPI(MPI_Errhandler_free(&eh));
    MT_CHECK_MPI(MPI_Comm_free(&comm));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    int tag = 0;
    for (int how = 0; how < NHOW; how++) {
        for (size_t i = 0; i < NPAIRS; i++) {
            int before = mt_failures;
            one_case((enum how)how, pairs[i], tag += 2, MPI_COMM_WORLD);
            if (mt_failures != before)
                fprintf(stderr, "[rank %d]   in %s of %zu bytes into %zu\n", mt_rank,
                        how_name[how], pairs[i].msg, pairs[i].buf);
        }
    }
    own_handler();
    return mt_finish();
}
