#!/bin/bash
# Measures coll gpuwire's selection table on this machine and checks it:
#   ci/gpu_coll_select.sh <build dir> <out dir> [np list, default "2"]
# For each np (all ranks on GPU 0 under CUDA MPS, as ci/gpu_mps.sh): OSU's
# Allreduce, Bcast, Allgather, Alltoall, Reduce and Reduce_scatter on device
# buffers (-d cuda, 8 B .. 64 MiB) under every algorithm gpuwire can be
# forced to (nvlink, device, chain, staged), each run SEL_R times (median);
# the best per size, merged into ranges, becomes that np's table (the format
# of coll_gpuwire_select_file). The default runs SEL_R times too, in turn
# with the forced ones (one repetition of each, then the next), reading the
# shipped table (or the file SEL_TABLE names): a Markdown report says, per
# collective and size, the default against the best forced algorithm; rows
# above 1.05 are flagged. For a topology the shipped table lacks, ship the
# measured rows, then run again to check them.
# Three files in <out dir>, kept up to date after each collective (the GPU
# machine returns at most 8 files):
#   select_table.txt     every np's rows (for ucx_glue/coll/select/select_table.txt)
#   select_report.md     the reports, each np's after its last collective
#   select_runs.tar.gz   every run's output and exit status (rc=N), the tables
# Environment: SEL_R (3), SEL_TABLE (a table for the default runs), SEL_TIMEOUT (seconds per run, 90), SEL_COLLS (the
# collectives), SEL_MAX (largest size, 67108864), SEL_BUDGET (seconds: no
# collective starts after it, unlimited by default), SEL_WORK (the runs'
# folder, default a new one under /tmp), OSU_DIR (OSU's mpi/ folder; default
# .ref/osu-install/libexec/osu-micro-benchmarks/mpi). A missing benchmark is
# one line and its collective is skipped. Exit status 0 when every measured
# row is within 1.05, 1 otherwise, 77 without a GPU.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
OUT=$2
NPS=${3:-2}
R=${SEL_R:-3}
TMO=${SEL_TIMEOUT:-90}
MAX=${SEL_MAX:-67108864}
BUDGET=${SEL_BUDGET:-100000}
COLLS=${SEL_COLLS:-"allreduce bcast allgather alltoall reduce reduce_scatter"}
HERE=$(cd "$(dirname "$0")" && pwd)
OSU=${OSU_DIR:-$HERE/../.ref/osu-install/libexec/osu-micro-benchmarks/mpi}/collective
WORK=${SEL_WORK:-$(mktemp -d /tmp/gw_select.XXXXXX)}
mkdir -p "$OUT" "$WORK/sel"
[ -f "$BUILD/components/mca_coll_gpuwire.so" ] || {
    echo "gpu_coll_select.sh: no $BUILD/components/mca_coll_gpuwire.so; build mca_coll_gpuwire first"
    exit 1
}

# shellcheck source=ci/mps_common.sh
. "$HERE/mps_common.sh"

# The forced algorithms: the parameters that make each one run the call
# (each set by the user, so the table stays out of that collective).
declare -A FORCE=(
    [nvlink]="--mca coll_gpuwire_nvlink_direct 1"
    [device]="--mca coll_gpuwire_nvlink 0 --mca coll_gpuwire_reduce_algorithm device
              --mca coll_gpuwire_move_algorithm device --mca coll_gpuwire_reduce_device_min_bytes 0
              --mca coll_gpuwire_bcast_chain_ranks 0"
    [chain]="--mca coll_gpuwire_nvlink 0 --mca coll_gpuwire_move_algorithm device
             --mca coll_gpuwire_bcast_chain_ranks 3 --mca coll_gpuwire_bcast_chain_bytes 0"
    [staged]="--mca coll_gpuwire_nvlink 0 --mca coll_gpuwire_reduce_algorithm staged
              --mca coll_gpuwire_move_algorithm staged"
)
algos_of() { # <collective> <np>
    case $1 in
    allreduce | allgather) echo "nvlink device staged" ;;
    bcast) if [ "$2" -gt 2 ]; then echo "nvlink device chain staged"; else echo "nvlink device staged"; fi ;;
    *) echo "device staged" ;;
    esac
}
prefix() { # <np>
    echo "mpirun --allow-run-as-root -np $1 --oversubscribe --bind-to core -x CUDA_VISIBLE_DEVICES=0
      -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY
      --mca mca_base_component_path $OMPI_LIB:$BUILD/components --mca pml gpuwire
      --mca coll gpuwire,inter,tuned,libnbc,basic,self"
}
# osu <np> <collective> <out file> <mpirun args...>: two size bands, fewer
# iterations for the large one; the rows of both in <out file>, each
# band's exit status as a line rc=N.
osu() {
    local np=$1 coll=$2 f=$3; shift 3
    : >"$f"
    local band m i x
    for band in "8:8192 200 20" "16384:$MAX 20 3"; do
        read -r m i x <<<"$band"
        # shellcheck disable=SC2046
        timeout "$TMO" $(prefix "$np") "$@" "$OSU/osu_$coll" -d cuda -m "$m" -i "$i" -x "$x" \
            >>"$f" 2>&1
        echo "rc=$?" >>"$f"
    done
}

