/*
 * Data movement: Bcast, Allgather(v), Alltoall(v, w), Gather(v), Scatter(v),
 * Barrier; every type pair, every count, in place where MPI allows it, roots
 * 0 and n-1, blocking and not. v-forms leave one element of hole between
 * blocks, which must keep its bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"

typedef struct {
    enum ttype_id st; /* send type, mult * c elements of it ... */
    int mult;
    enum ttype_id rt; /* ... carry what c elements of the receive type carry */
} tpair_t;

static const tpair_t pairs[] = {
    {T_INT, 1, T_INT},     {T_DOUBLE, 1, T_DOUBLE}, {T_VEC, 1, T_VEC},
    {T_NEGLB, 1, T_NEGLB}, {T_INT, 2, T_VEC},
};
static const int npairs = sizeof(pairs) / sizeof(pairs[0]);

static unsigned seed_of(int kase, int pair, long count, int in_place, int root)
{
    return (unsigned)(kase * 1000033 + pair * 7907 + count * 37 + in_place * 5 + root * 103);
}

static const char *pair_name(const tpair_t *p)
{
    static char buf[64];
    snprintf(buf, sizeof(buf), "%d x %s -> %s", p->mult, tt[p->st].name, tt[p->rt].name);
    return buf;
}

static void check_send_unchanged(tbuf_t *sb)
{
    unsigned char *before = tbuf_snapshot(sb);
    tbuf_pull(sb);
    tbuf_matches(sb, before, 0, 0, "send buffer");
    free(before);
}

/* Block shapes of the v/w forms. MPI_IN_PLACE needs symmetric counts (send
 * and receive share one layout). Open MPI 4.1's libnbc returns wrong data
 * for an in-place Ialltoallv whose counts differ between pairs (4 ranks, with
 * pml ob1 and without gpuwire too), so that one case uses equal counts. */
enum shape { ASYMMETRIC, SYMMETRIC, UNIFORM };

/* Count of receive-type elements rank src sends rank dst. */
static int vcount(long c, int src, int dst, enum shape shape)
{
    if (c == 0) return 0;
    int cc = (int)((c + 1) / 2);
    switch (shape) {
    case ASYMMETRIC: return ((src + 2 * dst) % 3) * cc;
    case SYMMETRIC: return ((src + dst) % 3) * cc;
    default: return cc;
    }
}

/* ------------------------------------------------------------------------ */

void case_bcast(MPI_Comm comm, bool nb)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    static const enum ttype_id types[] = {T_INT, T_DOUBLE, T_VEC, T_NEGLB};
    int roots[2] = {0, n - 1};
    for (int ri = 0; ri < (n > 1 ? 2 : 1); ++ri) {
        const int root = roots[ri];
        for (int ti = 0; ti < 4; ++ti) {
            for (int ci = 0; ci < ntcounts; ++ci) {
                const long c = tcounts[ci];
                const unsigned s = seed_of(10, ti, c, 0, root);
                tctx_set("%sbcast %s count %ld root %d comm size %d", nb ? "i" : "",
                         tt[types[ti]].name, c, root, n);
                tbuf_t b;
                tbuf_alloc(&b, types[ti], c,
                           lone_buffer_kind(me == root ? mem_send : mem_recv));
                if (me == root) img_set_flat(&b, b.img, 0, c, s, root, 0);
                tbuf_push(&b);
                unsigned char *expect = tbuf_snapshot(&b);
                img_set_flat(&b, expect, 0, c, s, root, 0);
                MPI_Datatype dt = tt[types[ti]].dt;
                TRUN(nb, MPI_Bcast(b.mpi, (int)c, dt, root, comm),
                     T_Ibcast(b.mpi, (int)c, dt, root, comm, &_req));
                tbuf_pull(&b);
                tbuf_matches(&b, expect, 0, c, me == root ? "root buffer" : "result");
                free(expect);
                tbuf_free(&b);
            }
        }
    }
}

