#!/usr/bin/env python3
"""NCCL reference for the collective benchmarks (ci/gpu_coll_bench.sh).

Runs all-reduce (float32 sum), broadcast and all-gather through PyTorch's
NCCL, one process per GPU, started by mpirun (rank and size from Open MPI's
environment; MPI itself is not used). For each size it prints two figures:

  loop: back-to-back operations, one synchronize at the end, time / ops
        (how nccl-tests reports);
  sync: one operation and a synchronize, median of the repetitions (what a
        blocking MPI collective costs its caller).

Output lines: "<coll> <bytes> <loop_us> <sync_us> <busbw_GBps>" where busbw
follows nccl-tests: all-reduce 2(n-1)/n, broadcast 1 times bytes / loop time;
all-gather (n-1) times the bytes each rank contributes (OSU's size; nccl-tests
counts the whole result and multiplies by (n-1)/n: the same figure).
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def env_int(*names):
    for n in names:
        if n in os.environ:
            return int(os.environ[n])
    raise SystemExit("nccl_ref.py: start it under mpirun (no rank in the environment)")


def main():
    rank = env_int("OMPI_COMM_WORLD_RANK", "RANK")
    size = env_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE")
    local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("nccl", rank=rank, world_size=size)
    dev = torch.device("cuda")
    max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    sizes = []
    b = 8
    while b <= max_bytes:
        sizes.append(b)
        b *= 4

    def run(name, make, op, factor):
        for nbytes in sizes:
            args = make(nbytes)
            iters = 200 if nbytes <= (1 << 20) else max(5, int(2e9 // nbytes))
            for _ in range(5):
                op(*args)
            torch.cuda.synchronize()
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                op(*args)
            torch.cuda.synchronize()
            loop = (time.perf_counter() - t0) / iters
            samples = []
            for _ in range(min(iters, 50)):
                t0 = time.perf_counter()
                op(*args)
                torch.cuda.synchronize()
                samples.append(time.perf_counter() - t0)
            sync = statistics.median(samples)
            busbw = factor * nbytes / loop / 1e9
            if rank == 0:
                print(f"{name} {nbytes} {loop * 1e6:.2f} {sync * 1e6:.2f} {busbw:.1f}", flush=True)
            del args
            torch.cuda.empty_cache()

    n = size
    run("allreduce",
        lambda nb: (torch.ones(max(nb // 4, 1), dtype=torch.float32, device=dev),),
        lambda t: dist.all_reduce(t), 2 * (n - 1) / n)
    run("bcast",
        lambda nb: (torch.ones(max(nb // 4, 1), dtype=torch.float32, device=dev),),
        lambda t: dist.broadcast(t, 0), 1.0)
    run("allgather",
        lambda nb: (torch.empty(max(nb // 4, 1) * n, dtype=torch.float32, device=dev),
                    torch.ones(max(nb // 4, 1), dtype=torch.float32, device=dev)),
        lambda out, inp: dist.all_gather_into_tensor(out, inp), n - 1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
