/*
 * Non-blocking collectives beyond one at a time: several of different kinds
 * in flight on one communicator, completed by Waitall or by polling; an
 * initiation that must return while the other ranks have not started yet;
 * and a blocking collective right after a non-blocking one that the other
 * ranks initiate late.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_harness.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* This rank and the size of comm; whether it has two ranks or more. */
static bool several(MPI_Comm comm, int *me, int *n)
{
    MPI_Comm_rank(comm, me);
    MPI_Comm_size(comm, n);
    return *n >= 2;
}

static void fill(tbuf_t *b, enum top_id o, unsigned s, int r)
{
    for (long e = 0; e < b->nelem; ++e) {
        int64_t v[2];
        tval(o, (enum ttype_id)(b->t - tt), s, r, e, v);
        tbuf_set(b, e, v);
    }
}

/* A send buffer of c ints holding this rank's values of seed s for a sum
 * (fill), and a receive buffer of c ints. */
static void sum_pair(tbuf_t *sb, tbuf_t *rb, long c, unsigned s, int me)
{
    tbuf_alloc(sb, T_INT, c, mem_send);
    tbuf_alloc(rb, T_INT, c, mem_recv);
    fill(sb, OP_SUM, s, me);
}

/* Pulls b and checks its nelem ints against the sum over n ranks of the
 * seeded values (fill, OP_SUM) of elements e0, e0 + 1, ... */
static void check_int_sum(tbuf_t *b, unsigned s, int n, long e0, const char *what)
{
    tbuf_pull(b);
    unsigned char *x = tbuf_snapshot(b);
    for (long e = 0; e < b->nelem; ++e) {
        int64_t acc[2];
        tfold(OP_SUM, T_INT, s, 0, n, e0 + e, acc);
        img_set(b, x, e, acc);
    }
    tbuf_matches(b, x, 0, b->nelem, what);
    free(x);
}

