/*
 * Collectives whose ranks pass what MPI lets them pass differently
 * (coll_<component>_agree and _agree_nb, on by default), results checked
 * against a host reference on every rank:
 *
 * - Allreduce, Reduce, Bcast and Allgather where one rank (each in turn)
 *   passes host buffers only and the others device memory, at counts below
 *   and above the small-call limit: the ranks with device memory run the call
 *   staged (coll_<component>_mixed_calls rises by one there), the host rank
 *   passes it through, and no GPU algorithm waits for a rank that runs Open
 *   MPI's (without the agreement such a call hangs or fails).
 * - The same non-blocking: every rank initiating at once (the agreement is
 *   over at the initiation), and with the host rank late (the others act on
 *   it from MPI's progress: coll_<component>_nb_agreements_late rises).
 * - Five Iallreduce in flight with different outcomes (one rank's host
 *   buffers, device memory everywhere, host memory everywhere) and an
 *   Ibarrier among them, completed in reverse order, then an Iallreduce
 *   followed by a blocking Allreduce; once with rank 0 late.
 * - Bcast and Allgather on device memory everywhere where one rank (each in
 *   turn) describes its elements with a vector type with gaps and the others
 *   with a dense pair of ints (one signature): every byte right, gaps
 *   unchanged, nothing counted as mixed.
 * - Iallgatherv, Ireduce_scatter, Ialltoallv, Igatherv and Iscatterv whose
 *   count and displacement arrays (and the derived type of the first and
 *   third) are freed right after the initiation, on host memory and on
 *   device memory, rank 0 late.
 *
 *   coll_agree fakedevrw | device
 *
 * fakedevrw: the simulated GPU of coll "gpuwirefake" (with GW_FAKE_NVLINK=1
 * its NVLink team takes the calls it can); device: cudaMalloc (exits 77
 * without a usable GPU).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_harness.h"
#include "coll_pvar.h"

static MPI_T_pvar_session session;
static MPI_T_pvar_handle mixed_h = MPI_T_PVAR_HANDLE_NULL, late_h = MPI_T_PVAR_HANDLE_NULL;

static unsigned long long mixed(void)
{
    return coll_pvar_read(session, mixed_h);
}

/* Blocking; non-blocking, every rank initiating at once; non-blocking with
 * the host rank late by LATE_US, so that the others' agreements are not
 * over at their initiation and the calls act on them from MPI's progress. */
enum form { F_BLOCKING, F_NB, F_NB_LATE, F_N };
static const char *const form_names[F_N] = {"", "non-blocking ", "non-blocking (one rank late) "};
#define LATE_US 200000

static void check_mixed(unsigned long long before, bool want)
{
    const unsigned long long got = mixed() - before;
    if (got != (want ? 1u : 0u)) {
        mt_fail(__FILE__, __LINE__, "%s [%s]: %llu calls counted as mixed on rank %d, expected %d",
                tctx, mode_name, got, mt_rank, want ? 1 : 0);
    }
}

enum call { C_ALLREDUCE, C_REDUCE, C_BCAST, C_ALLGATHER, C_N };
static const char *const call_names[C_N] = {"allreduce", "reduce", "bcast", "allgather"};

/* One call of c ints (per rank for Allgather) where rank host passes host
 * memory only and the others memory of kind dev, in form f. */
