#!/bin/bash
# Ranks sharing one GPU under CUDA MPS: every figure beside its floor or its
# reference, measured in the same run, with the ratio and the bar it is held
# to; medians of GPU_MPS_REPS repetitions.
#   ci/gpu_mps.sh <build dir> <out dir> [<base build dir>]   (ci/gpu.sh mps builds first)
#   GPU_MPS_PARTS: any of p2p,hd,ar,nb,coll,check (default all; ab with a base build)
#     p2p   OSU osu_latency / osu_bw D D, gpuwire against pml ucx over the
#           CUDA-enabled UCX in GPU_UCX_LIB, rounds alternating; 8 B latency
#           against the D2D + sync floor, 4 MiB bandwidth against the same
#           window copied on the GPU
#     hd    H D and D H from 1 MiB: OSU (pageable host buffers) and gwbench
#           --mem (pinned) against cudaMemcpy of that kind of host memory;
#           pinned H D also through the slots (pml_gpuwire_shared_push 0)
#     ar    osu_allreduce at 64 MiB against the HBM floor (every rank's input
#           read and output written once, at the measured D2D rate)
#     nb    osu_iallreduce -T mpi_float and osu_ibcast: overlap from 64 KiB
#     coll  ci/gpu_coll_select.sh: the default of every collective against
#           the fastest forced algorithm
#     check OSU's own validation (-c) of the benchmarks above
#   GPU_MPS_NP: rank counts of ar, nb and coll (default "2 4"); p2p and hd use 2.
#   GPU_MPS_REPS (5), GPU_UCX_LIB, OSU_DIR as in ci/gpu_p2p.sh;
#   GPU_MPS_GW_EXTRA: more mpirun arguments for every gpuwire run.
# With a base build (GPU_BASE_SRC in ci/gpu.sh), gwbench latency and bandwidth
# of both builds alternate in the same session (part ab).
# Writes mps_floor.txt and mps_runs.txt to <out dir>; prints the tables.
set -uo pipefail
BUILD=$1
OUT=$2
BASE=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OSU=${OSU_DIR:-$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi}
FB=$(find "$BUILD" -name cuda_floor_bench -type f -executable | head -1)
GWB=$(find "$BUILD" -name gwbench -type f -executable | head -1)
if [ -z "$FB" ] || [ -z "$GWB" ]; then echo "gpu_mps.sh: build cuda_floor_bench and gwbench first"; exit 1; fi
[ -x "$OSU/pt2pt/osu_latency" ] || { echo "gpu_mps.sh: no OSU build under $OSU"; exit 1; }
PARTS=,${GPU_MPS_PARTS:-p2p,hd,ar,nb,coll,check,ab},
REPS=${GPU_MPS_REPS:-5}
NPS=${GPU_MPS_NP:-2 4}
want() { [[ $PARTS == *",$1,"* ]]; }

# shellcheck source=ci/mps_common.sh
. "$(dirname "$0")/mps_common.sh"
LOG=$OUT/mps_runs.txt RUN_TAG=mps RUN_TIMEOUT=150
# shellcheck source=ci/osu_common.sh
. "$(dirname "$0")/osu_common.sh"
# gw <np> [more mpirun arguments]: the prefix that runs this build's components.
gw() {
    local np=$1; shift
    echo "${OSU_BASE/-np 2/-np $np --oversubscribe} --mca mca_base_component_path $OMPI_LIB:$BUILD/components
          --mca pml gpuwire --mca coll gpuwire,inter,tuned,libnbc,basic,self ${GPU_MPS_GW_EXTRA:-} $*"
}
REF=$(osu_ref)
med() { printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; }'; }
# bar <ratio> <le|ge> <limit>: PASS, MISS, or - without a figure.
bar() {
    [ -n "$1" ] || { echo "-"; return; }
    awk -v r="$1" -v op="$2" -v l="$3" 'BEGIN { ok = (op == "le") ? r <= l : r >= l; print (ok ? "PASS" : "MISS") }'
}
# medrun <prefix> <size> [column]: the median over the repetitions.
medrun() {
    local v=() r
    for r in $(seq "$REPS"); do
        v+=("$(awk -v s="$2" -v c="${3:-2}" '$1==s {print $c}' "/tmp/mps_$1_$r" 2>/dev/null | head -1)")
    done
    med "${v[@]}"
}
mkdir -p "$OUT"
"$FB" 300 >"$OUT/mps_floor.txt" 2>&1
floor() { grep -F "$1" "$OUT/mps_floor.txt" | awk '{print $(NF-1)}' | sort -g | head -1; }
peak() { grep -F "$1" "$OUT/mps_floor.txt" | awk '{print $(NF-1)}' | sort -g | tail -1; }
PT=$OSU/pt2pt
COLL=$OSU/collective