void case_many_in_flight(MPI_Comm comm)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const tcase_op_t *sum = &tops[0], *vsum = &tops[3], *affine = &tops[7];
    for (int round = 0; round < 2; ++round) {
        const unsigned s = 4242 + round;
        tctx_set("%d non-blocking collectives in flight (%s), comm size %d", 7,
                 round ? "MPI_Testall" : "MPI_Waitall", n);
        tbuf_t ar_s, ar_r, bc, ag_s, ag_r, aa_s, aa_r, rd_s, rd_r = {0}, sc_s, sc_r;
        const long c_ar = 1000, c_bc = 777, c_ag = 333, c_aa = 100, c_rd = 50, c_sc = 64;
        tbuf_alloc(&ar_s, T_INT, c_ar, mem_send);
        tbuf_alloc(&ar_r, T_INT, c_ar, mem_recv);
        /* Every rank's only buffer (lone_buffer_kind). */
        tbuf_alloc(&bc, T_VEC, c_bc, lone_buffer_kind(me == 0 ? mem_send : mem_recv));
        tbuf_alloc(&ag_s, T_INT, c_ag, mem_send);
        tbuf_alloc(&ag_r, T_INT, n * c_ag, mem_recv);
        tbuf_alloc(&aa_s, T_NEGLB, n * c_aa, mem_send);
        tbuf_alloc(&aa_r, T_NEGLB, n * c_aa, mem_recv);
        tbuf_alloc(&rd_s, T_AFFINE, c_rd, mem_send);
        if (me == n - 1) tbuf_alloc(&rd_r, T_AFFINE, c_rd, mem_recv);
        tbuf_alloc(&sc_s, T_VEC, c_sc, mem_send);
        tbuf_alloc(&sc_r, T_VEC, c_sc, mem_recv);

        fill(&ar_s, OP_SUM, s, me);
        if (me == 0) img_set_flat(&bc, bc.img, 0, c_bc, s, 0, 0);
        img_set_flat(&ag_s, ag_s.img, 0, c_ag, s, me, 0);
        img_set_flat(&aa_s, aa_s.img, 0, n * c_aa, s, me, 0);
        fill(&rd_s, OP_AFFINE, s, me);
        fill(&sc_s, OP_SUM, s, me);
        tbuf_t *all[] = {&ar_s, &ar_r, &bc, &ag_s, &ag_r, &aa_s, &aa_r, &rd_s, &sc_s, &sc_r};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) tbuf_push(all[i]);
        if (me == n - 1) tbuf_push(&rd_r);

        MPI_Request req[7];
        MT_CHECK_MPI(MPI_Iallreduce(ar_s.mpi, ar_r.mpi, c_ar, MPI_INT, sum->op, comm, &req[0]));
        MT_CHECK_MPI(MPI_Ibcast(bc.mpi, c_bc, tt[T_VEC].dt, 0, comm, &req[1]));
        MT_CHECK_MPI(MPI_Iallgather(ag_s.mpi, c_ag, MPI_INT, ag_r.mpi, c_ag, MPI_INT, comm,
                                    &req[2]));
        MT_CHECK_MPI(MPI_Ialltoall(aa_s.mpi, c_aa, tt[T_NEGLB].dt, aa_r.mpi, c_aa,
                                   tt[T_NEGLB].dt, comm, &req[3]));
        MT_CHECK_MPI(MPI_Ireduce(rd_s.mpi, me == n - 1 ? rd_r.mpi : NULL, c_rd, tt[T_AFFINE].dt,
                                 affine->op, n - 1, comm, &req[4]));
        MT_CHECK_MPI(MPI_Ibarrier(comm, &req[5]));
        MT_CHECK_MPI(MPI_Iscan(sc_s.mpi, sc_r.mpi, c_sc, tt[T_VEC].dt, vsum->op, comm, &req[6]));
        if (round == 0) {
            MT_CHECK_MPI(MPI_Waitall(7, req, MPI_STATUSES_IGNORE));
        } else {
            int done = 0;
            while (!done) MT_CHECK_MPI(MPI_Testall(7, req, &done, MPI_STATUSES_IGNORE));
        }

        int64_t acc[2];
        unsigned char *x;
        check_int_sum(&ar_r, s, n, 0, "iallreduce result");

        tbuf_pull(&bc);
        x = tbuf_snapshot(&bc);
        img_set_flat(&bc, x, 0, c_bc, s, 0, 0);
        tbuf_matches(&bc, x, 0, c_bc, "ibcast result");
        free(x);

        tbuf_pull(&ag_r);
        x = tbuf_snapshot(&ag_r);
        for (int r = 0; r < n; ++r) img_set_flat(&ag_r, x, r * c_ag, c_ag, s, r, 0);
        tbuf_matches(&ag_r, x, 0, n * c_ag, "iallgather result");
        free(x);

        tbuf_pull(&aa_r);
        x = tbuf_snapshot(&aa_r);
        for (int r = 0; r < n; ++r) img_set_flat(&aa_r, x, r * c_aa, c_aa, s, r, me * c_aa);
        tbuf_matches(&aa_r, x, 0, n * c_aa, "ialltoall result");
        free(x);

        if (me == n - 1) {
            tbuf_pull(&rd_r);
            x = tbuf_snapshot(&rd_r);
            for (long e = 0; e < c_rd; ++e) {
                tfold(OP_AFFINE, T_AFFINE, s, 0, n, e, acc);
                img_set(&rd_r, x, e, acc);
            }
            tbuf_matches(&rd_r, x, 0, c_rd, "ireduce result");
            free(x);
            tbuf_free(&rd_r);
        }

        tbuf_pull(&sc_r);
        x = tbuf_snapshot(&sc_r);
        for (long e = 0; e < c_sc; ++e) {
            tfold(OP_SUM, T_VEC, s, 0, me + 1, e, acc);
            img_set(&sc_r, x, e, acc);
        }
        tbuf_matches(&sc_r, x, 0, c_sc, "iscan result");
        free(x);

        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) tbuf_free(all[i]);
    }
}

void case_initiation_does_not_wait(MPI_Comm comm)
{
    int me, n;
    if (!several(comm, &me, &n)) return;
    const long c = 4096;
    const unsigned s = 777;
    tctx_set("iallreduce initiation while the other ranks are late, comm size %d", n);
    tbuf_t sb, rb;
    tbuf_alloc(&sb, T_INT, c, mem_send);
    tbuf_alloc(&rb, T_INT, c, mem_recv);
    for (long e = 0; e < c; ++e) {
        int64_t v[2];
        tval(OP_SUM, T_INT, s, me, e, v);
        tbuf_set(&sb, e, v);
    }
    tbuf_push(&sb);
    tbuf_push(&rb);
    MPI_Barrier(comm);
    if (me != 0) usleep(1000 * 1000);
    MPI_Request req;
    double t0 = now();
    MT_CHECK_MPI(MPI_Iallreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, comm, &req));
    double took = now() - t0;
    if (me == 0 && took > 0.5) {
        mt_fail(__FILE__, __LINE__, "%s: MPI_Iallreduce took %.3f s to return", tctx, took);
    }
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    check_int_sum(&rb, s, n, 0, "result");
    tbuf_free(&sb);
    tbuf_free(&rb);
}

