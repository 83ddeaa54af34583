#!/bin/bash
# ci/report.sh end to end, briefly: gwbench on host buffers under pml
# gpuwire, ucx and ob1 (few sizes, few iterations), then report.md and a
# valid PNG; then a render-only pass over outputs shaped like
# ci/gpu_bench.sh's (device gwbench, OSU, CUDA floor), which must add the
# device tables and report_device.png.
#   check_report.sh <source dir> <build dir>
set -u
SRC=$1 BUILD=$2
command -v gnuplot >/dev/null 2>&1 || { echo "SKIP: gnuplot not installed (apt-get install gnuplot-nox)"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; [ -f "$out/report.md" ] && head -40 "$out/report.md"; exit 1; }

is_png() { # non-empty, PNG signature, IHDR chunk first
    [ -s "$1" ] && [ "$(head -c 16 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a0000000d49484452" ]
}

"$SRC/ci/report.sh" "$BUILD" "$out" --sizes 1,4K,64K --iters 20 --no-bind || fail "report.sh exited $?"
[ -s "$out/report.md" ] || fail "no report.md"
grep -q '^| size | gpuwire (us) | ucx (us) | ob1 (us) | gpuwire / ucx |$' "$out/report.md" ||
    fail "no latency table with gpuwire, ucx and ob1"
grep -q '^| size | gpuwire (GB/s) | ucx (GB/s) | ob1 (GB/s) | gpuwire / ucx |$' "$out/report.md" ||
    fail "no bandwidth table"
[ "$(grep -c '^| 64 KiB | [0-9.e+-]* | [0-9.e+-]* | [0-9.e+-]* | [0-9.]* |$' "$out/report.md")" -eq 2 ] ||
    fail "the 64 KiB rows lack a figure"
is_png "$out/report_host.png" || fail "report_host.png is not a PNG"
grep -q 'report_host.png' "$out/report.md" || fail "report.md does not show the plot"
[ ! -e "$out/report_device.png" ] || fail "a device plot without device figures"

# Outputs as ci/gpu_bench.sh leaves them on a GPU machine.
sed -n '/^### host gpuwire/,/^### /p' "$out/report_raw.txt" | grep -v '^###' >"$out/gwbench_device.txt"
{
    echo "### lat_DD"; echo "# OSU MPI-CUDA Latency Test v7.4"; echo "# Size       Avg Latency(us)"
    echo "1                      10.21"; echo "4096                   11.50"
    echo "### bw_DD"; echo "# Size      Bandwidth (MB/s)"
    echo "4096                 1200.50"; echo "4194304            350000.00"
} >"$out/osu.txt"
printf '%-52s %10.3f %s\n' "cudaMemcpyPeerAsync GPU0->GPU1 4 MiB" 380.5 GB/s >"$out/floor.txt"
"$SRC/ci/report.sh" "$BUILD" "$out" --render-only || fail "render-only pass exited $?"
grep -q '^## Device buffers$' "$out/report.md" || fail "no device section"
grep -q 'gpuwire (osu_latency D D) (us)' "$out/report.md" || fail "OSU latency not in the report"
grep -q '^| 4 MiB | .* | 350 | 380.5 |$' "$out/report.md" || fail "OSU bandwidth (MB/s -> GB/s) or the CUDA floor missing"
is_png "$out/report_device.png" || fail "report_device.png is not a PNG"
echo "PASS: report.md with host and device tables, report_host.png and report_device.png"