static void one_host_rank_call(MPI_Comm comm, enum mem_kind dev, enum call k, long c, int host,
                               enum form f)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const int root = (host + 1) % n;
    const enum mem_kind mk = me == host ? MEM_HOST : dev;
    const unsigned s = (unsigned)(k * 7919 + host * 131 + c);
    tctx_set("%s%s of %ld ints, rank %d with host buffers only, root %d", form_names[f],
             call_names[k], c, host, root);
    tbuf_t sb, rb;
    const long rn = C_ALLGATHER == k ? n * c : c;
    tbuf_alloc(&sb, T_INT, c, mk);
    tbuf_alloc(&rb, T_INT, rn, mk);
    if (C_BCAST == k) {
        if (me == root) img_set_flat(&rb, rb.img, 0, c, s, root, 0);
    } else if (C_ALLGATHER == k) {
        img_set_flat(&sb, sb.img, 0, c, s, me, 0);
    } else {
        for (long e = 0; e < c; ++e) {
            int64_t v[2];
            tval(OP_SUM, T_INT, s, me, e, v);
            tbuf_set(&sb, e, v);
        }
    }
    tbuf_push(&sb);
    tbuf_push(&rb);
    unsigned char *expect = tbuf_snapshot(&rb);
    if (C_BCAST == k) {
        img_set_flat(&rb, expect, 0, c, s, root, 0);
    } else if (C_ALLGATHER == k) {
        for (int q = 0; q < n; ++q) img_set_flat(&rb, expect, q * c, c, s, q, 0);
    } else if (C_ALLREDUCE == k || me == root) {
        for (long e = 0; e < c; ++e) {
            int64_t acc[2];
            tfold(OP_SUM, T_INT, s, 0, n, e, acc);
            img_set(&rb, expect, e, acc);
        }
    }
    const unsigned long long before = mixed(), late = coll_pvar_read(session, late_h);
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Request *nb = F_BLOCKING == f ? NULL : &q;
    if (F_NB_LATE == f && me == host) usleep(LATE_US);
    switch (k) {
    case C_ALLREDUCE:
        MT_CHECK_MPI(nb ? MPI_Iallreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, comm, nb)
                        : MPI_Allreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, comm));
        break;
    case C_REDUCE:
        MT_CHECK_MPI(nb ? MPI_Ireduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, root, comm, nb)
                        : MPI_Reduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, root, comm));
        break;
    case C_BCAST:
        MT_CHECK_MPI(nb ? MPI_Ibcast(rb.mpi, (int)c, MPI_INT, root, comm, nb)
                        : MPI_Bcast(rb.mpi, (int)c, MPI_INT, root, comm));
        break;
    default:
        MT_CHECK_MPI(nb ? MPI_Iallgather(sb.mpi, (int)c, MPI_INT, rb.mpi, (int)c, MPI_INT, comm, nb)
                        : MPI_Allgather(sb.mpi, (int)c, MPI_INT, rb.mpi, (int)c, MPI_INT, comm));
        break;
    }
    if (nb) MT_CHECK_MPI(MPI_Wait(nb, MPI_STATUS_IGNORE));
    /* Reduce's non-roots and Bcast's root write nothing: their receive
     * buffers must be as they were. A rank with device memory in the call
     * counts it as mixed; a Reduce non-root's receive buffer is not
     * significant, so its kind is its send buffer's. */
    check_mixed(before, me != host);
    /* The ranks that were on time acted on the agreement from progress. */
    if (F_NB_LATE == f && me != host && coll_pvar_read(session, late_h) == late) {
        mt_fail(__FILE__, __LINE__, "%s [%s]: rank %d did not wait for the late rank's agreement",
                tctx, mode_name, mt_rank);
    }
    tbuf_pull(&rb);
    tbuf_matches(&rb, expect, 0, 0, "result");
    free(expect);
    tbuf_free(&sb);
    tbuf_free(&rb);
}

static void one_host_rank_form(MPI_Comm comm, enum mem_kind dev, enum form f)
{
    int n;
    MPI_Comm_size(comm, &n);
    const long cs[] = {1, 7, 40000};
    for (int host = 0; host < n; ++host) {
        for (int k = 0; k < C_N; ++k) {
            for (size_t ci = 0; ci < sizeof(cs) / sizeof(cs[0]); ++ci) {
                /* One size for the late form: each costs LATE_US. */
                if (F_NB_LATE == f && 7 != cs[ci]) continue;
                one_host_rank_call(comm, dev, (enum call)k, cs[ci], host, f);
            }
        }
    }
}

static void one_host_rank(MPI_Comm comm, enum mem_kind dev)
{
    one_host_rank_form(comm, dev, F_BLOCKING);
}

static void one_host_rank_nb(MPI_Comm comm, enum mem_kind dev)
{
    one_host_rank_form(comm, dev, F_NB);
    one_host_rank_form(comm, dev, F_NB_LATE);
}

/* Several non-blocking calls in flight at once, with different outcomes of
 * their agreements (one rank's host buffers; device memory everywhere; host
 * memory everywhere), an Ibarrier among them, rank 0 late so that the others
 * act on every agreement from MPI's progress, completed in reverse order:
 * every result right on every rank. */
