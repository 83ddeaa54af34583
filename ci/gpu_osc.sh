#!/bin/bash
# One-sided on device windows, two ranks on one GPU under CUDA MPS: OSU's
# osu_put_latency, osu_get_latency, osu_put_bw, osu_get_bw, osu_acc_latency,
# osu_fop_latency and osu_cas_latency, -d cuda D D, with every window kind of
# OSC_WINS and synchronisation of OSC_SYNCS, through
# osc gpuwire beside Open MPI's pml ucx + osc ucx over a UCX built with CUDA,
# in one MPS session; then host windows (OSC_HOST_BENCHES under every
# synchronisation of OSC_HOST_SYNCS) beside osc ucx over the system's UCX.
# Prints, per size, both figures and the ratio, and whether gpuwire is ahead
# (lower latency, higher bandwidth).
#   ci/gpu_osc.sh <build dir> <out dir>
#   OSU_DIR: OSU's libexec/osu-micro-benchmarks/mpi (default .ref/osu-install/...)
#   GPU_UCX_LIB: the lib folder of a CUDA-enabled UCX (none: no reference rows)
#   OSC_ITERS (100), OSC_GW_EXTRA: more --mca settings for gpuwire's rows,
#   OSC_WINS ("create allocate"), OSC_SYNCS ("lock flush"), OSC_BENCHES (the
#   seven above; get_acc_latency too if named),
#   OSC_HOST_SYNCS ("flush fence pscw lock_all"), OSC_HOST_BENCHES ("put_latency
#   get_latency acc_latency get_acc_latency fop_latency cas_latency").
# Writes osc_runs.txt to <out dir>; prints the tables last.
set -uo pipefail
BUILD=$1
OUT=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OSU=${OSU_DIR:-$ROOT/.ref/osu-install/libexec/osu-micro-benchmarks/mpi}
[ -x "$OSU/one-sided/osu_put_latency" ] || { echo "gpu_osc.sh: no OSU build under $OSU"; exit 1; }
ITERS=${OSC_ITERS:-100}
# shellcheck source=ci/mps_common.sh
. "$(dirname "$0")/mps_common.sh"
LOG=$OUT/osc_runs.txt RUN_TAG=osc RUN_TIMEOUT=90
# shellcheck source=ci/osu_common.sh
. "$(dirname "$0")/osu_common.sh"
GW="$OSU_BASE --mca mca_base_component_path $OMPI_LIB:$BUILD/components --mca pml gpuwire
    --mca coll gpuwire,inter,tuned,libnbc,basic,self --mca osc gpuwire ${OSC_GW_EXTRA:-}"
REF=$(osu_ref --mca osc ucx)
HOSTREF="$OSU_BASE --mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
WINS=${OSC_WINS:-create allocate}
SYNCS=${OSC_SYNCS:-lock flush}
HOST_SYNCS=${OSC_HOST_SYNCS:-flush fence pscw lock_all}
HOST_BENCHES=${OSC_HOST_BENCHES:-put_latency get_latency acc_latency get_acc_latency fop_latency cas_latency}
ARGS="-m 1:4194304 -i $ITERS -x $((ITERS / 10))"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; }'; }
# ahead <lat|bw> <gpuwire> <ref>: yes when gpuwire is the better of the two.
ahead() {
    awk -v k="$1" -v a="$2" -v b="$3" 'BEGIN { if (a == "" || b == "") exit;
        if ((k == "lat" && a + 0 <= b + 0) || (k == "bw" && a + 0 >= b + 0)) print "yes"; else print "NO"; }'
}
ok() { grep -q '^rc=0' "/tmp/osc_$1" && echo ok || echo "FAIL($(sed -n 's/^rc=//p' "/tmp/osc_$1"))"; }

# Benchmark:synchronisation pairs; fop and cas have one size.
BENCHES=""
for s in $SYNCS; do
    for b in ${OSC_BENCHES:-put_latency get_latency put_bw get_bw acc_latency fop_latency cas_latency}; do
        BENCHES="$BENCHES $b:$s"
    done
done
for w in $WINS; do
    for bs in $BENCHES; do
        b=${bs%%:*} s=${bs##*:}
        # shellcheck disable=SC2086
        run "gw_${b}_${s}_$w" "$GW" "$OSU/one-sided/osu_$b" -d cuda -w "$w" -s "$s" $ARGS D D
        # shellcheck disable=SC2086
        [ -n "$REF" ] && run "ref_${b}_${s}_$w" "$REF" "$OSU/one-sided/osu_$b" -d cuda -w "$w" -s "$s" $ARGS D D
    done
    for s in $HOST_SYNCS; do
        for b in $HOST_BENCHES; do
            # shellcheck disable=SC2086
            run "gwh_${b}_${s}_$w" "$GW" "$OSU/one-sided/osu_$b" -w "$w" -s "$s" $ARGS
            # shellcheck disable=SC2086
            run "refh_${b}_${s}_$w" "$HOSTREF" "$OSU/one-sided/osu_$b" -w "$w" -s "$s" $ARGS
        done
    done
done

SIZES="1 8 64 512 4096 16384 65536 262144 1048576 4194304"
for w in $WINS; do
    for bs in $BENCHES; do
        b=${bs%%:*} s=${bs##*:} k=lat sizes=$SIZES
        # fop and cas print the one size of their datatype (1 for MPI_CHAR)
        case $b in *bw) k=bw ;; fop_* | cas_*) sizes=$(awk '/^[0-9]/ {print $1; exit}' "/tmp/osc_gw_${b}_${s}_$w" 2>/dev/null) ;; esac
        echo
        echo "| osu_$b -d cuda -w $w -s $s D D (2 ranks, one GPU, MPS) | size | osc gpuwire | osc ucx (UCX with CUDA) | gpuwire/ucx | gpuwire ahead |"
        echo "| --- | --- | --- | --- | --- | --- |"
        for n in $sizes; do
            g=$(val "gw_${b}_${s}_$w" "$n"); u=""
            [ -n "$REF" ] && u=$(val "ref_${b}_${s}_$w" "$n")
            echo "| $([ $k = lat ] && echo us || echo MB/s) | $n | $g | $u | $(ratio "$g" "$u") | $(ahead $k "$g" "$u") |"
        done
        echo "runs: gpuwire $(ok "gw_${b}_${s}_$w"), ucx $([ -n "$REF" ] && ok "ref_${b}_${s}_$w" || echo -)"
    done
    for s in $HOST_SYNCS; do
        for b in $HOST_BENCHES; do
            sizes=$SIZES
            case $b in fop_* | cas_*) sizes=$(awk '/^[0-9]/ {print $1; exit}' "/tmp/osc_gwh_${b}_${s}_$w" 2>/dev/null) ;; esac
            echo
            echo "| osu_$b host windows -w $w -s $s | size | osc gpuwire | osc ucx | gpuwire/ucx | gpuwire ahead |"
            echo "| --- | --- | --- | --- | --- | --- |"
            for n in $sizes; do
                g=$(val "gwh_${b}_${s}_$w" "$n"); u=$(val "refh_${b}_${s}_$w" "$n")
                echo "| us | $n | $g | $u | $(ratio "$g" "$u") | $(ahead lat "$g" "$u") |"
            done
            echo "runs: gpuwire $(ok "gwh_${b}_${s}_$w"), ucx $(ok "refh_${b}_${s}_$w")"
        done
    done
done
