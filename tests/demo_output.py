#!/usr/bin/env python3
"""Does the demo print what README.md says it prints?

  tests/demo_output.py README.md DEMO_LOG

README.md shows the demo's output in the fenced block under "What the demo shows". Each of
its lines must match the demo's line at the same place: the same text, save numbers (times,
addresses, process ids, counts) and the runs of spaces that align a column
of numbers, and `...` where the README cuts a long line. The output may
begin with what `./run.sh` printed before the demo (installs, builds), up to the first line of
the block. Exit status 0 when they match, 1 (and each difference) when not.
"""
import re
import sys

HEADING = "## What the demo shows"
_TOKEN = re.compile(r"\.\.\.|0x[0-9a-f]+|\d+(?:\.\d+)?|  +")


def readme_demo(readme_text):
    """The lines of the first fenced block after HEADING."""
    lines = readme_text.split("\n")
    if HEADING not in lines:
        raise ValueError("README.md has no heading %r" % HEADING)
    i = lines.index(HEADING)
    while i < len(lines) and not lines[i].startswith("```"):
        i += 1
    j = i + 1
    while j < len(lines) and not lines[j].startswith("```"):
        j += 1
    if j >= len(lines):
        raise ValueError("README.md has no fenced block under %r" % HEADING)
    return [line.rstrip() for line in lines[i + 1:j]]


def line_pattern(line):
    """A regular expression for the lines that `line` (one of the README's) stands for."""
    out, pos = [], 0
    for m in _TOKEN.finditer(line):
        out.append(re.escape(line[pos:m.start()]))
        tok = m.group(0)
        if tok == "...":
            out.append(".*")
        elif tok.startswith("  "):
            out.append(" +")  # a table's padding, which a number's width changes
        elif tok.startswith("0x"):
            out.append("0x[0-9a-f]+")
        else:
            out.append(r"\d+(?:\.\d+)?")
        pos = m.end()
    out.append(re.escape(line[pos:]))
    return re.compile("".join(out))


def differences(expected, actual):
    """What differs between the README's lines and the demo's (both lists of lines)."""
    actual = [line.rstrip() for line in actual]
    while actual and actual[-1] == "":
        actual.pop()
    if not expected:
        return ["the README's demo block is empty"]
    first = line_pattern(expected[0])
    start = next((i for i, line in enumerate(actual) if first.fullmatch(line)), None)
    if start is None:
        return ["the demo never printed the README's first line %r" % expected[0]]
    actual = actual[start:]
    problems = []
    for n, want in enumerate(expected):
        got = actual[n] if n < len(actual) else None
        if got is None:
            problems.append("line %d: README shows %r, the demo printed nothing more" % (n + 1, want))
            break
        if not line_pattern(want).fullmatch(got):
            problems.append("line %d: README shows %r, the demo printed %r" % (n + 1, want, got))
    for n in range(len(expected), len(actual)):
        problems.append("line %d: the demo printed %r, which README does not show" % (n + 1, actual[n]))
    return problems


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().split("\n")[2].strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        expected = readme_demo(f.read())
    with open(argv[2], encoding="utf-8", errors="replace") as f:
        actual = f.read().split("\n")
    problems = differences(expected, actual)
    for p in problems:
        print("demo output: %s" % p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