for r in $(seq "$REPS"); do
    if want p2p; then
        for t in latency bw; do
            run "gw_${t}_DD_$r" "$(gw 2)" "$PT/osu_$t" -d cuda -m 1:4194304 -i 500 -x 50 D D
            [ -n "$REF" ] && run "ref_${t}_DD_$r" "$REF" "$PT/osu_$t" -d cuda -m 1:4194304 -i 500 -x 50 D D
        done
    fi
    if want hd; then
        for m in "H D" "D H"; do
            for t in latency bw; do
                # shellcheck disable=SC2086
                run "gw_${t}_${m// /}_$r" "$(gw 2)" "$PT/osu_$t" -d cuda -m 1048576:16777216 -i 50 -x 5 $m
            done
        done
        run "pin_bw_PD_$r" "$(gw 2)" "$GWB" --mem PD -t bw -m 1M,4M,16M -i 50 -x 5
        # The same through the slots (the sender's memcpy), for comparison.
        run "pin_bw_PDslots_$r" "$(gw 2 --mca pml_gpuwire_shared_push 0)" "$GWB" --mem PD -t bw \
            -m 1M,4M,16M -i 50 -x 5
        run "pin_bw_DP_$r" "$(gw 2)" "$GWB" --mem DP -t bw -m 1M,4M,16M -i 50 -x 5
    fi
    for np in $NPS; do
        want ar && run "ar_${np}_$r" "$(gw "$np")" "$COLL/osu_allreduce" -d cuda -m 67108864:67108864 -i 50 -x 5
        if want nb; then
            run "nbar_${np}_$r" "$(gw "$np")" "$COLL/osu_iallreduce" -d cuda -T mpi_float -m 65536:67108864 -i 20 -x 3
            run "nbbc_${np}_$r" "$(gw "$np")" "$COLL/osu_ibcast" -d cuda -m 65536:67108864 -i 20 -x 3
        fi
    done
done
"$FB" 300 >>"$OUT/mps_floor.txt" 2>&1

if want p2p; then
    f8=$(floor "8 B cudaMemcpyAsync D2D (same GPU) + sync")
    win=$(peak "D2D window of 64 x 4 MiB, one copy_and_mark kernel")
    wce=$(peak "D2D window of 64 x 4 MiB, cudaMemcpyAsync")
    win=$(awk -v a="$win" -v b="$wce" 'BEGIN { print (a > b ? a : b) }')
    echo "| D D, 2 ranks, median of $REPS | size | gpuwire | UCX with CUDA | gpuwire / UCX | bar | result |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    for t in latency bw; do
        for n in 1 8 64 512 4096 16384 65536 262144 1048576 4194304; do
            g=$(medrun "gw_${t}_DD" $n); u=""; [ -n "$REF" ] && u=$(medrun "ref_${t}_DD" $n)
            x=$(ratio "$g" "$u")
            if [ $t = latency ]; then
                echo "| osu_latency (us) | $n | $g | $u | $x | <= 0.9 | $(bar "$x" le 0.9) |"
            else
                echo "| osu_bw (MB/s) | $n | $g | $u | $x | >= 1.1 | $(bar "$x" ge 1.1) |"
            fi
        done
    done
    g=$(medrun gw_latency_DD 8); x=$(ratio "$g" "$f8")
    echo "| osu_latency 8 B against 8 B D2D + sync ($f8 us) | 8 | $g | | $x | <= 1.2 | $(bar "$x" le 1.2) |"
    g=$(medrun gw_bw_DD 4194304); x=$(ratio "$(awk -v g="$g" 'BEGIN { print g / 1000 }')" "$win")
    echo "| osu_bw 4 MiB (MB/s) against the same window copied on the GPU ($win GB/s) | 4194304 | $g | | $x | >= 0.8 | $(bar "$x" ge 0.8) |"
    echo
