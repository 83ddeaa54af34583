/*
 * Reductions: Allreduce, Reduce, Scan, Exscan, Reduce_scatter,
 * Reduce_scatter_block, each over every (type, op) pair of tops, every count,
 * in place and not, blocking and not; and MPI_Reduce_local. Expected values are folded on the host
 * from the inputs every rank computes (tval), in rank order.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"

static unsigned seed_of(int kase, int op, long count, int in_place, int root)
{
    return (unsigned)(kase * 1000003 + op * 7919 + count * 31 + in_place * 3 + root * 101);
}

/* Fills elements [0, n) of b with rank r's inputs. */
static void fill_inputs(tbuf_t *b, enum top_id o, unsigned s, int r, long n)
{
    for (long e = 0; e < n; ++e) {
        int64_t v[2];
        tval(o, b->t - tt, s, r, e, v);
        tbuf_set(b, e, v);
    }
}

/* The send buffer must come back unchanged. */
static void check_send_unchanged(tbuf_t *sb)
{
    unsigned char *before = tbuf_snapshot(sb);
    tbuf_pull(sb);
    tbuf_matches(sb, before, 0, 0, "send buffer");
    free(before);
}

static void run_allreduce_like(MPI_Comm comm, bool nb, int kase)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    static const char *names[] = {"allreduce", "scan", "exscan"};
    for (int oi = 0; oi < ntops; ++oi) {
        const tcase_op_t *op = &tops[oi];
        for (int ci = 0; ci < ntcounts; ++ci) {
            const long c = tcounts[ci];
            for (int ip = 0; ip < 2; ++ip) {
                const unsigned s = seed_of(kase, oi, c, ip, 0);
                tctx_set("%s%s %s count %ld%s comm size %d", nb ? "i" : "", names[kase],
                         op->name, c, ip ? " in place" : "", n);
                tbuf_t sb = {0}, rb;
                if (!ip) {
                    tbuf_alloc(&sb, op->type, c, mem_send);
                    fill_inputs(&sb, op->id, s, me, c);
                    tbuf_push(&sb);
                }
                tbuf_alloc(&rb, op->type, c, mem_recv);
                if (ip) fill_inputs(&rb, op->id, s, me, c);
                tbuf_push(&rb);
                unsigned char *expect = tbuf_snapshot(&rb);
                /* Exscan's result on rank 0 is undefined: not checked. */
                const bool check = !(kase == 2 && me == 0);
                for (long e = 0; e < c && check; ++e) {
                    int64_t acc[2];
                    int upto = kase == 0 ? n : kase == 1 ? me + 1 : me;
                    tfold(op->id, op->type, s, 0, upto, e, acc);
                    img_set(&rb, expect, e, acc);
                }
                const void *sp = ip ? MPI_IN_PLACE : sb.mpi;
                MPI_Datatype dt = tt[op->type].dt;
                if (kase == 0) {
                    TRUN(nb, MPI_Allreduce(sp, rb.mpi, (int)c, dt, op->op, comm),
                         T_Iallreduce(sp, rb.mpi, (int)c, dt, op->op, comm, &_req));
                } else if (kase == 1) {
                    TRUN(nb, MPI_Scan(sp, rb.mpi, (int)c, dt, op->op, comm),
                         T_Iscan(sp, rb.mpi, (int)c, dt, op->op, comm, &_req));
                } else {
                    TRUN(nb, MPI_Exscan(sp, rb.mpi, (int)c, dt, op->op, comm),
                         T_Iexscan(sp, rb.mpi, (int)c, dt, op->op, comm, &_req));
                }
                tbuf_pull(&rb);
                if (check) tbuf_matches(&rb, expect, 0, c, "result");
                if (!ip) {
                    check_send_unchanged(&sb);
                    tbuf_free(&sb);
                }
                free(expect);
                tbuf_free(&rb);
            }
        }
    }
}

