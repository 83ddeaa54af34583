#!/bin/bash
# Point-to-point on device buffers, two ranks on one GPU under CUDA MPS:
# OSU's osu_latency and osu_bw (-d cuda) through gpuwire beside Open MPI's
# pml ucx over a UCX built with CUDA, rounds alternating in one MPS session,
# medians per size; the CUDA floors of the same run beside them.
#   ci/gpu_p2p.sh <build dir> <out dir>
#   OSU_DIR: OSU's libexec/osu-micro-benchmarks/mpi (default .ref/osu-install/...)
#   GPU_UCX_LIB: the lib folder of a CUDA-enabled UCX (none: no reference rows)
#   P2P_ROUNDS (3), P2P_ITERS (1000), P2P_MODES ("D D"; e.g. "D D,H D,D H"),
#   P2P_GW_EXTRA: more --mca settings for gpuwire's rows;
#   P2P_AB, P2P_AB2: --mca settings of more gpuwire columns (A/Bs in the same rounds).
# Writes p2p_runs.txt and p2p_floor.txt to <out dir>; prints the tables last.
set -uo pipefail
BUILD=$1
OUT=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OSU=${OSU_DIR:-$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi}
[ -x "$OSU/pt2pt/osu_latency" ] || { echo "gpu_p2p.sh: no OSU build under $OSU"; exit 1; }
FB=$(find "$BUILD" -name cuda_floor_bench -type f -executable | head -1)
ROUNDS=${P2P_ROUNDS:-3}
ITERS=${P2P_ITERS:-1000}
IFS=, read -r -a MODES <<<"${P2P_MODES:-D D}"
# shellcheck source=ci/mps_common.sh
. "$(dirname "$0")/mps_common.sh"
LOG=$OUT/p2p_runs.txt RUN_TAG=p2p RUN_TIMEOUT=150
# shellcheck source=ci/osu_common.sh
. "$(dirname "$0")/osu_common.sh"
GW="$OSU_BASE --mca mca_base_component_path $OMPI_LIB:$BUILD/components --mca pml gpuwire
    --mca coll gpuwire,inter,tuned,libnbc,basic,self ${P2P_GW_EXTRA:-}"
REF=$(osu_ref)
med() { printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; }'; }
key() { echo "${1// /}"; } # "D D" -> DD

[ -n "$FB" ] && "$FB" 300 >"$OUT/p2p_floor.txt" 2>&1
ARGS="-m 1:4194304 -i $ITERS -x $((ITERS / 10))"
for r in $(seq "$ROUNDS"); do
    for m in "${MODES[@]}"; do
        k=$(key "$m")
        # shellcheck disable=SC2086
        run "gw_lat_${k}_$r" "$GW" "$OSU/pt2pt/osu_latency" -d cuda $ARGS $m
        # shellcheck disable=SC2086
        [ -n "$REF" ] && run "ref_lat_${k}_$r" "$REF" "$OSU/pt2pt/osu_latency" -d cuda $ARGS $m
        # shellcheck disable=SC2086
        [ -n "${P2P_AB:-}" ] && run "ab_lat_${k}_$r" "$GW $P2P_AB" "$OSU/pt2pt/osu_latency" -d cuda $ARGS $m
        # shellcheck disable=SC2086
        [ -n "${P2P_AB2:-}" ] && run "ab2_lat_${k}_$r" "$GW $P2P_AB2" "$OSU/pt2pt/osu_latency" -d cuda $ARGS $m
        # shellcheck disable=SC2086
        run "gw_bw_${k}_$r" "$GW" "$OSU/pt2pt/osu_bw" -d cuda $ARGS $m
        # shellcheck disable=SC2086
        [ -n "$REF" ] && run "ref_bw_${k}_$r" "$REF" "$OSU/pt2pt/osu_bw" -d cuda $ARGS $m
        # shellcheck disable=SC2086
        [ -n "${P2P_AB:-}" ] && run "ab_bw_${k}_$r" "$GW $P2P_AB" "$OSU/pt2pt/osu_bw" -d cuda $ARGS $m
        # shellcheck disable=SC2086
        [ -n "${P2P_AB2:-}" ] && run "ab2_bw_${k}_$r" "$GW $P2P_AB2" "$OSU/pt2pt/osu_bw" -d cuda $ARGS $m
    done
