#!/usr/bin/env python3
"""Sum of CuPy arrays over all ranks, with point-to-point messages only.

    mpirun --mca pml gpuwire -np 4 python3 mpi4py_cupy_allreduce.py
    mpirun --mca pml gpuwire -np 2 python3 mpi4py_cupy_allreduce.py --sizes 1K,1M,256M

pml gpuwire carries point-to-point on device buffers. MPI collectives on
device buffers come with coll/gpuwire; until it is selected, Open MPI's own
collectives (coll/tuned) reduce on the CPU and must not be given GPU arrays:
comm.Allreduce(cupy_array, ...) would read device memory from the host.

So this example sums with a ring of Sendrecv calls, the bandwidth-optimal
ring algorithm: a reduce-scatter (each rank ends up owning the full sum of
one chunk), then an all-gather of the summed chunks. Each rank sends and
receives 2 (p-1)/p of the array, and the additions run on the GPU. The result
is checked against the closed form and against MPI's Allreduce of host
copies (NumPy), which Open MPI's collectives handle.
"""
import argparse
import sys
import time

from mpi4py import MPI
import cupy as cp
import numpy as np


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def use_local_gpu(comm):
    """Picks a GPU by the rank's position on its node."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local = node.Get_rank()
    node.Free()
    device = local % cp.cuda.runtime.getDeviceCount()
    cp.cuda.Device(device).use()
    return device


def ring_allreduce(comm, x):
    """Returns the element-wise sum of x over all ranks of comm (x is not changed)."""
    p, rank = comm.Get_size(), comm.Get_rank()
    out = x.copy()
    if p == 1:
        return out
    chunks = cp.array_split(out, p)  # views into out
    scratch = cp.empty_like(chunks[0])  # the first chunk is the largest
    right, left = (rank + 1) % p, (rank - 1) % p
    stream = cp.cuda.get_current_stream()

    # Reduce-scatter: at step k, send chunk rank-k, add the incoming chunk rank-k-1.
    # After p-1 steps this rank holds the full sum of chunk rank+1.
    for k in range(p - 1):
        send, recv = chunks[(rank - k) % p], chunks[(rank - k - 1) % p]
        incoming = scratch[: recv.size]
        stream.synchronize()  # the previous addition wrote what is sent now
        comm.Sendrecv(send, dest=right, sendtag=k, recvbuf=incoming, source=left, recvtag=k)
        recv += incoming

    # All-gather: pass the summed chunks around the ring.
    for k in range(p - 1):
        send, recv = chunks[(rank - k + 1) % p], chunks[(rank - k) % p]
        stream.synchronize()
        comm.Sendrecv(send, dest=right, sendtag=p + k, recvbuf=recv, source=left, recvtag=p + k)
    stream.synchronize()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1K,64K,1M,16M,64M",
                    help="array sizes in bytes (float32 elements), K/M/G suffixes allowed")
    ap.add_argument("--iters", type=int, default=20, help="timed all-reduces per size")
    ap.add_argument("--quick", action="store_true", help="a few small sizes and iterations (tests)")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.iters = "1K,1M", 3

    comm = MPI.COMM_WORLD
    rank, p = comm.Get_rank(), comm.Get_size()
    device = use_local_gpu(comm)
    devices = comm.gather(device, root=0)
    if rank == 0:
        print(f"# {MPI.Get_library_version().splitlines()[0].strip()}")
        print(f"# {p} ranks on GPUs {devices}; ring all-reduce over point-to-point")
        print(f"# {'bytes':>12} {'time us':>12} {'busbw GB/s':>12}")

    failed = 0
    for nbytes in (parse_size(s) for s in args.sizes.split(",")):
        n = max(p, nbytes // 4)  # at least one element per chunk
        # Small integers in float32: every partial sum is exact, whatever the order.
        x = (cp.arange(n, dtype=cp.int64) % 1000 + rank).astype(cp.float32)
        result = ring_allreduce(comm, x)
        base = (cp.arange(n, dtype=cp.int64) % 1000).astype(cp.float32)
        expected = base * p + p * (p - 1) / 2
        host = np.empty(n, dtype=np.float32)
        comm.Allreduce(cp.asnumpy(x), host, op=MPI.SUM)  # host buffers: Open MPI's collective
        ok = bool(cp.array_equal(result, expected)) and np.array_equal(host, cp.asnumpy(result))
        if not comm.allreduce(ok, op=MPI.LAND):
            failed += 1
            if rank == 0:
                print(f"{n * 4:>14} result check FAILED")
            continue
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            ring_allreduce(comm, x)
        elapsed = (time.perf_counter() - start) / args.iters
        elapsed = comm.allreduce(elapsed, op=MPI.MAX)
        if rank == 0:
            # Bus bandwidth as nccl-tests reports it: bytes * 2 (p-1)/p per unit time.
            busbw = n * 4 * 2 * (p - 1) / p / elapsed / 1e9 if p > 1 else 0.0
            print(f"{n * 4:>14} {elapsed * 1e6:>12.1f} {busbw:>12.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
