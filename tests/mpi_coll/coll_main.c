/*
 * Every collective coll/gpuwire provides, checked against a host reference:
 * types with gaps and a negative lower bound, predefined and user-defined
 * ops (one not commutative), counts 0 / 1 / odd / large, in place and not,
 * blocking, non-blocking and persistent, on MPI_COMM_WORLD and on the halves of an
 * MPI_Comm_split with reversed rank order (a single-rank half on odd sizes).
 *
 *   coll_main [host|device|managed|mixed|mixedstaged|fakedev|fakedevrw|
 *              fakemixed|fakemixedstaged]
 *
 * host: every buffer in host memory. device / managed: every buffer from
 * cudaMalloc / cudaMallocManaged. mixed: send buffers on the GPU, receive
 * buffers in host memory on MPI_COMM_WORLD, and the other way round on the
 * split; a rank whose only buffer of a reduction or Bcast would be
 * host memory while others pass device memory gets device memory (see
 * lone_buffer_kind); mixedstaged keeps that shape too and runs under
 * coll_gpuwire_reduce_algorithm and coll_gpuwire_move_algorithm staged. fake*: the same over the simulated
 * GPU of coll "gpuwirefake" (fake_device.c). The GPU modes exit 77 (skipped)
 * without a usable GPU.
 *
 * GW_TEST_EXPECT_COLL_PVAR=<name>: a counter of the coll component (such as
 * coll_gpuwirefake_hier_calls) that must count on every rank during the run.
 * GW_TEST_EXPECT_COLL_PVAR_IN=<case>,<case>,...: with it, each case named
 * (a name of cases[] below) must make that counter count on every rank in
 * its blocking run on MPI_COMM_WORLD, and each name of one with an "i" in
 * front (iallreduce) in its non-blocking run there, through the counter of
 * GW_TEST_EXPECT_COLL_PVAR_NB=<name> where that is set (such as
 * coll_gpuwirefake_nvlink_nb_calls); an unknown name fails the test.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"
#include "coll_pvar.h"

typedef void (*case_fn)(MPI_Comm, bool);

static const struct {
    const char *name;
    case_fn fn;
} cases[] = {
    {"allreduce", case_allreduce},
    {"reduce", case_reduce},
    {"scan", case_scan},
    {"exscan", case_exscan},
    {"reduce_scatter", case_reduce_scatter},
    {"reduce_scatter_block", case_reduce_scatter_block},
    {"bcast", case_bcast},
    {"allgather", case_allgather},
    {"allgatherv", case_allgatherv},
    {"alltoall", case_alltoall},
    {"alltoallv", case_alltoallv},
    {"alltoallw", case_alltoallw},
    {"gather", case_gather},
    {"gatherv", case_gatherv},
    {"scatter", case_scatter},
    {"scatterv", case_scatterv},
    {"barrier", case_barrier},
    {"reduce_local", case_reduce_local},
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* The counter of GW_TEST_EXPECT_COLL_PVAR, and the cases that must make it
 * count (GW_TEST_EXPECT_COLL_PVAR_IN). */
static const char *expect;
static MPI_T_pvar_session session = MPI_T_PVAR_SESSION_NULL;
static MPI_T_pvar_handle counter = MPI_T_PVAR_HANDLE_NULL;
static const char *expect_nb;
static MPI_T_pvar_handle nb_counter = MPI_T_PVAR_HANDLE_NULL;
static bool expect_in[NCASES][2]; /* [case][non-blocking] */

/* Marks the cases named in list (comma-separated); fails on a name that is
 * not one of them. */
static void parse_expect_in(const char *list)
{
    const char *p = list;
    while (*p) {
        const size_t len = strcspn(p, ",");
        bool known = false;
        for (size_t i = 0; i < NCASES; ++i) {
            const size_t n = strlen(cases[i].name);
            if (n == len && 0 == strncmp(cases[i].name, p, len)) {
                expect_in[i][0] = known = true;
            } else if (n + 1 == len && 'i' == p[0] && 0 == strncmp(cases[i].name, p + 1, n)) {
                expect_in[i][1] = known = true;
            }
        }
        if (!known && len > 0) {
            mt_fail(__FILE__, __LINE__, "GW_TEST_EXPECT_COLL_PVAR_IN: no case %.*s", (int)len, p);
        }
        p += len;
        if (',' == *p) ++p;
    }
}

