#!/bin/bash
# Two ranks on one GPU under CUDA MPS, beside the CUDA floors of the same run:
# without MPS such ranks pay a context switch (about 150 us) per message, so
# a one-GPU machine shows only that; with it, the software's own cost.
#   ci/gpu_mps.sh <build dir> <out dir> [<base build dir>]   (ci/gpu.sh mps builds first)
# With a base build (GPU_BASE_SRC in ci/gpu.sh: an earlier tree built beside
# this one), its latency and bandwidth rows run alternately with this build's
# in the same MPS session and a last table gives the ratios new / base.
# Starts the MPS control daemon with its pipe and log folders under /tmp and
# stops it at the end; the GPU's settings are left as they are. Writes
# mps_floor.txt and mps_runs.txt to <out dir>, prints a table last.
set -uo pipefail
BUILD=$1
OUT=$2
BASE=${3:-}
FB=$(find "$BUILD" -name cuda_floor_bench -type f -executable | head -1)
GWB=$(find "$BUILD" -name gwbench -type f -executable | head -1)
if [ -z "$FB" ] || [ -z "$GWB" ]; then
    echo "gpu_mps.sh: build cuda_floor_bench and gwbench first"
    exit 1
fi

# shellcheck source=ci/mps_common.sh
. "$(dirname "$0")/mps_common.sh"

# run_of <build dir>: the mpirun prefix that loads that build's components.
run_of() {
    echo "mpirun --allow-run-as-root -np 2 --bind-to core
     --mca mca_base_component_path $OMPI_LIB:$1/components -x CUDA_VISIBLE_DEVICES=0
     -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY
     --mca pml gpuwire --mca coll gpuwire,inter,tuned,libnbc,basic,self"
}
LOG=$OUT/mps_runs.txt
: >"$LOG"
# gw <name> [--mca ...] -- <gwbench args>: one gwbench run of this build (of
# the base build where GW_BUILD names it), its rows kept as /tmp/gw_mps_<name>.
gw() {
    local name=$1; shift
    local pre=(); while [ "$1" != "--" ]; do pre+=("$1"); shift; done; shift
    local b=${GW_BUILD:-$BUILD} exe=${GW_EXE:-$GWB}
    echo "### $name ($b): ${pre[*]} gwbench $*" >>"$LOG"
    # shellcheck disable=SC2046
    timeout 120 $(run_of "$b") "${pre[@]}" "$exe" --device "$@" >"/tmp/gw_mps_$name" 2>&1
    cat "/tmp/gw_mps_$name" >>"$LOG"
}
# The second column of gwbench's row for size $2 in run $1 (latency: median
# one-way us; bw: GB/s; allreduce: the slowest rank's median us).
col() { awk -v s="$2" '$1==s {print $2}' "/tmp/gw_mps_$1" | head -1; }
med() { printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; }'; }

"$FB" 500 >"$OUT/mps_floor.txt" 2>&1
for r in 1 2 3; do
    gw "lat_$r" -- -t latency -m 8:8 -i 5000 -x 500
    gw "lat_nosync_$r" --mca pml_gpuwire_device_sync 0 -- -t latency -m 8:8 -i 5000 -x 500
done
SIZES=8,4096,32768,65536,1048576
gw ar_default -- -t allreduce -m $SIZES -i 300 -x 30
gw ar_staged --mca coll_gpuwire_reduce_algorithm staged -- -t allreduce -m $SIZES -i 300 -x 30
gw ar_ring --mca coll_gpuwire_reduce_device_min_bytes 0 -- -t allreduce -m $SIZES -i 300 -x 30
gw ar_team --mca coll_gpuwire_nvlink_shared_gpu 1 -- -t allreduce -m $SIZES -i 300 -x 30
gw bw_staged --mca pml_gpuwire_ipc 0 -- -t bw -m 1M,4M,64M
"$FB" 300 >>"$OUT/mps_floor.txt" 2>&1

