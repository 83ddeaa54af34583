#!/bin/sh
# The clang fuzz pass, in a build folder of its own (FUZZ_BUILD_DIR, default
# build-fuzz): every library built with libFuzzer's coverage feedback, ASan and
# UBSan (cmake/GpuwireSanitizers.cmake, GPUWIRE_FUZZ); only the fuzz targets
# are built. Then ctest replays each seed corpus and runs each fuzzer for
# FUZZ_SECONDS (default 15), two at a time. A crash fails the run and leaves
# its input under <build>/fuzz-runs/<fuzzer>/. The default gcc build of
# ci/test.sh replays the corpora only, and does not need this.
set -eu
cd "$(dirname "$0")/.."
dir=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-15}
if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1; then
    echo "ci/fuzz.sh: clang is not installed (ci/setup.sh installs it)" >&2
    exit 1
fi
start=$(date +%s)
# CMAKE_PROJECT_INCLUDE brings the fuzz option in whether or not the
# top-level CMakeLists.txt includes GpuwireSanitizers itself (it is guarded).
mkdir -p "$dir"
CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUWIRE_WITH_CUDA=OFF -DGPUWIRE_FUZZ=ON -DGPUWIRE_FUZZ_SECONDS="$seconds" \
    -DCMAKE_PROJECT_INCLUDE="$PWD/cmake/GpuwireSanitizers.cmake" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log" >&2; exit 1; }
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target gpuwire_fuzz_all
built=$(date +%s)
rm -rf "$dir/fuzz-runs"
status=0
ctest --test-dir "$dir" -L 'fuzz-replay|fuzz-run' -j "${JOBS:-$(nproc)}" --output-on-failure ||
    status=$?
done_at=$(date +%s)
echo "ci/fuzz.sh: configure+build $((built - start)) s, replay+fuzz $((done_at - built)) s"
cat "$dir"/fuzz-runs/*.stats 2>/dev/null || true
exit $status
