/*
 * Blocking collectives whose ranks pass what MPI lets them pass differently
 * (coll_<component>_agree, on by default), results checked against a host
 * reference on every rank:
 *
 * - Allreduce, Reduce, Bcast and Allgather where one rank (each in turn)
 *   passes host buffers only and the others device memory, at counts below
 *   and above the small-call limit: the ranks with device memory run the call
 *   staged (coll_<component>_mixed_calls rises by one there), the host rank
 *   passes it through, and no GPU algorithm waits for a rank that runs Open
 *   MPI's (without the agreement such a call hangs or fails).
 * - Bcast and Allgather on device memory everywhere where one rank (each in
 *   turn) describes its elements with a vector type with gaps and the others
 *   with a dense pair of ints (one signature): every byte right, gaps
 *   unchanged, nothing counted as mixed.
 *
 *   coll_agree fakedevrw | device
 *
 * fakedevrw: the simulated GPU of coll "gpuwirefake" (with GW_FAKE_NVLINK=1
 * its NVLink team takes the calls it can); device: cudaMalloc (exits 77
 * without a usable GPU).
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"
#include "coll_pvar.h"

static MPI_T_pvar_session session;
static MPI_T_pvar_handle mixed_h = MPI_T_PVAR_HANDLE_NULL;

static unsigned long long mixed(void)
{
    return coll_pvar_read(session, mixed_h);
}

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
 * memory only and the others memory of kind dev. */
static void one_host_rank_call(MPI_Comm comm, enum mem_kind dev, enum call k, long c, int host)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const int root = (host + 1) % n;
    const enum mem_kind mk = me == host ? MEM_HOST : dev;
    const unsigned s = (unsigned)(k * 7919 + host * 131 + c);
    tctx_set("%s of %ld ints, rank %d with host buffers only, root %d", call_names[k], c, host,
             root);
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
    const unsigned long long before = mixed();
    switch (k) {
    case C_ALLREDUCE:
        MT_CHECK_MPI(MPI_Allreduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, comm));
        break;
    case C_REDUCE:
        MT_CHECK_MPI(MPI_Reduce(sb.mpi, rb.mpi, (int)c, MPI_INT, MPI_SUM, root, comm));
        break;
    case C_BCAST:
        MT_CHECK_MPI(MPI_Bcast(rb.mpi, (int)c, MPI_INT, root, comm));
        break;
    default:
        MT_CHECK_MPI(MPI_Allgather(sb.mpi, (int)c, MPI_INT, rb.mpi, (int)c, MPI_INT, comm));
        break;
    }
    /* Reduce's non-roots and Bcast's root write nothing: their receive
     * buffers must be as they were. A rank with device memory in the call
     * counts it as mixed; a Reduce non-root's receive buffer is not
     * significant, so its kind is its send buffer's. */
    check_mixed(before, me != host);
    tbuf_pull(&rb);
    tbuf_matches(&rb, expect, 0, 0, "result");
    free(expect);
    tbuf_free(&sb);
    tbuf_free(&rb);
}

static void one_host_rank(MPI_Comm comm, enum mem_kind dev)
{
    int n;
    MPI_Comm_size(comm, &n);
    const long cs[] = {1, 7, 40000};
    for (int host = 0; host < n; ++host) {
        for (int k = 0; k < C_N; ++k) {
            for (size_t ci = 0; ci < sizeof(cs) / sizeof(cs[0]); ++ci) {
                one_host_rank_call(comm, dev, (enum call)k, cs[ci], host);
            }
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

    const struct {
        const char *name;
        void (*fn)(MPI_Comm, enum mem_kind);
    } cases[] = {
        {"blocking calls with one rank's buffers in host memory", one_host_rank},
        {"bcast and allgather with one rank's type with gaps", one_rank_with_gaps},
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
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    harness_fini();
    return mt_finish();
}
