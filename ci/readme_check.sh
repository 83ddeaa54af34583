#!/bin/sh
# The README's two commands as a new user meets them: a fresh `git clone` of
# this checkout's committed HEAD into /tmp, then, in that clone,
#   1. ci/demo.sh: must succeed, print the gpuwire/reference ratios and a
#      "ran:" line naming pml gpuwire and coll gpuwire;
#   2. build/ configured with GPUWIRE_BUILD_TESTS=OFF (what an old demo left
#      behind), then ci/test.sh on a selection: must build the tests anyway,
#      run every test of the selection (its summary says "ran N of N", N > 0),
#      pass, and end with the line "N passed, 0 failed, N skipped";
#   3. ci/test.sh on a selection that matches no test: must fail.
# The clone's HOME is private (the demo installs into ~/.openmpi/components,
# which every other Open MPI job of the machine would search).
#
# Why not in a chroot: without one this already takes 18 min on a busy 2-core
# machine (1069 s: the demo with its cold build 529 s, the test build and the
# selection 503 s); a debootstrap and the build dependencies (apt-get) would
# add several more, and the chroot tests (ci/deb_chroot.sh) already cover a
# clean Debian.
# Why a selection in step 2: the full suite runs around this test already; the
# assertions are about the test command itself (README_CHECK_CTEST, default
# the engine's unit tests; README_CHECK_CTEST="-LE ^(chroot|twohost|slow)$"
# for the quick suite).
# With ccache installed the clone's compilations go through it (base dir: the
# clone), so a second run takes minutes instead of two cold builds.
#
# Usage: ci/readme_check.sh   Exits 0 on success, 1 on a failure, 77 (skipped)
# where this is not a git checkout or git is missing.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'readme_check: %s\n' "$*"; }
die() { printf 'readme_check: FAIL: %s\n' "$*"; exit 1; }
command -v git >/dev/null 2>&1 || { say "SKIP: git not installed"; exit 77; }
REV=$(git -C "$SRC" rev-parse HEAD 2>/dev/null) || { say "SKIP: $SRC is not a git checkout"; exit 77; }
[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ] ||
    say "note: $SRC has uncommitted changes; the clone tests the commit $REV only"

TMP=$(mktemp -d /tmp/gpuwire-readme.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM HUP
CLONE=$TMP/gpuwire
git clone -q --no-checkout "$SRC" "$CLONE" && git -C "$CLONE" checkout -q "$REV" ||
    die "git clone of $SRC failed"
say "fresh clone of $REV in $CLONE"
mkdir "$TMP/home"
export HOME="$TMP/home"
unset BUILD_DIR DEMO_BUILD_DIR PREFIX
if command -v ccache >/dev/null 2>&1; then
    export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache \
           CMAKE_CUDA_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$CLONE" CCACHE_NOHASHDIR=true
fi
cd "$CLONE"
now() { date +%s; }

# 1. ci/demo.sh
t=$(now)
ci/demo.sh >"$TMP/demo.log" 2>&1 || { tail -30 "$TMP/demo.log"; die "ci/demo.sh exited $?"; }
say "ci/demo.sh: $(( $(now) - t )) s"
grep -q 'ratio [0-9]' "$TMP/demo.log" || { cat "$TMP/demo.log"; die "ci/demo.sh printed no ratio"; }
grep -q '^ran: pml gpuwire and coll gpuwire' "$TMP/demo.log" ||
    { cat "$TMP/demo.log"; die "ci/demo.sh did not show pml gpuwire and coll gpuwire running"; }
[ -x "$HOME/.local/bin/gpuwire-info" ] || die "ci/demo.sh did not install ~/.local/bin/gpuwire-info"
[ ! -e build/CMakeCache.txt ] || die "ci/demo.sh configured build/, the test command's folder"

# 2. the test command over a build folder configured without the tests
cmake -S . -B build -DGPUWIRE_BUILD_TESTS=OFF >"$TMP/off.log" 2>&1 || { tail "$TMP/off.log"; die "cmake failed"; }
SEL=${README_CHECK_CTEST:--R ^gpuwire_unit_}
t=$(now)
# shellcheck disable=SC2086  # the selection is words
ci/test.sh -- $SEL >"$TMP/test.log" 2>&1 || { tail -40 "$TMP/test.log"; die "ci/test.sh -- $SEL failed"; }
say "ci/test.sh -- $SEL: $(( $(now) - t )) s"
summary=$(grep '^ran [0-9]* of [0-9]* tests' "$TMP/test.log") || { tail -20 "$TMP/test.log"; die "no summary"; }
set -- $summary
[ "$2" -gt 0 ] || die "ci/test.sh ran no test: $summary"
[ "$2" = "$4" ] || die "ci/test.sh ran fewer tests than its selection: $summary"
expected=$(cd build && ctest -N $SEL | sed -n 's/^Total Tests: *//p')
[ "$2" = "$expected" ] || die "ci/test.sh ran $2 tests, ctest -N counts $expected"
tail -1 "$TMP/test.log" | grep -qE '^[0-9]+ passed, 0 failed, [0-9]+ skipped$' ||
    die "ci/test.sh's last line is not 'N passed, 0 failed, N skipped': $(tail -1 "$TMP/test.log")"
say "PASS: $summary"

# 3. no test selected: the command must fail
if ci/test.sh -- -R '^no_such_test$' >"$TMP/none.log" 2>&1; then
    tail -5 "$TMP/none.log"; die "ci/test.sh passed with no test to run"
fi
tail -1 "$TMP/none.log" | grep -q '^0 passed' || die "ci/test.sh with no test: $(tail -1 "$TMP/none.log")"
say "PASS: ci/test.sh fails when no test runs"
say "PASS: 0 failures"
