#!/bin/bash
# Benchmarks on the GPU machine, gpuwire beside its references in one run:
# the CUDA floors (cudaMemcpyPeer, 8-byte copies), OSU's osu_latency/osu_bw/
# osu_bibw on device buffers under pml gpuwire (where .ref/osu-install holds an
# OSU build), gwbench, and host buffers against pml ucx.
#   ci/gpu_bench.sh <build dir> <out dir>
#   GPU_BENCH_QUICK=1: only the floors, H D / D H latency and bandwidth, the
#   staged bandwidth and the bound host latency rounds (about two minutes).
set -uo pipefail
BUILD=$1
OUT=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OMPI_LIB=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
CPATH_GW="$OMPI_LIB:$BUILD/components"
MPIRUN="mpirun --allow-run-as-root -np 2 --bind-to none --mca mca_base_component_path $CPATH_GW"
GW="$MPIRUN --mca pml gpuwire"
QUICK=${GPU_BENCH_QUICK:-0}
SUM=$OUT/bench_summary.txt
: >"$SUM"

floor_bench=$(find "$BUILD" -name cuda_floor_bench -type f -executable | head -1)
if [ -n "$floor_bench" ]; then
    "$floor_bench" 200 >"$OUT/floor.txt" 2>&1
    echo "--- CUDA floors (cuda_floor_bench)"; cat "$OUT/floor.txt"
fi

