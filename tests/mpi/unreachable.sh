#!/bin/sh
# A peer UCX cannot reach with the transports it was given must stop
# MPI_Init with pml gpuwire's one line naming the peer and the transports,
# and the job must end nonzero (not hang, not compute).
#   unreachable.sh <UCX_TLS value> <mpirun> <program> <mpirun flags...>
set -u
TLS=$1 MPIRUN=$2 PROG=$3
shift 3
out=$(mktemp "${TMPDIR:-/tmp}/gpuwire-unreachable.XXXXXX")
trap 'rm -f "$out"' EXIT
timeout -k 5 60 "$MPIRUN" -np 2 "$@" -x UCX_TLS="$TLS" "$PROG" >"$out" 2>&1
rc=$?
fail=0
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "FAIL: mpirun exited with $rc (expected a failed MPI_Init)"
    fail=1
fi
if ! grep -q "pml:gpuwire: declined: UCX cannot reach process [01].* (UCX_TLS=$TLS)" "$out"; then
    echo "FAIL: no line naming the unreachable process and UCX_TLS=$TLS"
    fail=1
fi
if grep -q '^PASS' "$out"; then
    echo "FAIL: the program ran"
    fail=1
fi
[ "$fail" -eq 0 ] && echo "PASS: mpirun exited with $rc" || head -30 "$out"
exit "$fail"
