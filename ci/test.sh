#!/bin/sh
# The whole test suite: build, then every test through ctest. GPU tests report
# themselves skipped (with the reason) on machines without a GPU. An MPI test
# declares its rank count as PROCESSORS, so ctest never oversubscribes the
# machine more than one test at a time.
set -eu
cd "$(dirname "$0")/.."
ci/setup.sh
ci/build.sh "$@"
[ "${FUZZ:-0}" = 0 ] || ci/fuzz.sh  # FUZZ=1: the clang fuzz pass too (its own build dir, about 3 min)
cd "${BUILD_DIR:-build}"
exec ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
