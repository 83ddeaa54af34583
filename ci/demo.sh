#!/bin/sh
# The first thing to run: installs the dependencies (apt-get, output in a
# log), builds gpuwire without its tests into ${DEMO_BUILD_DIR:-build-demo}
# (ci/test.sh builds into build/, with the tests), installs the components
# where Open MPI finds them (~/.openmpi/components) and the tools under
# ${PREFIX:-~/.local}, then runs gwbench on 2 ranks twice: through gpuwire
# (pml and coll) and through Open MPI's own pml (ucx where it runs, else ob1),
# prints gpuwire's figures as a ratio of the reference, and which components
# the run really selected. GPU buffers where a GPU is present, host otherwise.
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${DEMO_BUILD_DIR:-build-demo}
PREFIX=${PREFIX:-$HOME/.local}
LOGDIR=${DEMO_LOG_DIR:-$BUILD_DIR/demo-logs}
ci/setup.sh
mkdir -p "$BUILD_DIR"
mkdir -p "$LOGDIR"
echo "ci/demo.sh: building into $BUILD_DIR (a few minutes; log: $LOGDIR/build.log)"
if ! BUILD_DIR=$BUILD_DIR ci/build.sh -DGPUWIRE_BUILD_TESTS=OFF >"$LOGDIR/build.log" 2>&1; then
    tail -20 "$LOGDIR/build.log" >&2
    echo "ci/demo.sh: the build failed (the lines above; all of it in $LOGDIR/build.log)" >&2
    exit 1
fi
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$LOGDIR/install.log" 2>&1 || {
    cat "$LOGDIR/install.log" >&2; exit 1; }
echo "ci/demo.sh: installed the components into $(sed -n 's|.*Installing: \(.*\)/mca_pml_gpuwire.so$|\1|p' "$LOGDIR/install.log" | head -1)," \
     "gpuwire-info into $PREFIX/bin"

BENCH="$BUILD_DIR/bench/gwbench"
MODE=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    MODE="--device"
fi
ROOT_FLAG=""
[ "$(id -u)" -ne 0 ] || ROOT_FLAG="--allow-run-as-root"   # mpirun refuses root without it
BENCH_ARGS="-t latency,bw,allreduce -m 8,64K,4M $MODE"
COLL=gpuwire,inter,tuned,libnbc,basic,self

# run <name> <mpirun arguments...>: echoes the command line, runs exactly it.
run() {
    name=$1; shift
    echo "running: $*"
    "$@" >"$LOGDIR/$name.out" 2>"$LOGDIR/$name.err" || {
        cat "$LOGDIR/$name.out"; tail -20 "$LOGDIR/$name.err" >&2
        echo "ci/demo.sh: the $name run failed (output in $LOGDIR/$name.out, .err)" >&2
        exit 1
    }
}
# gpuwire, with its statistics table at finalize: the proof of what ran.
# shellcheck disable=SC2086
run gpuwire mpirun $ROOT_FLAG -np 2 --bind-to none --mca pml gpuwire --mca coll $COLL \
    --mca pml_gpuwire_stats 1 --mca pml_base_verbose 10 --mca coll_base_verbose 10 \
    "$BENCH" $BENCH_ARGS
cat "$LOGDIR/gpuwire.out"
# The reference: Open MPI's pml ucx (every transport and device allowed: by
# default it declines shared memory only), else ob1 where ucx cannot run.
REF=ucx
echo "ci/demo.sh: checking that pml ucx runs here (the reference; ob1 otherwise)"
# shellcheck disable=SC2086
if ! run_ucx=$(mpirun $ROOT_FLAG -np 2 --bind-to none --mca pml ucx --mca pml_ucx_tls any \
        --mca pml_ucx_devices any "$BENCH" -t latency -m 8 -i 10 2>&1); then
    REF=ob1
fi
if [ "$REF" = ucx ]; then
    # shellcheck disable=SC2086
    run ref mpirun $ROOT_FLAG -np 2 --bind-to none --mca pml ucx --mca pml_ucx_tls any \
        --mca pml_ucx_devices any --mca pml_base_verbose 10 "$BENCH" $BENCH_ARGS
