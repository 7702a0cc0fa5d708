"""Golden headers: the headers stencilgen writes for tests/golden/golden.yaml
(both targets, a handful of ops with one of each kind of hole, data and call)
must equal the checked-in tests/golden/jit_stencils*.h byte for byte. Any change
to the writer, the extraction or the ABI block therefore shows up as a diff in
review; regenerate with `python3 tests/golden/update.py BUILD_DIR` when the
change is meant. The LLVM version in each header's first comment is the one
difference allowed, so a newer LLVM 22 release alone does not fail the suite
(a change in the code it generates still does)."""
import difflib
import glob
import os
import re

from sgtest import check, read

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden")
LLVM_VERSION = re.compile(r"with LLVM [0-9][0-9.a-z+~-]*")


def normalized(text):
    return LLVM_VERSION.sub("with LLVM <version>", text, count=1)


def test_headers_equal_the_golden_ones(ctx):
    compare_with_golden(ctx, GOLDEN)


def test_headers_without_hot_cold_equal_the_golden_ones(ctx):
    """--no-hot-cold (docs/design.md, "Hot and cold parts"): tests/golden/no-hot-cold."""
    compare_with_golden(ctx, os.path.join(GOLDEN, "no-hot-cold"), "--no-hot-cold")


def compare_with_golden(ctx, golden, *options):
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(os.path.join(GOLDEN, "golden.yaml"), out, *options)
    want = sorted(os.path.basename(p) for p in glob.glob(os.path.join(golden, "jit_stencils*.h")))
    got = sorted(f for f in os.listdir(out) if f.endswith(".h"))
    check(want == got, "headers written %s, golden %s", got, want)
    for name in want:
        a, b = normalized(read(os.path.join(golden, name))), normalized(read(os.path.join(out, name)))
        if a != b:
            diff = "".join(list(difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                                     "golden/" + name, "generated/" + name))[:120])
            check(False, "%s differs from its golden copy (if meant: python3 "
                  "tests/golden/update.py BUILD_DIR, then review the diff):\n%s", name, diff)