static void burst_nb(MPI_Comm comm, enum mem_kind dev)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    enum { B = 5 };
    const long c = 4000;
    /* Per call: the rank with host memory (-1: none; n: every rank). */
    const int host_of[B] = {1 % n, -1, n, -1, 0};
    tbuf_t sb[B], rb[B];
    unsigned char *expect[B];
    MPI_Request q[B + 1];
    for (int round = 0; round < 2; ++round) {
        tctx_set("%d non-blocking calls in flight%s", B, round ? ", rank 0 late" : "");
        for (int i = 0; i < B; ++i) {
            const enum mem_kind mk = (host_of[i] == me || host_of[i] == n) ? MEM_HOST : dev;
            const unsigned s = (unsigned)(i * 131 + round * 7 + 3);
            tbuf_alloc(&sb[i], T_INT, c, mk);
            tbuf_alloc(&rb[i], T_INT, c, mk);
            for (long e = 0; e < c; ++e) {
                int64_t v[2];
                tval(OP_SUM, T_INT, s, me, e, v);
                tbuf_set(&sb[i], e, v);
            }
            tbuf_push(&sb[i]);
            tbuf_push(&rb[i]);
            expect[i] = tbuf_snapshot(&rb[i]);
            for (long e = 0; e < c; ++e) {
                int64_t acc[2];
                tfold(OP_SUM, T_INT, s, 0, n, e, acc);
                img_set(&rb[i], expect[i], e, acc);
            }
        }
        if (round && 0 == me) usleep(LATE_US);
        for (int i = 0; i < B; ++i) {
            MT_CHECK_MPI(MPI_Iallreduce(sb[i].mpi, rb[i].mpi, (int)c, MPI_INT, MPI_SUM, comm, &q[i]));
            if (2 == i) MT_CHECK_MPI(MPI_Ibarrier(comm, &q[B]));
        }
        for (int i = B; i >= 0; --i) MT_CHECK_MPI(MPI_Wait(&q[i], MPI_STATUS_IGNORE));
        for (int i = 0; i < B; ++i) {
            tbuf_pull(&rb[i]);
            tbuf_matches(&rb[i], expect[i], 0, 0, "result");
            free(expect[i]);
            tbuf_free(&sb[i]);
            tbuf_free(&rb[i]);
        }
        /* And a blocking call right after non-blocking ones not yet acted on. */
        if (round && 0 == me) usleep(LATE_US);
        MPI_Request r2;
        int x = me + 1, sum = 0, y = 0;
        MT_CHECK_MPI(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, comm, &r2));
        MT_CHECK_MPI(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, comm));
        MT_CHECK_MPI(MPI_Wait(&r2, MPI_STATUS_IGNORE));
        MT_CHECK_EQ(sum, n * (n + 1) / 2);
        MT_CHECK_EQ(y, n * (n + 1) / 2);
    }
}

/* A fresh array of n ints, to be scribbled over and freed right after the
 * initiation that gets it (as clients do with temporaries: mpi4py). */
static int *ints(int n, int first, int step)
{
    int *a = malloc((size_t)n * sizeof(int));
    if (NULL == a) abort();
    for (int i = 0; i < n; ++i) a[i] = first + step * i;
    return a;
}

static void scribble_free(int *a, int n)
{
    for (int i = 0; i < n; ++i) a[i] = -123456789;
    free(a);
}

/* Iallgatherv, Ireduce_scatter, Ialltoallv, Igatherv and Iscatterv whose
 * count and displacement arrays are overwritten and freed right after the
 * initiation, and whose derived datatype is freed then too (another type made
 * at once in its place), every rank's buffers host memory or every rank's device
 * memory, rank 0 late: the others' calls start after their initiation
 * returned (from MPI's progress, after the agreement), and must not read the
 * application's arrays then. Every result right. */
