#!/bin/sh
# A rank killed in the middle of a large transfer must take the job down as
# under ob1: mpirun exits nonzero within 30 s, names the killed rank, and no
# process of the job is left; the survivor never aborts by itself, and a
# receiver that completes holds the sender's bytes.
#   kill_rank.sh <mpirun> <kill_rank program> <sender|receiver|probe> <MiB>[:device] <expect>
#                <mpirun flags...>
# ("probe": the sender dies and the receiver probes for it, kill_rank.c.)
# <expect> is what the survivor must see:
#   error      its MPI_Wait returns (peer failure detection on): an MPI error,
#              or success when the bytes had all moved before the kill
#   noabort    anything but an abort of its own (waits, errs, or completes)
# Passes the flags on (pml gpuwire and its parameters among them). With
# ":device" the transfer is between GPU buffers; exit 77 (skipped) without a GPU.
set -u
MPIRUN=$1 PROG=$2 VICTIM=$3 MIB=${4%%:*} MEM=host EXPECT=$5
case $4 in *:device) MEM=device ;; esac
case $EXPECT in error | noabort) ;; *) echo "unknown expectation: $EXPECT"; exit 2 ;; esac
shift 5
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
echo "mpirun exited with $rc after $ms ms (victim: the $VICTIM, expected of the survivor: $EXPECT)"
grep -E '^kill_rank:|noticed|exited on signal|process_vm_readv|Signal: ' "$dir/out" | head -10
vrank=0 srank=1
[ "$VICTIM" = receiver ] && vrank=1 srank=0

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
if grep -q '^kill_rank: rank .: FAIL: ' "$dir/out"; then
    grep '^kill_rank: rank .: FAIL: ' "$dir/out"
    fail=1
fi
if grep -q '^kill_rank: rank 1: the transfer completed.*data CORRUPT' "$dir/out"; then
    echo "FAIL: the receiver's transfer completed with wrong data"
    fail=1
fi
# The survivor must not abort by itself (Open MPI's handler prints "Signal:"
# for it; the killed rank dies by SIGKILL and prints nothing).
if grep -q '^\[.*\] Signal: ' "$dir/out"; then
    echo "FAIL: the survivor (rank $srank) aborted by itself; output:"
    head -40 "$dir/out"
    fail=1
# (Open MPI 5's prterun breaks that sentence over two lines: read it as one.)
elif ! tr -s '\n\t ' ' ' <"$dir/out" |
        grep -Eq "process rank $vrank with PID [0-9]+ on node [^ ]+ exited on signal 9"; then
    echo "FAIL: mpirun did not name the killed rank $vrank; output:"
    head -40 "$dir/out"
    fail=1
fi
# With peer failure detection the survivor's MPI_Wait must return: an error,
# or success where the bytes had all moved before the kill (checked above).
# Open MPI 5's runtime (prterun, without --enable-recovery) ends every
# process of the job within a second of a death, which can be before UCX
# reports the peer's failure: there the survivor may be ended first.
if [ "$EXPECT" = error ] &&
    ! grep -qE "^kill_rank: rank $srank: the transfer (failed|completed)" "$dir/out"; then
    if grep -q '^prterun noticed' "$dir/out"; then
        echo "known: Open MPI 5's prterun ended the survivor before an error reached it"
    else
        echo "FAIL: the survivor (rank $srank) stayed blocked (MPI_Wait, MPI_Probe): no error reached it"
        fail=1
    fi
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
