#!/bin/sh
# The set-up lines of a verbose run say what is true: no doubled "fabric:"
# prefix, and no CUDA IPC claimed for the same-node device path when there is
# no device support (no CUDA driver here; on a GPU machine the check of that
# line is skipped, the prefix check still runs).
#   verbose_wording.sh <mpirun> <program> <mpirun flags...>
set -u
MPIRUN=$1 PROG=$2
shift 2
out=$(mktemp "${TMPDIR:-/tmp}/gpuwire-verbose.XXXXXX")
trap 'rm -f "$out"' EXIT
timeout -k 5 60 "$MPIRUN" -np 1 "$@" --mca pml_gpuwire_verbose 10 "$PROG" >"$out" 2>&1
rc=$?
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: mpirun exited with $rc"; fail=1; }
if grep -q 'fabric: fabric:' "$out"; then
    echo "FAIL: doubled prefix:"; grep -m2 'fabric: fabric:' "$out"; fail=1
fi
line=$(grep -m1 'pml:gpuwire: device buffers:' "$out")
if [ -z "$line" ]; then
    echo "FAIL: no 'device buffers' line in the verbose output"; fail=1
else
    case $line in
    *"device buffers: no,"*)
        case $line in
        *"same-node device path: CUDA IPC"*)
            echo "FAIL: CUDA IPC claimed without device support: $line"; fail=1 ;;
        esac ;;
    esac
fi
[ "$fail" -eq 0 ] && echo "PASS: $line" || head -20 "$out"
exit "$fail"