else
    # shellcheck disable=SC2086
    run ref mpirun $ROOT_FLAG -np 2 --bind-to none --mca pml ob1 --mca pml_base_verbose 10 \
        "$BENCH" $BENCH_ARGS
fi

echo
echo "gpuwire / pml $REF, same machine, one run each (ratio: latency below 1 and bandwidth above 1"
echo "favour gpuwire; on a busy machine the figures vary from run to run):"
awk -v ref="$REF" '
    /^# latency:/ { s = "lat" } /^# bw:/ { s = "bw" } /^# allreduce:/ { s = "ar" } /^# bibw:/ { s = "" }
    /^[0-9]/ && s != "" { v[FILENAME == ARGV[1] ? "g" : "r", s, $1] = $2; sizes[s, $1] = 1; order[s] = order[s] " " $1 }
    END {
        split("lat bw ar", kinds, " ")
        name["lat"] = "latency"; name["bw"] = "bandwidth"; name["ar"] = "allreduce"
        unit["lat"] = "us"; unit["bw"] = "GB/s"; unit["ar"] = "us"
        for (k = 1; k <= 3; k++) {
            s = kinds[k]; n = split(order[s], sz, " "); seen = ""
            for (i = 1; i <= n; i++) {
                if (index(seen, " " sz[i] " ")) continue
                seen = seen " " sz[i] " "
                g = v["g", s, sz[i]]; r = v["r", s, sz[i]]
                # (bandwidth of 8-byte messages rounds to 0.00x GB/s: no ratio there)
                if (g == "" || r == "" || r + 0 < 0.01 || g + 0 < 0.01) continue
                printf "  %-10s %8s B: gpuwire %9.3f %-4s  %s %9.3f %-4s  ratio %.3g\n",
                       name[s], sz[i], g, unit[s], ref, r, unit[s], g / r
            }
        }
    }' "$LOGDIR/gpuwire.out" "$LOGDIR/ref.out"

# What ran: Open MPI's own selection messages (pml_base_verbose,
# coll_base_verbose) and gpuwire's statistics table (its last three columns
# count coll gpuwire's calls), never assumed from the command line.
selected() { grep -ho 'select: component [a-z0-9]* selected' "$@" | awk '{ print $3 }' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
pml=$(selected "$LOGDIR/gpuwire.err")
ref_pml=$(selected "$LOGDIR/ref.err")
coll=$(grep -q 'comm_select: selecting *gpuwire, .*Enabled' "$LOGDIR/gpuwire.err" && echo gpuwire || echo none)
total=$(awk '$1 == "total" { print $2, $(NF-2) + $(NF-1) + $NF; exit }' "$LOGDIR/gpuwire.err")
msgs=${total% *}; colls=${total#* }
echo
if [ "$pml" = gpuwire ] && [ "$coll" = gpuwire ] && [ "${colls:-0}" -gt 0 ]; then
    echo "ran: pml gpuwire and coll gpuwire (Open MPI's selection messages; gpuwire's statistics:" \
         "$msgs messages, $colls collective calls through coll gpuwire); reference: pml $ref_pml"
else
    echo "ci/demo.sh: FAIL: expected pml gpuwire and coll gpuwire to run; Open MPI selected" \
         "pml '${pml:-none}', coll gpuwire: $coll, coll gpuwire calls: ${colls:-none} (see $LOGDIR/gpuwire.err)" >&2
    exit 1
fi
[ "$ref_pml" = "$REF" ] || { echo "ci/demo.sh: FAIL: the reference run selected pml '${ref_pml:-none}', not $REF" >&2; exit 1; }
echo
echo "next: examples/README.md (mpi4py + CuPy, Slurm, OSU, the preload library, troubleshooting);"
echo "      $PREFIX/bin/gpuwire-info shows what gpuwire finds on this machine;"
echo "      ci/test.sh runs the test suite (ci/test.sh --quick: a shorter one)."
