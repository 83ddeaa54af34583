/*
 * A job where only some processes have a GPU (docs/coll.md, "Processes
 * without a GPU"); which ones, each process reads from coll_<component>_gpus.
 * Processes with a GPU pass device memory, the others host memory:
 *
 * - on MPI_COMM_WORLD, a blocking and a non-blocking Allreduce: staged on the
 *   processes with a GPU (staged_calls rises, device_calls does not), right
 *   on every rank, no hang;
 * - on the communicator of the processes with a GPU (MPI_Comm_split), a
 *   non-blocking Allreduce before any blocking call is staged too; its first
 *   blocking Allreduce learns that every member has a GPU, and from there the
 *   calls run on the GPU (device_calls rises, staged_calls does not).
 *
 *   coll_some_gpus fakedevrw | device
 *
 * Needs at least one process with a GPU and one without: GW_TEST_NO_GPU_RANK
 * (the simulated GPU of fake_device.c leaves that rank out; with device,
 * coll_harness.c hides the GPUs from it).
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"
#include "coll_pvar.h"

enum { N_INTS = 65536 }; /* above the small-call limit of the device reductions */

static MPI_T_pvar_session session;

/* staged_calls, then the calls run on the GPU: device_calls,
 * device_nb_calls, nvlink_calls, nvlink_nb_calls. */
static const char *const names[] = {"staged_calls", "device_calls", "device_nb_calls",
                                    "nvlink_calls", "nvlink_nb_calls"};
enum { N_NAMES = sizeof(names) / sizeof(names[0]) };
static MPI_T_pvar_handle h[N_NAMES];

typedef struct {
    unsigned long long staged, device;
} counts_t;

static counts_t counts(void)
{
    counts_t c = {coll_pvar_read(session, h[0]), 0};
    for (int i = 1; i < N_NAMES; ++i) c.device += coll_pvar_read(session, h[i]);
    return c;
}

/* One Allreduce (MPI_SUM of ints) on comm, blocking or not, with buffers of
 * kind k; the result checked; then what the counters did on this rank. */
static void allreduce(MPI_Comm comm, enum mem_kind k, bool nonblocking, bool want_staged,
                      bool want_device)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    tctx_set("%s of %d ints on %d ranks, %s memory", nonblocking ? "iallreduce" : "allreduce",
             N_INTS, n, k == MEM_HOST ? "host" : "device");
    const size_t bytes = N_INTS * sizeof(int);
    int *host = malloc(bytes);
    void *sbuf = mem_alloc(bytes, k), *rbuf = mem_alloc(bytes, k);
    MT_CHECK(host && sbuf && rbuf);
    for (int i = 0; i < N_INTS; ++i) host[i] = i * 3 + me * 7 + 1;
    mem_copy(sbuf, host, bytes, sbuf, k);
    const counts_t before = counts();
    if (nonblocking) {
        MPI_Request req;
        MT_CHECK_MPI(MPI_Iallreduce(sbuf, rbuf, N_INTS, MPI_INT, MPI_SUM, comm, &req));
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    } else {
        MT_CHECK_MPI(MPI_Allreduce(sbuf, rbuf, N_INTS, MPI_INT, MPI_SUM, comm));
    }
    const counts_t after = counts();
    mem_copy(host, rbuf, bytes, rbuf, k);
    long bad = 0, first = -1;
    for (int i = 0; i < N_INTS; ++i) {
        const int want = n * (i * 3 + 1) + 7 * (n * (n - 1) / 2);
        if (host[i] != want && 0 == bad++) first = i;
    }
    if (bad) {
        mt_fail(__FILE__, __LINE__, "%s: %ld wrong elements on rank %d, the first at %ld", tctx,
                bad, me, first);
    }
    if ((after.staged > before.staged) != want_staged ||
        (after.device > before.device) != want_device) {
        mt_fail(__FILE__, __LINE__,
                "%s on rank %d: staged calls +%llu, device calls +%llu; expected %s", tctx, me,
                after.staged - before.staged, after.device - before.device,
                want_staged ? "staged" : want_device ? "on the GPU" : "neither");
    }
    mem_free(sbuf, bytes, k);
    mem_free(rbuf, bytes, k);
    free(host);
}

int main(int argc, char **argv)
{
    int exit_code;
    if (!harness_init_device(&argc, &argv, &exit_code)) return exit_code;
    const char *comp = mem_send == MEM_FAKEDEV_RW ? "gpuwirefake" : "gpuwire";
    char name[128];
    int provided;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
    for (int i = 0; i < N_NAMES; ++i) {
        snprintf(name, sizeof(name), "coll_%s_%s", comp, names[i]);
        h[i] = coll_pvar_open(session, name, MPI_T_PVAR_CLASS_COUNTER);
    }
    snprintf(name, sizeof(name), "coll_%s_gpus", comp);
    MPI_T_pvar_handle gpus_h = coll_pvar_open(session, name, MPI_T_PVAR_CLASS_SIZE);
    const bool gpu = coll_pvar_read(session, gpus_h) > 0;
    if (MPI_T_PVAR_HANDLE_NULL != gpus_h) MPI_T_pvar_handle_free(session, &gpus_h);

    int with = 0, size = 0;
    const int mine = gpu;
    MT_CHECK_MPI(MPI_Allreduce(&mine, &with, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (0 == with || size == with) {
        mt_fail(__FILE__, __LINE__, "%d of %d processes have a GPU: the test needs some with "
                                    "and some without", with, size);
    } else {
        const enum mem_kind k = gpu ? mem_send : MEM_HOST;
        MPI_Comm dup, gpus;
        MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        allreduce(dup, k, true, gpu, false);
        allreduce(dup, k, false, gpu, false);
        MT_CHECK_MPI(MPI_Comm_free(&dup));
        MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, gpu, 0, &gpus));
        if (gpu && with > 1) {
            allreduce(gpus, k, true, true, false);  /* not learnt yet: staged */
            allreduce(gpus, k, false, false, true); /* learns: every member has a GPU */
            allreduce(gpus, k, true, false, true);
        }
        MT_CHECK_MPI(MPI_Comm_free(&gpus));
    }
    for (int i = 0; i < N_NAMES; ++i) {
        if (MPI_T_PVAR_HANDLE_NULL != h[i]) MPI_T_pvar_handle_free(session, &h[i]);
    }
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    harness_fini();
    return mt_finish();
}
