#!/usr/bin/env python3
"""The closing summary of ci/test.sh, from ctest's JUnit file (--output-junit).

Prints every skipped test under its cause, one wording per cause, the failed
tests, and the counts; the last line is "N passed, N failed, N skipped" (CI
reads it). Exits 1 when a test failed, when ctest failed, when no test ran, or
when fewer tests ran than the selection holds (--expected, from ctest -N).
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET

NO_GPU = "no GPU (CUDA driver or device absent)"
NO_CUDA = "no CUDA (built without the CUDA toolkit)"
# Older or foreign wordings of the same causes, so that a test written before
# the wording was unified still lands under its cause.
CAUSES = [
    (re.compile(r"no CUDA \(built without|built without CUDA", re.I), NO_CUDA),
    (re.compile(r"\bno (usable )?GPU\b|no CUDA-capable|CUDA driver", re.I), NO_GPU),
]
SKIP_LINE = re.compile(r"\bskip(?:ped)?\s*:\s*(.+)", re.I)


def cause(output):
    """The skip line a test printed, reduced to its cause."""
    for line in output.splitlines():
        m = SKIP_LINE.search(line)
        if not m:
            continue
        reason = m.group(1).strip()
        for pattern, wording in CAUSES:
            if pattern.search(reason):
                return wording
        return reason
    return "no reason printed (the test exited with its skip code)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("junit")
    ap.add_argument("--expected", type=int, required=True, help="tests in the selection (ctest -N)")
    ap.add_argument("--ctest-status", type=int, default=0)
    a = ap.parse_args()

    try:
        cases = ET.parse(a.junit).getroot().iter("testcase")
    except (OSError, ET.ParseError) as e:
        print(f"ci/test.sh: FAIL: no readable ctest result ({e})")
        print(f"0 passed, {a.expected} failed, 0 skipped")
        return 1
    passed, failed, skipped = [], [], {}
    for tc in cases:
        name = tc.get("name")
        out = tc.findtext("system-out") or ""
        if tc.find("failure") is not None or tc.get("status") == "fail":
            failed.append(name)
        elif tc.find("skipped") is not None or tc.get("status") in ("notrun", "disabled"):
            skipped.setdefault(cause(out), []).append(name)
        else:
            passed.append(name)
    nskip = sum(len(v) for v in skipped.values())
    ran = len(passed) + len(failed) + nskip

    print()
    print("== gpuwire test summary ==")
    for why in sorted(skipped, key=lambda w: (-len(skipped[w]), w)):
        names = sorted(skipped[why])
        print(f"skipped: {why}: {len(names)} test(s): {', '.join(names)}")
    if failed:
        print(f"FAILED: {', '.join(sorted(failed))}")
    problems = []
    if ran == 0:
        problems.append("no test ran")
    elif ran < a.expected:
        problems.append(f"ctest ran {ran} of the {a.expected} tests of the selection")
    if a.ctest_status != 0 and not failed:
        problems.append(f"ctest exited with status {a.ctest_status}")
    for p in problems:
        print(f"ci/test.sh: FAIL: {p}")
    print(f"ran {ran} of {a.expected} tests: {len(passed)} passed, {len(failed)} failed, {nskip} skipped")
    print(f"{len(passed)} passed, {len(failed) + (a.expected - ran if ran < a.expected else 0)} failed, "
          f"{nskip} skipped")
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
