#!/usr/bin/env python3
"""Turns benchmark outputs in one folder into report.md and its plots.

Reads, where present (ci/report.sh and ci/gpu_bench.sh write them):
  report_raw.txt      gwbench on host buffers, one "### host <pml>" section per PML
                      (ci/report.sh)
  gwbench_device.txt  gwbench --device under pml gpuwire (ci/gpu_bench.sh or ci/report.sh)
  osu.txt             OSU runs, one "### <name>" section each (ci/gpu_bench.sh)
  floor.txt           CUDA floors: cudaMemcpyPeerAsync bandwidth (ci/gpu_bench.sh)
  bench_summary.txt   ci/gpu_bench.sh's table of figures
Writes report.md, report_host.png (host latency and bandwidth) and, when
device figures exist, report_device.png; PNGs need gnuplot.

  report.py <folder> [--machine TEXT] [--command TEXT]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import OrderedDict

# ---- readers ------------------------------------------------------------------


def sections(path):
    """'### name' headed sections of a file: OrderedDict name -> lines."""
    out = OrderedDict()
    if not os.path.exists(path):
        return out
    name = None
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.startswith("### "):
            name = line[4:].strip()
            out[name] = []
        elif name is not None:
            out[name].append(line.rstrip("\n"))
    return out


def gwbench_tables(lines):
    """gwbench output -> {"latency"|"bw"|"bibw"|"allreduce": {size: value}}."""
    tables, current = {}, None
    for line in lines:
        m = re.match(r"^# (latency|bw|bibw|allreduce):", line)
        if m:
            current = tables.setdefault(m.group(1), OrderedDict())
            continue
        if line.startswith("#") or current is None:
            continue
        cells = line.split()
        if len(cells) >= 2 and cells[0].isdigit():
            try:
                current[int(cells[0])] = float(cells[1])
            except ValueError:
                pass
    return tables


def osu_table(lines, scale=1.0):
    """OSU output rows 'size value' -> {size: value * scale}."""
    t = OrderedDict()
    for line in lines:
        cells = line.split()
        if len(cells) >= 2 and not line.startswith("#") and cells[0].isdigit():
            try:
                t[int(cells[0])] = float(cells[1]) * scale
            except ValueError:
                pass
    return t


def peer_copy_floor(path):
    """floor.txt rows 'cudaMemcpyPeerAsync GPU0->GPU1 N MiB  value GB/s'."""
    t = OrderedDict()
    if not os.path.exists(path):
        return t
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"^cudaMemcpyPeerAsync GPU0->GPU1 (\d+) MiB\s+([0-9.]+)\s+GB/s", line)
        if m:
            t[int(m.group(1)) << 20] = float(m.group(2))
    return t


# ---- output -------------------------------------------------------------------


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def md_table(title, unit, series, ratio_of=None):
    """One Markdown table: a row per size, a column per series; with
    ratio_of = (a, b) a last column a / b."""
    if not series:
        return []
    sizes = sorted({s for t in series.values() for s in t})
    names = list(series)
    head = ["size"] + [f"{n} ({unit})" for n in names]
    if ratio_of:
        head.append(f"{ratio_of[0]} / {ratio_of[1]}")
    rows = [f"### {title}", "", "| " + " | ".join(head) + " |",
            "|" + " --- |" * len(head)]
    for s in sizes:
        cells = [human(s)]
        for n in names:
            v = series[n].get(s)
            cells.append("" if v is None else f"{v:.4g}")
        if ratio_of:
            a, b = series[ratio_of[0]].get(s), series[ratio_of[1]].get(s)
            cells.append(f"{a / b:.2f}" if a and b else "")
        rows.append("| " + " | ".join(cells) + " |")
    rows.append("")
    return rows


def plot(png, title, panels, workdir):
    """panels: [(title, ylabel, logy, {name: {size: value}})]; one PNG, the
    panels side by side. Returns an error line or None."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        return "gnuplot not found (apt-get install gnuplot-nox): no plots"
    sizes = sorted({s for _, _, _, series in panels for t in series.values() for s in t if s > 0})
    tics = []
    if sizes:
        k, step = 0, 2 if sizes[-1] <= 1 << 12 else 4  # a tic every 4x or 16x
        while 1 << k <= sizes[-1] * 2:
            if 1 << k >= sizes[0] // 2:
                tics.append(f'"{human(1 << k)}" {1 << k}')
            k += step
    script = [
        f'set terminal pngcairo noenhanced size {700 * len(panels)},540 font "sans,10"',
        f'set output "{png}"',
        f'set multiplot layout 1,{len(panels)} title "{title}"',
        "set logscale x 2", "set grid", "set key below", 'set xlabel "message size"',
    ]
    if tics:
        script.append(f"set xtics ({', '.join(tics)})")
    for p, (ptitle, ylabel, logy, series) in enumerate(panels):
        script += [f'set title "{ptitle}"', f'set ylabel "{ylabel}"',
                   "set logscale y" if logy else "unset logscale y"]
        plots = []
        for i, (name, t) in enumerate(series.items()):
            dat = os.path.join(workdir, f"p{p}_{i}.dat")
            with open(dat, "w") as f:
                for s in sorted(t):
                    if s > 0 and t[s] > 0:
                        f.write(f"{s} {t[s]}\n")
            plots.append(f'"{dat}" using 1:2 with linespoints title "{name}"')
        script.append("plot " + ", ".join(plots) if plots else "plot 0 notitle")
    script.append("unset multiplot")
    r = subprocess.run([gnuplot], input="\n".join(script) + "\n", text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0 or not os.path.exists(png):
        return f"gnuplot failed: {r.stdout.strip()[:300]}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--machine", default="")
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    d = a.folder
    workdir = os.path.join(d, ".report-tmp")
    os.makedirs(workdir, exist_ok=True)

    # Host buffers: gwbench under each PML.
    host_lat, host_bw, failed = OrderedDict(), OrderedDict(), []
    for name, lines in sections(os.path.join(d, "report_raw.txt")).items():
        m = re.match(r"host (\S+)", name)
        if not m:
            continue
        if any(l.startswith("# FAILED") for l in lines):
            failed.append(m.group(1))
            continue
        t = gwbench_tables(lines)
        if t.get("latency"):
            host_lat[m.group(1)] = t["latency"]
        if t.get("bw"):
            host_bw[m.group(1)] = t["bw"]

    # Device buffers: gwbench --device, OSU, the CUDA peer copy.
    dev_lat, dev_bw = OrderedDict(), OrderedDict()
    gd = os.path.join(d, "gwbench_device.txt")
    if os.path.exists(gd):
        t = gwbench_tables(open(gd, encoding="utf-8", errors="replace").read().splitlines())
        if t.get("latency"):
            dev_lat["gpuwire (gwbench)"] = t["latency"]
        if t.get("bw"):
            dev_bw["gpuwire (gwbench)"] = t["bw"]
    osu = sections(os.path.join(d, "osu.txt"))
    for key, label in (("lat_DD", "gpuwire (osu_latency D D)"),
                       ("lat_DD_staged", "gpuwire, IPC off (osu_latency D D)")):
        if key in osu and osu_table(osu[key]):
            dev_lat[label] = osu_table(osu[key])
    for key, label in (("bw_DD", "gpuwire (osu_bw D D)"),
                       ("bw_DD_staged", "gpuwire, IPC off (osu_bw D D)")):
        if key in osu and osu_table(osu[key]):
            dev_bw[label] = osu_table(osu[key], 1e-3)  # MB/s -> GB/s
    floor = peer_copy_floor(os.path.join(d, "floor.txt"))
    if floor and dev_bw:
        dev_bw["cudaMemcpyPeerAsync (floor)"] = floor

    notes = []
    md = ["# gpuwire benchmark report", ""]
    if a.machine:
        md += [f"Machine: {a.machine}", ""]
    if a.command:
        md += [f"Command: `{a.command}`", ""]
    md += ["Latency: one-way, median of round trips / 2 (us; lower is better). Bandwidth: "
           "unidirectional, windows of non-blocking sends (GB/s = 1e9 bytes/s; higher is "
           "better). Two ranks on one node; every implementation ran in the same run of ci/report.sh.", ""]
    if failed:
        md += [f"**Runs that failed** (see report_raw.txt): {', '.join(failed)}", ""]

    ratio = ("gpuwire", "ucx") if "gpuwire" in host_lat and "ucx" in host_lat else None
    md += ["## Host buffers (gwbench)", ""]
    if host_lat or host_bw:
        md += md_table("Latency", "us", host_lat, ratio)
        md += md_table("Bandwidth", "GB/s", host_bw,
                       ratio if ratio and "ucx" in host_bw and "gpuwire" in host_bw else None)
        err = plot(os.path.join(d, "report_host.png"), "host buffers, 2 ranks",
                   [("latency", "us", True, host_lat), ("bandwidth", "GB/s", True, host_bw)],
                   workdir)
        if err:
            notes.append(err)
        else:
            md += ["![host latency and bandwidth](report_host.png)", ""]
    else:
        md += ["No host figures (report_raw.txt missing or empty).", ""]

    if dev_lat or dev_bw:
        md += ["## Device buffers", ""]
        md += md_table("Latency", "us", dev_lat)
        md += md_table("Bandwidth", "GB/s", dev_bw)
        err = plot(os.path.join(d, "report_device.png"), "device buffers, 2 ranks",
                   [("latency", "us", True, dev_lat), ("bandwidth", "GB/s", True, dev_bw)],
                   workdir)
        if err:
            notes.append(err)
        else:
            md += ["![device latency and bandwidth](report_device.png)", ""]
    summary = os.path.join(d, "bench_summary.txt")
    if os.path.exists(summary) and os.path.getsize(summary) > 0:
        md += ["## Figures of ci/gpu_bench.sh", ""]
        md += open(summary, encoding="utf-8", errors="replace").read().splitlines() + [""]
    for n in notes:
        md += [f"Note: {n}", ""]
    with open(os.path.join(d, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md))
    shutil.rmtree(workdir, ignore_errors=True)
    for n in notes:
        print(f"report: {n}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