void case_allgather(MPI_Comm comm, bool nb)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int pi = 0; pi < npairs; ++pi) {
        const tpair_t *p = &pairs[pi];
        for (int ci = 0; ci < ntcounts; ++ci) {
            const long c = tcounts[ci];
            for (int ip = 0; ip < (p->mult == 1 ? 2 : 1); ++ip) {
                const unsigned s = seed_of(11, pi, c, ip, 0);
                tctx_set("%sallgather %s count %ld%s comm size %d", nb ? "i" : "", pair_name(p),
                         c, ip ? " in place" : "", n);
                tbuf_t sb = {0}, rb;
                if (!ip) {
                    tbuf_alloc(&sb, p->st, p->mult * c, mem_send);
                    img_set_flat(&sb, sb.img, 0, p->mult * c, s, me, 0);
                    tbuf_push(&sb);
                }
                tbuf_alloc(&rb, p->rt, n * c, mem_recv);
                if (ip) img_set_flat(&rb, rb.img, me * c, c, s, me, 0);
                tbuf_push(&rb);
                unsigned char *expect = tbuf_snapshot(&rb);
                for (int r = 0; r < n; ++r) img_set_flat(&rb, expect, r * c, c, s, r, 0);
                const void *sp = ip ? MPI_IN_PLACE : sb.mpi;
                const int sc = (int)(p->mult * c), rc = (int)c;
                TRUN(nb, MPI_Allgather(sp, sc, tt[p->st].dt, rb.mpi, rc, tt[p->rt].dt, comm),
                     T_Iallgather(sp, sc, tt[p->st].dt, rb.mpi, rc, tt[p->rt].dt, comm, &_req));
                tbuf_pull(&rb);
                tbuf_matches(&rb, expect, 0, n * c, "result");
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

/* Receive layout of the gather-like v-forms: uneven blocks (some empty)
 * with one element of hole after each; returns the element count. */
static long v_layout(long c, int n, int *counts, int *displs)
{
    long at = 0;
    for (int i = 0; i < n; ++i) {
        counts[i] = c == 0 ? 0 : (int)(i % 2 == 0 ? c : c / 2);
        displs[i] = (int)at;
        at += counts[i] + 1;
    }
    return at;
}

void case_allgatherv(MPI_Comm comm, bool nb)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
    for (int pi = 0; pi < npairs; ++pi) {
        const tpair_t *p = &pairs[pi];
        for (int ci = 0; ci < ntcounts; ++ci) {
            const long c = tcounts[ci];
            const long total = v_layout(c, n, counts, displs);
            for (int ip = 0; ip < (p->mult == 1 ? 2 : 1); ++ip) {
                const unsigned s = seed_of(12, pi, c, ip, 0);
                tctx_set("%sallgatherv %s count %ld%s comm size %d", nb ? "i" : "",
                         pair_name(p), c, ip ? " in place" : "", n);
                tbuf_t sb = {0}, rb;
                if (!ip) {
                    tbuf_alloc(&sb, p->st, p->mult * counts[me], mem_send);
                    img_set_flat(&sb, sb.img, 0, p->mult * counts[me], s, me, 0);
                    tbuf_push(&sb);
                }
                /* Nothing to send: the receive buffer is this rank's only one. */
                tbuf_alloc(&rb, p->rt, total,
                           !ip && 0 == counts[me] ? lone_buffer_kind(mem_recv) : mem_recv);
                if (ip) img_set_flat(&rb, rb.img, displs[me], counts[me], s, me, 0);
                tbuf_push(&rb);
                unsigned char *expect = tbuf_snapshot(&rb);
                for (int r = 0; r < n; ++r) img_set_flat(&rb, expect, displs[r], counts[r], s, r, 0);
                const void *sp = ip ? MPI_IN_PLACE : sb.mpi;
                const int sc = p->mult * counts[me];
                TRUN(nb,
                     MPI_Allgatherv(sp, sc, tt[p->st].dt, rb.mpi, counts, displs, tt[p->rt].dt,
                                    comm),
                     T_Iallgatherv(sp, sc, tt[p->st].dt, rb.mpi, counts, displs, tt[p->rt].dt,
                                   comm, &_req));
                tbuf_pull(&rb);
                tbuf_matches(&rb, expect, 0, total, "result");
                if (!ip) {
                    check_send_unchanged(&sb);
                    tbuf_free(&sb);
                }
                free(expect);
                tbuf_free(&rb);
            }
        }
    }
    free(counts);
    free(displs);
}

void case_alltoall(MPI_Comm comm, bool nb)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int pi = 0; pi < npairs; ++pi) {
        const tpair_t *p = &pairs[pi];
        const long ncr = tt[p->rt].ncomp;
        for (int ci = 0; ci < ntcounts; ++ci) {
            const long c = tcounts[ci];
            for (int ip = 0; ip < (p->mult == 1 ? 2 : 1); ++ip) {
                const unsigned s = seed_of(13, pi, c, ip, 0);
                tctx_set("%salltoall %s count %ld%s comm size %d", nb ? "i" : "", pair_name(p), c,
                         ip ? " in place" : "", n);
                tbuf_t sb = {0}, rb;
                if (!ip) {
                    tbuf_alloc(&sb, p->st, n * p->mult * c, mem_send);
                    img_set_flat(&sb, sb.img, 0, n * p->mult * c, s, me, 0);
                    tbuf_push(&sb);
                }
                tbuf_alloc(&rb, p->rt, n * c, mem_recv);
                if (ip) img_set_flat(&rb, rb.img, 0, n * c, s, me, 0);
                tbuf_push(&rb);
                unsigned char *expect = tbuf_snapshot(&rb);
                /* Block r comes from rank r's block me. */
                for (int r = 0; r < n; ++r) img_set_flat(&rb, expect, r * c, c, s, r, me * c * ncr);
                const void *sp = ip ? MPI_IN_PLACE : sb.mpi;
                const int sc = (int)(p->mult * c), rc = (int)c;
                TRUN(nb, MPI_Alltoall(sp, sc, tt[p->st].dt, rb.mpi, rc, tt[p->rt].dt, comm),
                     T_Ialltoall(sp, sc, tt[p->st].dt, rb.mpi, rc, tt[p->rt].dt, comm, &_req));
                tbuf_pull(&rb);
                tbuf_matches(&rb, expect, 0, n * c, "result");
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

/* Displacement (in elements of a side whose blocks are unit * vcount) of
 * owner's block for peer: blocks in peer order, each followed by a hole of
 * unit elements. send: owner sends to peer (vcount(owner, k)); otherwise
 * owner receives from peer (vcount(k, owner)). */
static long v_displ(long c, int owner, int peer, bool send, enum shape sym, int unit)
{
    long at = 0;
    for (int k = 0; k < peer; ++k) {
        int cnt = send ? vcount(c, owner, k, sym) : vcount(c, k, owner, sym);
        at += (long)(cnt + 1) * unit;
    }
    return at;
}

void case_alltoallv(MPI_Comm comm, bool nb)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n);
    int *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
    for (int pi = 0; pi < npairs; ++pi) {
        const tpair_t *p = &pairs[pi];
        const long ncs = tt[p->st].ncomp, ncr = tt[p->rt].ncomp;
        for (int ci = 0; ci < ntcounts; ++ci) {
            const long c = tcounts[ci];
            for (int ip = 0; ip < (p->mult == 1 ? 2 : 1); ++ip) {
                const enum shape sym = !ip ? ASYMMETRIC : nb ? UNIFORM : SYMMETRIC;
                const unsigned s = seed_of(14, pi, c, ip, 0);
                tctx_set("%salltoallv %s count %ld%s comm size %d", nb ? "i" : "", pair_name(p),
                         c, ip ? " in place" : "", n);
                for (int k = 0; k < n; ++k) {
                    sc[k] = p->mult * vcount(c, me, k, sym);
                    sd[k] = (int)v_displ(c, me, k, true, sym, p->mult);
                    rc[k] = vcount(c, k, me, sym);
                    rd[k] = (int)v_displ(c, me, k, false, sym, 1);
                }
                const long stotal = v_displ(c, me, n, true, sym, p->mult);
                const long rtotal = v_displ(c, me, n, false, sym, 1);
                tbuf_t sb = {0}, rb;
                if (!ip) {
                    tbuf_alloc(&sb, p->st, stotal, mem_send);
                    img_set_flat(&sb, sb.img, 0, stotal, s, me, 0);
                    tbuf_push(&sb);
                }
                tbuf_alloc(&rb, p->rt, rtotal,
                           !ip && 0 == stotal ? lone_buffer_kind(mem_recv) : mem_recv);
                if (ip) img_set_flat(&rb, rb.img, 0, rtotal, s, me, 0);
                tbuf_push(&rb);
                unsigned char *expect = tbuf_snapshot(&rb);
                for (int r = 0; r < n; ++r) {
                    /* Rank r's block for me: in its send buffer, or in place
                     * in its receive buffer (the same layout when symmetric). */
                    long flat0 = ip ? v_displ(c, r, me, false, sym, 1) * ncr
                                    : v_displ(c, r, me, true, sym, p->mult) * ncs;
                    img_set_flat(&rb, expect, rd[r], rc[r], s, r, flat0);
                }
                const void *sp = ip ? MPI_IN_PLACE : sb.mpi;
                TRUN(nb,
                     MPI_Alltoallv(sp, sc, sd, tt[p->st].dt, rb.mpi, rc, rd, tt[p->rt].dt, comm),
                     T_Ialltoallv(sp, sc, sd, tt[p->st].dt, rb.mpi, rc, rd, tt[p->rt].dt, comm,
                                  &_req));
                tbuf_pull(&rb);
                tbuf_matches(&rb, expect, 0, rtotal, "result");
                if (!ip) {
                    check_send_unchanged(&sb);
                    tbuf_free(&sb);
                }
                free(expect);
                tbuf_free(&rb);
            }
        }
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

/* Alltoallw: receive side c two-int vectors per block (16-byte elements);
 * send side 2c ints, typed per peer as MPI_INT (even peers) or int pairs
 * (odd peers). Displacements in bytes, a hole after every block. */
void case_alltoallw(MPI_Comm comm, bool nb)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n);
    int *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
    MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * n), *rt = malloc(sizeof(MPI_Datatype) * n);
    for (int ci = 0; ci < ntcounts; ++ci) {
        const long c = tcounts[ci];
        for (int ip = 0; ip < 2; ++ip) {
            const enum shape sym = ip ? SYMMETRIC : ASYMMETRIC;
            const unsigned s = seed_of(15, 0, c, ip, 0);
            tctx_set("%salltoallw count %ld%s comm size %d", nb ? "i" : "", c,
                     ip ? " in place" : "", n);
            for (int k = 0; k < n; ++k) {
                const int m = vcount(c, me, k, sym);
                sc[k] = k % 2 == 0 ? 2 * m : m;
                st[k] = k % 2 == 0 ? MPI_INT : tt[T_AFFINE].dt;
                sd[k] = (int)(v_displ(c, me, k, true, sym, 2) * 4);
                rc[k] = vcount(c, k, me, sym);
                rt[k] = tt[T_VEC].dt;
                rd[k] = (int)(v_displ(c, me, k, false, sym, 1) * 16);
            }
            const long stotal = v_displ(c, me, n, true, sym, 2);
            const long rtotal = v_displ(c, me, n, false, sym, 1);
            tbuf_t sb = {0}, rb;
            if (!ip) {
                tbuf_alloc(&sb, T_INT, stotal, mem_send);
                img_set_flat(&sb, sb.img, 0, stotal, s, me, 0);
                tbuf_push(&sb);
            }
            tbuf_alloc(&rb, T_VEC, rtotal, mem_recv);
            if (ip) img_set_flat(&rb, rb.img, 0, rtotal, s, me, 0);
            tbuf_push(&rb);
            unsigned char *expect = tbuf_snapshot(&rb);
            for (int r = 0; r < n; ++r) {
                long flat0 = ip ? v_displ(c, r, me, false, sym, 1) * 2
                                : v_displ(c, r, me, true, sym, 2);
                img_set_flat(&rb, expect, rd[r] / 16, rc[r], s, r, flat0);
            }
            if (ip) {
                TRUN(nb,
                     MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, rb.mpi, rc, rd, rt, comm),
                     T_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, rb.mpi, rc, rd, rt, comm,
                                  &_req));
            } else {
                TRUN(nb, MPI_Alltoallw(sb.mpi, sc, sd, st, rb.mpi, rc, rd, rt, comm),
                     T_Ialltoallw(sb.mpi, sc, sd, st, rb.mpi, rc, rd, rt, comm, &_req));
            }
            tbuf_pull(&rb);
            tbuf_matches(&rb, expect, 0, rtotal, "result");
            if (!ip) {
                check_send_unchanged(&sb);
                tbuf_free(&sb);
            }
            free(expect);
            tbuf_free(&rb);
        }
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(st);
    free(rt);
}