static void arrays_freed_nb(MPI_Comm comm, enum mem_kind dev)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    enum { K = 5 };
    static const char *const names[K] = {"iallgatherv", "ireduce_scatter", "ialltoallv",
                                         "igatherv", "iscatterv"};
    const long c = 3; /* ints per block; rank r's block has c + r of them */
    long total = 0;
    for (int r = 0; r < n; ++r) total += c + r;
    for (int kind = 0; kind < 2; ++kind) {
        const enum mem_kind mk = kind ? dev : MEM_HOST;
        for (int k = 0; k < K; ++k) {
            tctx_set("%s, arrays freed after the initiation, %s memory, rank 0 late", names[k],
                     kind ? "device" : "host");
            const long scount = 0 == k || 3 == k ? c + me : 2 == k ? n * c : total;
            const long rcount = 0 == k || 3 == k ? total : 1 == k ? c + me : 2 == k ? n * c : c + me;
            tbuf_t sb, rb;
            tbuf_alloc(&sb, T_INT, scount, mk);
            tbuf_alloc(&rb, T_INT, rcount, mk);
            for (long e = 0; e < scount; ++e) {
                /* Element e of block r carries (me, r, e): every kind of call
                 * sends block r to rank r (or the whole to the root). */
                const int64_t v[2] = {1 == k ? me + 1 : me * 1000 + e, 0};
                tbuf_set(&sb, e, v);
            }
            tbuf_push(&sb);
            tbuf_push(&rb);
            unsigned char *expect = tbuf_snapshot(&rb);
            long at = 0;
            for (int r = 0; r < n; ++r) { /* the reference, per call kind */
                if (0 == k || (3 == k && 0 == me)) { /* block of rank r: its c + r */
                    for (long e = 0; e < c + r; ++e) {
                        const int64_t v[2] = {r * 1000 + e, 0};
                        img_set(&rb, expect, at + e, v);
                    }
                    at += c + r;
                } else if (2 == k) { /* block me of rank r: c ints from me * c */
                    for (long e = 0; e < c; ++e) {
                        const int64_t v[2] = {r * 1000 + me * c + e, 0};
                        img_set(&rb, expect, r * c + e, v);
                    }
                }
            }
            if (1 == k) {
                for (long e = 0; e < c + me; ++e) {
                    const int64_t v[2] = {n * (n + 1) / 2, 0};
                    img_set(&rb, expect, e, v);
                }
            } else if (4 == k) { /* my block of the root's (rank 0's) send buffer */
                long off = 0;
                for (int r = 0; r < me; ++r) off += c + r;
                for (long e = 0; e < c + me; ++e) {
                    const int64_t v[2] = {off + e, 0};
                    img_set(&rb, expect, e, v);
                }
            }
            int *counts = ints(n, (int)c, 1), *displs = malloc((size_t)n * sizeof(int));
            if (NULL == displs) abort();
            for (int r = 0, d = 0; r < n; d += counts[r], ++r) displs[r] = d;
            int *acounts = ints(n, (int)c, 0), *adispls = ints(n, 0, (int)c);
            /* A derived type of one int, freed after the initiation too. */
            MPI_Datatype one;
            MT_CHECK_MPI(MPI_Type_contiguous(1, MPI_INT, &one));
            MT_CHECK_MPI(MPI_Type_commit(&one));
            if (0 == me) usleep(LATE_US);
            MPI_Request q;
            switch (k) {
            case 0:
                MT_CHECK_MPI(MPI_Iallgatherv(sb.mpi, (int)scount, one, rb.mpi, counts, displs, one,
                                             comm, &q));
                break;
            case 1:
                MT_CHECK_MPI(MPI_Ireduce_scatter(sb.mpi, rb.mpi, counts, MPI_INT, MPI_SUM, comm,
                                                 &q));
                break;
            case 2:
                MT_CHECK_MPI(MPI_Ialltoallv(sb.mpi, acounts, adispls, one, rb.mpi, acounts,
                                            adispls, one, comm, &q));
                break;
            case 3:
                MT_CHECK_MPI(MPI_Igatherv(sb.mpi, (int)scount, MPI_INT, rb.mpi, counts, displs,
                                          MPI_INT, 0, comm, &q));
                break;
            default:
                MT_CHECK_MPI(MPI_Iscatterv(sb.mpi, counts, displs, MPI_INT, rb.mpi, (int)rcount,
                                           MPI_INT, 0, comm, &q));
                break;
            }
            MT_CHECK_MPI(MPI_Type_free(&one));
            /* A type made right after the free would take the freed one's
             * memory if nothing held a reference on `one` (the request does,
             * and Open MPI 4.1's bindings of the MPI_I... calls do too): a
             * call that read it then would move two ints per element. */
            MPI_Datatype two;
            MT_CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &two));
            MT_CHECK_MPI(MPI_Type_commit(&two));
            scribble_free(counts, n);
            scribble_free(displs, n);
            scribble_free(acounts, n);
            scribble_free(adispls, n);
            MT_CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
            MT_CHECK_MPI(MPI_Type_free(&two));
            tbuf_pull(&rb);
            if (!(3 == k && 0 != me)) tbuf_matches(&rb, expect, 0, 0, "result");
            free(expect);
            tbuf_free(&sb);
            tbuf_free(&rb);
        }
    }
}

/* Bcast (root each rank in turn) and Allgather of c int pairs on device
 * memory, rank odd's datatype a vector with gaps, the others' dense. */