fi
if want hd; then
    echo "| host and device, 2 ranks, median of $REPS | size | gpuwire (GB/s) | cudaMemcpy of that host memory (GB/s) | ratio | bar | result |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    for n in 1 4 16; do
        b=$((n << 20))
        ph=$(peak "pageable H2D $n MiB"); pd=$(peak "pageable D2H $n MiB")
        qh=$(peak "pinned H2D $n MiB"); qd=$(peak "pinned D2H $n MiB")
        for m in HD DH; do
            if [ $m = HD ]; then f=$ph; q=$qh; pin=PD; else f=$pd; q=$qd; pin=DP; fi
            g=$(awk -v v="$(medrun "gw_bw_$m" $b)" 'BEGIN { if (v > 0) printf "%.2f", v / 1000 }')
            x=$(ratio "$g" "$f")
            echo "| osu_bw ${m:0:1} ${m:1:1}, pageable | $b | $g | $f | $x | >= 0.8 | $(bar "$x" ge 0.8) |"
            # One-way latency as a rate, against the mean time of the two directions.
            l=$(medrun "gw_latency_$m" $b)
            g=$(awk -v l="$l" -v b="$b" 'BEGIN { if (l > 0) printf "%.2f", b / l / 1000 }')
            f2=$(awk -v a="$ph" -v c="$pd" 'BEGIN { if (a > 0 && c > 0) printf "%.2f", 2 / (1 / a + 1 / c) }')
            x=$(ratio "$g" "$f2")
            echo "| osu_latency ${m:0:1} ${m:1:1}, pageable (size / latency) | $b | $g | $f2 | $x | >= 0.8 | $(bar "$x" ge 0.8) |"
            g=$(medrun "pin_bw_$pin" $b); x=$(ratio "$g" "$q")
            echo "| gwbench bw ${m:0:1} ${m:1:1}, pinned | $b | $g | $q | $x | >= 0.8 | $(bar "$x" ge 0.8) |"
            if [ $m = HD ]; then
                g=$(medrun pin_bw_PDslots $b); x=$(ratio "$g" "$q")
                echo "| gwbench bw H D, pinned, slots (pml_gpuwire_shared_push 0) | $b | $g | $q | $x | (for comparison) | - |"
            fi
        done
    done
    echo
fi
if want ar || want nb; then
    rate=$(peak "D2D 256 MiB cudaMemcpyAsync, read+write counted")
    echo "| collectives, median of $REPS | ranks | size | gpuwire | floor | ratio | bar | result |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
    for np in $NPS; do
        if want ar; then
            g=$(medrun "ar_$np" 67108864)
            f=$(awk -v n="$np" -v r="$rate" 'BEGIN { if (r > 0) printf "%.1f", 2 * n * 67108864 / (r * 1e3) }')
            x=$(ratio "$g" "$f")
            echo "| osu_allreduce (us) against the HBM floor ($rate GB/s) | $np | 67108864 | $g | $f | $x | <= 1.5 | $(bar "$x" le 1.5) |"
        fi
        if want nb; then
            for c in nbar nbbc; do
                for n in 65536 1048576 16777216 67108864; do
                    g=$(medrun "${c}_$np" $n 5)
                    echo "| $([ $c = nbar ] && echo osu_iallreduce || echo osu_ibcast) overlap (%) | $np | $n | $g | 100 | | >= 90 | $(bar "$g" ge 90) |"
                done
            done
        fi
    done
    echo
