#!/bin/sh
# Sanitizer runs of the host code, each in a build folder of its own:
#   asan  AddressSanitizer + UBSan (GPUWIRE_SANITIZE): every unit test
#         (ctest -L unit) and the replay of every fuzz corpus
#   tsan  ThreadSanitizer (GPUWIRE_TSAN, cmake/GpuwireSanitizers.cmake): the
#         engine's threaded tests (gpuwire_unit_engine_threads, loopback)
# Usage: ci/sanitize.sh [asan|tsan|all]      (default: all)
# Build folders: $SANITIZE_BUILD_DIR-asan, -tsan (default build-sanitize-*).
# Only host code is built (-DGPUWIRE_WITH_CUDA=OFF), and not the MPI
# component: Open MPI and UCX are not instrumented, so the component could not
# be loaded into mpirun from such a build.
set -eu
cd "$(dirname "$0")/.."
what=${1:-all}
base=${SANITIZE_BUILD_DIR:-build-sanitize}
jobs=${JOBS:-$(nproc)}

# Report every finding with a stack, and let none pass as a warning.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# configure <dir> <cmake args...>
configure() {
    d=$1
    shift
    mkdir -p "$d"
    cmake -S . -B "$d" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUWIRE_WITH_CUDA=OFF \
        -DCMAKE_PROJECT_INCLUDE="$PWD/cmake/GpuwireSanitizers.cmake" "$@" >"$d/configure.log" 2>&1 ||
        { cat "$d/configure.log" >&2; exit 1; }
}

# run <dir> <ctest label regex> [ctest test regex]: builds exactly the
# executables of the selected tests (a test is named after its executable),
# then runs them.
run() {
    d=$1 labels=$2 only=${3:-.}
    tests=$(ctest --test-dir "$d" -N -L "$labels" -R "$only" | sed -n 's/^ *Test *#[0-9]*: //p')
    [ -n "$tests" ] || { echo "ci/sanitize.sh: no tests match $labels / $only" >&2; exit 1; }
    # shellcheck disable=SC2086
    cmake --build "$d" -j "$jobs" --target $tests
    ctest --test-dir "$d" -L "$labels" -R "$only" -j "$jobs" --output-on-failure --timeout 900
}

elapsed() { echo "ci/sanitize.sh: $1 took $(( $(date +%s) - $2 )) s"; }

if [ "$what" = asan ] || [ "$what" = all ]; then
    t0=$(date +%s)
    configure "$base-asan" -DGPUWIRE_SANITIZE=ON
    run "$base-asan" 'unit|fuzz-replay'
    elapsed "asan+ubsan (unit tests, fuzz corpus replay)" "$t0"
fi
if [ "$what" = tsan ] || [ "$what" = all ]; then
    t0=$(date +%s)
    configure "$base-tsan" -DGPUWIRE_TSAN=ON
    # UCX's memory hooks (UCM) intercept the madvise() a thread calls as it
    # exits, after ThreadSanitizer has released the thread's state: a crash
    # in TSan's runtime, not a finding. The events keep UCX's registration
    # cache right for RDMA devices, which the loopback tests do not use.
    export UCX_MEM_EVENTS=no
    run "$base-tsan" engine 'gpuwire_unit_engine_(threads|loopback)'
    elapsed "tsan (threaded engine tests)" "$t0"
fi
