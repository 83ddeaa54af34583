#!/usr/bin/env python3
"""Turns benchmark outputs in one folder into report.md and its plots.

Reads, where present (ci/report.sh, ci/gpu_bench.sh and ci/gpu.sh write them):
  report_raw.txt      gwbench on host buffers, one "### host <pml>" section per PML
                      (ci/report.sh)
  gwbench_device.txt  gwbench --device under pml gpuwire (ci/gpu_bench.sh or ci/report.sh)
  osu.txt             OSU runs, one "### <name>" section each (ci/gpu_bench.sh):
                      lat_DD, lat_HD, lat_DH, lat_DD_samegpu, lat_DD_staged, lat_DD_check,
                      bw_DD, bibw_DD, bw_DD_staged, bw_DD_chunked, bw_HD,
                      lat_HH_gpuwire, lat_HH_ucx, bw_HH_gpuwire, bw_HH_ucx
  floor.txt           CUDA floors of cuda_floor_bench (8 B copies + sync, pinned
                      H2D/D2H bandwidth, cudaMemcpyPeerAsync)
  bench_summary.txt   ci/gpu_bench.sh's table of figures
  build.log           ci/gpu.sh's log, nvidia-smi and ompi_info output first: the
                      machine line of a report rendered elsewhere (--render-only)
Writes report.md, report_host.png (host latency and bandwidth; from report_raw.txt,
else from osu.txt's H H runs) and, when device figures exist, report_device.png;
PNGs need gnuplot.

  report.py <folder> [--machine TEXT] [--command TEXT] [--render-only] [--date TEXT]

--render-only: the files came from another machine; the machine line comes from
build.log (or says it is unknown) instead of --machine. --date: the date of the
files (default: the modification time of the newest input file).
"""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
from collections import OrderedDict

# ---- readers ------------------------------------------------------------------

INPUTS = ("report_raw.txt", "gwbench_device.txt", "osu.txt", "floor.txt",
          "bench_summary.txt", "build.log")


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def sections(path):
    """'### name' headed sections of a file: OrderedDict name -> lines."""
    out = OrderedDict()
    name = None
    for line in read_lines(path):
        if line.startswith("### "):
            name = line[4:].strip()
            out[name] = []
        elif name is not None:
            out[name].append(line)
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


def osu_validation(lines):
    """Rows of an OSU run with -c: (sizes, sizes that passed)."""
    rows = [l.split() for l in lines if l and l.split()[0].isdigit()]
    rows = [r for r in rows if len(r) >= 3]
    return len(rows), sum(1 for r in rows if r[-1] == "Pass")


def floors(path):
    """cuda_floor_bench's output: (number of GPUs or None, {label: (value, unit)})."""
    ngpu, rows = None, OrderedDict()
    for line in read_lines(path):
        m = re.match(r"^cuda_floor_bench: (\d+) GPU", line)
        if m:
            ngpu = int(m.group(1))
            continue
        m = re.match(r"^(\S.*?)\s+([0-9.]+) (us|ns|GB/s)\s*$", line)
        if m:
            rows[m.group(1)] = (float(m.group(2)), m.group(3))
    return ngpu, rows


def peer_copy_floor(rows):
    """floor rows 'cudaMemcpyPeerAsync GPU0->GPU1 N MiB' -> {bytes: GB/s}."""
    t = OrderedDict()
    for label, (value, unit) in rows.items():
        m = re.match(r"^cudaMemcpyPeerAsync GPU0->GPU1 (\d+) MiB$", label)
        if m and unit == "GB/s":
            t[int(m.group(1)) << 20] = value
    return t