fi
if want coll; then
    if [ -x "$ROOT/ci/gpu_coll_select.sh" ]; then
        "$ROOT/ci/gpu_coll_select.sh" "$BUILD" "$OUT" "$NPS"
    else
        echo "coll: ci/gpu_coll_select.sh is not there"
    fi
    echo
fi
if want check; then
    v() { # v <name> <np> <program> <args>: one validated run
        local name=$1 np=$2 prog=$3; shift 3
        run "chk_$name" "$(gw "$np")" "$prog" -c "$@"
        echo "validation $name: $(grep -q '^rc=0' "/tmp/mps_chk_$name" && echo ok || echo FAIL), $(grep -ci fail "/tmp/mps_chk_$name") lines naming a failure"
    }
    v latency_DD 2 "$PT/osu_latency" -d cuda -m 1:4194304 -i 20 -x 2 D D
    v bw_DD 2 "$PT/osu_bw" -d cuda -m 1:4194304 -i 10 -x 2 D D
    v bw_HD 2 "$PT/osu_bw" -d cuda -m 1048576:16777216 -i 10 -x 2 H D
    v bw_DH 2 "$PT/osu_bw" -d cuda -m 1048576:16777216 -i 10 -x 2 D H
    for np in $NPS; do
        v "allreduce_$np" "$np" "$COLL/osu_allreduce" -d cuda -m 8:67108864 -i 5 -x 1
        v "iallreduce_$np" "$np" "$COLL/osu_iallreduce" -d cuda -T mpi_float -m 8:67108864 -i 5 -x 1
        v "ibcast_$np" "$np" "$COLL/osu_ibcast" -d cuda -m 8:67108864 -i 5 -x 1
    done
    run chk_pinned "$(gw 2)" "$GWB" --mem PD -t bw,latency -m 1M,16M -i 10 -x 1 -c
    echo "validation gwbench pinned: $(grep -q '^rc=0' /tmp/mps_chk_pinned && echo ok || echo FAIL)"
    echo
fi

[ -n "$BASE" ] && want ab || exit 0
BGWB=$(find "$BASE" -name gwbench -type f -executable | head -1)
[ -n "$BGWB" ] || { echo "gpu_mps.sh: no gwbench in $BASE"; exit 1; }
gwb() { # gwb <build> [mpirun arguments]
    local b=$1; shift
    echo "$OSU_BASE --mca mca_base_component_path $OMPI_LIB:$b/components --mca pml gpuwire
          --mca coll gpuwire,inter,tuned,libnbc,basic,self $*"
}
for r in $(seq "$REPS"); do
    run "ab_lat_base_$r" "$(gwb "$BASE")" "$BGWB" --device -t latency -m 8:8 -i 5000 -x 500
    run "ab_lat_new_$r" "$(gwb "$BUILD")" "$GWB" --device -t latency -m 8:8 -i 5000 -x 500
    run "ab_bw_base_$r" "$(gwb "$BASE")" "$BGWB" --device -t bw -m 4M:4M
    run "ab_bw_new_$r" "$(gwb "$BUILD")" "$GWB" --device -t bw -m 4M:4M
done
echo "| this build against the base build, alternating, median of $REPS | base | new | new / base |"
echo "| --- | --- | --- | --- |"
a=$(medrun ab_lat_base 8); b=$(medrun ab_lat_new 8)
echo "| gwbench latency D D 8 B (us) | $a | $b | $(ratio "$b" "$a") |"
a=$(medrun ab_bw_base 4194304); b=$(medrun ab_bw_new 4194304)
echo "| gwbench bw D D 4 MiB (GB/s) | $a | $b | $(ratio "$b" "$a") |"
