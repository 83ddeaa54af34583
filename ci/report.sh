#!/bin/bash
# Benchmark report: gwbench (latency and bandwidth against message size) on
# host buffers under pml gpuwire and Open MPI's own pml ucx and pml ob1, one
# run after the other in one run; then report.md (tables, with the
# gpuwire/ucx ratio) and report_host.png (one line per implementation).
#
# On a GPU machine, run ci/gpu_bench.sh into the same folder first: its
# outputs (gwbench_device.txt, osu.txt, floor.txt, bench_summary.txt) become
# the report's device tables and report_device.png. Without them, and with a
# GPU present, gwbench --device is run here.
#
#   ci/report.sh <build dir> <out dir> [--sizes SPEC] [--iters N] [--no-bind]
#                [--pmls "gpuwire ucx ob1"] [--render-only] [--date TEXT]
#
# --sizes: gwbench's -m (default 1:4M); --iters: gwbench's -i (default: by
# size); --no-bind: no core binding (shared machines, tests); --render-only:
# no runs, only the report from what <out dir> holds (files of ci/gpu.sh:
# the machine line from its build.log; host plot from osu.txt's H H runs
# when report_raw.txt is missing); --date: the date of those files (default:
# their newest modification time). Needs python3; the PNGs need gnuplot
# (apt-get install gnuplot-nox). Writes report.md, report_raw.txt,
# report_host.png and maybe report_device.png.
# Exit 0 when every run worked, 1 when one failed, 2 on usage errors.
set -uo pipefail

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
BUILD=$(cd "$1" && pwd) || usage
mkdir -p "$2" || exit 2
OUT=$(cd "$2" && pwd)
shift 2
SIZES=1:4M ITERS="" BIND="--bind-to core --map-by core" PMLS="gpuwire ucx ob1" RENDER_ONLY=0 DATE=""
while [ $# -gt 0 ]; do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --no-bind) BIND="--bind-to none"; shift ;;
    --pmls) PMLS=$2; shift 2 ;;
    --render-only) RENDER_ONLY=1; shift ;;
    --date) DATE=$2; shift 2 ;;
    *) usage ;;
    esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MPIRUN=${MPIRUN:-mpirun}
PKGLIB=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
GWB=$BUILD/bench/gwbench
RAW=$OUT/report_raw.txt
rc=0

pml_flags() {
    case $1 in
    ucx) echo --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any ;;
    *) echo --mca pml "$1" ;;
    esac
}

# run <section name> <mpirun flags...> -- <gwbench args...>: appends one section to RAW.
run() {
    local name=$1; shift
    local flags=(); while [ "$1" != "--" ]; do flags+=("$1"); shift; done; shift
    echo "### $name" >>"$RAW"
    # shellcheck disable=SC2086
    if ! timeout 600 "$MPIRUN" --allow-run-as-root -np 2 $BIND \
        --mca mca_base_component_path "$PKGLIB:$BUILD/components" --mca btl self,vader \
        "${flags[@]}" "$GWB" "$@" >>"$RAW" 2>&1; then
        echo "# FAILED: $MPIRUN ${flags[*]} gwbench $*" >>"$RAW"
        echo "report: $name failed (see $RAW)" >&2
        rc=1
    fi
}

if [ "$RENDER_ONLY" -eq 1 ]; then
    # The files came from elsewhere: report.py describes that machine from build.log.
    python3 "$ROOT/ci/report.py" "$OUT" --render-only ${DATE:+--date "$DATE"} || rc=1
    echo "report: $OUT/report.md"
    exit $rc
fi

machine="$(hostname), $(nproc) cores, $(ompi_info | sed -n 's/^ *Open MPI: *//p' | head -1 | sed 's/^/Open MPI /')"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)
    machine="$machine, GPUs: $gpus"
    have_gpu=1
else
    have_gpu=0
fi

[ -x "$GWB" ] || { echo "report: no $GWB; build the gwbench target first" >&2; exit 2; }
: >"$RAW"
args=(-t "latency,bw" -m "$SIZES")
[ -z "$ITERS" ] || args+=(-i "$ITERS")
for pml in $PMLS; do
    # shellcheck disable=SC2046
    run "host $pml" $(pml_flags "$pml") -- "${args[@]}"
done
if [ "$have_gpu" -eq 1 ] && [ ! -s "$OUT/gwbench_device.txt" ]; then
    if timeout 600 "$MPIRUN" --allow-run-as-root -np 2 --bind-to none \
        --mca mca_base_component_path "$PKGLIB:$BUILD/components" --mca pml gpuwire \
        "$GWB" --device "${args[@]}" >"$OUT/gwbench_device.txt" 2>&1; then :; else
        echo "report: gwbench --device failed (see $OUT/gwbench_device.txt)" >&2
        rc=1
    fi
fi

python3 "$ROOT/ci/report.py" "$OUT" --machine "$machine" \
    --command "ci/report.sh <build> <out> --sizes $SIZES${ITERS:+ --iters $ITERS}" || rc=1
echo "report: $OUT/report.md"
exit $rc
