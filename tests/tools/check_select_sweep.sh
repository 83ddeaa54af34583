#!/bin/bash
# ci/gpu_coll_select.sh without a GPU: stand-ins for mpirun + OSU, nvidia-smi
# and the MPS daemon (select_sweep/) give latencies that depend on the
# algorithm the parameters force, or on the row of the table the default
# reads. Checks the table written (ranges, topology fields), the report
# (no row above 1.05, exit 0), the default run in turn with the forced ones,
# without a table the built-in rules flagged where they lose, the line for a missing benchmark (osu_alltoall
# is absent), a failing algorithm left out, and a slow default flagged (exit 1).
#   check_select_sweep.sh <source dir> <build dir>
set -u
SRC=$1
BUILD=$2
HERE=$SRC/tests/tools/select_sweep
OUT=$(mktemp -d /tmp/gw_select_sweep.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
sweep() { # <out dir> <np list> [env...]: the runs in <out dir>.work
    local out=$1 nps=$2; shift 2
    env PATH="$HERE/bin:$PATH" OSU_DIR="$HERE/osu" SEL_R=1 SEL_WORK="$out.work" "$@" \
        bash "$SRC/ci/gpu_coll_select.sh" "$BUILD" "$out" "$nps" >"$out.log" 2>&1
}

# The default runs read table.txt, the stand-ins' ideal table.
sweep "$OUT/a" "2 4" SEL_TABLE="$HERE/table.txt"
rc=$?
[ $rc -eq 0 ] || bad "sweep exited $rc: $(tail -5 "$OUT/a.log")"
t=$OUT/a/select_table.txt
want_rows=(
    "allreduce 2 1 2 1 2 1 0 32768 nvlink"
    "allreduce 2 1 2 1 2 1 32769 * device"
    "reduce 2 1 2 1 2 * 0 8192 staged"
    "reduce_scatter 4 1 4 1 4 * 8193 * device"
    "bcast 4 1 4 1 4 1 0 32768 nvlink"
    "bcast 4 1 4 1 4 1 32769 262144 device"
    "bcast 4 1 4 1 4 1 262145 * chain"
)
for w in "${want_rows[@]}"; do
    tr -s ' ' <"$t" | grep -qFx "$w" || bad "table lacks '$w'"
done
grep -q "^alltoall" "$t" && bad "alltoall has rows without its benchmark"
grep -q "no .*osu_alltoall: alltoall not measured" "$OUT/a.log" || bad "no line for the missing benchmark"
grep -q "^2 ranks: 0 row(s) above 1.05" "$OUT/a.log" || bad "np 2 report: $(grep ranks: "$OUT/a.log")"
grep -q "^4 ranks: 0 row(s) above 1.05" "$OUT/a.log" || bad "np 4 report: $(grep ranks: "$OUT/a.log")"
[ "$(ls "$OUT/a")" = "$(printf 'select_report.md\nselect_runs.tar.gz\nselect_table.txt')" ] ||
    bad "the out dir holds: $(ls "$OUT/a")"
tar -tzf "$OUT/a/select_runs.tar.gz" | grep -q "sel/np4_bcast_chain_1.txt" || bad "the runs are not packed"
grep -q "^| bcast | 67108864 | .* (chain) | 1.000 |" "$OUT/a/select_report.md" ||
    bad "np 4 report lacks bcast 64 MiB by the chain"

# The default in turn with the forced algorithms: repetition 1 of each
# before repetition 2 of any.
sweep "$OUT/d" 2 SEL_R=2 SEL_COLLS=reduce SEL_TABLE="$HERE/table.txt"
order=$(ls -tr --time-style=full-iso "$OUT/d.work/sel" | grep -o '_[0-9]*\.txt$' | tr -d '_.txt' | tr -d '\n')
[ "$order" = "111222" ] || bad "the repetitions did not alternate: $(ls -tr "$OUT/d.work/sel" | tr '\n' ' ')"
# Without SEL_TABLE the default reads the shipped table (the stand-in's is
# empty: device everywhere), and loses to staged at the small sizes.
grep -q "^| reduce | 8 | .* (staged) | .*\*\*> 1.05\*\* |" "$OUT/d.log" && bad "SEL_TABLE was not read"

# A forced algorithm whose runs fail: its rc is recorded, the others win.
sweep "$OUT/b" 2 FAKE_SEL_FAIL=nvlink SEL_COLLS=allreduce
grep -q "rc=1" "$OUT/b.work/sel/np2_allreduce_nvlink_1.txt" || bad "the failed run's rc is not kept"
tr -s ' ' <"$OUT/b/select_table.txt" | grep -qFx "allreduce 2 1 2 1 2 1 0 * device" ||
    bad "without nvlink: $(cat "$OUT/b/select_table.txt")"

# A default 10 % slower than the best: every row flagged, exit 1.
sweep "$OUT/c" 2 FAKE_SEL_DEFAULT_FACTOR=1.1 SEL_COLLS=reduce SEL_TABLE="$HERE/table.txt"
rc=$?
[ $rc -eq 1 ] || bad "a slow default exited $rc"
grep -q "^| reduce | 8 | .* | 1.100 \*\*> 1.05\*\* |" "$OUT/c/select_report.md" ||
    bad "the slow default is not flagged: $(head -4 "$OUT/c/select_report.md")"

[ $fail -eq 0 ] && echo "select sweep: all checks passed"
exit $fail
