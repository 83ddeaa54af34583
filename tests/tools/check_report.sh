#!/bin/bash
# ci/report.sh end to end, briefly: gwbench on host buffers under pml
# gpuwire, ucx and ob1 (few sizes, few iterations), then report.md and a
# valid PNG; then a render-only pass over outputs shaped like
# ci/gpu_bench.sh's (device gwbench, OSU, CUDA floor), which must add the
# device tables and report_device.png; then render-only passes over files
# shaped like ci/gpu.sh's from a one-GPU and a two-GPU machine (build.log,
# osu.txt with every series, floor.txt, no report_raw.txt): the machine line
# from build.log, the host tables from OSU's H H runs, each device series
# and floor.
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
grep -q '^Machine: not recorded' "$out/report.md" || fail "render-only without build.log describes this machine"

# osu_section <name> <unit> <size value>...: one OSU 7.4 section of osu.txt.
osu_section() {
    local name=$1 unit=$2; shift 2
    echo "### $name"; echo; echo "# OSU MPI-CUDA Test v7.4"
    [ "$unit" = us ] && echo "# Size       Avg Latency(us)" || echo "# Size      Bandwidth (MB/s)"
    while [ $# -gt 1 ]; do printf '%-10s %16s\n' "$1" "$2"; shift 2; done
}
build_log() { # build_log <number of GPUs>: the head of ci/gpu.sh's build.log
    echo "index, name, driver_version, memory.total [MiB]"
    for ((i = 0; i < $1; i++)); do echo "$i, NVIDIA H200, 580.159.04, 143771 MiB"; done
    if [ "$1" -eq 2 ]; then
        printf '\t\033[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\033[0m\n'
        printf 'GPU0\t X \tNV18\t0-15\t0\t\tN/A\nGPU1\tNV18\t X \t0-15\t0\t\tN/A\n'
    else
        printf '\t\033[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\033[0m\nGPU0\t X \t0-15\t0\t\tN/A\n'
    fi
    echo "                 Package: Debian OpenMPI"
    echo "                Open MPI: 4.1.6"
    echo "-- The C compiler identification is GNU 13.3.0"
}
floor_file() { # floor_file <number of GPUs>
    echo "cuda_floor_bench: $1 GPU(s), driver 13000, 200 reps; medians"
    printf '%-52s %10.3f %s\n' "8 B cudaMemcpyAsync D2H (pinned) + sync" 6.473 us \
        "8 B cudaMemcpyAsync H2D (pinned) + sync" 5.716 us "classify host, cache hit" 3.513 ns \
        "pinned H2D 64 MiB" 55.306 GB/s "pinned D2H 64 MiB" 55.312 GB/s
    if [ "$1" -eq 2 ]; then
        printf '%-52s %10.3f %s\n' "8 B cudaMemcpyPeerAsync GPU0->GPU1 + sync" 7.5 us \
            "cudaMemcpyPeerAsync GPU0->GPU1 4 MiB" 380.5 GB/s "cudaMemcpyPeerAsync GPU0->GPU1 64 MiB" 410.25 GB/s
    else
        echo "one GPU: peer rows skipped"
    fi
}
# One GPU, as ci/gpu.sh leaves it: no report_raw.txt, no lat_DD/bw_DD/bibw_DD.
one=$out/one && mkdir -p "$one"
build_log 1 >"$one/build.log"
floor_file 1 >"$one/floor.txt"
{
    osu_section lat_HD us 1 8.48 8 7.89 4194304 682.29
    osu_section lat_DH us 1 8.72 8 8.90 4194304 676.64
    osu_section lat_DD_samegpu us 1 153.20 8 151.76 65536 150.59
    osu_section lat_DD_staged us 1 152.59 8 151.67 65536 41.21
    echo "### lat_DD_check"; echo "# Size       Avg Latency(us)        Validation"
    echo "1                     153.94              Pass"; echo "8                     152.47              Pass"
    osu_section bw_DD_staged MB/s 4096 308.09 4194304 1177.55 67108864 1195.85
    osu_section bw_DD_chunked MB/s 4096 202.70 4194304 1145.26 67108864 2389.75
    osu_section bw_HD MB/s 4096 404.97 4194304 1081.85 67108864 1213.89
    osu_section lat_HH_gpuwire us 1 0.65 8 0.61 65536 5.79
    osu_section lat_HH_ucx us 1 0.51 8 0.47 65536 9.50
    osu_section bw_HH_gpuwire MB/s 1 4.03 1048576 11600.05
    osu_section bw_HH_ucx MB/s 1 5.67 1048576 10978.18
} >"$one/osu.txt"
touch -d 2026-12-01T05:20:00Z "$one"/*
"$SRC/ci/report.sh" "$BUILD" "$one" --render-only || fail "render-only pass (one GPU) exited $?"
r=$one/report.md
grep -qx 'Machine: 1x NVIDIA H200 (143771 MiB, driver 580.159.04), Open MPI 4.1.6; files of 2026-12-01' "$r" ||
    fail "machine line not from build.log: $(grep '^Machine' "$r")"
grep -q '^## Host buffers (OSU' "$r" || fail "no host section from osu.txt"
grep -qx '| 8 B | 0.61 | 0.47 | 1.30 |' "$r" || fail "host latency from OSU with the gpuwire/ucx ratio"
grep -qx '| 1 MiB | 11.6 | 10.98 | 1.06 |' "$r" || fail "host bandwidth from OSU (GB/s) with the ratio"
grep -q '^One GPU: the D D runs put both ranks on GPU 0' "$r" || fail "no one-GPU note"
grep -q 'GPU context switches' "$r" || fail "the one-GPU note does not name the context switches"
for col in 'gpuwire, same GPU (osu_latency D D) (us)' 'gpuwire, IPC off (osu_latency D D, same GPU) (us)' \
    'gpuwire (osu_latency H D) (us)' 'gpuwire (osu_latency D H) (us)' \
    'gpuwire, IPC off (osu_bw D D, same GPU) (GB/s)' 'gpuwire, IPC off, chunked (osu_bw D D, same GPU) (GB/s)' \
    'gpuwire (osu_bw H D) (GB/s)'; do
    grep -qF "$col" "$r" || fail "no column $col"
done
grep -qx '| 8 B | 151.8 | 151.7 | 7.89 | 8.9 |' "$r" || fail "device latency row at 8 B"
grep -qx '| 64 MiB | 1.196 | 2.39 | 1.214 |' "$r" || fail "device bandwidth row at 64 MiB"
grep -qx '| 8 B cudaMemcpyAsync H2D (pinned) + sync | 5.716 us |' "$r" || fail "no 8 B H2D floor"
grep -qx '| pinned H2D 64 MiB | 55.306 GB/s |' "$r" || fail "no pinned H2D floor"
grep -q 'classify host' "$r" && fail "a floor row that is no copy"
grep -qx 'osu_latency -c D D (lat_DD_check, data validated): 2 of 2 sizes Pass.' "$r" || fail "no validation line"
is_png "$one/report_host.png" || fail "report_host.png from OSU is not a PNG"
is_png "$one/report_device.png" || fail "one-GPU report_device.png is not a PNG"
"$SRC/ci/report.sh" "$BUILD" "$one" --render-only --date 2026-11-30 >/dev/null || fail "--date pass exited $?"
grep -q '; files of 2026-11-30$' "$r" || fail "--date not in the machine line"

# Two GPUs: lat_DD, bw_DD and bibw_DD, peer-copy floors, the link from nvidia-smi topo -m.
two=$out/two && mkdir -p "$two"
build_log 2 >"$two/build.log"
floor_file 2 >"$two/floor.txt"
{
    osu_section lat_DD us 1 3.10 8 3.12 4194304 20.5
    osu_section lat_HD us 8 7.89
    osu_section bw_DD MB/s 4096 9000.0 4194304 350000.00 67108864 380000.0
    osu_section bibw_DD MB/s 4096 12000.0 4194304 600000.00 67108864 700000.0
} >"$two/osu.txt"
"$SRC/ci/report.sh" "$BUILD" "$two" --render-only || fail "render-only pass (two GPUs) exited $?"
r=$two/report.md
grep -q '^Machine: 2x NVIDIA H200 (143771 MiB, driver 580.159.04), GPU0-GPU1: NV18, Open MPI 4.1.6' "$r" ||
    fail "two-GPU machine line: $(grep '^Machine' "$r")"
grep -q '^One GPU' "$r" && fail "one-GPU note on two GPUs"
grep -qF '| size | gpuwire (osu_latency D D, GPU0 to GPU1) (us) | gpuwire (osu_latency H D) (us) |' "$r" ||
    fail "two-GPU latency columns"
grep -qF '| size | gpuwire (osu_bw D D, GPU0 to GPU1) (GB/s) | gpuwire (osu_bibw D D, GPU0 to GPU1) (GB/s) | floor: cudaMemcpyPeerAsync GPU0->GPU1 (GB/s) |' "$r" ||
    fail "two-GPU bandwidth columns"
grep -qx '| 4 MiB | 350 | 600 | 380.5 |' "$r" || fail "two-GPU bandwidth row at 4 MiB"
grep -qx '| 8 B cudaMemcpyPeerAsync GPU0->GPU1 + sync | 7.5 us |' "$r" || fail "no 8 B peer floor"
grep -q '^No host figures' "$r" || fail "host section without host figures"
is_png "$two/report_device.png" || fail "two-GPU report_device.png is not a PNG"
echo "PASS: report.md with host and device tables, report_host.png and report_device.png; render-only from one- and two-GPU files"
