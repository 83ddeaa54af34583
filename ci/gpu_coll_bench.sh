#!/bin/bash
# Collectives on device buffers, gpuwire beside NCCL in one run: OSU's
# osu_allreduce / osu_bcast / osu_allgather (-d cuda) under pml gpuwire + coll
# gpuwire, and bench/nccl_ref.py (PyTorch's NCCL, one process per GPU) on the
# same sizes. Prints a table with the ratios; raw output in <out>/coll.txt.
# Then osu_iallreduce by default, over the GPU ring alone and staged.
# The NCCL figures come from PyTorch's Python API: its per-call overhead
# makes small-message NCCL latency look higher than nccl-tests' (C) figures.
#   ci/gpu_coll_bench.sh <build dir> <out dir> [max bytes, default 256 MiB]
#   GPU_COLL_EXTRA: more mpirun arguments for the gpuwire runs;
#   GPU_COLL_NB_MAX: largest osu_iallreduce size (default 64 MiB).
set -uo pipefail
BUILD=$1
OUT=$2
MAX=${3:-268435456}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OMPI_LIB=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
NP=${GPU_COLL_NP:-2}
MPIRUN="mpirun --allow-run-as-root -np $NP --bind-to none --mca mca_base_component_path $OMPI_LIB:$BUILD/components"
GW="$MPIRUN --mca pml gpuwire --mca coll gpuwire,tuned,libnbc,basic,self ${GPU_COLL_EXTRA:-}"
COLL=$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi/collective/blocking
[ -d "$COLL" ] || COLL=$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi/collective  # OSU 7.4
# GPU_COLL_LOG: append the raw output there instead (ci/gpu_bench.sh: osu.txt).
LOG=${GPU_COLL_LOG:-$OUT/coll.txt}
[ -n "${GPU_COLL_LOG:-}" ] || : >"$LOG"
PY=python3
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3

echo "### nccl_ref" >>"$LOG"
NCCL_NVLS_ENABLE=0 timeout 300 $MPIRUN -x NCCL_NVLS_ENABLE=0 "$PY" "$ROOT/bench/nccl_ref.py" "$MAX" \
    >/tmp/coll_nccl.txt 2>&1
cat /tmp/coll_nccl.txt >>"$LOG"

for c in allreduce bcast allgather; do
    echo "### osu_$c" >>"$LOG"
    if [ -x "$COLL/osu_$c" ]; then
        timeout 240 $GW "$COLL/osu_$c" -d cuda -m "8:$MAX" -i 200 -x 20 >"/tmp/coll_$c.txt" 2>&1
        echo "rc=$?" >>"/tmp/coll_$c.txt"
    else
        echo "no $COLL/osu_$c" >"/tmp/coll_$c.txt"
    fi
    cat "/tmp/coll_$c.txt" >>"$LOG"
done

# Table: for each collective and size, OSU's average latency under gpuwire,
# NCCL's per-call latency (synchronized) and loop time, bus bandwidth of both.
awk -v np="$NP" '
    FNR == 1 { file++ }
    file == 1 && NF == 5 && $2 ~ /^[0-9]+$/ { loop[$1, $2] = $3; sync[$1, $2] = $4 }
    file > 1 && $1 ~ /^[0-9]+$/ && NF >= 2 { gw[name[file], $1] = $2; seen[name[file], $1] = 1 }
    FNR == 1 && file > 1 { name[file] = FILENAME; sub(/.*coll_/, "", name[file]); sub(/\.txt$/, "", name[file]) }
    END {
        printf "| collective | bytes | gpuwire (us) | NCCL per call, synchronized (us) | NCCL loop (us) | gpuwire busbw (GB/s) | NCCL busbw (GB/s) | busbw ratio |\n"
        printf "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
        n = split("allreduce bcast allgather", cs, " ")
        for (i = 1; i <= n; i++) {
            c = cs[i]
            f = (c == "allreduce") ? 2 * (np - 1) / np : (c == "bcast" ? 1 : np - 1)
            for (b = 8; b <= 1073741824; b *= 4) {
                if (!((c, b) in seen) && !((c, b) in loop)) continue
                g = gw[c, b]; L = loop[c, b]; S = sync[c, b]
                gb = (g > 0) ? f * b / g / 1e3 : 0
                nb = (L > 0) ? f * b / L / 1e3 : 0
                printf "| %s | %d | %s | %s | %s | %.1f | %.1f | %s |\n", c, b, g, S, L, gb, nb, (nb > 0 && gb > 0) ? sprintf("%.2f", gb / nb) : ""
            }
        }
    }' /tmp/coll_nccl.txt /tmp/coll_allreduce.txt /tmp/coll_bcast.txt /tmp/coll_allgather.txt

# Non-blocking Allreduce, OSU's "Pure Comm." column (initiation to completion
# without the emulated compute): the default (NVLink kernels up to the
# one-shot size, the GPU ring above), the ring alone (coll_gpuwire_nvlink 0)
# and staged through host memory (coll_gpuwire_reduce_algorithm staged too).
NBC=$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi/collective/non_blocking
[ -d "$NBC" ] || NBC=$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi/collective  # OSU 7.4
NB_MAX=${GPU_COLL_NB_MAX:-67108864}
nb_run() { # name, extra mpirun arguments
    local name=$1
    shift
    echo "### osu_iallreduce $name: $*" >>"$LOG"
    if [ -x "$NBC/osu_iallreduce" ]; then
        timeout 240 $GW "$@" "$NBC/osu_iallreduce" -d cuda -m "8:$NB_MAX" -i 100 -x 10 \
            >"/tmp/coll_iallreduce_$name.txt" 2>&1
        echo "rc=$?" >>"/tmp/coll_iallreduce_$name.txt"
    else
        echo "no $NBC/osu_iallreduce" >"/tmp/coll_iallreduce_$name.txt"
    fi
    cat "/tmp/coll_iallreduce_$name.txt" >>"$LOG"
}
nb_run default
nb_run ring --mca coll_gpuwire_nvlink 0
nb_run staged --mca coll_gpuwire_nvlink 0 --mca coll_gpuwire_reduce_algorithm staged
echo
awk '
    FNR == 1 { file++ }
    $1 ~ /^[0-9]+$/ && NF >= 4 { comm[file, $1] = $4; sizes[$1] = 1 }
    END {
        printf "| osu_iallreduce bytes | default: NVLink kernels, then the GPU ring (us) | GPU ring only (us) | staged (us) | staged / default |\n"
        printf "| --- | --- | --- | --- | --- |\n"
        for (b = 8; b <= 1073741824; b *= 4) {
            if (!(b in sizes)) continue
            a = comm[1, b]; r = comm[2, b]; s = comm[3, b]
            printf "| %d | %s | %s | %s | %s |\n", b, a, r, s, (a > 0 && s > 0) ? sprintf("%.2f", s / a) : ""
        }
    }' /tmp/coll_iallreduce_default.txt /tmp/coll_iallreduce_ring.txt /tmp/coll_iallreduce_staged.txt