void case_allreduce(MPI_Comm comm, bool nb) { run_allreduce_like(comm, nb, 0); }
void case_scan(MPI_Comm comm, bool nb) { run_allreduce_like(comm, nb, 1); }
void case_exscan(MPI_Comm comm, bool nb) { run_allreduce_like(comm, nb, 2); }

void case_reduce(MPI_Comm comm, bool nb)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int roots[2] = {0, n - 1};
    for (int ri = 0; ri < (n > 1 ? 2 : 1); ++ri) {
        const int root = roots[ri];
        for (int oi = 0; oi < ntops; ++oi) {
            const tcase_op_t *op = &tops[oi];
            for (int ci = 0; ci < ntcounts; ++ci) {
                const long c = tcounts[ci];
                for (int ip = 0; ip < 2; ++ip) {
                    const unsigned s = seed_of(3, oi, c, ip, root);
                    tctx_set("%sreduce %s count %ld root %d%s comm size %d", nb ? "i" : "",
                             op->name, c, root, ip ? " in place" : "", n);
                    /* MPI_IN_PLACE only at the root; elsewhere the receive
                     * buffer is not significant and NULL is passed. */
                    const bool in_place = ip && me == root;
                    tbuf_t sb = {0}, rb = {0};
                    if (!in_place) {
                        tbuf_alloc(&sb, op->type, c,
                                   me == root ? mem_send : lone_buffer_kind(mem_send));
                        fill_inputs(&sb, op->id, s, me, c);
                        tbuf_push(&sb);
                    }
                    unsigned char *expect = NULL;
                    if (me == root) {
                        tbuf_alloc(&rb, op->type, c,
                                   in_place ? lone_buffer_kind(mem_recv) : mem_recv);
                        if (in_place) fill_inputs(&rb, op->id, s, me, c);
                        tbuf_push(&rb);
                        expect = tbuf_snapshot(&rb);
                        for (long e = 0; e < c; ++e) {
                            int64_t acc[2];
                            tfold(op->id, op->type, s, 0, n, e, acc);
                            img_set(&rb, expect, e, acc);
                        }
                    }
                    const void *sp = in_place ? MPI_IN_PLACE : sb.mpi;
                    void *rp = me == root ? rb.mpi : NULL;
                    MPI_Datatype dt = tt[op->type].dt;
                    TRUN(nb, MPI_Reduce(sp, rp, (int)c, dt, op->op, root, comm),
                         T_Ireduce(sp, rp, (int)c, dt, op->op, root, comm, &_req));
                    if (me == root) {
                        tbuf_pull(&rb);
                        tbuf_matches(&rb, expect, 0, c, "result");
                        free(expect);
                        tbuf_free(&rb);
                    }
                    if (!in_place) {
                        check_send_unchanged(&sb);
                        tbuf_free(&sb);
                    }
                }
            }
        }
    }
}

