#!/bin/sh
# Regenerates docs/img/incast_8to1_100g.png from the simulator: queue and
# per-flow throughput over time for one 8:1 incast at 100 Gb/s, with the
# NIC's DCQCN alone and with gpuwire's pacer. Also prints the results table
# that docs/pacing.md quotes.
#
# usage: ci/plot_sim.sh [BUILD_DIR]    (default: build)
# needs: the gpuwire_incast_sim target built in BUILD_DIR; gnuplot
#        (apt-get install -y gnuplot-nox)
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
sim=$build/tests/sim/gpuwire_incast_sim
if [ ! -x "$sim" ]; then
  echo "plot_sim.sh: $sim is not built (cmake --build $build --target gpuwire_incast_sim)" >&2
  exit 1
fi
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "plot_sim.sh: gnuplot not found (apt-get install -y gnuplot-nox)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$sim" --csv "$work" --trace 8@100 --trace-ideal-us 10000
mkdir -p "$repo/docs/img"
out=$repo/docs/img/incast_8to1_100g.png

# Columns of trace_*.csv: time_us, queue_kb, flow0..7_gbps, nic0..7_gbps.
gnuplot <<GNUPLOT
set terminal pngcairo size 1400,900 font "sans,11"
set output "$out"
set datafile separator ","
set key top right
set grid
set multiplot layout 2,2 title "8:1 incast at 100 Gb/s (simulated; Kmin 5 KB, Kmax 200 KB, PFC XOFF 512 KiB)"

set xlabel "time (ms)"
set ylabel "egress queue (KB)"
set yrange [0:800]
set title "NIC DCQCN only: queue"
plot "$work/trace_dcqcn.csv" every ::1 using (\$1/1000):2 with lines lw 1.5 lc rgb "#c0392b" title "queue", \
     5 with lines dt 2 lc rgb "#888888" title "Kmin", \
     200 with lines dt 3 lc rgb "#888888" title "Kmax", \
     524.288 with lines dt 4 lc rgb "#000000" title "PFC XOFF"
set title "gpuwire pacer (credits + port pacer): queue"
stats "$work/trace_gpuwire.csv" every ::1 using 2 name "Q" nooutput
set label 1 sprintf("peak %.1f KB, mean %.1f KB", Q_max, Q_mean) at graph 0.05, graph 0.9
plot "$work/trace_gpuwire.csv" every ::1 using (\$1/1000):2 with lines lw 1.5 lc rgb "#2471a3" title "queue", \
     5 with lines dt 2 lc rgb "#888888" title "Kmin", \
     200 with lines dt 3 lc rgb "#888888" title "Kmax", \
     524.288 with lines dt 4 lc rgb "#000000" title "PFC XOFF"

unset label 1
set ylabel "delivered throughput per flow (Gb/s, 200 us window)"
set yrange [0:40]
set key off
set title "NIC DCQCN only: 8 flows (fair share 12.5 Gb/s)"
plot for [c=3:10] "$work/trace_dcqcn.csv" every ::1 using (\$1/1000):c with lines lw 1
set title "gpuwire pacer: 8 flows (fair share 12.5 Gb/s)"
plot for [c=3:10] "$work/trace_gpuwire.csv" every ::1 using (\$1/1000):c with lines lw 1
unset multiplot
GNUPLOT
echo "plot_sim.sh: wrote $out"