/* GW_TEST_COLL_CASES (comma-separated case names; unset: all): the cases
 * run_all runs, for tests narrower than the whole matrix. */
static bool case_selected(const char *name)
{
    const char *p = getenv("GW_TEST_COLL_CASES");
    if (NULL == p) return true;
    const size_t n = strlen(name);
    while (*p) {
        const size_t len = strcspn(p, ",");
        if (len == n && 0 == strncmp(p, name, n)) return true;
        p += len;
        if (',' == *p) ++p;
    }
    return false;
}

/* check: whether the cases of GW_TEST_EXPECT_COLL_PVAR_IN must count here.
 * Every case blocking, non-blocking, and in the persistent form (counted as
 * non-blocking: each MPI_Start runs the non-blocking form) where this MPI
 * has it. */
static void run_all(MPI_Comm comm, const char *comm_name, bool check)
{
    static const char *const prefix[3] = {"", "i", "persistent "};
    const int forms = t_persistent_available() ? 3 : 2;
    for (int form = 0; form < forms; ++form) {
        const bool nb = form > 0;
        t_persistent = 2 == form;
        for (size_t i = 0; i < NCASES; ++i) {
            if (!case_selected(cases[i].name)) continue;
            int before = mt_failures;
            const bool counts = check && expect_in[i][nb];
            const MPI_T_pvar_handle h = nb ? nb_counter : counter;
            const unsigned long long was = counts ? coll_pvar_read(session, h) : 0;
            cases[i].fn(comm, nb);
            if (counts && coll_pvar_read(session, h) == was) {
                mt_fail(__FILE__, __LINE__, "%s%s on %s: %s did not count on rank %d",
                        prefix[form], cases[i].name, comm_name, nb ? expect_nb : expect,
                        mt_rank);
            }
            if (mt_failures != before) {
                fprintf(stderr, "[rank %d] %s%s on %s: %d failure(s)\n", mt_rank, prefix[form],
                        cases[i].name, comm_name, mt_failures - before);
            }
        }
    }
    t_persistent = false;
}

