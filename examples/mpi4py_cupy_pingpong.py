#!/usr/bin/env python3
"""Ping-pong of CuPy device arrays between two MPI ranks, through gpuwire.

    mpirun --mca pml gpuwire -np 2 python3 mpi4py_cupy_pingpong.py
    mpirun --mca pml gpuwire -np 2 python3 mpi4py_cupy_pingpong.py --sizes 8,4K,1M,64M --iters 200

Rank 0 sends a GPU buffer to rank 1, which sends it back. The data is checked
once per size, then the round trip is timed: one-way latency is half of it,
bandwidth is the size over the one-way time. Ranks of one node take GPUs
round-robin by their rank on the node.

mpi4py hands the device pointer of a CuPy array (through DLPack or the CUDA
Array Interface) straight to MPI; gpuwire sees it is GPU memory and moves it
(CUDA IPC within a node, GPUDirect RDMA through UCX or staging between nodes).
Use the upper-case methods (Send/Recv) for buffers: the lower-case ones
pickle objects through host memory.
"""
import argparse
import sys
import time

from mpi4py import MPI
import cupy as cp


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


def pingpong(comm, buf, peer, iters):
    """Time of `iters` round trips of buf, started by rank 0."""
    rank = comm.Get_rank()
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(iters):
        if rank == 0:
            comm.Send(buf, dest=peer, tag=1)
            comm.Recv(buf, source=peer, tag=2)
        else:
            comm.Recv(buf, source=peer, tag=1)
            comm.Send(buf, dest=peer, tag=2)
    return time.perf_counter() - start


def check_exchange(comm, n, peer):
    """Rank 0 sends a pattern, rank 1 adds 1 and sends it back; both check."""
    rank = comm.Get_rank()
    pattern = (cp.arange(n, dtype=cp.int64) % 251).astype(cp.uint8)  # +1 cannot wrap
    if rank == 0:
        buf = pattern.copy()
        cp.cuda.get_current_stream().synchronize()  # MPI must not read before the copy ends
        comm.Send(buf, dest=peer, tag=3)
        comm.Recv(buf, source=peer, tag=4)
        return bool((buf == pattern + 1).all())
    buf = cp.zeros(n, dtype=cp.uint8)
    cp.cuda.get_current_stream().synchronize()
    comm.Recv(buf, source=peer, tag=3)
    ok = bool((buf == pattern).all())
    buf += 1
    cp.cuda.get_current_stream().synchronize()
    comm.Send(buf, dest=peer, tag=4)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,1K,64K,1M,16M,64M",
                    help="message sizes in bytes, K/M/G suffixes allowed")
    ap.add_argument("--iters", type=int, default=100, help="timed round trips per size")
    ap.add_argument("--quick", action="store_true", help="a few small sizes and iterations (tests)")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.iters = "8,64K,4M", 10

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size != 2:
        if rank == 0:
            print("run with exactly 2 ranks: mpirun --mca pml gpuwire -np 2 python3 "
                  + sys.argv[0], file=sys.stderr)
        return 2
    peer = 1 - rank
    device = use_local_gpu(comm)
    if rank == 0:
        print(f"# {MPI.Get_library_version().splitlines()[0].strip()}")
        print(f"# rank 0 on GPU {device}, rank 1 on GPU {comm.recv(source=1, tag=0)}")
        print(f"# {'bytes':>12} {'latency us':>12} {'GB/s':>10}")
    else:
        comm.send(device, dest=0, tag=0)

    failed = 0
    for n in (parse_size(s) for s in args.sizes.split(",")):
        ok = check_exchange(comm, n, peer)
        ok = comm.allreduce(ok, op=MPI.LAND)
        if not ok:
            failed += 1
            if rank == 0:
                print(f"{n:>14} data check FAILED")
            continue
        buf = cp.zeros(n, dtype=cp.uint8)
        cp.cuda.get_current_stream().synchronize()
        pingpong(comm, buf, peer, max(1, args.iters // 10))  # warm-up: mappings, registrations
        elapsed = pingpong(comm, buf, peer, args.iters)
        if rank == 0:
            one_way = elapsed / (2 * args.iters)
            print(f"{n:>14} {one_way * 1e6:>12.2f} {n / one_way / 1e9:>10.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
