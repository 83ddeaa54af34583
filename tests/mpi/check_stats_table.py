#!/usr/bin/env python3
"""Runs pml_stats under mpirun and checks the statistics table of
pml_gpuwire_stats: with "--expect table" exactly one table, one row per
process with the message and byte counts pml_stats.c sends (process r sends
2+r messages of 64 B and one of 128 KiB, the large one by rendezvous), every
message on the host path, and a total row that adds up; with "--expect none"
no table at all.

  check_stats_table.py --np N --expect table|none -- <mpirun command...>
"""
import argparse
import re
import subprocess
import sys

SMALL, LARGE = 64, 128 * 1024
TITLE = "pml:gpuwire: statistics of"


def fail(msg, out):
    print(f"FAIL: {msg}")
    print("---- output ----")
    print(out[-6000:])
    sys.exit(1)


def expected_row(r, n):
    left = (r + n - 1) % n
    sent, recvd = 3 + r, 3 + left
    return {
        "sent": sent, "sent B": (2 + r) * SMALL + LARGE,
        "recvd": recvd, "recvd B": (2 + left) * SMALL + LARGE,
        "host": sent, "ipc": 0, "staged": 0, "shm chunks": 0, "push": 0, "gdr": 0, "rndv out": 1, "dev in": 0,
    }


def parse_table(lines, start):
    """Header and rows after the title line at index start."""
    header = lines[start + 1]
    # Column names may hold one space ("sent B"); columns are two or more apart.
    names = re.split(r"\s{2,}", header.strip())
    if names[0] != "rank":
        return None, None
    rows = {}
    for line in lines[start + 2:]:
        cells = line.split()
        if len(cells) != len(names):
            break
        rows[cells[0]] = dict(zip(names[1:], cells[1:]))
    return names, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--expect", choices=["table", "none"], required=True)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=90)
    except subprocess.TimeoutExpired:
        fail("the job did not end within 90 s (finalize hung?)", "")
    out = p.stdout
    if p.returncode != 0:
        fail(f"the job failed (exit {p.returncode})", out)
    lines = out.splitlines()
    titles = [i for i, l in enumerate(lines) if TITLE in l]
    if a.expect == "none":
        if titles:
            fail("a statistics table was printed with pml_gpuwire_stats off", out)
        print("PASS: no table with statistics off")
        return
    if len(titles) != 1:
        fail(f"{len(titles)} statistics tables printed, expected exactly one", out)
    if f"{TITLE} {a.np} processes" not in lines[titles[0]]:
        fail(f"title does not name {a.np} processes: {lines[titles[0]]!r}", out)
    names, rows = parse_table(lines, titles[0])
    if rows is None:
        fail("no header row under the title", out)
    want_labels = [str(r) for r in range(a.np)] + ["total"]
    if list(rows) != want_labels:
        fail(f"rows {list(rows)}, expected {want_labels}", out)
    totals = {}
    for r in range(a.np):
        got = rows[str(r)]
        for col, want in expected_row(r, a.np).items():
            if col not in got:
                fail(f"no column {col!r}", out)
            if int(got[col]) != want:
                fail(f"process {r}: {col} is {got[col]}, expected {want}", out)
        for col, v in got.items():
            totals[col] = totals.get(col, 0) + int(v)
    for col, v in totals.items():
        if int(rows["total"][col]) != v:
            fail(f"total {col} is {rows['total'][col]}, the rows add up to {v}", out)
    print(f"PASS: one table, {a.np} rows and a total that match the traffic sent")


if __name__ == "__main__":
    main()
