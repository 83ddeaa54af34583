/*
 * MPI_THREAD_MULTIPLE on device buffers under pml gpuwire: four threads per
 * rank send and receive at the same time (tests/mpi/p2p_threads.h), each
 * thread with buffers of its own from cudaMalloc, on its own communicator
 * and then on one shared communicator told apart by tag; sizes from 0 B to
 * 4 MiB (eager, rendezvous, CUDA IPC or staged). Four rounds: every thread
 * device to device; device to host; host to device; and a mix where threads
 * 0 and 2 use device memory and 1 and 3 host memory. Every message is
 * checked on the host. Exits 77 (skipped) where there is no GPU.
 */
#include <cuda_runtime_api.h>

#include "p2p_threads.h"

static int device_id;

static int report(cudaError_t e, const char *call)
{
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "[rank %d] %s: %s\n", mt_rank, call, cudaGetErrorString(e));
    return -1;
}

/* The current device is per thread in the CUDA runtime: every worker sets it. */
static int dev_thread_init(void) { return report(cudaSetDevice(device_id), "cudaSetDevice"); }
static int dev_alloc(void **p, size_t n) { return report(cudaMalloc(p, n ? n : 1), "cudaMalloc"); }
static int dev_release(void *p) { return report(cudaFree(p), "cudaFree"); }
static int dev_copy(void *dst, const void *src, size_t n)
{
    if (!n) return 0;
    return report(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "cudaMemcpy");
}
static const p2p_thread_mem_t dev_mem = {"device", dev_thread_init, dev_alloc, dev_release,
                                         dev_copy, dev_copy};

static void all_device(int id, const p2p_thread_mem_t **s, const p2p_thread_mem_t **r)
{
    (void)id;
    *s = *r = &dev_mem;
}
static void device_to_host(int id, const p2p_thread_mem_t **s, const p2p_thread_mem_t **r)
{
    (void)id;
    *s = &dev_mem;
    *r = &p2p_host_mem;
}
static void host_to_device(int id, const p2p_thread_mem_t **s, const p2p_thread_mem_t **r)
{
    (void)id;
    *s = &p2p_host_mem;
    *r = &dev_mem;
}
static void mixed(int id, const p2p_thread_mem_t **s, const p2p_thread_mem_t **r)
{
    *s = *r = id % 2 ? &p2p_host_mem : &dev_mem;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {0, 1, 100, 4096, 9000, 70000, 300000, (1 << 20) + 3, 4 << 20};
    const p2p_thread_sizes_t sz = {sizes, (int)(sizeof(sizes) / sizeof(sizes[0]))};
    mt_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) return mt_skip("MPI_THREAD_MULTIPLE not provided");
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    int none = e != cudaSuccess || ndev == 0, any = 0;
    MPI_Allreduce(&none, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) return mt_skip("no GPU (CUDA driver or device absent)");
    device_id = mt_rank % ndev;
    if (report(cudaSetDevice(device_id), "cudaSetDevice") != 0) MPI_Abort(MPI_COMM_WORLD, 1);

    p2p_thread_mem_of_t rounds[] = {all_device, device_to_host, host_to_device, mixed};
    for (size_t i = 0; i < sizeof(rounds) / sizeof(rounds[0]); ++i) {
        p2p_run_threads(0, rounds[i], sz);
        p2p_run_threads(1, rounds[i], sz);
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    return mt_finish();
}
