#!/usr/bin/env python3
"""The source tree's shape (test source_layout).

Two rules of the design, checked here so that a change that breaks one fails:

* no C/C++/CUDA source or header over --max-lines (600) lines: the tracked
  files (git ls-files, plus new files git does not ignore), or every such file
  under the source folder where it is no git work tree (a tarball);
* no group of object files of one built unit (a component with the static
  libraries linked into it, the core, a static library) that use one another
  in a circle: from nm, file A -> file B when A leaves undefined a symbol B
  defines; every strongly connected component of more than one file is a
  circle. A circle listed in the allowlist (--allow), or part of one, passes:
  the circles the tree had when the rule came in are recorded there, to be
  removed; any other fails. A listed circle that is gone or smaller is
  noted (update the list), not failed, since builds differ (Open MPI 5, no
  CUDA) in which uses they compile.

Also printed, as information: the lines under plugin/ (the Open MPI glue)
and the largest source file.

  check_layout.py --source DIR [--build DIR --units FILE --nm NM]
                  [--allow FILE] [--max-lines N] [--links]

--units: one unit a line, "name=object;object;..." (CMake writes it with
$<TARGET_OBJECTS>, tests/tools/CMakeLists.txt). Each new circle is printed
with the uses that make it (file -> file: symbols); --links prints them for
the allowed ones too. Exit 0 when the tree keeps
both rules, 1 when not (each breach named), 2 on a usage or build problem.
"""
import argparse
import os
import subprocess
import sys

SOURCE_EXTS = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hh", ".hpp", ".cuh")
PLUGIN_EXTS = (".c", ".h", ".cpp")
# Defined symbols, strong and weak (nm's upper-case letters; U: undefined).
STRONG = set("TDBRGSCi")
WEAK = set("VWu")


def die(msg):
    print("source_layout: " + msg, file=sys.stderr)
    sys.exit(2)


def source_files(root):
    """Repository-relative paths of the C/C++/CUDA files under root."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, check=True).stdout.decode()
        names = [n for n in out.split("\0") if n]
        how = "git ls-files"
    except (OSError, subprocess.CalledProcessError):
        # No git, or no work tree (an unpacked tarball): walk it, leaving out
        # hidden folders and build trees (any folder with a CMakeCache.txt).
        names = []
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and
                             not os.path.exists(os.path.join(d, x, "CMakeCache.txt")))
            names += [os.path.relpath(os.path.join(d, f), root) for f in files]
        how = "walk of the source folder: no git work tree"
    names = sorted(n for n in names if n.endswith(SOURCE_EXTS)
                   and os.path.isfile(os.path.join(root, n)))
    return names, how


def count_lines(path):
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def check_lines(root, max_lines):
    names, how = source_files(root)
    if not names:
        die("no C/C++/CUDA source found under %s (%s)" % (root, how))
    lines = {n: count_lines(os.path.join(root, n)) for n in names}
    over = sorted((n for n in names if lines[n] > max_lines), key=lambda n: -lines[n])
    print("%d C/C++/CUDA sources and headers (%s)" % (len(names), how))
    for n in over:
        print("FAIL: %s has %d lines, over the limit of %d: split it by concern"
              % (n, lines[n], max_lines))
    plugin = sum(v for n, v in lines.items() if n.startswith("plugin/") and n.endswith(PLUGIN_EXTS))
    largest = max(names, key=lambda n: lines[n])
    print("info: %d lines under plugin/ (.c, .h, .cpp; the goal is at most 3000)" % plugin)
    print("info: largest source file: %s, %d lines" % (largest, lines[largest]))
    return len(over)


def object_source(obj, build):
    """The source an object of CMake's build tree comes from, relative to the
    source folder: <build>/<dir>/CMakeFiles/<target>.dir/<path>.o is
    <dir>/<path>, where each "__" of <path> stands for "..". Objects outside
    that shape keep their path."""
    rel = os.path.relpath(obj, build)
    head, sep, tail = rel.partition("/CMakeFiles/")
    if not sep:
        if rel.startswith("CMakeFiles/"):
            head, tail = "", rel[len("CMakeFiles/"):]
        else:
            return rel
    tail = tail.split("/", 1)[1] if "/" in tail else tail  # drop <target>.dir
    if tail.endswith(".o"):
        tail = tail[:-2]
    parts = [".." if p == "__" else p for p in tail.split("/")]
    return os.path.normpath(os.path.join(head, *parts))


def read_symbols(nm, objects):
    """{object: (defined strong, defined weak, undefined)} from nm."""
    syms = {o: (set(), set(), set()) for o in objects}
    r = subprocess.run([nm, "-A", "-g", "-P"] + objects, capture_output=True)
    if r.returncode != 0:
        die("%s failed: %s" % (nm, r.stderr.decode(errors="replace").strip()))
    for line in r.stdout.decode(errors="replace").splitlines():
        obj, sep, rest = line.partition(": ")
        f = rest.split()
        if not sep or len(f) < 2 or obj not in syms:
            continue
        name, kind = f[0], f[1]
        strong, weak, undef = syms[obj]
        if kind == "U":
            undef.add(name)
        elif kind in STRONG:
            strong.add(name)
        elif kind in WEAK:
            weak.add(name)
    return syms


def circles(files, syms):
    """Strongly connected components (more than one file) of "uses a symbol
    defined by", as sorted lists of file names."""
    strong_by, weak_by = {}, {}
    for f, (strong, weak, _) in syms.items():
        for s in strong:
            strong_by.setdefault(s, set()).add(f)
        for s in weak:
            weak_by.setdefault(s, set()).add(f)
    edges = {f: set() for f in syms}
    why = {}  # (user, definer): the symbols
    for f, (_, _, undef) in syms.items():
        for s in undef:
            # A strong definition is the one the linker takes.
            for d in strong_by.get(s) or weak_by.get(s, set()):
                if d != f:
                    edges[f].add(d)
                    why.setdefault((f, d), []).append(s)
    # Tarjan's algorithm, iteratively (no recursion limit to meet).
    index, low, on_stack, stack, sccs = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    links = sorted((files[a], files[b], sorted(why[(a, b)]))
                                   for a in comp for b in comp if (a, b) in why)
                    sccs.append((sorted(files[o] for o in comp), links))
    return sorted(sccs)


