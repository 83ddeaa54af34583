#!/bin/bash
# One command on the GPU machine: configure, build, run every test (GPU ones
# included) and the benchmarks, keep full logs under $OUT (or ./gpu-out), and
# print a short table last.
#   device run: carry [".deps"] (made by ci/deps_for_gpu.sh), optional ".ref"
#   with reference programs built elsewhere. Usage: ci/gpu.sh [quick]
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
} >"$OUT/machine.txt" 2>&1
note "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs), $(ompi_info | sed -n 's/ *Open MPI: //p' | head -1)"

t0=$(date +%s)
"$CMAKE" -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUWIRE_UCX_ROOT="$ROOT/.deps/ucx" -DCMAKE_PREFIX_PATH="$ROOT/.deps/catch2/usr" \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >"$OUT/build.log" 2>&1 &&
"$CMAKE" --build "$BUILD" -j 32 >>"$OUT/build.log" 2>&1
rc=$?
note "build: rc=$rc in $(( $(date +%s) - t0 )) s"
if [ $rc -ne 0 ]; then tail -40 "$OUT/build.log"; exit 1; fi

(cd "$BUILD" && ctest --output-on-failure -j 4 --timeout 150) >"$OUT/ctest.log" 2>&1
note "tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
grep -E '\*\*\*|Failed|Not Run' "$OUT/ctest.log" | head -20

if [ "${1:-}" != "quick" ] && [ -x ci/gpu_bench.sh ]; then
    ci/gpu_bench.sh "$BUILD" "$OUT" | tee "$OUT/bench.txt"
fi
echo
echo "================ summary ================"
printf '%s\n' "${summary[@]}"
[ -f "$OUT/bench_summary.txt" ] && cat "$OUT/bench_summary.txt"
exit 0