def machine_from_build_log(path):
    """ci/gpu.sh's build.log starts with nvidia-smi's csv (index, name,
    driver_version, memory.total), nvidia-smi topo -m and ompi_info | head -4.
    Returns (description or "", number of GPUs or None)."""
    lines = read_lines(path)[:200]
    if not lines:
        return "", None
    gpus = []
    for i, line in enumerate(lines):
        if line.startswith("index, name"):
            for row in lines[i + 1:]:
                cells = [c.strip() for c in row.split(",")]
                if len(cells) < 2 or not cells[0].isdigit():
                    break
                gpus.append(cells)
            break
    parts = []
    if gpus:
        names = OrderedDict()
        for g in gpus:
            names[g[1]] = names.get(g[1], 0) + 1
        extra = []
        if len(gpus[0]) > 3 and gpus[0][3]:
            extra.append(gpus[0][3])
        if len(gpus[0]) > 2 and gpus[0][2]:
            extra.append(f"driver {gpus[0][2]}")
        desc = ", ".join(f"{n}x {name}" for name, n in names.items())
        parts.append(desc + (f" ({', '.join(extra)})" if extra else ""))
        link = gpu_link(lines)
        if link:
            parts.append(f"GPU0-GPU1: {link}")
    for line in lines:
        m = re.match(r"^\s*Open MPI:\s*(\S+)", line)
        if m:
            parts.append(f"Open MPI {m.group(1)}")
            break
    return ", ".join(parts), (len(gpus) or None)


def gpu_link(lines):
    """The GPU0 -> GPU1 entry of nvidia-smi topo -m (NV18, SYS, PIX...), or ''."""
    clean = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in lines]
    for i, line in enumerate(clean):
        head = line.split("\t")
        if "GPU0" in [h.strip() for h in head] and "GPU1" in [h.strip() for h in head]:
            col = [h.strip() for h in head].index("GPU1")
            for row in clean[i + 1:]:
                cells = row.split("\t")
                if cells and cells[0].strip() == "GPU0" and len(cells) > col:
                    return cells[col].strip()
            return ""
    return ""


def files_date(d, given):
    if given:
        return given
    times = [os.path.getmtime(os.path.join(d, n)) for n in INPUTS
             if os.path.exists(os.path.join(d, n))]
    if not times:
        return ""
    return datetime.datetime.fromtimestamp(max(times), datetime.timezone.utc).strftime("%Y-%m-%d")


# ---- output -------------------------------------------------------------------


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def md_table(title, unit, series, ratio_of=None):
    """One Markdown table: a row per size, a column per series (tables only;
    reference levels, floats, are left out); with ratio_of = (a, b) a last
    column a / b."""
    series = OrderedDict((n, t) for n, t in series.items() if isinstance(t, dict))
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


