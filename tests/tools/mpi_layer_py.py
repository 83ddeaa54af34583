"""The MPI-layer calls from mpi4py, without LD_PRELOAD: pml gpuwire puts
libgpuwire_mpi.so in at MPI_Init (pml_gpuwire_mpi_layer). 2 ranks.

    mpirun -np 2 ... python3 mpi_layer_py.py <folder for the file> [device]

"device": the buffers are CuPy arrays (or PyTorch CUDA tensors), passed
through the CUDA array interface; exit 77 when neither can run. Otherwise
host arrays (CI; with GPUWIRE_MPI_STAGE_ALL=1 the layer stages them as it
would device memory). Checks every result; exit 0 or 1, 77 to skip.
"""
import os
import sys

try:
    from mpi4py import MPI
except ImportError:
    print("SKIP: mpi4py is not installed (apt-get install python3-mpi4py)")
    sys.exit(77)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if size != 2:
    print("SKIP: needs 2 ranks")
    sys.exit(77)
folder = sys.argv[1] if len(sys.argv) > 1 else "."
device = len(sys.argv) > 2 and sys.argv[2] == "device"


class Host:
    """Host arrays of the array module."""
    import array as _array

    def ints(self, values):
        return self._array.array("i", values)

    def doubles(self, values):
        return self._array.array("d", values)

    def zeros(self, n, kind):
        return self._array.array(kind, [0] * n)

    def bytes(self, n):
        return bytearray(n)

    def read(self, a):
        return list(a)


def device_arrays():
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()

        class Cupy:
            def ints(self, values):
                return cupy.asarray(values, dtype=cupy.int32)

            def doubles(self, values):
                return cupy.asarray(values, dtype=cupy.float64)

            def zeros(self, n, kind):
                return cupy.zeros(n, dtype=cupy.int32 if kind == "i" else cupy.float64)

            def bytes(self, n):
                return cupy.zeros(n, dtype=cupy.uint8)

            def read(self, a):
                cupy.cuda.runtime.deviceSynchronize()
                return a.get().tolist()

        return Cupy()
    except Exception:
        pass
    try:
        import torch

        if not torch.cuda.is_available():
            return None

        class Torch:
            def ints(self, values):
                return torch.tensor(values, dtype=torch.int32, device="cuda")

            def doubles(self, values):
                return torch.tensor(values, dtype=torch.float64, device="cuda")

            def zeros(self, n, kind):
                return torch.zeros(n, dtype=torch.int32 if kind == "i" else torch.float64,
                                   device="cuda")

            def bytes(self, n):
                return torch.zeros(n, dtype=torch.uint8, device="cuda")

            def read(self, a):
                torch.cuda.synchronize()
                return a.cpu().tolist()

        return Torch()
    except Exception:
        return None


arr = device_arrays() if device else Host()
if arr is None:
    print("SKIP: neither CuPy nor PyTorch with CUDA can run here")
    sys.exit(77)
failures = 0


def check(what, got, want):
    global failures
    if got != want:
        failures += 1
        print(f"FAIL rank {rank}: {what}: {got} != {want}", flush=True)


# pml gpuwire opened the layer in MPI_Init (the C test tools_mpi_layer_installed
# checks that a program's references then lead to it).
with open("/proc/self/maps") as maps:
    check("libgpuwire_mpi.so loaded", "libgpuwire_mpi.so" in maps.read(), True)

peer = 1 - rank
n = 1000
# Sendrecv_replace: Open MPI packs the buffer with the CPU.
a = arr.ints([rank * 10000 + i for i in range(n)])
comm.Sendrecv_replace([a, MPI.INT], dest=peer, source=peer)
check("Sendrecv_replace", arr.read(a), [peer * 10000 + i for i in range(n)])

# Pack and Unpack.
packed = arr.bytes(4 * 8)
src = arr.ints([7, 8, 9, 10])
position = MPI.INT.Pack(src, packed, 0, comm)
check("Pack position", position, 16)
out = arr.zeros(4, "i")
end = MPI.INT.Unpack(packed, 0, out, comm)
check("Unpack", arr.read(out), [7, 8, 9, 10])
check("Unpack position", end, 16)

# Reduce_local.
x = arr.doubles([1.5 * i for i in range(n)])
y = arr.doubles([2.0] * n)
MPI.SUM.Reduce_local([x, MPI.DOUBLE], [y, MPI.DOUBLE])
check("Reduce_local", arr.read(y), [1.5 * i + 2.0 for i in range(n)])

# A file: each rank writes its block at its offset, reads the other's back.
path = os.path.join(folder, "mpi_layer_py.bin")
fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR)
block = arr.ints([rank * 100 + i for i in range(n)])
fh.Write_at_all(rank * n * 4, [block, MPI.INT])
fh.Sync()
comm.Barrier()
fh.Sync()
back = arr.zeros(n, "i")
fh.Read_at_all(peer * n * 4, [back, MPI.INT])
fh.Close()
check("File read back", arr.read(back), [peer * 100 + i for i in range(n)])
comm.Barrier()
if rank == 0:
    os.remove(path)

total = comm.allreduce(failures)
if rank == 0:
    print(("PASS" if total == 0 else "FAIL") + f": {total} failure(s), "
          f"{'device' if device else 'host'} buffers", flush=True)
sys.exit(0 if total == 0 else 1)
