/*
 * The delegated NVLink form's failure path over the simulated team on "one
 * GPU" (GW_FAKE_NVLINK=1, GW_FAKE_NVLINK_DELEGATE=1): a rank that cannot
 * take part in a call (its buffers refused, GW_FAKE_BOARD_REFUSE=1 set on
 * rank 1 only, so that not even a temporary can be described) still posts,
 * and the call fails on every rank at once (its initiation there; MPI_Wait
 * with MPI_ERR_OTHER under MPI_ERRORS_RETURN on the others), whichever rank
 * launches it, with no rank left waiting;
 * calls before and after it are right.
 *
 *   coll_nvlink_delegate_fail fakedev
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_harness.h"

static double now(void) { return MPI_Wtime(); }

/* An Iallreduce (SUM on ints) of c elements; its MPI_Wait's return. */
static int iallreduce(MPI_Comm comm, long c, unsigned s, tbuf_t *sb, tbuf_t *rb)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    tbuf_alloc(sb, T_INT, c, mem_send);
    tbuf_alloc(rb, T_INT, c, mem_recv);
    for (long e = 0; e < c; ++e) {
        int64_t v[2];
        tval(OP_SUM, T_INT, s, me, e, v);
        tbuf_set(sb, e, v);
    }
    tbuf_push(sb);
    tbuf_push(rb);
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc = MPI_Iallreduce(sb->mpi, rb->mpi, (int)c, MPI_INT, MPI_SUM, comm, &req);
    /* The rank that cannot take part knows at initiation. */
    if (rc != MPI_SUCCESS) return rc;
    return MPI_Wait(&req, MPI_STATUS_IGNORE);
}

static void check_sum(MPI_Comm comm, tbuf_t *rb, unsigned s, const char *what)
{
    int n;
    MPI_Comm_size(comm, &n);
    tbuf_pull(rb);
    unsigned char *x = tbuf_snapshot(rb);
    for (long e = 0; e < rb->nelem; ++e) {
        int64_t acc[2];
        tfold(OP_SUM, T_INT, s, 0, n, e, acc);
        img_set(rb, x, e, acc);
    }
    tbuf_matches(rb, x, 0, rb->nelem, what);
    free(x);
}

static void right(MPI_Comm comm, long c, unsigned s, const char *what)
{
    tbuf_t sb, rb;
    tctx_set("%s", what);
    MT_CHECK_MPI(iallreduce(comm, c, s, &sb, &rb));
    check_sum(comm, &rb, s, "iallreduce result");
    tbuf_free(&sb);
    tbuf_free(&rb);
}

int main(int argc, char **argv)
{
    harness_init(&argc, &argv);
    if (harness_skip_reason()) return mt_skip(harness_skip_reason());
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm comm;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MT_CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    /* A blocking call sets the team up; the non-blocking ones then go by it. */
    {
        tbuf_t sb, rb;
        tbuf_alloc(&sb, T_INT, 16, mem_send);
        tbuf_alloc(&rb, T_INT, 16, mem_recv);
        tbuf_push(&sb);
        MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, 16, MPI_INT, MPI_SUM, comm));
        tbuf_free(&sb);
        tbuf_free(&rb);
    }
    right(comm, 1000, 5, "a delegated call before the failure");
    /* Rank 1 cannot take part: twice, arriving last (it is the rank that
     * launches, and fails the call itself), then first (another rank
     * launches and finds its description refused). */
    for (int round = 0; round < 2; ++round) {
        tctx_set("rank 1 cannot take part, arriving %s", round ? "first" : "last");
        if ((round == 0) == (me == 1)) usleep(200 * 1000);
        if (me == 1) setenv("GW_FAKE_BOARD_REFUSE", "1", 1);
        tbuf_t sb, rb;
        const double t0 = now();
        const int rc = iallreduce(comm, 1000, 6, &sb, &rb);
        if (me == 1) unsetenv("GW_FAKE_BOARD_REFUSE");
        int cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        if (cls == MPI_SUCCESS) {
            mt_fail(__FILE__, __LINE__, "%s: the call succeeded on rank %d", tctx, me);
        } else if (me != 1 && cls != MPI_ERR_OTHER) {
            mt_fail(__FILE__, __LINE__, "%s: MPI_Wait returned %d (class %d), not MPI_ERR_OTHER",
                    tctx, rc, cls);
        }
        if (now() - t0 > 5.0) mt_fail(__FILE__, __LINE__, "%s: took %.1f s", tctx, now() - t0);
        tbuf_free(&sb);
        tbuf_free(&rb);
    }
    right(comm, 1000, 7, "a delegated call after the failures");
    MT_CHECK_MPI(MPI_Comm_free(&comm));
    return mt_finish();
}
