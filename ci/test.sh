#!/bin/sh
# The test suite: install the dependencies, build gpuwire WITH its tests (into
# ${BUILD_DIR:-build}, whatever an earlier configure cached there), run them
# through ctest, then print a summary: every skipped test with its reason, and
# the counts. Fails when a test fails, when no test ran, or when ctest ran
# fewer tests than the selection holds.
#
# Usage: ci/test.sh [--quick] [cmake -D options...] [-- ctest selection options]
#   --quick   everything but the chroot (Open MPI 5, .deb, fresh clone) and
#             two-host tests (labels chroot, twohost, slow): a few minutes
#             instead of about 15 on 2 cores
#   -- ...    passed to ctest (e.g. -- -R unit_ -L coll)
# Environment: BUILD_DIR, JOBS, FUZZ=1 (the clang fuzz pass too, about 3 min).
# An MPI test declares its rank count as PROCESSORS, so ctest never
# oversubscribes the machine more than one test at a time.
set -eu
cd "$(dirname "$0")/.."
SRC=$(pwd)
QUICK=0
CMAKE_ARGS=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; shift ;;
        --) shift; break ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) CMAKE_ARGS="$CMAKE_ARGS $1"; shift ;;
    esac
done
# What is left in "$@" selects tests for ctest.
[ "$QUICK" = 0 ] || set -- -LE '^(chroot|twohost|slow)$' "$@"

ci/setup.sh
# shellcheck disable=SC2086  # cmake options are words
ci/build.sh -DGPUWIRE_BUILD_TESTS=ON $CMAKE_ARGS
[ "${FUZZ:-0}" = 0 ] || ci/fuzz.sh
cd "${BUILD_DIR:-build}"

expected=$(ctest -N "$@" | sed -n 's/^Total Tests: *//p')
if [ "${expected:-0}" -eq 0 ]; then
    echo "ci/test.sh: FAIL: the selection holds no test (is GPUWIRE_BUILD_TESTS ON in $(pwd)?)"
    echo "0 passed, 0 failed, 0 skipped"
    exit 1
fi
junit="$(pwd)/Testing/gpuwire-junit.xml"
rm -f "$junit"
rc=0
ctest --output-on-failure --no-tests=error -j "${JOBS:-$(nproc)}" --timeout 600 \
    --output-junit "$junit" "$@" || rc=$?
# The summary ends with the line "N passed, N failed, N skipped" (CI reads it).
python3 "$SRC/ci/test_summary.py" "$junit" --expected "$expected" --ctest-status "$rc"