static void run_reduce_scatter(MPI_Comm comm, bool nb, bool block)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *rcounts = malloc(sizeof(int) * n);
    for (int oi = 0; oi < ntops; ++oi) {
        const tcase_op_t *op = &tops[oi];
        for (int ci = 0; ci < ntcounts; ++ci) {
            const long c = tcounts[ci];
            long total = 0, offset = 0;
            for (int i = 0; i < n; ++i) {
                /* Uneven blocks, some empty, for the v-form. */
                rcounts[i] = block ? (int)c : (c == 0 ? 0 : (int)(c + (i % 3) - 1));
                if (i < me) offset += rcounts[i];
                total += rcounts[i];
            }
            const long mine = rcounts[me];
            for (int ip = 0; ip < 2; ++ip) {
                const unsigned s = seed_of(block ? 5 : 4, oi, c, ip, 0);
                tctx_set("%sreduce_scatter%s %s count %ld%s comm size %d", nb ? "i" : "",
                         block ? "_block" : "", op->name, c, ip ? " in place" : "", n);
                tbuf_t sb = {0}, rb;
                if (!ip) {
                    /* With an empty block of its own the send buffer is
                     * this rank's only significant buffer. */
                    tbuf_alloc(&sb, op->type, total,
                               mine == 0 ? lone_buffer_kind(mem_send) : mem_send);
                    fill_inputs(&sb, op->id, s, me, total);
                    tbuf_push(&sb);
                }
                /* In place, the whole input is in the receive buffer and the
                 * result replaces its first block; the rest is undefined. */
                tbuf_alloc(&rb, op->type, ip ? total : mine, mem_recv);
                if (ip) fill_inputs(&rb, op->id, s, me, total);
                tbuf_push(&rb);
                unsigned char *expect = tbuf_snapshot(&rb);
                for (long e = 0; e < mine; ++e) {
                    int64_t acc[2];
                    tfold(op->id, op->type, s, 0, n, offset + e, acc);
                    img_set(&rb, expect, e, acc);
                }
                const void *sp = ip ? MPI_IN_PLACE : sb.mpi;
                MPI_Datatype dt = tt[op->type].dt;
                if (block) {
                    TRUN(nb, MPI_Reduce_scatter_block(sp, rb.mpi, (int)c, dt, op->op, comm),
                         T_Ireduce_scatter_block(sp, rb.mpi, (int)c, dt, op->op, comm, &_req));
                } else {
                    TRUN(nb, MPI_Reduce_scatter(sp, rb.mpi, rcounts, dt, op->op, comm),
                         T_Ireduce_scatter(sp, rb.mpi, rcounts, dt, op->op, comm, &_req));
                }
                tbuf_pull(&rb);
                if (ip) {
                    if (mine > 0) tbuf_matches(&rb, expect, 0, mine, "result");
                } else {
                    tbuf_matches(&rb, expect, 0, mine, "result");
                }
                if (!ip) {
                    check_send_unchanged(&sb);
                    tbuf_free(&sb);
                }
                free(expect);
                tbuf_free(&rb);
            }
        }
    }
    free(rcounts);
}

void case_reduce_scatter(MPI_Comm comm, bool nb) { run_reduce_scatter(comm, nb, false); }
void case_reduce_scatter_block(MPI_Comm comm, bool nb) { run_reduce_scatter(comm, nb, true); }

/* MPI_Reduce_local (not a collective: MPI_COMM_SELF's module): inout = in op
 * inout over every (type, op) pair and count, in as "rank 0" and inout as
 * "rank 1" of tval. Blocking only; comm only names the run. */
void case_reduce_local(MPI_Comm comm, bool nb)
{
    if (nb) return;
    int n;
    MPI_Comm_size(comm, &n);
    for (int oi = 0; oi < ntops; ++oi) {
        const tcase_op_t *op = &tops[oi];
        for (int ci = 0; ci < ntcounts; ++ci) {
            const long c = tcounts[ci];
            const unsigned s = seed_of(6, oi, c, 0, 0);
            tctx_set("reduce_local %s count %ld (comm size %d)", op->name, c, n);
            tbuf_t in, io;
            tbuf_alloc(&in, op->type, c, mem_send);
            tbuf_alloc(&io, op->type, c, mem_recv);
            fill_inputs(&in, op->id, s, 0, c);
            fill_inputs(&io, op->id, s, 1, c);
            tbuf_push(&in);
            tbuf_push(&io);
            unsigned char *expect = tbuf_snapshot(&io);
            for (long e = 0; e < c; ++e) {
                int64_t acc[2];
                tfold(op->id, op->type, s, 0, 2, e, acc);
                img_set(&io, expect, e, acc);
            }
            MT_CHECK_MPI(MPI_Reduce_local(in.mpi, io.mpi, (int)c, tt[op->type].dt, op->op));
            tbuf_pull(&io);
            tbuf_matches(&io, expect, 0, c, "inout buffer");
            check_send_unchanged(&in);
            free(expect);
            tbuf_free(&in);
            tbuf_free(&io);
        }
    }
}