/* Pulls b (nelem ints) and checks it holds rank r's flat values of seed s
 * from flat index flat0; what names the check. */
static void check_flat(tbuf_t *b, long e0, long nelem, unsigned s, int r, const char *what)
{
    tbuf_pull(b);
    unsigned char *x = tbuf_snapshot(b);
    img_set_flat(b, x, e0, nelem, s, r, 0);
    tbuf_matches(b, x, e0, e0 + nelem, what);
    free(x);
}

/* A communicator's first non-blocking calls while its NVLink team (where
 * one may exist) is being set up: rank 0 initiates an Iallreduce, an Ibcast
 * and an Iallgather at once, before it can know the set-up's outcome; the
 * others start late and complete each call before initiating the next, so
 * they know the outcome from the second on. Every rank must still run each
 * call by the same algorithm (where the team turns out unusable, a rank that
 * ran the second by the next algorithm while rank 0 staged it would hang).
 * Then a blocking Allreduce, after which every rank goes by the outcome, and
 * one more Ibcast. Needs a fresh communicator to mean anything. */
void case_team_outcome_seen_late(MPI_Comm comm)
{
    int me, n;
    if (!several(comm, &me, &n)) return;
    const long c = 1000;
    const unsigned s_ar = 919, s_bc = 929, s_ag = 939, s_b2 = 949;
    tctx_set("non-blocking calls during an NVLink set-up, its outcome seen late by rank 0, "
             "comm size %d", n);
    tbuf_t ar_s, ar_r, bc, ag_s, ag_r, b_s, b_r, bc2;
    sum_pair(&ar_s, &ar_r, c, s_ar, me);
    sum_pair(&b_s, &b_r, c, s_b2, me);
    /* Every rank's only buffer (lone_buffer_kind). */
    const enum mem_kind bc_kind = lone_buffer_kind(me == 0 ? mem_send : mem_recv);
    tbuf_alloc(&bc, T_INT, c, bc_kind);
    tbuf_alloc(&bc2, T_INT, c, bc_kind);
    tbuf_alloc(&ag_s, T_INT, c, mem_send);
    tbuf_alloc(&ag_r, T_INT, c * n, mem_recv);
    tbuf_poison(&bc);
    tbuf_poison(&bc2);
    if (0 == me) {
        img_set_flat(&bc, bc.img, 0, c, s_bc, 0, 0);
        img_set_flat(&bc2, bc2.img, 0, c, s_b2, 0, 0);
    }
    img_set_flat(&ag_s, ag_s.img, 0, c, s_ag, me, 0);
    tbuf_poison(&ag_r);
    tbuf_t *all[] = {&ar_s, &ar_r, &bc, &ag_s, &ag_r, &b_s, &b_r, &bc2};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) tbuf_push(all[i]);

    MPI_Barrier(comm);
    if (me != 0) usleep(300 * 1000);
    MPI_Request rq[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MT_CHECK_MPI(MPI_Iallreduce(ar_s.mpi, ar_r.mpi, (int)c, MPI_INT, MPI_SUM, comm, &rq[0]));
    if (me != 0) MT_CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Ibcast(bc.mpi, (int)c, MPI_INT, 0, comm, &rq[1]));
    if (me != 0) MT_CHECK_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Iallgather(ag_s.mpi, (int)c, MPI_INT, ag_r.mpi, (int)c, MPI_INT, comm,
                                &rq[2]));
    MT_CHECK_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
    MT_CHECK_MPI(MPI_Allreduce(b_s.mpi, b_r.mpi, (int)c, MPI_INT, MPI_SUM, comm));
    MPI_Request r2;
    MT_CHECK_MPI(MPI_Ibcast(bc2.mpi, (int)c, MPI_INT, 0, comm, &r2));
    MT_CHECK_MPI(MPI_Wait(&r2, MPI_STATUS_IGNORE));

    check_int_sum(&ar_r, s_ar, n, 0, "iallreduce result");
    check_flat(&bc, 0, c, s_bc, 0, "ibcast result");
    for (int r = 0; r < n; ++r) check_flat(&ag_r, (long)r * c, c, s_ag, r, "iallgather result");
    check_int_sum(&b_r, s_b2, n, 0, "allreduce result after them");
    check_flat(&bc2, 0, c, s_b2, 0, "ibcast result after the allreduce");
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) tbuf_free(all[i]);
}