static void run_gather(MPI_Comm comm, bool nb, bool v)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
    int roots[2] = {0, n - 1};
    for (int ri = 0; ri < (n > 1 ? 2 : 1); ++ri) {
        const int root = roots[ri];
        for (int pi = 0; pi < npairs; ++pi) {
            const tpair_t *p = &pairs[pi];
            for (int ci = 0; ci < ntcounts; ++ci) {
                const long c = tcounts[ci];
                long total = n * c;
                if (v) {
                    total = v_layout(c, n, counts, displs);
                } else {
                    for (int i = 0; i < n; ++i) {
                        counts[i] = (int)c;
                        displs[i] = (int)(i * c);
                    }
                }
                for (int ip = 0; ip < (p->mult == 1 ? 2 : 1); ++ip) {
                    const bool in_place = ip && me == root;
                    const unsigned s = seed_of(v ? 17 : 16, pi, c, ip, root);
                    tctx_set("%sgather%s %s count %ld root %d%s comm size %d", nb ? "i" : "",
                             v ? "v" : "", pair_name(p), c, root, ip ? " in place" : "", n);
                    tbuf_t sb = {0}, rb = {0};
                    if (!in_place) {
                        tbuf_alloc(&sb, p->st, p->mult * counts[me], mem_send);
                        img_set_flat(&sb, sb.img, 0, p->mult * counts[me], s, me, 0);
                        tbuf_push(&sb);
                    }
                    unsigned char *expect = NULL;
                    if (me == root) {
                        tbuf_alloc(&rb, p->rt, total, mem_recv);
                        if (in_place) img_set_flat(&rb, rb.img, displs[me], counts[me], s, me, 0);
                        tbuf_push(&rb);
                        expect = tbuf_snapshot(&rb);
                        for (int r = 0; r < n; ++r)
                            img_set_flat(&rb, expect, displs[r], counts[r], s, r, 0);
                    }
                    const void *sp = in_place ? MPI_IN_PLACE : sb.mpi;
                    void *rp = me == root ? rb.mpi : NULL;
                    const int sc = p->mult * counts[me];
                    MPI_Datatype sdt = tt[p->st].dt, rdt = tt[p->rt].dt;
                    if (v) {
                        TRUN(nb, MPI_Gatherv(sp, sc, sdt, rp, counts, displs, rdt, root, comm),
                             T_Igatherv(sp, sc, sdt, rp, counts, displs, rdt, root, comm,
                                        &_req));
                    } else {
                        TRUN(nb, MPI_Gather(sp, sc, sdt, rp, (int)c, rdt, root, comm),
                             T_Igather(sp, sc, sdt, rp, (int)c, rdt, root, comm, &_req));
                    }
                    if (me == root) {
                        tbuf_pull(&rb);
                        tbuf_matches(&rb, expect, 0, total, "result");
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
    free(counts);
    free(displs);
}

void case_gather(MPI_Comm comm, bool nb) { run_gather(comm, nb, false); }
void case_gatherv(MPI_Comm comm, bool nb) { run_gather(comm, nb, true); }

static void run_scatter(MPI_Comm comm, bool nb, bool v)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
    int *scounts = malloc(sizeof(int) * n), *sdispls = malloc(sizeof(int) * n);
    int roots[2] = {0, n - 1};
    for (int ri = 0; ri < (n > 1 ? 2 : 1); ++ri) {
        const int root = roots[ri];
        for (int pi = 0; pi < npairs; ++pi) {
            const tpair_t *p = &pairs[pi];
            const long ncs = tt[p->st].ncomp;
            for (int ci = 0; ci < ntcounts; ++ci) {
                const long c = tcounts[ci];
                long total = n * c;
                if (v) {
                    total = v_layout(c, n, counts, displs);
                } else {
                    for (int i = 0; i < n; ++i) {
                        counts[i] = (int)c;
                        displs[i] = (int)(i * c);
                    }
                }
                /* Send side in send-type elements. */
                for (int i = 0; i < n; ++i) {
                    scounts[i] = p->mult * counts[i];
                    sdispls[i] = p->mult * displs[i];
                }
                for (int ip = 0; ip < (p->mult == 1 ? 2 : 1); ++ip) {
                    const bool in_place = ip && me == root;
                    const unsigned s = seed_of(v ? 19 : 18, pi, c, ip, root);
                    tctx_set("%sscatter%s %s count %ld root %d%s comm size %d", nb ? "i" : "",
                             v ? "v" : "", pair_name(p), c, root, ip ? " in place" : "", n);
                    tbuf_t sb = {0}, rb = {0};
                    if (me == root) {
                        tbuf_alloc(&sb, p->st, p->mult * total, mem_send);
                        img_set_flat(&sb, sb.img, 0, p->mult * total, s, root, 0);
                        tbuf_push(&sb);
                    }
                    unsigned char *expect = NULL;
                    if (!in_place) {
                        tbuf_alloc(&rb, p->rt, counts[me], mem_recv);
                        tbuf_push(&rb);
                        expect = tbuf_snapshot(&rb);
                        img_set_flat(&rb, expect, 0, counts[me], s, root, sdispls[me] * ncs);
                    }
                    const void *sp = me == root ? sb.mpi : NULL;
                    void *rp = in_place ? MPI_IN_PLACE : rb.mpi;
                    MPI_Datatype sdt = tt[p->st].dt, rdt = tt[p->rt].dt;
                    if (v) {
                        TRUN(nb,
                             MPI_Scatterv(sp, scounts, sdispls, sdt, rp, counts[me], rdt, root,
                                          comm),
                             T_Iscatterv(sp, scounts, sdispls, sdt, rp, counts[me], rdt, root,
                                         comm, &_req));
                    } else {
                        TRUN(nb,
                             MPI_Scatter(sp, (int)(p->mult * c), sdt, rp, (int)c, rdt, root, comm),
                             T_Iscatter(sp, (int)(p->mult * c), sdt, rp, (int)c, rdt, root,
                                        comm, &_req));
                    }
                    if (!in_place) {
                        tbuf_pull(&rb);
                        tbuf_matches(&rb, expect, 0, counts[me], "result");
                        free(expect);
                        tbuf_free(&rb);
                    }
                    if (me == root) {
                        check_send_unchanged(&sb);
                        tbuf_free(&sb);
                    }
                }
            }
        }
    }
    free(counts);
    free(displs);
    free(scounts);
    free(sdispls);
}

void case_scatter(MPI_Comm comm, bool nb) { run_scatter(comm, nb, false); }
void case_scatterv(MPI_Comm comm, bool nb) { run_scatter(comm, nb, true); }

void case_barrier(MPI_Comm comm, bool nb)
{
    int n;
    MPI_Comm_size(comm, &n);
    tctx_set("%sbarrier comm size %d", nb ? "i" : "", n);
    for (int i = 0; i < 3; ++i) TRUN(nb, MPI_Barrier(comm), T_Ibarrier(comm, &_req));
}