OSU=$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi/pt2pt/standard
[ -d "$OSU" ] || OSU=$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi/pt2pt  # OSU 7.4
# One log for every OSU run (the GPU machine returns at most 8 files).
LOG=$OUT/osu.txt
: >"$LOG"
osu() { # osu <name> <mpirun prefix...> -- <program and args>
    local name=$1; shift
    local pre=() ; while [ "$1" != "--" ]; do pre+=("$1"); shift; done; shift
    echo "### $name" >>"$LOG"
    "${pre[@]}" "$@" >"$OUT/.tmp" 2>&1
    cat "$OUT/.tmp" >>"$LOG"
    cp "$OUT/.tmp" "/tmp/osu_$name.txt"
    rm -f "$OUT/.tmp"
    echo "--- $name"; grep -v "^#" "/tmp/osu_$name.txt" | head -40
}
val() { awk -v s="$2" '$1==s {print $2}' "/tmp/osu_$1.txt" | head -1; }
if [ -x "$OSU/osu_latency" ]; then
    # With one GPU, D D runs put both ranks on it (150 us context switches per
    # message without MPS): only the same-GPU, staged and validated ones run.
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    for dirs in "D D" "H D" "D H"; do
        tag=$(echo "$dirs" | tr -d ' ')
        [ "$tag" = DD ] && [ "$NGPU" -lt 2 ] && continue
        osu "lat_$tag" $GW -- "$OSU/osu_latency" -d cuda -m 1:4194304 -i 3000 -x 300 $dirs
    done
    if [ "$QUICK" != 1 ]; then
        osu lat_DD_samegpu $GW -x CUDA_VISIBLE_DEVICES=0 -- "$OSU/osu_latency" -d cuda -m 1:65536 -i 3000 -x 300 D D
        osu lat_DD_staged $GW --mca pml_gpuwire_ipc 0 -- "$OSU/osu_latency" -d cuda -m 1:65536 -i 2000 -x 200 D D
        osu lat_DD_check $GW -- "$OSU/osu_latency" -d cuda -c -m 1:4194304 -i 20 -x 5 D D
    fi
    if [ "$NGPU" -ge 2 ]; then
        osu bw_DD $GW -- "$OSU/osu_bw" -d cuda -m 4096:268435456 D D
        osu bibw_DD $GW -- "$OSU/osu_bibw" -d cuda -m 4096:268435456 D D
    fi
    # IPC off: shared staging slots (the default) against whole messages
    # through UCX and chunked transfers through UCX.
    osu bw_DD_staged $GW --mca pml_gpuwire_ipc 0 -- "$OSU/osu_bw" -d cuda -m 4096:67108864 D D
    osu bw_DD_noshared $GW --mca pml_gpuwire_ipc 0 --mca pml_gpuwire_shared_staging 0 -- "$OSU/osu_bw" -d cuda -m 4096:67108864 D D
    osu bw_DD_chunked $GW --mca pml_gpuwire_ipc 0 --mca pml_gpuwire_staged_chunked 1 --mca pml_gpuwire_shared_staging 0 -- "$OSU/osu_bw" -d cuda -m 4096:67108864 D D
    osu bw_HD $GW -- "$OSU/osu_bw" -d cuda -m 4096:67108864 H D
    # Host 8 B latency, ranks bound to cores, the two PMLs alternating.
    BOUND="mpirun --allow-run-as-root -np 2 --bind-to core --map-by core --mca mca_base_component_path $CPATH_GW"
    for r in 1 2 3; do
        osu "lat_HHb_gpuwire_$r" $BOUND --mca pml gpuwire -- "$OSU/osu_latency" -m 8:8 -i 200000 -x 20000
        osu "lat_HHb_ucx_$r" $BOUND --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -- "$OSU/osu_latency" -m 8:8 -i 200000 -x 20000
    done
    if [ "$QUICK" != 1 ]; then
        osu lat_HH_gpuwire $GW -- "$OSU/osu_latency" -m 1:65536 -i 20000 -x 2000
        osu lat_HH_ucx $MPIRUN --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -- "$OSU/osu_latency" -m 1:65536 -i 20000 -x 2000
        osu bw_HH_gpuwire $GW -- "$OSU/osu_bw" -m 1:4194304
        osu bw_HH_ucx $MPIRUN --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -- "$OSU/osu_bw" -m 1:4194304
    fi

    floor() { grep -F "$1" "$OUT/floor.txt" | awk '{print $(NF-1)}' | head -1; }
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; }'; }
    f_peer=$(floor "8 B cudaMemcpyPeerAsync GPU0->GPU1 + sync")
    f_h2d=$(floor "8 B cudaMemcpyAsync H2D (pinned) + sync")
    f_d2h=$(floor "8 B cudaMemcpyAsync D2H (pinned) + sync")
    {
        echo "| figure (OSU 7.4, pml gpuwire) | gpuwire | reference in the same run | ratio |"
        echo "| --- | --- | --- | --- |"
        for t in "DD ${f_peer:--} peer-copy+sync" "HD ${f_h2d:--} H2D+sync" "DH ${f_d2h:--} D2H+sync"; do
            set -- $t
            v=$(val "lat_$1" 8)
            echo "| osu_latency $1 8 B (us) | $v | $2 ($3) | $(ratio "$v" "$2") |"
        done
        echo "| osu_latency DD 8 B, same GPU (us) | $(val lat_DD_samegpu 8) | | |"
        echo "| osu_latency DD 8 B, IPC off (us) | $(val lat_DD_staged 8) | | |"
        for s in 4096 4194304; do
            for t in DD HD DH; do echo "| osu_latency $t $s B (us) | $(val "lat_$t" $s) | | |"; done
        done
        for m in 4 16 64 256; do
            b=$((m * 1048576))
            peer=$(floor "cudaMemcpyPeerAsync GPU0->GPU1 $m MiB")
            v=$(val bw_DD $b); vb=$(val bibw_DD $b)
            pv=$(awk -v p="$peer" 'BEGIN { if (p > 0) print p * 1000 }')
            echo "| osu_bw D D $m MiB (MB/s) | $v | $pv (cudaMemcpyPeerAsync) | $(ratio "$v" "$pv") |"
            echo "| osu_bibw D D $m MiB (MB/s) | $vb | $(awk -v p="$pv" 'BEGIN { if (p > 0) print 2 * p }') (2x peer) | $(ratio "$vb" "$(awk -v p="$pv" 'BEGIN { print 2 * p }')") |"
        done
        h2d=$(awk '/^pinned H2D 64 MiB/ {printf "%.0f", $(NF-1) * 1000}' "$OUT/floor.txt")
        d2h=$(awk '/^pinned D2H 64 MiB/ {printf "%.0f", $(NF-1) * 1000}' "$OUT/floor.txt")
        [ -n "$h2d" ] || h2d=55000
        # A staged message needs both DMAs: the slower one is the limit.
        lim=$h2d; [ -n "$d2h" ] && [ "$d2h" -lt "$h2d" ] && lim=$d2h
        for m in 1 4 16 64; do
            b=$((m * 1048576))
            echo "| osu_bw D D staged (shared slots) $m MiB (MB/s) | $(val bw_DD_staged $b) | $lim (pinned copy, H2D $h2d / D2H ${d2h:-?}) | $(ratio "$(val bw_DD_staged $b)" "$lim") |"
            echo "| osu_bw D D staged, whole messages through UCX $m MiB (MB/s) | $(val bw_DD_noshared $b) | $lim | $(ratio "$(val bw_DD_noshared $b)" "$lim") |"
            echo "| osu_bw D D staged, chunked through UCX $m MiB (MB/s) | $(val bw_DD_chunked $b) | $lim | $(ratio "$(val bw_DD_chunked $b)" "$lim") |"
            echo "| osu_bw H D $m MiB (MB/s) | $(val bw_HD $b) | | |"
        done
        med3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
        hbg=$(med3 "$(val lat_HHb_gpuwire_1 8)" "$(val lat_HHb_gpuwire_2 8)" "$(val lat_HHb_gpuwire_3 8)")
        hbu=$(med3 "$(val lat_HHb_ucx_1 8)" "$(val lat_HHb_ucx_2 8)" "$(val lat_HHb_ucx_3 8)")
        echo "| osu_latency H H 8 B, bound to cores, median of 3 alternating runs (us) | $hbg | $hbu (pml ucx) | $(ratio "$hbg" "$hbu") |"
        hg=$(val lat_HH_gpuwire 8); hu=$(val lat_HH_ucx 8)
        echo "| osu_latency H H 8 B (us) | $hg | $hu (pml ucx) | $(ratio "$hg" "$hu") |"
        bg=$(val bw_HH_gpuwire 1048576); bu=$(val bw_HH_ucx 1048576)
        echo "| osu_bw H H 1 MiB (MB/s) | $bg | $bu (pml ucx) | $(ratio "$bg" "$bu") |"
    } >>"$SUM"
fi

# Collectives on device buffers beside NCCL (two GPUs or more).
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ] && [ -x "$ROOT/ci/gpu_coll_bench.sh" ]; then
    GPU_COLL_LOG=$OUT/osu.txt "$ROOT/ci/gpu_coll_bench.sh" "$BUILD" "$OUT" "${GPU_COLL_MAX:-268435456}" >/tmp/coll_table.txt 2>&1
    echo "--- collectives on device buffers, gpuwire vs NCCL"; cat /tmp/coll_table.txt
    { echo; cat /tmp/coll_table.txt; } >>"$SUM"
fi
GWB=$(find "$BUILD" -name gwbench -type f -executable | head -1)
if [ -n "$GWB" ] && [ "$QUICK" != 1 ]; then
    $GW "$GWB" --device >"$OUT/gwbench_device.txt" 2>&1
    echo "--- gwbench --device (pml gpuwire)"; cat "$OUT/gwbench_device.txt"
fi
if [ -x "$ROOT/ci/bench_host.sh" ]; then
    "$ROOT/ci/bench_host.sh" "$BUILD" >"$OUT/bench_host.txt" 2>&1
    echo "--- host buffers, pml gpuwire vs pml ucx"; cat "$OUT/bench_host.txt"
fi