# Of the two floor runs, the stricter reference: the lower time, the higher bandwidth.
floor() { grep -F "$1" "$OUT/mps_floor.txt" | awk '{print $(NF-1)}' | sort -g | head -1; }
peak() { grep -F "$1" "$OUT/mps_floor.txt" | awk '{print $(NF-1)}' | sort -g | tail -1; }
f_d2d=$(floor "8 B cudaMemcpyAsync D2D (same GPU) + sync")
p_min=$(awk -v a="$(peak "pinned H2D 64 MiB")" -v b="$(peak "pinned D2H 64 MiB")" \
        'BEGIN { print (a < b ? a : b) }')
lat=$(med "$(col lat_1 8)" "$(col lat_2 8)" "$(col lat_3 8)")
lat_ns=$(med "$(col lat_nosync_1 8)" "$(col lat_nosync_2 8)" "$(col lat_nosync_3 8)")
echo "| two ranks on one GPU under MPS | gpuwire | reference in the same run | ratio |"
echo "| --- | --- | --- | --- |"
echo "| gwbench latency D D 8 B, median of 3 (us) | $lat | $f_d2d (8 B D2D + sync, lower of two) | $(ratio "$lat" "$f_d2d") |"
echo "| the same, pml_gpuwire_device_sync 0 (us) | $lat_ns | $f_d2d | $(ratio "$lat_ns" "$f_d2d") |"
for n in 1048576 4194304 67108864; do
    b=$(col bw_staged "$n")
    echo "| gwbench bw D D, IPC off (staged), $((n >> 20)) MiB (GB/s) | $b | $p_min (slower pinned direction, 64 MiB) | $(ratio "$b" "$p_min") |"
done
echo
echo "| Allreduce, floats, 2 ranks (us) | default | staged | ring | team (shared GPU) |"
echo "| --- | --- | --- | --- | --- |"
for n in ${SIZES//,/ }; do
    echo "| $n B | $(col ar_default "$n") | $(col ar_staged "$n") | $(col ar_ring "$n") | $(col ar_team "$n") |"
done

[ -n "$BASE" ] || exit 0
BGWB=$(find "$BASE" -name gwbench -type f -executable | head -1)
[ -n "$BGWB" ] || { echo "gpu_mps.sh: no gwbench in $BASE"; exit 1; }
# Five alternating rounds: base, then this build, for each row.
for r in 1 2 3 4 5; do
    GW_BUILD=$BASE GW_EXE=$BGWB gw "ab_lat_base_$r" -- -t latency -m 8:8 -i 5000 -x 500
    gw "ab_lat_new_$r" -- -t latency -m 8:8 -i 5000 -x 500
    GW_BUILD=$BASE GW_EXE=$BGWB gw "ab_bw_base_$r" -- -t bw -m 4M:4M
    gw "ab_bw_new_$r" -- -t bw -m 4M:4M
    GW_BUILD=$BASE GW_EXE=$BGWB gw "ab_bws_base_$r" --mca pml_gpuwire_ipc 0 -- -t bw -m 4M:4M
    gw "ab_bws_new_$r" --mca pml_gpuwire_ipc 0 -- -t bw -m 4M:4M
done
ab() { # ab <row prefix> <size>: the median of five rounds
    local v=(); for r in 1 2 3 4 5; do v+=("$(col "$1_$r" "$2")"); done
    med "${v[@]}"
}
echo
echo "| this build against the base build, alternating, median of 5 | base | new | new / base |"
echo "| --- | --- | --- | --- |"
a=$(ab ab_lat_base 8); b=$(ab ab_lat_new 8)
echo "| gwbench latency D D 8 B (us) | $a | $b | $(ratio "$b" "$a") |"
a=$(ab ab_bw_base 4194304); b=$(ab ab_bw_new 4194304)
echo "| gwbench bw D D 4 MiB, IPC (GB/s) | $a | $b | $(ratio "$b" "$a") |"
a=$(ab ab_bws_base 4194304); b=$(ab ab_bws_new 4194304)
echo "| gwbench bw D D 4 MiB, staged (GB/s) | $a | $b | $(ratio "$b" "$a") |"
