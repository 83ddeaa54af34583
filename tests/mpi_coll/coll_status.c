/*
 * What coll/gpuwire reports and where calls go, read through its MPI_T
 * performance variables:
 *   coll_gpuwire_gpus              GPUs it handles (0: no GPU)
 *   coll_gpuwire_passthrough_calls collectives handed on unchanged
 *   coll_gpuwire_staged_calls      collectives staged through host memory
 *   coll_gpuwire_device_calls      calls run on the GPU over point-to-point
 *   coll_gpuwire_device_nb_calls   non-blocking calls run there
 *   coll_gpuwire_nvlink_calls      blocking calls run by the NVLink kernels
 *   coll_gpuwire_nvlink_nb_calls   non-blocking calls run by the NVLink kernels
 *
 * Every provided collective on host buffers must pass through, exactly once
 * each, and none may be staged. Built with CUDA (GW_COLL_DEVICE), the
 * component's GPU count must equal what the CUDA runtime sees (0 here means
 * "no GPU" agreed on both sides), and where there are GPUs the same calls on
 * device buffers must each be counted exactly once: the eight blocking calls
 * that have a GPU algorithm (the five reductions, int sum: a kernel applies;
 * Bcast, Allgather, Alltoall; pml gpuwire carries device buffers) on the GPU,
 * over point-to-point or, where an NVLink team forms, by its kernels; the
 * four non-blocking ones on the GPU too (Iallreduce, Ibcast and Iallgather
 * by the team where one forms, else over point-to-point, as Ialltoall);
 * Gather and Scatter staged.
 *
 *   coll_status [nogpu]     nogpu: the component must report 0 GPUs
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "coll_pvar.h"

#ifdef GW_COLL_DEVICE
#include <cuda_runtime_api.h>
#endif

static MPI_T_pvar_session session;

static MPI_T_pvar_handle pvar(const char *name, int var_class)
{
    return coll_pvar_open(session, name, var_class);
}

static unsigned long long read_pvar(MPI_T_pvar_handle h) { return coll_pvar_read(session, h); }

enum { NCALLS = 14, NGPU = 8 };

/* Fourteen provided collectives, every one counted once. */
static void run_collectives(int *a, int *b, int n, MPI_Comm comm)
{
    int me;
    MPI_Comm_rank(comm, &me);
    MPI_Request r;
    MT_CHECK_MPI(MPI_Allreduce(a, b, 4, MPI_INT, MPI_SUM, comm));
    MT_CHECK_MPI(MPI_Reduce(a, b, 4, MPI_INT, MPI_SUM, 0, comm));
    MT_CHECK_MPI(MPI_Bcast(a, 4, MPI_INT, 0, comm));
    MT_CHECK_MPI(MPI_Allgather(a, 4, MPI_INT, b, 4, MPI_INT, comm));
    MT_CHECK_MPI(MPI_Alltoall(a, 4, MPI_INT, b, 4, MPI_INT, comm));
    MT_CHECK_MPI(MPI_Gather(a, 4, MPI_INT, b, 4, MPI_INT, 0, comm));
    MT_CHECK_MPI(MPI_Scatter(a, 4, MPI_INT, b, 4, MPI_INT, 0, comm));
    MT_CHECK_MPI(MPI_Scan(a, b, 4, MPI_INT, MPI_SUM, comm));
    MT_CHECK_MPI(MPI_Exscan(a, b, 4, MPI_INT, MPI_SUM, comm));
    MT_CHECK_MPI(MPI_Reduce_scatter_block(a, b, 4, MPI_INT, MPI_SUM, comm));
    MT_CHECK_MPI(MPI_Iallreduce(a, b, 4, MPI_INT, MPI_SUM, comm, &r));
    MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Ibcast(a, 4, MPI_INT, 0, comm, &r));
    MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Iallgather(a, 4, MPI_INT, b, 4, MPI_INT, comm, &r));
    MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MT_CHECK_MPI(MPI_Ialltoall(a, 4, MPI_INT, b, 4, MPI_INT, comm, &r));
    MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    /* Not provided (nothing to stage): must not be counted. */
    MT_CHECK_MPI(MPI_Barrier(comm));
    MT_CHECK_MPI(MPI_Ibarrier(comm, &r));
    MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    (void)n;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    const bool expect_no_gpu = argc > 1 && strcmp(argv[1], "nogpu") == 0;
    int provided;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
    MPI_T_pvar_handle gpus_h = pvar("coll_gpuwire_gpus", MPI_T_PVAR_CLASS_SIZE);
    MPI_T_pvar_handle pass_h = pvar("coll_gpuwire_passthrough_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle staged_h = pvar("coll_gpuwire_staged_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle device_h = pvar("coll_gpuwire_device_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle device_nb_h = pvar("coll_gpuwire_device_nb_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle nvl_h = pvar("coll_gpuwire_nvlink_calls", MPI_T_PVAR_CLASS_COUNTER);
    MPI_T_pvar_handle nvl_nb_h = pvar("coll_gpuwire_nvlink_nb_calls", MPI_T_PVAR_CLASS_COUNTER);

    const unsigned long long gpus = read_pvar(gpus_h);
    if (expect_no_gpu) MT_CHECK_EQ(gpus, 0);
#ifdef GW_COLL_DEVICE
    int cuda_gpus = 0;
    if (cudaGetDeviceCount(&cuda_gpus) != cudaSuccess) cuda_gpus = 0;
    /* "No GPU" in CUDA's eyes and in the component's agree. */
    if (!expect_no_gpu) MT_CHECK_EQ(gpus, cuda_gpus);
#endif

    const int n = mt_size;
    int *a = calloc(4 * n, sizeof(int)), *b = calloc(4 * n, sizeof(int));
    unsigned long long p0 = read_pvar(pass_h), s0 = read_pvar(staged_h), d0 = read_pvar(device_h);
    run_collectives(a, b, n, MPI_COMM_WORLD);
    unsigned long long p1 = read_pvar(pass_h), s1 = read_pvar(staged_h), d1 = read_pvar(device_h);
    MT_CHECK_EQ(p1 - p0, NCALLS);
    MT_CHECK_EQ(s1 - s0, 0);
    MT_CHECK_EQ(d1 - d0, 0);
    MT_CHECK_EQ(read_pvar(device_nb_h), 0);

#ifdef GW_COLL_DEVICE
    if (gpus > 0) {
        int *da = NULL, *db = NULL;
        cudaSetDevice(mt_rank % cuda_gpus);
        if (cudaMalloc((void **)&da, 4 * n * sizeof(int)) != cudaSuccess ||
            cudaMalloc((void **)&db, 4 * n * sizeof(int)) != cudaSuccess) {
            mt_fail(__FILE__, __LINE__, "cudaMalloc failed");
        } else {
            cudaMemset(da, 0, 4 * n * sizeof(int));
            p0 = read_pvar(pass_h);
            s0 = read_pvar(staged_h);
            d0 = read_pvar(device_h);
            const unsigned long long v0 = read_pvar(nvl_h), w0 = read_pvar(nvl_nb_h);
            const unsigned long long dn0 = read_pvar(device_nb_h);
            run_collectives(da, db, n, MPI_COMM_WORLD);
            p1 = read_pvar(pass_h);
            s1 = read_pvar(staged_h);
            d1 = read_pvar(device_h);
            const unsigned long long v1 = read_pvar(nvl_h), w1 = read_pvar(nvl_nb_h);
            const unsigned long long dn = read_pvar(device_nb_h) - dn0, w = w1 - w0;
            MT_CHECK_EQ((d1 - d0) + (v1 - v0), NGPU);
            MT_CHECK_EQ((s1 - s0) + w + dn, NCALLS - NGPU);
            MT_CHECK(w == 0 || w == 3); /* a team takes Iallreduce, Ibcast and Iallgather */
            /* The four non-blocking ones: the team's or over point-to-point. */
            MT_CHECK_EQ(dn + w, 4);
            MT_CHECK_EQ(p1 - p0, 0);
            cudaFree(da);
            cudaFree(db);
        }
    }
#endif
    if (mt_rank == 0) {
        printf("coll gpuwire: %llu GPU(s)%s; %d host collectives passed through\n", gpus,
               gpus ? "" : " (no GPU: everything passes through)", NCALLS);
    }
    free(a);
    free(b);
    MPI_T_pvar_handle_free(session, &gpus_h);
    MPI_T_pvar_handle_free(session, &pass_h);
    MPI_T_pvar_handle_free(session, &staged_h);
    MPI_T_pvar_handle_free(session, &device_h);
    MPI_T_pvar_handle_free(session, &device_nb_h);
    MPI_T_pvar_handle_free(session, &nvl_h);
    MPI_T_pvar_handle_free(session, &nvl_nb_h);
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    return mt_finish();
}
