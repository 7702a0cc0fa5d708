"""The demo prints what README.md says it prints: its sections, its summary lines (one per
triple), tinyvm's times, GDB's frames and stencilrt-stack's, in the README's order, numbers
aside (tests/demo_output.py). The clean room (tests/clean_room/clean-room.sh) holds a new
machine's `./run.sh demo` to the same block; this holds the demo of every build to it."""
import os
import sys

from sgtest import ROOT, check, read

sys.path.insert(0, os.path.join(ROOT, "tests"))
import demo_output  # noqa: E402

ASAN = False  # the demo runs the plain build's tinyvm under GDB; nothing here parses input


def test_the_demo_prints_what_the_readme_shows(ctx):
    p = ctx.run([ctx.path("stencils", "demo.sh"), ctx.build, os.path.join(ctx.tmp, "demo")],
                timeout=600)
    check(p.returncode == 0, "stencils/demo.sh exited %d\n%s\n%s", p.returncode, p.stdout[-3000:],
          p.stderr[-3000:])
    expected = demo_output.readme_demo(read(ctx.path("README.md")))
    problems = demo_output.differences(expected, p.stdout.split("\n"))
    check(not problems, "the demo's output differs from README.md's block:\n%s\n--- output:\n%s",
          "\n".join(problems), p.stdout)


README = """intro
## What the demo shows

```
== section one
stencilgen: x86_64-unknown-linux-gnu: 22 ops (22 compiled, 0 cached), 684 bytes (...)
stencilgen: aarch64-unknown-linux-gnu: 22 ops (22 compiled, 0 cached), 728 bytes (...)

== section two
#1  0x00007ffff7c30027 in tos_native[in=2,out=2]@inner[1] ()
#2  0x0000555555561d6c in vm_run (vm=<optimized out>, ...) at ../stencils/run.c:37
```
"""
OUTPUT = """run.sh: installing clang-22
== section one
stencilgen: x86_64-unknown-linux-gnu: 22 ops (0 compiled, 22 cached), 690 bytes (9 variants)
stencilgen: aarch64-unknown-linux-gnu: 22 ops (0 compiled, 22 cached), 730 bytes (3 variants)

== section two
#1  0x00007f0000000027 in tos_native[in=2,out=2]@inner[1] ()
#2  0x0000555555561eee in vm_run (vm=<optimized out>, code=0x5555, sp=9) at ../stencils/run.c:38
"""


def test_the_demo_check_tells_each_difference(ctx):
    expected = demo_output.readme_demo(README)
    check(len(expected) == 7, "the README's block: %r", expected)
    lines = OUTPUT.rstrip("\n").split("\n")
    check(demo_output.differences(expected, lines) == [],
          "numbers, addresses and cut text must not count: %s",
          demo_output.differences(expected, lines))

    def problems(edit):
        return demo_output.differences(expected, edit(list(lines)))

    swapped = problems(lambda ls: ls[:2] + [ls[3], ls[2]] + ls[4:])
    check(len(swapped) == 2 and "aarch64" in swapped[0], "two summary lines swapped: %s", swapped)
    renamed = problems(lambda ls: [l.replace("section two", "section 2") for l in ls])
    check(len(renamed) == 1 and "section two" in renamed[0], "a renamed section: %s", renamed)
    extra = problems(lambda ls: ls + ["#3  0x1 in main ()"])
    check(len(extra) == 1 and "does not show" in extra[0], "a line the README lacks: %s", extra)
    short = problems(lambda ls: ls[:-2])
    check(len(short) == 1 and "nothing more" in short[0], "a missing last line: %s", short)
    none = problems(lambda ls: ["ninja: build stopped: subcommand failed."])
    check(len(none) == 1 and "never printed" in none[0], "a demo that never started: %s", none)
    other_frame = problems(lambda ls: [l.replace("@inner[1]", "@outer[1]") for l in ls])
    check(len(other_frame) == 1, "a frame of another function: %s", other_frame)
