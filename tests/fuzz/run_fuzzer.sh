#!/bin/sh
# Runs one libFuzzer binary for a bounded time over its seed corpus and
# records what it did.
#   run_fuzzer.sh <fuzzer> <seed corpus folder> <seconds> <results folder> [dictionary]
# New inputs go to <results>/<name>/corpus (the committed seeds are only
# read); a crash leaves its input in <results>/<name>/ and fails the test.
# <results>/<name>.stats gets one line: name, executions, seconds, exec/s,
# coverage, corpus size.
set -eu
fuzzer=$1 seeds=$2 seconds=$3 results=$4
dict=${5:+-dict=$5}
name=$(basename "$fuzzer")
work=$results/$name
rm -rf "$work"
mkdir -p "$work/corpus"

status=0
"$fuzzer" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -artifact_prefix="$work/" $dict "$work/corpus" "$seeds" >"$work/log" 2>&1 || status=$?

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -n 1)
cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -n 1 | cut -d' ' -f2)
corpus=$(ls "$work/corpus" | wc -l)
printf '%s executions=%s seconds=%s exec_per_s=%s cov=%s new_inputs=%s\n' \
    "$name" "${execs:-?}" "$seconds" "${rate:-?}" "${cov:-?}" "$corpus" | tee "$results/$name.stats"
if [ "$status" -ne 0 ]; then
    echo "run_fuzzer.sh: $name failed (exit $status); the input is in $work/:" >&2
    ls "$work" >&2
    tail -n 60 "$work/log" >&2
    exit 1
fi
