#!/usr/bin/env python3
"""The analysis half of ci/gpu_coll_select.sh.

    gpu_coll_select.py table  --dir D --np N --gpn G --coll C
        The selection table's rows for collective C on this topology (N ranks
        on one node, G GPUs, ranks per GPU N/G rounded up): per size the
        algorithm with the lowest median latency over the runs
        D/npN_C_<algo>_<r>.txt, a size kept with the previous size's
        algorithm while that one is within TOLERANCE of the best (fewer,
        steadier ranges), sizes merged into ranges (a range runs from above
        the previous measured size to its last size; the last one has no
        upper bound).
    gpu_coll_select.py report --dir D --np N --colls "C ..."
        The Markdown table: collective | bytes | default | best forced
        (which) | default/best, from D/npN_C_default_<r>.txt against the
        forced runs; ratios above 1.05 flagged; then one line per collective
        (its worst size). Exit 1 when a ratio is above 1.05.
"""
import argparse
import glob
import os
import re
import statistics
import sys

TOLERANCE = 1.02  # well inside the 5 % the default must hold
LIMIT = 1.05
NVLINK_COLLS = {"allreduce", "bcast", "allgather"}


def rows_of(path):
    """{size: latency us} of one OSU output (rows '<size> <avg> ...')."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].isdigit():
                try:
                    out[int(parts[0])] = float(parts[1])
                except ValueError:
                    pass
    return out


def medians(directory, np_, coll, algo):
    """{size: median latency} over the runs of one algorithm (absent: {})."""
    runs = [rows_of(p) for p in sorted(glob.glob(
        os.path.join(directory, f"np{np_}_{coll}_{algo}_*.txt")))]
    sizes = set().union(*runs) if runs else set()
    return {s: statistics.median([r[s] for r in runs if s in r]) for s in sizes}


def forced_algos(directory, np_, coll):
    algos = set()
    pat = re.compile(rf"^np{np_}_{re.escape(coll)}_([a-z]+)_\d+\.txt$")
    for p in os.listdir(directory):
        m = pat.match(p)
        if m and m.group(1) != "default":
            algos.add(m.group(1))
    return sorted(algos)


def best_per_size(directory, np_, coll):
    """[(size, algo, latency)] by size, with the hysteresis of TOLERANCE."""
    data = {a: medians(directory, np_, coll, a) for a in forced_algos(directory, np_, coll)}
    sizes = sorted(set().union(*data.values())) if data else []
    out, prev = [], None
    for s in sizes:
        cands = {a: d[s] for a, d in data.items() if s in d}
        if not cands:
            continue
        a = min(cands, key=cands.get)
        if prev in cands and cands[prev] <= cands[a] * TOLERANCE:
            a = prev
        out.append((s, a, cands[a]))
        prev = a
    return out


def table(args):
    best = best_per_size(args.dir, args.np, args.coll)
    if not best:
        print(f"# {args.coll}, {args.np} ranks: no measurement", file=sys.stderr)
        return 1
    rpg = -(-args.np // args.gpn)
    nvl = "1" if args.coll in NVLINK_COLLS else "*"
    ranges = []  # [lo, hi, algo]
    prev_size = -1
    for s, a, _ in best:
        if ranges and ranges[-1][2] == a:
            ranges[-1][1] = s
        else:
            ranges.append([prev_size + 1, s, a])
        prev_size = s
    ranges[-1][1] = "*"
    for lo, hi, a in ranges:
        print(f"{args.coll:<14} {args.np:>3} {1:>3} {args.np:>3} {args.gpn:>3} {rpg:>3} "
              f"{nvl:>3} {lo:>10} {hi:>10} {a}")
    return 0


def report(args):
    print(f"| collective | bytes | default (us) | best forced (us, which) | default/best |")
    print("| --- | --- | --- | --- | --- |")
    flagged, worst = 0, {}
    for coll in args.colls.split():
        default = medians(args.dir, args.np, coll, "default")
        data = {a: medians(args.dir, args.np, coll, a)
                for a in forced_algos(args.dir, args.np, coll)}
        for s in sorted(default):
            cands = {a: d[s] for a, d in data.items() if s in d}
            if not cands:
                continue
            a = min(cands, key=cands.get)
            ratio = default[s] / cands[a] if cands[a] > 0 else float("inf")
            flag = " **> 1.05**" if ratio > LIMIT else ""
            flagged += ratio > LIMIT
            worst.setdefault(coll, []).append((ratio, s))
            print(f"| {coll} | {s} | {default[s]:.2f} | {cands[a]:.2f} ({a}) | "
                  f"{ratio:.3f}{flag} |")
        if not default:
            print(f"| {coll} | - | no default run | - | - |")
    print(f"\n{args.np} ranks: {flagged} row(s) above {LIMIT}")
    # One line per collective for docs/performance.md: the worst size.
    print("\n| collective, ranks | sizes | worst default/best (bytes) | sizes above 1.05 |")
    print("| --- | --- | --- | --- |")
    for coll, rows in worst.items():
        r, s = max(rows)
        print(f"| {coll}, {args.np} | {len(rows)} | {r:.3f} ({s}) | "
              f"{sum(x > LIMIT for x, _ in rows)} |")
    return 1 if flagged else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["table", "report"])
    p.add_argument("--dir", required=True)
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--gpn", type=int, default=1)
    p.add_argument("--coll", default="")
    p.add_argument("--colls", default="")
    args = p.parse_args()
    return table(args) if args.mode == "table" else report(args)


if __name__ == "__main__":
    sys.exit(main())