def demangle(names):
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                           check=True)
        out = r.stdout.splitlines()
        return out if len(out) == len(names) else names
    except (OSError, subprocess.CalledProcessError):
        return names


def print_links(links):
    """Each use inside a circle: which file, of which file, through which symbols."""
    for a, b, names in links:
        shown = demangle(names[:3])
        more = " (+%d)" % (len(names) - 3) if len(names) > 3 else ""
        print("      %s -> %s: %s%s" % (a, b, ", ".join(shown), more))


def read_units(path):
    units = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, objs = line.partition("=")
            units.append((name, [o for o in objs.split(";") if o]))
    return units


def read_allow(path):
    allow = []
    if not path:
        return allow
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                allow.append(tuple(sorted(line)))
    return allow


def check_circles(units_path, build, nm, allow_path, all_links):
    units = read_units(units_path)
    if not units:
        die("no units in %s" % units_path)
    allow = read_allow(allow_path)
    seen_files, found = set(), {}
    failures = 0
    for name, objs in units:
        missing = [o for o in objs if not os.path.isfile(o)]
        if missing:
            die("%s: %d object files missing (first: %s): build the project before this test"
                % (name, len(missing), missing[0]))
        files = {o: object_source(o, build) for o in objs}
        seen_files.update(files.values())
        found_here = circles(files, read_symbols(nm, objs))
        print("%s: %d object files, %d circle%s" % (name, len(objs), len(found_here),
                                                     "" if len(found_here) == 1 else "s"))
        for c, links in found_here:
            key = tuple(c)
            found.setdefault(key, []).append(name)
            # Part of an allowed circle (some of its uses gone, or not in this
            # build: Open MPI 5, no CUDA) is no new circle.
            wider = [w for w in allow if key != w and set(key) < set(w)]
            if key in allow:
                print("  allowed: %s" % " ".join(c))
            elif wider:
                print("  allowed, part of a listed circle: %s\n"
                      "    note: where this build is the usual one, replace the line\n"
                      "    %s\n    with this one in %s" % (" ".join(c), " ".join(wider[0]),
                                                        allow_path))
            else:
                print("  FAIL: new circle: %s" % " ".join(c))
                failures += 1
            if not (key in allow or wider) or all_links:
                print_links(links)
    for key in allow:
        if not any(set(f) <= set(key) for f in found) and any(f in seen_files for f in key):
            print("note: allowed circle not found in this build; once it is gone for good, "
                  "delete its line from %s: %s" % (allow_path, " ".join(key)))
    if failures:
        print("A circle: files that use one another's symbols. Break it (move the function that "
              "closes it, or pass a callback), do not list it.")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="the source folder (repository root)")
    ap.add_argument("--build", help="the build folder (objects' paths are read against it)")
    ap.add_argument("--units", help="units of object files, one a line: name=obj;obj;...")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--allow", help="allowed circles, one a line, sorted file names")
    ap.add_argument("--max-lines", type=int, default=600)
    ap.add_argument("--links", action="store_true",
                    help="the uses inside allowed circles too, not only inside new ones")
    a = ap.parse_args()
    if not os.path.isdir(a.source):
        die("no source folder %s" % a.source)
    failures = check_lines(a.source, a.max_lines)
    if a.units:
        if not a.build:
            die("--units needs --build")
        failures += check_circles(a.units, a.build, a.nm, a.allow, a.links)
    print("source_layout: %s" % ("%d breach%s" % (failures, "" if failures == 1 else "es")
                                 if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
