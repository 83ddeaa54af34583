#!/usr/bin/env python3
"""Runs MPI tests of a build under compute-sanitizer, one tool at a time.

    ci/gpu_mpi_sanitize.py BUILD TOOL TEST [TEST...]

Each test's command comes from ctest (`ctest --show-only=json-v1`), so the
ranks start exactly as under ctest; compute-sanitizer goes in front of the
test program, inside mpirun, so every rank runs under it. Prints one line per
test (rc, errors reported) and exits nonzero when any test failed or the
sanitizer reported an error. Used by ci/gpu.sh (GPU_MPI_SANITIZER).
"""
import json
import os
import re
import shutil
import subprocess
import sys


def main():
    if len(sys.argv) < 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    build, tool, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    san = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not os.access(san, os.X_OK):
        print("compute-sanitizer not found: skipped")
        return 0
    ctest = shutil.which("ctest") or "/opt/torch/.venv/bin/ctest"
    out = subprocess.run([ctest, "--show-only=json-v1"], cwd=build, capture_output=True,
                         text=True, check=True).stdout
    tests = {t["name"]: t for t in json.loads(out)["tests"]}
    timeout = int(os.environ.get("GPU_SAN_TIMEOUT", "240"))
    bad = 0
    for name in names:
        t = tests.get(name)
        if not t:
            print(f"{name}: no such test in {build}")
            bad += 1
            continue
        cmd = list(t["command"])
        exe = next((i for i, a in enumerate(cmd) if a.endswith("_exe")), None)
        if exe is None:
            print(f"{name}: cannot find the test program in {cmd}")
            bad += 1
            continue
        cmd[exe:exe] = [san, "--tool", tool, "--error-exitcode", "9", "--print-limit", "20"]
        try:
            r = subprocess.run(cmd, cwd=build, capture_output=True, text=True, timeout=timeout)
            rc, text = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            rc = 124
            text = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(
                errors="replace")
        # memcheck and synccheck end with an error summary, racecheck with
        # a hazard summary.
        summaries = re.findall(r"(?:ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: (\d+) hazard)",
                               text)
        errors = sum(int(a or b) for a, b in summaries)
        print(f"### {name} under {tool}: rc={rc}, ranks reporting {len(summaries)}, "
              f"errors {errors}")
        sys.stdout.write(text[-6000:] if rc or errors or not summaries else "")
        if rc or errors or not summaries:
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
