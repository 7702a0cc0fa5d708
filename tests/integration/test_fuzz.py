"""A brief fuzzing run of every parser of untrusted bytes, each target of
tests/fuzz/run.py (./run.sh fuzz runs longer), the object reader among them:
a fixed number of inputs per target, from its seeds with a fixed random seed,
so that a slower machine fuzzes as much as this one and a clean checkout
starts where this one did. A crash fails the test and leaves its reproducer
in build/fuzz/."""
import sys

from sgtest import check


def test_fuzz_parsers_briefly(ctx):
    p = ctx.run([sys.executable, ctx.path("tests", "fuzz", "run.py"), "--build", ctx.build,
                 "--brief"], timeout=3000)
    check(p.returncode == 0, "fuzzing failed:\n%s\n%s", p.stdout[-4000:], p.stderr[-2000:])
    check("0 crashes" in p.stdout, "no fuzz summary: %s", p.stdout)
    for target in ("cfi", "win64_unwind", "arm64_unwind", "fp_chain", "stencil_blob", "manifest", "registry", "objfile",
                   "cache_index"):
        check("fuzz %s: " % target in p.stdout, "target %s did not run: %s", target, p.stdout)
    print(p.stdout.strip())