/* calls Iallreduces of 1000 ints, each completed before the next, and
 * nothing else: a program without blocking collectives on comm. */
void case_nonblocking_only(MPI_Comm comm, int calls)
{
    int me, n;
    if (!several(comm, &me, &n)) return;
    const long c = 1000;
    tctx_set("%d iallreduces and no blocking collective, comm size %d", calls, n);
    for (int k = 0; k < calls; ++k) {
        const unsigned s = 959 + (unsigned)k;
        tbuf_t sb, rb;
        sum_pair(&sb, &rb, c, s, me);
        tbuf_push(&sb);
        tbuf_push(&rb);
        MPI_Request req;
        MT_CHECK_MPI(MPI_Iallreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, comm, &req));
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        check_int_sum(&rb, s, n, 0, "iallreduce result");
        tbuf_free(&sb);
        tbuf_free(&rb);
    }
}

/* A blocking collective while a non-blocking one initiated before it has not
 * started on this rank yet (the other ranks initiate it late): each rank
 * must run them in initiation order (an NVLink team launches the earlier
 * call's kernel first), and both results must be right. */
void case_blocking_after_nonblocking(MPI_Comm comm)
{
    int me, n;
    if (!several(comm, &me, &n)) return;
    const long c = 1000;
    const unsigned s0 = 515, s1 = 616;
    tctx_set("a blocking allreduce after an iallreduce the others initiate late, comm size %d", n);
    tbuf_t a_s, a_r, b_s, b_r;
    sum_pair(&a_s, &a_r, c, s0, me);
    sum_pair(&b_s, &b_r, c, s1, me);
    tbuf_push(&a_s);
    tbuf_push(&a_r);
    tbuf_push(&b_s);
    tbuf_push(&b_r);
    MPI_Barrier(comm);
    if (me != 0) usleep(300 * 1000);
    MPI_Request req;
    MT_CHECK_MPI(MPI_Iallreduce(a_s.mpi, a_r.mpi, (int)c, MPI_INT, MPI_SUM, comm, &req));
    /* The late ranks let the non-blocking call get going first (their
     * progress finds rank 0's arrival there); rank 0 goes straight into the
     * blocking one, before the others' arrivals have come. */
    for (int i = 0; me != 0 && i < 20 && MPI_REQUEST_NULL != req; ++i) {
        int done = 0;
        MT_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        usleep(1000);
    }
    MT_CHECK_MPI(MPI_Allreduce(b_s.mpi, b_r.mpi, (int)c, MPI_INT, MPI_SUM, comm));
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    tbuf_t *res[2] = {&a_r, &b_r};
    const unsigned seeds[2] = {s0, s1};
    for (int k = 0; k < 2; ++k) {
        check_int_sum(res[k], seeds[k], n, 0, k ? "allreduce result" : "iallreduce result");
    }
    tbuf_free(&a_s);
    tbuf_free(&a_r);
    tbuf_free(&b_s);
    tbuf_free(&b_r);
}

/* Two Ireduce_scatters in flight whose blocks are large where the other's
 * are small, so that each step of one is slow on the ranks where the
 * other's is fast (rank r receives block (r - 1 - k) mod n at step k of a
 * ring): ranks finish their steps of the two in different orders. Both
 * results must be right; a second step of one meeting the other's messages
 * makes them wrong or fails them. */