GPN=1 # every rank on GPU 0 (CUDA_VISIBLE_DEVICES=0)
DEFAULT_ARGS=""
[ -n "${SEL_TABLE:-}" ] && DEFAULT_ARGS="--mca coll_gpuwire_select_file $(cd "$(dirname "$SEL_TABLE")" && pwd)/$(basename "$SEL_TABLE")"
START=$(date +%s)
: >"$OUT/select_table.txt"
: >"$OUT/select_report.md"
# What <out dir> holds so far: the tables, and the runs packed.
publish() {
    cat "$WORK"/select_np*.txt >"$OUT/select_table.txt" 2>/dev/null
    tar -czf "$OUT/select_runs.tar.gz" -C "$WORK" . 2>/dev/null
}
status=0
for np in $NPS; do
    table=$WORK/select_np$np.txt
    : >"$table"
    done_colls=""
    for c in $COLLS; do
        if [ ! -x "$OSU/osu_$c" ]; then
            echo "gpu_coll_select.sh: no $OSU/osu_$c: $c not measured"
            continue
        fi
        if [ $(($(date +%s) - START)) -ge "$BUDGET" ]; then
            echo "gpu_coll_select.sh: SEL_BUDGET ${BUDGET}s spent: np $np $c not measured"
            continue
        fi
        # Repetition by repetition, every forced algorithm and the default
        # in turn, so that the machine's drift between minutes weighs on
        # them alike; each repetition starts one later in the list, so that
        # none always runs first or last (docs/performance.md: the default,
        # last in every repetition, lost 7-22 % to the same algorithm forced
        # at small sizes, and won when first). The default reads the shipped
        # table, or SEL_TABLE.
        read -r -a order <<<"$(algos_of "$c" "$np") default"
        for r in $(seq 1 "$R"); do
            k=$(( (r - 1) % ${#order[@]} ))
            for a in "${order[@]:k}" "${order[@]:0:k}"; do
                if [ "$a" = default ]; then
                    # shellcheck disable=SC2086
                    osu "$np" "$c" "$WORK/sel/np${np}_${c}_default_$r.txt" $DEFAULT_ARGS
                else
                    # shellcheck disable=SC2086
                    osu "$np" "$c" "$WORK/sel/np${np}_${c}_${a}_$r.txt" ${FORCE[$a]}
                fi
            done
        done
        # The measured rows, for the next shipped table.
        python3 "$HERE/gpu_coll_select.py" table --dir "$WORK/sel" --np "$np" --gpn "$GPN" \
            --coll "$c" >>"$table" || { echo "np $np $c: no rows"; status=1; }
        done_colls="$done_colls $c"
        echo "np $np $c: measured $(date +%T); rc of the runs: $(grep -ho 'rc=[0-9]*' "$WORK/sel/np${np}_${c}_"*.txt | sort | uniq -c | tr -s ' \n' ' ')"
        publish
    done
    [ -n "$done_colls" ] || continue
    python3 "$HERE/gpu_coll_select.py" report --dir "$WORK/sel" --np "$np" --colls "$done_colls" \
        >"$WORK/select_report_np$np.md" || status=1
    cat "$WORK/select_report_np$np.md" >>"$OUT/select_report.md"
    cat "$WORK/select_report_np$np.md"
    publish
done
exit $status
