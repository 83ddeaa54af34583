#!/bin/bash
# Every OSU 7.x benchmark that takes a buffer, on device buffers with OSU's own
# validation (-c), under pml, coll and osc gpuwire: the collectives (blocking,
# non-blocking; the neighbourhood ones on host buffers, the only ones OSU 7.4
# takes for them) at each rank count, point-to-point D D, H D and
# D H, one-sided D D. Ranks share GPU 0 under CUDA MPS. A run passes when it
# exits 0 and no line of its output reports a failed validation.
#   ci/gpu_osu_sweep.sh <build dir> <out dir> [ranks, default "2 3 4"]
#   OSU_DIR: OSU's libexec/osu-micro-benchmarks/mpi (default .ref/osu-install/...)
#   SWEEP_M: sizes (default 1:1048576), SWEEP_P: runs at a time (default 3),
#   SWEEP_TL: seconds per run (default 90), SWEEP_ONLY: a regular expression
#   over the benchmarks' names to run only those.
# Writes <out dir>/sweep/summary.txt and failures.txt (the head of each failed
# run's log; the logs themselves stay under SWEEP_LOGS, default /tmp/gw-sweep).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
OUTD=$2/sweep
LOGD=${SWEEP_LOGS:-/tmp/gw-sweep}
shift 2
NPS=${*:-2 3 4}
OSU=${OSU_DIR:-$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi}
[ -d "$OSU/collective" ] || { echo "gpu_osu_sweep: no OSU build under $OSU"; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# shellcheck source=ci/mps_common.sh
. "$ROOT/ci/mps_common.sh"
mkdir -p "$OUTD" "$LOGD"
M=${SWEEP_M:-1:1048576}

plan() { # one line per run: <np> <program> <arguments>
    local p np
    for np in $NPS; do
        for p in "$OSU"/collective/osu_* "$OSU"/collective/*/osu_*; do
            [ -x "$p" ] || continue
            case $(basename "$p") in osu_barrier | osu_ibarrier) continue ;; esac
            # OSU 7.4's neighbourhood collectives refuse -d (host buffers only).
            case $(basename "$p") in
            *neighbor*) echo "$np $p -c -m $M -i 3 -x 1" ;;
            *) echo "$np $p -d cuda -c -m $M -i 3 -x 1" ;;
            esac
        done
    done
    for p in osu_latency osu_bw osu_bibw; do
        for d in "D D" "H D" "D H"; do
            echo "2 $OSU/pt2pt/$p -d cuda -c -m $M -i 5 -x 1 $d"
        done
    done
    for p in "$OSU"/one-sided/osu_*; do
        [ -x "$p" ] || continue
        for w in create allocate; do
            echo "2 $p -d cuda -w $w -m $M -i 5 -x 1 D D"
        done
    done
}

run_one() { # <n> <np> <program> <arguments>
    local n=$1 np=$2 prog=$3; shift 3
    local name log rc st=FAIL
    name=$(basename "$prog")
    log=$LOGD/$n-$name-np$np.log
    timeout -k 5 "$SWEEP_TL" mpirun --oversubscribe --bind-to none -np "$np" \
        -x CUDA_VISIBLE_DEVICES=0 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY \
        -x LD_LIBRARY_PATH --mca mca_base_component_path "$OMPI_LIB:$BUILD/components" \
        --mca pml gpuwire --mca coll gpuwire,inter,tuned,libnbc,basic,self --mca osc gpuwire \
        "$prog" "$@" >"$log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ! grep -qiE 'fail|error' "$log" && st=PASS
    [ $rc -eq 124 ] && st=TIMEOUT
    echo "$st rc=$rc $n $name np=$np $*"
}
export BUILD LOGD OMPI_LIB SWEEP_TL=${SWEEP_TL:-90}
export -f run_one
plan | { if [ -n "${SWEEP_ONLY:-}" ]; then grep -E "$SWEEP_ONLY"; else cat; fi; } |
    awk '{print NR, $0}' | xargs -P "${SWEEP_P:-3}" -L 1 bash -c 'run_one "$@"' _ |
    tee "$OUTD/summary.txt"
pass=$(grep -c '^PASS' "$OUTD/summary.txt")
all=$(grep -c . "$OUTD/summary.txt")
echo "gpu_osu_sweep: $pass of $all passed"
grep -v '^PASS' "$OUTD/summary.txt" | while read -r _ _ n name np _; do
    echo "--- $n $name $np"
    grep -v '^\s*$' "$LOGD/$n-$name-np${np#np=}.log" | head -30
done >"$OUTD/failures.txt"
grep -A3 '^---' "$OUTD/failures.txt" | head -80
[ "$pass" -eq "$all" ]