void case_crossing_reduce_scatters(MPI_Comm comm)
{
    int me, n;
    if (!several(comm, &me, &n)) return;
    const int big = 60000, tiny = 3;
    tctx_set("two ireduce_scatters with opposite block sizes in flight, comm size %d", n);
    int *counts[2];
    long total[2] = {0, 0}, offset[2] = {0, 0};
    tbuf_t sb[2], rb[2];
    const unsigned seeds[2] = {717, 818};
    MPI_Request req[2];
    for (int k = 0; k < 2; ++k) {
        counts[k] = malloc(sizeof(int) * n);
        for (int i = 0; i < n; ++i) {
            const bool large = (i % 3 == 1) == (k == 0);
            counts[k][i] = large ? big : tiny;
            if (i < me) offset[k] += counts[k][i];
            total[k] += counts[k][i];
        }
        tbuf_alloc(&sb[k], T_INT, total[k], mem_send);
        tbuf_alloc(&rb[k], T_INT, counts[k][me], mem_recv);
        fill(&sb[k], OP_SUM, seeds[k], me);
        tbuf_push(&sb[k]);
        tbuf_push(&rb[k]);
    }
    for (int k = 0; k < 2; ++k) {
        MT_CHECK_MPI(MPI_Ireduce_scatter(sb[k].mpi, rb[k].mpi, counts[k], MPI_INT, MPI_SUM, comm,
                                         &req[k]));
    }
    MT_CHECK_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    for (int k = 0; k < 2; ++k) {
        check_int_sum(&rb[k], seeds[k], n, offset[k], k ? "second result" : "first result");
        tbuf_free(&sb[k]);
        tbuf_free(&rb[k]);
        free(counts[k]);
    }
}

/* Persistent requests started again and again with new data in the send
 * buffers (MPI_Startall over two), then freed. host_rank (or -1): that rank
 * passes host memory only, whatever the mode, while the others pass the
 * mode's (the ranks agree on one form at initialization). */
void case_persistent_restart(MPI_Comm comm, int host_rank)
{
    if (!t_persistent_available()) return;
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const long c = 5000;
    const int rounds = 3;
    tctx_set("persistent allreduce and bcast started %d times, comm size %d%s", rounds, n,
             host_rank < 0 ? "" : ", host memory on one rank");
    t_persistent = true;
    const bool host = me == host_rank;
    tbuf_t sb, rb, bc;
    tbuf_alloc(&sb, T_INT, c, host ? MEM_HOST : mem_send);
    tbuf_alloc(&rb, T_INT, c, host ? MEM_HOST : mem_recv);
    tbuf_alloc(&bc, T_INT, c, host ? MEM_HOST : me == 0 ? mem_send : mem_recv);
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    for (int round = 0; round < rounds; ++round) {
        const unsigned s = 900 + round;
        fill(&sb, OP_SUM, s, me);
        tbuf_push(&sb);
        if (me == 0) {
            img_set_flat(&bc, bc.img, 0, c, s, 0, 0);
            tbuf_push(&bc);
        }
        if (0 == round) {
            /* Initialised and started (coll_forms.c). */
            MT_CHECK_MPI(T_Iallreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, comm, &req[0]));
            MT_CHECK_MPI(T_Ibcast(bc.mpi, (int)c, MPI_INT, 0, comm, &req[1]));
        } else {
            MT_CHECK_MPI(MPI_Startall(2, req));
        }
        /* Completed by MPI_Waitall, MPI_Testall polling, MPI_Wait on each: each
         * leaves them inactive for the next MPI_Startall. */
        if (0 == round) {
            MT_CHECK_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
        } else if (1 == round) {
            int done = 0;
            while (!done) MT_CHECK_MPI(MPI_Testall(2, req, &done, MPI_STATUSES_IGNORE));
        } else {
            for (int k = 0; k < 2; ++k) MT_CHECK_MPI(MPI_Wait(&req[k], MPI_STATUS_IGNORE));
        }
        if (MPI_REQUEST_NULL == req[0] || MPI_REQUEST_NULL == req[1]) {
            mt_fail(__FILE__, __LINE__, "%s: completion freed a persistent request", tctx);
            break;
        }
        check_int_sum(&rb, s, n, 0, "allreduce result");
        tbuf_pull(&bc);
        unsigned char *x = tbuf_snapshot(&bc);
        img_set_flat(&bc, x, 0, c, s, 0, 0);
        tbuf_matches(&bc, x, 0, c, "bcast result");
        free(x);
    }
    for (int k = 0; k < 2; ++k) {
        if (MPI_REQUEST_NULL == req[k]) continue;
        MT_CHECK_MPI(MPI_Request_free(&req[k]));
        if (MPI_REQUEST_NULL != req[k]) {
            mt_fail(__FILE__, __LINE__, "%s: MPI_Request_free left the handle", tctx);
        }
    }
    t_persistent = false;
    tbuf_free(&sb);
    tbuf_free(&rb);
    tbuf_free(&bc);
}
