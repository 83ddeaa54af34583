#!/bin/bash
# OSU 7.x on device buffers, two ranks on one GPU under CUDA MPS, gpuwire beside
# Open MPI's pml ucx / osc ucx over a UCX built with CUDA, in one run:
# one-sided (osc gpuwire, -w create/allocate, -s lock/flush) and point-to-point.
#   ci/gpu_osu.sh <build dir> <out dir>
#   OSU_DIR: OSU's libexec/osu-micro-benchmarks/mpi (default .ref/osu-install/...)
#   GPU_UCX_LIB: the lib folder of a CUDA-enabled UCX for the reference rows
#   (none: the reference rows are left out).
# Writes osu_runs.txt to <out dir>; prints tables last (8 B latency, 4 MiB rate).
set -uo pipefail
BUILD=$1
OUT=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OSU=${OSU_DIR:-$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi}
[ -x "$OSU/one-sided/osu_put_latency" ] || { echo "gpu_osu.sh: no OSU build under $OSU"; exit 1; }
# shellcheck source=ci/mps_common.sh
. "$(dirname "$0")/mps_common.sh"
LOG=$OUT/osu_runs.txt RUN_TAG=osu RUN_TIMEOUT=120
# shellcheck source=ci/osu_common.sh
. "$(dirname "$0")/osu_common.sh"
BASE=$OSU_BASE
GW="$BASE --mca mca_base_component_path $OMPI_LIB:$BUILD/components --mca pml gpuwire
    --mca coll gpuwire,inter,tuned,libnbc,basic,self --mca osc gpuwire"
REF=$(osu_ref --mca osc ucx)
ok() { grep -q '^rc=0' "/tmp/osu_$1" && echo ok || echo "FAIL($(sed -n 's/^rc=//p' "/tmp/osu_$1"))"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; }'; }

RMA="-m 1:4194304 -i 200 -x 20"
for w in create allocate; do
    for s in lock flush; do
        for b in put_latency get_latency put_bw get_bw acc_latency; do
            run "gw_${b}_${w}_${s}" "$GW" "$OSU/one-sided/osu_$b" -d cuda -w $w -s $s $RMA D D
            [ -n "$REF" ] && run "ref_${b}_${w}_${s}" "$REF" "$OSU/one-sided/osu_$b" -d cuda -w $w -s $s $RMA D D
        done
        for b in fop_latency cas_latency; do
            run "gw_${b}_${w}_${s}" "$GW" "$OSU/one-sided/osu_$b" -d cuda -w $w -s $s -i 500 -x 50 D D
            [ -n "$REF" ] && run "ref_${b}_${w}_${s}" "$REF" "$OSU/one-sided/osu_$b" -d cuda -w $w -s $s -i 500 -x 50 D D
        done
    done
done
# Host windows: gpuwire's osc beside osc ucx over the system's UCX.
HOSTREF="$BASE --mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
for b in put_latency get_latency; do
    run "gwh_$b" "$GW" "$OSU/one-sided/osu_$b" -w create -s flush -m 1:8 -i 5000 -x 500
    run "refh_$b" "$HOSTREF" "$OSU/one-sided/osu_$b" -w create -s flush -m 1:8 -i 5000 -x 500
done
# Point-to-point on device buffers.
P2P="-m 1:4194304 -i 1000 -x 100"
run gw_lat "$GW" "$OSU/pt2pt/osu_latency" -d cuda $P2P D D
run gw_bw "$GW" "$OSU/pt2pt/osu_bw" -d cuda $P2P D D
run gw_lat_c "$GW" "$OSU/pt2pt/osu_latency" -d cuda -c -m 1:4194304 -i 20 -x 2 D D
if [ -n "$REF" ]; then
    run ref_lat "$REF" "$OSU/pt2pt/osu_latency" -d cuda $P2P D D
    run ref_bw "$REF" "$OSU/pt2pt/osu_bw" -d cuda $P2P D D
fi

echo "| OSU one-sided -d cuda D D, 2 ranks on one GPU (MPS) | gpuwire 8 B | ref 8 B | gpuwire/ref | gpuwire 4 MiB | ref 4 MiB | gpuwire/ref | runs |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for w in create allocate; do for s in lock flush; do
    for b in put_latency get_latency put_bw get_bw acc_latency fop_latency cas_latency; do
        n="${b}_${w}_${s}"; small=8; [ "$b" = put_bw ] || [ "$b" = get_bw ] && small=8
        g8=$(val "gw_$n" $small); g4=$(val "gw_$n" 4194304)
        r8=""; r4=""; rs="-"
        if [ -n "$REF" ]; then r8=$(val "ref_$n" $small); r4=$(val "ref_$n" 4194304); rs=$(ok "ref_$n"); fi
        [ "$b" = fop_latency ] || [ "$b" = cas_latency ] && { g8=$(awk '$1 ~ /^[0-9]+$/ {print $2; exit}' "/tmp/osu_gw_$n"); [ -n "$REF" ] && r8=$(awk '$1 ~ /^[0-9]+$/ {print $2; exit}' "/tmp/osu_ref_$n"); }
        echo "| osu_$b -w $w -s $s | $g8 | $r8 | $(ratio "$g8" "$r8") | $g4 | $r4 | $(ratio "$g4" "$r4") | gw $(ok "gw_$n"), ref $rs |"
    done
done; done
echo
echo "| host windows, -w create -s flush, 8 B (us) | osc gpuwire | osc ucx | ratio |"
echo "| --- | --- | --- | --- |"
for b in put_latency get_latency; do
    echo "| osu_$b | $(val "gwh_$b" 8) | $(val "refh_$b" 8) | $(ratio "$(val "gwh_$b" 8)" "$(val "refh_$b" 8)") |"
done
echo
echo "| OSU pt2pt -d cuda D D | size | gpuwire | ref (pml ucx, UCX with CUDA) | gpuwire/ref |"
echo "| --- | --- | --- | --- | --- |"
for n in 8 4096 65536 1048576 4194304; do
    g=$(val gw_lat $n); r=""; [ -n "$REF" ] && r=$(val ref_lat $n)
    echo "| osu_latency (us) | $n | $g | $r | $(ratio "$g" "$r") |"
done
for n in 8 4096 65536 1048576 4194304; do
    g=$(val gw_bw $n); r=""; [ -n "$REF" ] && r=$(val ref_bw $n)
    echo "| osu_bw (MB/s) | $n | $g | $r | $(ratio "$g" "$r") |"
done
echo "osu_latency -c (validation): $(ok gw_lat_c) $(grep -c -i 'fail' /tmp/osu_gw_lat_c) lines naming a failure"
