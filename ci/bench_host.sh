#!/bin/bash
# Host-memory comparison of pml gpuwire against Open MPI's pml ucx: 8-byte
# latency, 1 MiB bandwidth and peak resident memory, two ranks on one node
# (shared memory). The two PMLs alternate, round after round, in one run so
# that drift of the machine hits both alike; the medians are compared.
#
#   ci/bench_host.sh BUILD_DIR [--rounds N] [--baseline PML] [--candidate PML]
#                    [--mpirun PATH]
#
# Targets (candidate vs baseline): latency <= 1.10x, bandwidth >= 0.95x, peak
# memory <= 1.10x. Exit 0 when all pass, 1 when one fails, 2 on errors.
# --candidate ob1 checks the script itself before gpuwire exists.
set -u

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
build=$(cd "$1" && pwd) || exit 2
shift
rounds=5 baseline=ucx candidate=gpuwire mpirun=mpirun
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --candidate) candidate=$2; shift 2 ;;
    --mpirun) mpirun=$2; shift 2 ;;
    *) usage ;;
    esac
done

bench=$build/bench/gwbench
[ -x "$bench" ] || { echo "no $bench; build the gwbench target first" >&2; exit 2; }
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
component_path=$pkglibdir:$build/components

pml_flags() {
    case $1 in
    ucx) echo --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any ;;
    *) echo --mca pml "$1" ;;
    esac
}

# run PML GWBENCH-ARGS...: prints gwbench's output, fails on a failed run.
run() {
    local pml=$1
    shift
    timeout 300 "$mpirun" --allow-run-as-root -np 2 --bind-to core --map-by core \
        --mca mca_base_component_path "$component_path" --mca btl self,vader \
        $(pml_flags "$pml") "$bench" --report-rss "$@" 2>&1
}

# value SIZE <<< output: the first number after SIZE in the table.
value() { awk -v s="$1" '$1 == s { print $2; exit }'; }
rss() { awk '/^# peak RSS max KiB:/ { print $NF; exit }'; }
rss_per_rank() { awk -F': ' '/^# peak RSS \(VmHWM, KiB\) per rank:/ { gsub(/ /, "/", $2); print $2; exit }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan";
    else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# bench_host: $rounds rounds, 2 ranks, host buffers, shared memory; $baseline vs $candidate"
printf "%-6s %-10s %12s %14s %22s %22s\n" round pml "lat 8B (us)" "bw 1MiB (GB/s)" \
    "RSS lat run (KiB/rank)" "RSS bw run (KiB/rank)"
for ((r = 1; r <= rounds; r++)); do
    for pml in "$baseline" "$candidate"; do
        lat_out=$(run "$pml" -t latency -m 8 -i 20000) || { echo "$lat_out"; echo "latency run with pml $pml failed" >&2; exit 2; }
        bw_out=$(run "$pml" -t bw -m 1M -i 100) || { echo "$bw_out"; echo "bandwidth run with pml $pml failed" >&2; exit 2; }
        lat=$(value 8 <<<"$lat_out") bw=$(value 1048576 <<<"$bw_out")
        rss_lat=$(rss <<<"$lat_out") rss_bw=$(rss <<<"$bw_out")
        if [ -z "$lat" ] || [ -z "$bw" ] || [ -z "$rss_lat" ] || [ -z "$rss_bw" ]; then
            echo "$lat_out"; echo "$bw_out"; echo "cannot read gwbench's output (pml $pml)" >&2; exit 2
        fi
        # The peak over both runs: the bandwidth run's includes its buffers
        # (65 MiB), the latency run's is mostly the libraries' own memory.
        peak=$((rss_lat > rss_bw ? rss_lat : rss_bw))
        echo "$lat" >>"$tmp/lat.$pml"; echo "$bw" >>"$tmp/bw.$pml"
        echo "$rss_lat" >>"$tmp/rsslat.$pml"; echo "$peak" >>"$tmp/rss.$pml"
        printf "%-6s %-10s %12s %14s %22s %22s\n" "$r" "$pml" "$lat" "$bw" \
            "$(rss_per_rank <<<"$lat_out")" "$(rss_per_rank <<<"$bw_out")"
    done
done

# compare NAME BASE CAND OP LIMIT: prints one line, returns 1 on FAIL.
fails=0
compare() {
    local name=$1 base=$2 cand=$3 op=$4 limit=$5
    local ratio verdict
    ratio=$(awk -v a="$base" -v b="$cand" 'BEGIN { printf "%.3f", b / a }')
    if awk -v x="$ratio" -v l="$limit" -v op="$op" 'BEGIN { exit !(op == "<=" ? x <= l : x >= l) }'; then
        verdict=PASS
    else
        verdict=FAIL
        fails=$((fails + 1))
    fi
    printf "%-26s %12s %12s %8s %9s  %s\n" "$name" "$base" "$cand" "$ratio" "$op $limit" "$verdict"
}

echo
echo "# medians over $rounds rounds; ratio = $candidate / $baseline"
printf "%-26s %12s %12s %8s %9s  %s\n" metric "$baseline" "$candidate" ratio target result
compare "latency 8 B (us)" "$(median <"$tmp/lat.$baseline")" "$(median <"$tmp/lat.$candidate")" "<=" 1.10
compare "bandwidth 1 MiB (GB/s)" "$(median <"$tmp/bw.$baseline")" "$(median <"$tmp/bw.$candidate")" ">=" 0.95
compare "peak RSS, all runs (KiB)" "$(median <"$tmp/rss.$baseline")" "$(median <"$tmp/rss.$candidate")" "<=" 1.10
compare "peak RSS, latency (KiB)" "$(median <"$tmp/rsslat.$baseline")" "$(median <"$tmp/rsslat.$candidate")" "<=" 1.10
[ "$fails" -eq 0 ] && echo "ALL PASS" || echo "$fails FAIL"
[ "$fails" -eq 0 ]
