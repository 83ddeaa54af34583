#!/bin/bash
# One command on the GPU machine: configure, build, run every test (GPU ones
# included) and the benchmarks, keep full logs under $OUT (or ./gpu-out), and
# print a short table last.
#   device run: carry [".deps"] (made by ci/deps_for_gpu.sh), optional ".ref"
#   with reference programs built elsewhere. Usage: ci/gpu.sh [quick|mps]
#   (mps: build, then only ci/gpu_mps.sh: two ranks on one GPU under CUDA MPS
#   beside the CUDA floors, for machines with one GPU; no tests. select: build
#   the components, then only ci/gpu_coll_select.sh for the ranks of
#   GPU_SELECT_NP, default "2 4": the selection table's rows and the default
#   against every forced algorithm, select_*.* in $OUT; no tests).
#   GPU_CTEST_ARGS: ctest selection (default: every test), e.g. "-L gpu";
#   GPU_SAN_TIMEOUT: seconds per compute-sanitizer run (default 240);
#   GPU_SANITIZER=0 skips compute-sanitizer over the kernel tests;
#   GPU_UCX_LIB: a CUDA-enabled UCX's lib folder for the tests (see below);
#   GPU_MPI_SANITIZER="test ...": those MPI tests under compute-sanitizer too
#   (GPU_MPI_SANITIZER_TOOLS, default memcheck; ci/gpu_mpi_sanitize.py).
#   At most 8 files land in $OUT (the GPU machine returns no more): build.log
#   (machine first), ctest.log, bench.txt, bench_summary.txt, floor.txt, osu.txt,
#   sanitizer.txt and report.tar (ci/report.sh's tables and raw data).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD_DIR:-/tmp/gpuwire-build}
CMAKE=$(command -v cmake || echo /opt/torch/.venv/bin/cmake)
[ -x "$CMAKE" ] || CMAKE=/opt/torch/.venv/bin/cmake
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
summary=()
note() { summary+=("$1"); echo "== $1"; }

{
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
    nvidia-smi topo -m
    ompi_info | head -4
    ls /usr/lib/x86_64-linux-gnu/libucp.so* 2>/dev/null
} >"$OUT/build.log" 2>&1
note "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs), $(ompi_info | sed -n 's/ *Open MPI: //p' | head -1)"

TARGETS=()
[ "${1:-}" = "mps" ] && TARGETS=(--target mca_pml_gpuwire mca_coll_gpuwire gwbench cuda_floor_bench)
[ "${1:-}" = "select" ] && TARGETS=(--target mca_pml_gpuwire mca_coll_gpuwire)
t0=$(date +%s)
"$CMAKE" -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUWIRE_UCX_ROOT="$ROOT/.deps/ucx" -DCMAKE_PREFIX_PATH="$ROOT/.deps/catch2/usr" \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >>"$OUT/build.log" 2>&1 &&
"$CMAKE" --build "$BUILD" -j 32 "${TARGETS[@]}" >>"$OUT/build.log" 2>&1
rc=$?
note "build: rc=$rc in $(( $(date +%s) - t0 )) s"
if [ $rc -ne 0 ]; then tail -40 "$OUT/build.log"; exit 1; fi

if [ "${1:-}" = "select" ]; then
    ci/gpu_coll_select.sh "$BUILD" "$OUT" "${GPU_SELECT_NP:-2 4}"
    note "gpu_coll_select.sh: rc=$? (1: a default above 1.05 of the best; select_report.md)"
    echo
    echo "================ summary ================"
    printf '%s\n' "${summary[@]}"
    exit 0
fi

