#!/bin/bash
# Costs that must grow linearly with the work, pml gpuwire beside ob1 in one
# run (bench/gwscale.c): one non-contiguous host MPI_Send of BLOCKS x 1 MiB
# (stride 1.25 MiB), and N communicators each holding a pending message.
# Two ranks on one node; the two PMLs alternate, the median of the rounds
# of each is printed with the ratio gpuwire/ob1.
#
#   ci/bench_scale.sh BUILD_DIR [--rounds N] [--blocks "200 1000 2100"]
#                     [--comms "40000"] [--limit RATIO]
#
# Exit 1 when a ratio exceeds RATIO (default 1.2), 2 on errors. The machine
# is shared: a ratio near the limit needs more rounds before it means much.
set -u
[ $# -ge 1 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
build=$(cd "$1" && pwd) || exit 2
shift
rounds=3 blocks="200 1000 2100" comms="40000" limit=1.2
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --blocks) blocks=$2; shift 2 ;;
    --comms) comms=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    *) exit 2 ;;
    esac
done
bench=$build/bench/gwscale
[ -x "$bench" ] || { echo "no $bench; build the gwscale target first" >&2; exit 2; }
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')

run() { # PML MODE N -> seconds
    timeout 600 mpirun --allow-run-as-root -np 2 --bind-to core --map-by core \
        --mca mca_base_component_path "$pkglibdir:$build/components" --mca btl self,vader \
        --mca pml "$1" "$bench" "$2" "$3" 2>&1 | awk -v m="$2" '$1 == m { print $3 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

fail=0
printf "%-10s %8s %12s %12s %7s\n" mode n "ob1 (s)" "gpuwire (s)" ratio
for case in $(for b in $blocks; do echo noncontig:$b; done; for c in $comms; do echo comms:$c; done); do
    mode=${case%%:*} n=${case#*:}
    : >/tmp/gwscale.$$.ob1; : >/tmp/gwscale.$$.gpuwire
    for ((r = 0; r < rounds; r++)); do
        for pml in ob1 gpuwire; do
            t=$(run $pml $mode $n)
            [ -n "$t" ] || { echo "$mode $n under pml $pml failed" >&2; rm -f /tmp/gwscale.$$.*; exit 2; }
            echo "$t" >>/tmp/gwscale.$$.$pml
        done
    done
    a=$(median </tmp/gwscale.$$.ob1) b=$(median </tmp/gwscale.$$.gpuwire)
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / (a+1e-9)      }')
    printf "%-10s %8s %12s %12s %7s\n" "$mode" "$n" "$a" "$b" "$ratio"
    awk -v r="$ratio" -v l="$limit" 'BEGIN { exit !(r > l) }' && fail=1
done
rm -f /tmp/gwscale.$$.*
exit $fail