done
# OSU's own validation of the data, once per mode.
for m in "${MODES[@]}"; do
    # shellcheck disable=SC2086
    run "gw_latc_$(key "$m")" "$GW" "$OSU/pt2pt/osu_latency" -d cuda -c -m 1:4194304 -i 20 -x 2 $m
    # shellcheck disable=SC2086
    run "gw_bwc_$(key "$m")" "$GW" "$OSU/pt2pt/osu_bw" -d cuda -c -m 1:4194304 -i 10 -x 2 $m
done
[ -n "$FB" ] && "$FB" 300 >>"$OUT/p2p_floor.txt" 2>&1

# medof <prefix> <size>: the median over the rounds.
medof() {
    local v=() r
    for r in $(seq "$ROUNDS"); do v+=("$(val "$1_$r" "$2")"); done
    med "${v[@]}"
}
floor() { grep -F "$1" "$OUT/p2p_floor.txt" | awk '{print $(NF-1)}' | sort -g | head -1; }
peak() { grep -F "$1" "$OUT/p2p_floor.txt" | awk '{print $(NF-1)}' | sort -g | tail -1; }
echo "floors (the better of two runs): 8 B D2D + sync $(floor "8 B cudaMemcpyAsync D2D (same GPU) + sync") us;" \
     "8 B copy_and_mark + spin $(floor "8 B D2D copy_and_mark (one kernel)") us;" \
     "D2D window 64 x 4 MiB: copy engine $(peak "64 x 4 MiB, cudaMemcpyAsync") GB/s, one kernel $(peak "64 x 4 MiB, one copy_and_mark") GB/s;" \
     "pinned H2D / D2H 64 MiB $(peak "pinned H2D 64 MiB") / $(peak "pinned D2H 64 MiB") GB/s;" \
     "pageable cudaMemcpy H2D / D2H 1 MiB $(peak "pageable H2D 1 MiB") / $(peak "pageable D2H 1 MiB")," \
     "4 MiB $(peak "pageable H2D 4 MiB") / $(peak "pageable D2H 4 MiB") GB/s"
for m in "${MODES[@]}"; do
    k=$(key "$m")
    echo
    echo "| OSU -d cuda $m, 2 ranks on one GPU (MPS), median of $ROUNDS | size | gpuwire | UCX with CUDA | gpuwire/UCX | gpuwire ${P2P_AB:-(no A/B)} | gpuwire ${P2P_AB2:-(no A/B)} |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    for t in lat bw; do
        for n in 1 8 64 512 4096 16384 65536 262144 1048576 4194304; do
            g=$(medof "gw_${t}_$k" $n); u=""; a=""; a2=""
            [ -n "$REF" ] && u=$(medof "ref_${t}_$k" $n)
            [ -n "${P2P_AB:-}" ] && a=$(medof "ab_${t}_$k" $n)
            [ -n "${P2P_AB2:-}" ] && a2=$(medof "ab2_${t}_$k" $n)
            if [ $t = lat ]; then what="osu_latency (us)"; else what="osu_bw (MB/s)"; fi
            echo "| $what | $n | $g | $u | $(ratio "$g" "$u") | $a | $a2 |"
        done
    done
    for c in latc bwc; do
        f=/tmp/p2p_gw_${c}_$k
        echo "validation osu_${c%c} -c $m: $(grep -q '^rc=0' "$f" && echo ok || echo "FAIL($(sed -n 's/^rc=//p' "$f"))"), $(grep -ci 'fail' "$f") lines naming a failure"
    done
done