if [ "${1:-}" = "mps" ]; then
    # GPU_BASE_SRC: the source of an earlier tree (e.g. `git archive REV`
    # unpacked into an ignored folder and carried), built beside this one for
    # gpu_mps.sh's alternating new / base rows.
    BASE_BUILD=""
    if [ -n "${GPU_BASE_SRC:-}" ]; then
        BASE_BUILD=$BUILD-base
        "$CMAKE" -S "$GPU_BASE_SRC" -B "$BASE_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DGPUWIRE_UCX_ROOT="$ROOT/.deps/ucx" -DCMAKE_PREFIX_PATH="$ROOT/.deps/catch2/usr" \
            -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >>"$OUT/build.log" 2>&1 &&
        "$CMAKE" --build "$BASE_BUILD" -j 32 "${TARGETS[@]}" >>"$OUT/build.log" 2>&1
        note "base build ($GPU_BASE_SRC): rc=$?"
    fi
    ci/gpu_mps.sh "$BUILD" "$OUT" $BASE_BUILD | tee "$OUT/bench_summary.txt"
    note "gpu_mps.sh: rc=${PIPESTATUS[0]}"
    echo
    echo "================ summary ================"
    printf '%s\n' "${summary[@]}"
    exit 0
fi

# GPU_UCX_LIB: the lib folder of a CUDA-enabled UCX (built by hand for
# testing; not part of gpuwire), put first on LD_LIBRARY_PATH for the tests:
# the two_hosts_*_ucx_cuda tests then hand device pointers to UCX between two
# simulated hosts (docs/cuda.md, "A UCX that moves CUDA memory").
if [ -n "${GPU_UCX_LIB:-}" ]; then
    export LD_LIBRARY_PATH="$GPU_UCX_LIB:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    note "UCX for the tests: $GPU_UCX_LIB"
fi
# shellcheck disable=SC2086
(cd "$BUILD" && ctest --output-on-failure -j 4 --timeout 300 ${GPU_CTEST_ARGS:-}) >"$OUT/ctest.log" 2>&1
note "tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
grep -E '\*\*\*|Failed|Not Run' "$OUT/ctest.log" | head -20

# compute-sanitizer (memcheck, racecheck, synccheck) over the kernel tests
# (reductions, datatype packing).
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ] && [ "${GPU_SANITIZER:-1}" != 0 ]; then
    for t in cuda_reduce_gpu cuda_pack_gpu; do
        exe=$(find "$BUILD" -name "$t" -type f -executable | head -1)
        [ -n "$exe" ] || continue
        for tool in memcheck racecheck synccheck; do
            echo "### $t under $tool" >>"$OUT/sanitizer.txt"
            GW_REDUCE_LARGE_COUNT=4099 timeout "${GPU_SAN_TIMEOUT:-240}" "$SAN" --tool $tool --error-exitcode 9 \
                "$exe" >>"$OUT/sanitizer.txt" 2>&1
            note "compute-sanitizer $tool $t: rc=$?"
        done
    done
fi

# compute-sanitizer inside mpirun over the device MPI tests (every rank under it).
if [ -n "${GPU_MPI_SANITIZER:-}" ]; then
    for tool in ${GPU_MPI_SANITIZER_TOOLS:-memcheck}; do
        # shellcheck disable=SC2086
        ci/gpu_mpi_sanitize.py "$BUILD" $tool $GPU_MPI_SANITIZER >>"$OUT/sanitizer.txt" 2>&1
        note "compute-sanitizer $tool over MPI tests ($GPU_MPI_SANITIZER): rc=$?"
        grep '^### ' "$OUT/sanitizer.txt" | tail -n 20
    done
fi

if [ "${1:-}" != "quick" ] && [ -x ci/gpu_bench.sh ]; then
    ci/gpu_bench.sh "$BUILD" "$OUT" | tee "$OUT/bench.txt"
    # The report's tables from what the benchmarks left (PNGs where gnuplot is).
    if [ -x ci/report.sh ]; then
        R=$(mktemp -d)
        cp "$OUT"/osu.txt "$OUT"/floor.txt "$OUT"/bench_summary.txt "$R"/ 2>/dev/null
        ci/report.sh "$BUILD" "$R" --sizes 1:4M >"$R/report_run.log" 2>&1
        tar -C "$R" -cf "$OUT/report.tar" . && rm -rf "$R"
    fi
fi
echo
echo "================ summary ================"
printf '%s\n' "${summary[@]}"
[ -f "$OUT/bench_summary.txt" ] && cat "$OUT/bench_summary.txt"
exit 0
