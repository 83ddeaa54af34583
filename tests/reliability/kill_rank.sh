#!/bin/sh
# A rank killed in the middle of a large transfer must take the job down:
# mpirun exits nonzero within 30 s, and no process of the job is left.
#   kill_rank.sh <mpirun> <kill_rank program> <sender|receiver> <MiB>[:device] <mpirun flags...>
# Passes the flags on (pml gpuwire and its parameters among them). With
# ":device" the transfer is between GPU buffers; exit 77 (skipped) without a GPU.
set -u
MPIRUN=$1 PROG=$2 VICTIM=$3 MIB=${4%%:*} MEM=host
case $4 in *:device) MEM=device ;; esac
shift 4
LIMIT=30

dir=$(mktemp -d "${TMPDIR:-/tmp}/gpuwire-kill-rank.XXXXXX")
trap 'rm -rf "$dir"' EXIT
start=$(date +%s%N)
timeout -k 5 "$LIMIT" "$MPIRUN" -np 2 "$@" "$PROG" "$VICTIM" "$dir" "$MIB" "$MEM" >"$dir/out" 2>&1
rc=$?
if grep -q '^kill_rank: skip' "$dir/out"; then
    grep -m1 '^kill_rank: skip' "$dir/out"
    exit 77
fi
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "mpirun exited with $rc after $ms ms (victim: the $VICTIM)"
grep -E '^kill_rank:|noticed|exited on signal' "$dir/out" | head -8

fail=0
# mpirun passes the killed rank's status on (137 = 128 + SIGKILL), which is
# also what timeout returns when it has to kill: the clock tells them apart.
if [ "$ms" -ge $((LIMIT * 1000)) ]; then
    echo "FAIL: the job did not end within $LIMIT s"
    fail=1
elif [ "$rc" -eq 0 ]; then
    echo "FAIL: mpirun exited with 0 although a rank was killed"
    fail=1
fi
if ! grep -q '^kill_rank: rank . kills itself' "$dir/out"; then
    echo "FAIL: the victim never reached the kill; output:"
    head -40 "$dir/out"
    fail=1
fi

# Every rank's process must be gone (give the kernel a moment to reap).
pids=$(cat "$dir"/rank*.pid 2>/dev/null)
[ -n "$pids" ] || { echo "FAIL: no rank wrote its pid"; fail=1; }
for i in 1 2 3 4 5 6 7 8 9 10; do
    left=""
    for p in $pids; do
        if kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null; then
            left="$left $p"
        fi
    done
    [ -z "$left" ] && break
    sleep 0.5
done
if [ -n "$left" ]; then
    echo "FAIL: processes left behind:$left"
    for p in $left; do ps -o pid,stat,etime,cmd -p "$p" | tail -n +2; done
    for p in $left; do kill -9 "$p" 2>/dev/null; done
    fail=1
fi
# Nor any shared staging segment of theirs (they are unlinked at creation).
for p in $pids; do
    if ls /dev/shm/gpuwire-ss.*."$p".* >/dev/null 2>&1; then
        echo "FAIL: process $p left shared memory behind:" /dev/shm/gpuwire-ss.*."$p".*
        fail=1
    fi
done
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