int main(int argc, char **argv)
{
    harness_init(&argc, &argv);
    if (harness_skip_reason()) return mt_skip(harness_skip_reason());
    if (0 == mt_rank && !t_persistent_available()) {
        printf("note: this MPI has no persistent collectives; that form is not run\n");
    }

    /* The counters of the header comment. */
    expect = getenv("GW_TEST_EXPECT_COLL_PVAR");
    const char *expect_in_list = getenv("GW_TEST_EXPECT_COLL_PVAR_IN");
    bool check_in = false;
    if (expect && *expect) {
        int provided = 0;
        MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
        MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
        counter = coll_pvar_open(session, expect, MPI_T_PVAR_CLASS_COUNTER);
        expect_nb = getenv("GW_TEST_EXPECT_COLL_PVAR_NB");
        if (expect_nb && *expect_nb) {
            nb_counter = coll_pvar_open(session, expect_nb, MPI_T_PVAR_CLASS_COUNTER);
        } else {
            expect_nb = expect;
            nb_counter = counter;
        }
    }
    if (expect_in_list && *expect_in_list) {
        if (expect && *expect) {
            parse_expect_in(expect_in_list);
            check_in = true;
        } else {
            mt_fail(__FILE__, __LINE__,
                    "GW_TEST_EXPECT_COLL_PVAR_IN without GW_TEST_EXPECT_COLL_PVAR");
        }
    }

    /* Non-blocking calls first, on a fresh communicator: a team of the
     * NVLink kernels (where one can exist) is set up from their progress,
     * with staged calls initiated in between; with
     * GW_TEST_EXPECT_COLL_PVAR_NB, its counter must count there. */
    MPI_Comm fresh;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &fresh));
    case_team_outcome_seen_late(fresh);
    MT_CHECK_MPI(MPI_Comm_free(&fresh));
    /* Only non-blocking calls on a fresh communicator: after a few (16,
     * GW_CE_NVL_ADOPT_AFTER) they go by the team's outcome, so the counter
     * of GW_TEST_EXPECT_COLL_PVAR_NB must count there even where the team
     * is unusable (the calls given to the team stage). */
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &fresh));
    const unsigned long long only_was =
        nb_counter != counter ? coll_pvar_read(session, nb_counter) : 0;
    case_nonblocking_only(fresh, 24);
    if (nb_counter != counter && mt_size > 1 &&
        coll_pvar_read(session, nb_counter) == only_was) {
        mt_fail(__FILE__, __LINE__, "non-blocking calls only on a fresh communicator: %s did "
                "not count on rank %d", expect_nb, mt_rank);
    }
    MT_CHECK_MPI(MPI_Comm_free(&fresh));
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &fresh));
    const unsigned long long nb_was = nb_counter != counter ? coll_pvar_read(session, nb_counter) : 0;
    case_initiation_does_not_wait(fresh);
    case_many_in_flight(fresh);
    if (nb_counter != counter && coll_pvar_read(session, nb_counter) == nb_was) {
        mt_fail(__FILE__, __LINE__, "non-blocking calls first on a fresh communicator: %s did "
                "not count on rank %d", expect_nb, mt_rank);
    }
    MT_CHECK_MPI(MPI_Comm_free(&fresh));

    /* A persistent Allreduce and Bcast first on a fresh communicator: the
     * initialization sets up what the starts use (the hierarchical levels),
     * so where "iallreduce" is in GW_TEST_EXPECT_COLL_PVAR_IN the counter
     * must count there already. */
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &fresh));
    /* cases[0] is allreduce */
    const bool persistent_counts = check_in && expect_in[0][1] && t_persistent_available();
    const unsigned long long p_was = persistent_counts ? coll_pvar_read(session, nb_counter) : 0;
    case_persistent_restart(fresh, -1);
    if (persistent_counts && coll_pvar_read(session, nb_counter) == p_was) {
        mt_fail(__FILE__, __LINE__, "persistent calls first on a fresh communicator: %s did not "
                "count on rank %d", expect_nb, mt_rank);
    }
    MT_CHECK_MPI(MPI_Comm_free(&fresh));

    run_all(MPI_COMM_WORLD, "MPI_COMM_WORLD", check_in);

    /* Halves in reversed order: rank 0 of the sub-communicator is the
     * highest world rank of its half. */
    MPI_Comm half;
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_size - mt_rank, &half));
    if (mem_send != mem_recv) {
        enum mem_kind t = mem_send;
        mem_send = mem_recv;
        mem_recv = t;
    }
    run_all(half, "split", false);
    MPI_Comm_free(&half);

    case_many_in_flight(MPI_COMM_WORLD);
    case_initiation_does_not_wait(MPI_COMM_WORLD);
    case_blocking_after_nonblocking(MPI_COMM_WORLD);
    case_crossing_reduce_scatters(MPI_COMM_WORLD);
    case_persistent_restart(MPI_COMM_WORLD, -1);
    case_persistent_restart(MPI_COMM_WORLD, mt_size - 1);

    if (expect && *expect) {
        const unsigned long long n = coll_pvar_read(session, counter);
        if (0 == n) mt_fail(__FILE__, __LINE__, "%s did not count on rank %d", expect, mt_rank);
        if (nb_counter != counter && nb_counter != MPI_T_PVAR_HANDLE_NULL) {
            MPI_T_pvar_handle_free(session, &nb_counter);
        }
        if (counter != MPI_T_PVAR_HANDLE_NULL) MPI_T_pvar_handle_free(session, &counter);
        MPI_T_pvar_session_free(&session);
        MPI_T_finalize();
    }

    harness_fini();
    return mt_finish();
}
