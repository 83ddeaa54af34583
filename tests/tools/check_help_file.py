#!/usr/bin/env python3
"""plugin/help-gpuwire.txt and the text compiled into the components
(plugin/common/gpuwire_help_topics.h) must hold the same topics with the same
text, each one line: the components print the compiled text when the help
file is missing, and Open MPI prints the file's otherwise.

  check_help_file.py <gpuwire_help_topics.h> <help-gpuwire.txt> [<copy>...]

Each further argument is a copy of the help file (build tree) that must be
identical to the source."""
import re
import sys


def c_topics(path):
    text = open(path, encoding="utf-8").read().replace("\\\n", " ")
    topics = {}
    for m in re.finditer(r"^#define\s+(GW_HELP_\w+)\s+(.*)$", text, re.M):
        literals = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2))
        if len(literals) < 2:
            continue
        body = "".join(literals[1:]).encode().decode("unicode_escape")
        topics[literals[0]] = (m.group(1), body)
    return topics


def help_topics(path):
    """Parsed as Open MPI's show_help lexer does: '#' lines are comments, a
    line '[name]' starts a topic, every other line is text of the topic."""
    topics, current = {}, None
    for line in open(path, encoding="utf-8").read().splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^\[(.+)\]$", line)
        if m:
            current = m.group(1)
            topics[current] = []
        elif current is not None:
            topics[current].append(line)
    return {k: "\n".join(v) for k, v in topics.items()}


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    compiled, shipped = c_topics(sys.argv[1]), help_topics(sys.argv[2])
    errors = []
    if not compiled:
        errors.append(f"no GW_HELP_* topics found in {sys.argv[1]}")
    for topic, (macro, text) in compiled.items():
        if topic not in shipped:
            errors.append(f"{macro}: topic [{topic}] missing from the help file")
        elif shipped[topic] != text:
            errors.append(f"{macro}: [{topic}] differs:\n  compiled: {text!r}\n  file:     "
                          f"{shipped[topic]!r}")
        if "\n" in text or not text.strip():
            errors.append(f"{macro}: the message must be exactly one line")
    for topic in shipped:
        if topic not in compiled:
            errors.append(f"[{topic}] in the help file has no GW_HELP_* definition")
    source = open(sys.argv[2], encoding="utf-8").read()
    for copy in sys.argv[3:]:
        try:
            if open(copy, encoding="utf-8").read() != source:
                errors.append(f"{copy} differs from {sys.argv[2]} (re-run cmake)")
        except OSError as e:
            errors.append(f"{copy}: {e.strerror}")
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print(f"PASS: {len(compiled)} topics, the same in the help file and the components")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