static void one_rank_with_gaps(MPI_Comm comm, enum mem_kind dev)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const long cs[] = {1, 7, 4000};
    for (int odd = 0; odd < n; ++odd) {
        const enum ttype_id t = me == odd ? T_VEC : T_AFFINE;
        for (size_t ci = 0; ci < sizeof(cs) / sizeof(cs[0]); ++ci) {
            const long c = cs[ci];
            for (int root = 0; root < n; ++root) {
                const unsigned s = (unsigned)(odd * 7919 + root * 131 + c);
                tctx_set("bcast of %ld pairs, root %d, rank %d's vector type with gaps", c, root,
                         odd);
                tbuf_t b;
                tbuf_alloc(&b, t, c, dev);
                if (me == root) img_set_flat(&b, b.img, 0, c, s, root, 0);
                tbuf_push(&b);
                unsigned char *expect = tbuf_snapshot(&b);
                img_set_flat(&b, expect, 0, c, s, root, 0);
                const unsigned long long before = mixed();
                MT_CHECK_MPI(MPI_Bcast(b.mpi, (int)c, tt[t].dt, root, comm));
                check_mixed(before, false);
                tbuf_pull(&b);
                /* Every byte, gaps included. */
                tbuf_matches(&b, expect, 0, 0, "result");
                free(expect);
                tbuf_free(&b);
            }
            const unsigned s = (unsigned)(odd * 7919 + c + 17);
            tctx_set("allgather of %ld pairs, rank %d's vector type with gaps", c, odd);
            tbuf_t sb, rb;
            tbuf_alloc(&sb, t, c, dev);
            tbuf_alloc(&rb, t, n * c, dev);
            img_set_flat(&sb, sb.img, 0, c, s, me, 0);
            tbuf_push(&sb);
            tbuf_push(&rb);
            unsigned char *expect = tbuf_snapshot(&rb);
            for (int q = 0; q < n; ++q) img_set_flat(&rb, expect, q * c, c, s, q, 0);
            const unsigned long long before = mixed();
            MT_CHECK_MPI(
                MPI_Allgather(sb.mpi, (int)c, tt[t].dt, rb.mpi, (int)c, tt[t].dt, comm));
            check_mixed(before, false);
            tbuf_pull(&rb);
            tbuf_matches(&rb, expect, 0, 0, "result");
            free(expect);
            tbuf_free(&sb);
            tbuf_free(&rb);
        }
    }
}

int main(int argc, char **argv)
{
    int exit_code;
    if (!harness_init_device(&argc, &argv, &exit_code)) return exit_code;
    const enum mem_kind dev = mem_send;
    char name[128];
    int provided;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
    snprintf(name, sizeof(name), "coll_%s_mixed_calls",
             dev == MEM_FAKEDEV_RW ? "gpuwirefake" : "gpuwire");
    mixed_h = coll_pvar_open(session, name, MPI_T_PVAR_CLASS_COUNTER);
    snprintf(name, sizeof(name), "coll_%s_nb_agreements_late",
             dev == MEM_FAKEDEV_RW ? "gpuwirefake" : "gpuwire");
    late_h = coll_pvar_open(session, name, MPI_T_PVAR_CLASS_COUNTER);

    const struct {
        const char *name;
        void (*fn)(MPI_Comm, enum mem_kind);
    } cases[] = {
        {"blocking calls with one rank's buffers in host memory", one_host_rank},
        {"non-blocking calls with one rank's buffers in host memory", one_host_rank_nb},
        {"non-blocking calls in flight with different outcomes", burst_nb},
        {"bcast and allgather with one rank's type with gaps", one_rank_with_gaps},
        {"non-blocking v-forms whose arrays are freed after the initiation", arrays_freed_nb},
    };
    /* GW_TEST_AGREE_CASE=i: only case i (0-based). */
    const char *only = getenv("GW_TEST_AGREE_CASE");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        if (NULL != only && (size_t)atoi(only) != i) continue;
        const int before = mt_failures;
        cases[i].fn(MPI_COMM_WORLD, dev);
        if (mt_failures != before) {
            fprintf(stderr, "[rank %d] %s: %d failure(s)\n", mt_rank, cases[i].name,
                    mt_failures - before);
        }
    }
    if (mixed_h != MPI_T_PVAR_HANDLE_NULL) MPI_T_pvar_handle_free(session, &mixed_h);
    if (late_h != MPI_T_PVAR_HANDLE_NULL) MPI_T_pvar_handle_free(session, &late_h);
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    harness_fini();
    return mt_finish();
}