# Colours by series kind (the first key that the label holds), so that one kind
# keeps its colour in every panel; a floor takes the colour of the runs it bounds.
COLOURS = OrderedDict((
    ("gwbench bibw", "#c77dff"), ("gwbench", "#7b2cbf"), ("IPC off, chunked", "#ff7f0e"),
    ("IPC off", "#2ca02c"), ("bibw", "#17becf"), ("GPU0 to GPU1", "#d62728"),
    ("same GPU", "#1f77b4"), ("H D", "#8c564b"), ("H2D", "#8c564b"), ("D H", "#e377c2"),
    ("D2H", "#e377c2"), ("peer", "#000000"), ("Peer", "#000000"), ("ucx", "#d62728"),
    ("gpuwire", "#1f77b4"),
))
FALLBACK = ("#bcbd22", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#2ca02c")


def colour(name, i):
    for key, c in COLOURS.items():
        if key in name:
            return c
    return FALLBACK[i % len(FALLBACK)]


def plot(png, title, panels, workdir):
    """panels: [(title, ylabel, logy, {name: {size: value} or float})]; one PNG,
    the panels side by side, a float drawn as a dashed horizontal reference
    line. Returns an error line or None."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        return "gnuplot not found (apt-get install gnuplot-nox): no plots"
    tables = [t for _, _, _, series in panels for t in series.values() if isinstance(t, dict)]
    sizes = sorted({s for t in tables for s in t if s > 0})
    tics = []
    if sizes:
        k, step = 0, 2 if sizes[-1] <= 1 << 12 else 4  # a tic every 4x or 16x
        while 1 << k <= sizes[-1] * 2:
            if 1 << k >= sizes[0] // 2:
                tics.append(f'"{human(1 << k)}" {1 << k}')
            k += step
    nkeys = max(len(series) for _, _, _, series in panels)
    height = 560 + 22 * nkeys
    script = [
        f'set terminal pngcairo noenhanced size {760 * len(panels)},{height} font "sans,11"',
        f'set output "{png}"',
        f'set multiplot layout 1,{len(panels)} title "{title}" font "sans,13"',
        "set logscale x 2", "set grid", "set key below vertical Left reverse maxcols 1",
        'set xlabel "message size"', "set mxtics default",
        f"set bmargin {nkeys + 5}",  # one plot height in every panel, room for the key
    ]
    if sizes:
        script.append(f"set xrange [{sizes[0] / 1.5}:{sizes[-1] * 1.5}]")
    if tics:
        script.append(f"set xtics ({', '.join(tics)})")
    for p, (ptitle, ylabel, logy, series) in enumerate(panels):
        script += [f'set title "{ptitle}"', f'set ylabel "{ylabel}"',
                   "set logscale y" if logy else "unset logscale y"]
        plots = []
        for i, (name, t) in enumerate(series.items()):
            c = colour(name, i)
            if not isinstance(t, dict):
                plots.append(f'{float(t)} with lines dt 2 lw 2 lc rgb "{c}" title "{name}"')
                continue
            dat = os.path.join(workdir, f"p{p}_{i}.dat")
            with open(dat, "w") as f:
                for s in sorted(t):
                    if s > 0 and t[s] > 0:
                        f.write(f"{s} {t[s]}\n")
            style = "linespoints dt 3 pt 6" if name.startswith("floor") else "linespoints pt 7 ps 0.6"
            plots.append(f'"{dat}" using 1:2 with {style} lw 2 lc rgb "{c}" title "{name}"')
        script.append("plot " + ", ".join(plots) if plots else "plot 0 notitle")
    script.append("unset multiplot")
    r = subprocess.run([gnuplot], input="\n".join(script) + "\n", text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0 or not os.path.exists(png):
        return f"gnuplot failed: {r.stdout.strip()[:300]}"
    return None


# ---- figures ------------------------------------------------------------------


def host_from_gwbench(d):
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
    return host_lat, host_bw, failed


def host_from_osu(osu):
    host_lat, host_bw = OrderedDict(), OrderedDict()
    for impl in ("gpuwire", "ucx"):
        t = osu_table(osu.get(f"lat_HH_{impl}", []))
        if t:
            host_lat[impl] = t
        t = osu_table(osu.get(f"bw_HH_{impl}", []), 1e-3)  # MB/s -> GB/s
        if t:
            host_bw[impl] = t
    return host_lat, host_bw


def device_series(d, osu, floor_rows, ngpu):
    """Latency and bandwidth series on device buffers: {label: table or level}."""
    # ngpu 1: every D D run has both ranks on one GPU. lat_DD, bw_DD and bibw_DD
    # run only with two GPUs (ci/gpu_bench.sh), one rank on each.
    same = ", same GPU" if ngpu == 1 else ""
    pair = same or (", GPU0 to GPU1" if ngpu else "")
    dev_lat, dev_bw = OrderedDict(), OrderedDict()
    t = gwbench_tables(read_lines(os.path.join(d, "gwbench_device.txt")))
    if t.get("latency"):
        dev_lat[f"gpuwire (gwbench D D{same})"] = t["latency"]
    if t.get("bw"):
        dev_bw[f"gpuwire (gwbench D D{same})"] = t["bw"]
    if any(v > 0 for v in t.get("bibw", {}).values()):
        dev_bw[f"gpuwire (gwbench bibw D D{same})"] = t["bibw"]
    lat = (("lat_DD", f"gpuwire (osu_latency D D{pair})"),
           ("lat_DD_samegpu", "gpuwire, same GPU (osu_latency D D)"),
           ("lat_DD_staged", f"gpuwire, IPC off (osu_latency D D{same})"),
           ("lat_HD", "gpuwire (osu_latency H D)"),
           ("lat_DH", "gpuwire (osu_latency D H)"))
    bw = (("bw_DD", f"gpuwire (osu_bw D D{pair})"),
          ("bibw_DD", f"gpuwire (osu_bibw D D{pair})"),
          ("bw_DD_staged", f"gpuwire, IPC off (osu_bw D D{same})"),
          ("bw_DD_chunked", f"gpuwire, IPC off, chunked (osu_bw D D{same})"),
          ("bw_HD", "gpuwire (osu_bw H D)"))
    for key, label in lat:
        tab = osu_table(osu.get(key, []))
        if tab:
            dev_lat[label] = tab
    for key, label in bw:
        tab = osu_table(osu.get(key, []), 1e-3)  # MB/s -> GB/s
        if tab:
            dev_bw[label] = tab
    if dev_lat:
        for row, label in (("8 B cudaMemcpyAsync H2D (pinned) + sync", "floor: 8 B H2D + sync"),
                           ("8 B cudaMemcpyAsync D2H (pinned) + sync", "floor: 8 B D2H + sync"),
                           ("8 B cudaMemcpyPeerAsync GPU0->GPU1 + sync",
                            "floor: 8 B peer copy + sync")):
            if row in floor_rows and floor_rows[row][1] == "us":
                v = floor_rows[row][0]
                dev_lat[f"{label}, {v:g} us"] = v
    if dev_bw:
        # Pinned H2D bounds the H D and staged runs; D2H bounds no bandwidth run
        # (there is no D H one) and would lie near the H2D line: table only.
        row = "pinned H2D 64 MiB"
        if row in floor_rows and floor_rows[row][1] == "GB/s":
            v = floor_rows[row][0]
            dev_bw[f"floor: pinned H2D 64 MiB, {v:g} GB/s"] = v
        peer = peer_copy_floor(floor_rows)
        if peer:
            dev_bw["floor: cudaMemcpyPeerAsync GPU0->GPU1"] = peer
    return dev_lat, dev_bw


def floor_table(floor_rows):
    wanted = [l for l in floor_rows
              if re.match(r"^8 B cudaMemcpy(Peer)?Async .*\+ sync$", l)
              or re.match(r"^pinned (H2D|D2H) \d+ MiB$", l)
              or l.startswith("cudaMemcpyPeerAsync GPU0->GPU1")]
    if not wanted:
        return []
    rows = ["### CUDA floors (cuda_floor_bench, medians)", "", "| copy | value |", "| --- | --- |"]
    for l in wanted:
        v, unit = floor_rows[l]
        rows.append(f"| {l} | {v:g} {unit} |")
    return rows + [""]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--machine", default="")
    ap.add_argument("--command", default="")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--date", default="")
    a = ap.parse_args()
    d = a.folder
    workdir = os.path.join(d, ".report-tmp")
    os.makedirs(workdir, exist_ok=True)

    log_machine, log_ngpu = machine_from_build_log(os.path.join(d, "build.log"))
    floor_ngpu, floor_rows = floors(os.path.join(d, "floor.txt"))
    ngpu = log_ngpu or floor_ngpu
    osu = sections(os.path.join(d, "osu.txt"))

    host_lat, host_bw, failed = host_from_gwbench(d)
    host_src = "gwbench" if host_lat or host_bw else ""
    if not host_src:
        host_lat, host_bw = host_from_osu(osu)
        host_src = "OSU osu_latency / osu_bw" if host_lat or host_bw else ""
    dev_lat, dev_bw = device_series(d, osu, floor_rows, ngpu)

    notes = []
    md = ["# gpuwire benchmark report", ""]
    if a.render_only:
        machine = log_machine or "not recorded (no build.log among the files)"
        date = files_date(d, a.date)
        md += [f"Machine: {machine}" + (f"; files of {date}" if date else ""), ""]
    elif a.machine:
        md += [f"Machine: {a.machine}", ""]
    if a.command:
        md += [f"Command: `{a.command}`", ""]
    elif a.render_only:
        md += ["Commands: `ci/gpu.sh` on the machine that ran, then "
               "`ci/report.sh <build> <out> --render-only` over the files it left.", ""]
    md += ["Latency: one-way (gwbench: median of round trips / 2; OSU: osu_latency's average), "
           "us, lower is better. Bandwidth: unidirectional, windows of non-blocking sends "
           "(GB/s = 1e9 bytes/s; OSU's MB/s divided by 1000), higher is better. Two ranks on one node"
           + ("." if a.render_only else "; every implementation ran in the same run of ci/report.sh."),
           ""]
    if failed:
        md += [f"**Runs that failed** (see report_raw.txt): {', '.join(failed)}", ""]

    ratio = ("gpuwire", "ucx") if "gpuwire" in host_lat and "ucx" in host_lat else None
    md += [f"## Host buffers ({host_src})" if host_src else "## Host buffers", ""]
    if host_lat or host_bw:
        md += md_table("Latency", "us", host_lat, ratio)
        md += md_table("Bandwidth", "GB/s", host_bw,
                       ("gpuwire", "ucx") if "ucx" in host_bw and "gpuwire" in host_bw else None)
        err = plot(os.path.join(d, "report_host.png"), f"host buffers, 2 ranks ({host_src})",
                   [("latency", "us", True, host_lat), ("bandwidth", "GB/s", True, host_bw)],
                   workdir)
        if err:
            notes.append(err)
        else:
            md += ["![host latency and bandwidth](report_host.png)", ""]
    else:
        md += ["No host figures (report_raw.txt missing or empty, no H H runs in osu.txt).", ""]

    if dev_lat or dev_bw:
        md += ["## Device buffers", ""]
        if ngpu == 1:
            at8 = [(n, t[8]) for n, t in dev_lat.items()
                   if isinstance(t, dict) and "D D" in n and 8 in t]
            md += ["One GPU: the D D runs put both ranks on GPU 0, two processes on one GPU. "
                   "Every message then waits for GPU context switches between them (about "
                   "150 us per message), so the D D latencies measure that, not the transport, "
                   "and the D D bandwidth with CUDA IPC is a copy inside one GPU's memory. "
                   "The H D and D H runs do not pay that cost."
                   + (" D D latency at 8 B in this run:" if at8 else ""), ""]
            if at8:
                md += [f"- {n}: {v:g} us" for n, v in at8] + [""]
        if floor_rows:
            md += ["The dashed lines and the lines named floor are CUDA floors from floor.txt "
                   "(cuda_floor_bench, medians); the table of CUDA floors lists them.", ""]
        md += md_table("Latency", "us", dev_lat)
        md += md_table("Bandwidth", "GB/s", dev_bw)
        md += floor_table(floor_rows)
        if "lat_DD_check" in osu:
            n, ok = osu_validation(osu["lat_DD_check"])
            if n:
                md += [f"osu_latency -c D D (lat_DD_check, data validated): {ok} of {n} sizes Pass.", ""]
        what = "device buffers, 2 ranks" + (", one GPU" if ngpu == 1 else
                                             f", {ngpu} GPUs" if ngpu else "")
        err = plot(os.path.join(d, "report_device.png"), what,
                   [("latency", "us", True, dev_lat), ("bandwidth", "GB/s", True, dev_bw)],
                   workdir)
        if err:
            notes.append(err)
        else:
            md += ["![device latency and bandwidth](report_device.png)", ""]
    summary = os.path.join(d, "bench_summary.txt")
    if os.path.exists(summary) and os.path.getsize(summary) > 0:
        md += ["## Figures of ci/gpu_bench.sh", ""]
        md += read_lines(summary) + [""]
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
