"""CFI differential: the generator's .eh_frame parser and row interpreter must
produce exactly the rows llvm-dwarfdump-22 prints, for the shim and for every
op compiled once more with unwind tables, plus a few objects with richer CFI."""
import glob
import os
import re

from sgtest import BUNDLED_OPS, TRIPLE, check

ASAN = True


def dwarfdump_rows(ctx, obj):
    """FDEs as lists of 'OFFSET: rule ...' lines, normalised to our spelling."""
    out = ctx.run(["llvm-dwarfdump-22", "--eh-frame", obj], check=True).stdout
    fdes, cur, start = [], None, 0
    for line in out.splitlines():
        m = re.search(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.\.([0-9a-f]+)", line)
        if m:
            start = int(m.group(1), 16)
            cur = []
            fdes.append((int(m.group(2), 16) - start, cur))
            continue
        m = re.match(r"\s+0x([0-9a-f]+): (CFA=.*)$", line)
        if m and cur is not None:
            rule = m.group(2).lower().replace(":", "").replace(",", "")
            # llvm prints offset-0 rules without a sign ("CFA=RSP"); we always print one.
            rule = re.sub(r"\b(cfa=[a-z0-9]+)(\s|$)", r"\1+0\2", rule)
            rule = re.sub(r"\[cfa\]", "[cfa+0]", rule)
            cur.append("0x%x: %s" % (int(m.group(1), 16) - start, rule.strip()))
    return fdes


def our_rows(ctx, obj):
    out = ctx.run([os.path.join(ctx.build, "tests", "tools", "cfi_rows"), obj],
                  check=True).stdout
    fdes, cur = [], None
    for line in out.splitlines():
        m = re.match(r"FDE pc=0x([0-9a-f]+)\.\.0x([0-9a-f]+)", line)
        if m:
            cur = []
            fdes.append((int(m.group(2), 16) - int(m.group(1), 16), cur))
        else:
            cur.append(line.lower())
    return fdes


def compare(ctx, obj):
    ours, theirs = our_rows(ctx, obj), dwarfdump_rows(ctx, obj)
    check(len(theirs) > 0, "%s: llvm-dwarfdump found no FDE", obj)
    check(ours == theirs, "%s: rows differ\nours:   %s\ntheirs: %s", obj, ours, theirs)
    return sum(len(rows) for _, rows in ours)


def test_bundled_objects_rows_match_dwarfdump(ctx):
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out,
                       "--extra-cflags=-fasynchronous-unwind-tables",
                       "--units", "per-op")  # one object per op, each read whole below
    objs = sorted(glob.glob(os.path.join(out, ".stencilgen", TRIPLE, "*.o")))
    check(len(objs) == BUNDLED_OPS + 1, "expected %d ops + shim, found %d objects", BUNDLED_OPS,
          len(objs))
    rows = sum(compare(ctx, o) for o in objs)
    check(rows >= 27, "suspiciously few rows compared: %d", rows)


RICH = r"""
#include <stdarg.h>
#include <string.h>
extern int ext(int, ...);
int many(int a, int b, int c, int d, int e, int f)
{
    volatile char buf[4096];
    memset((char *)buf, a, sizeof buf);
    int r = 0;
    for (int i = 0; i < a; i++)
        r += ext(i, b, c, d, e, f, buf[i & 4095]);
    return r;
}
int vla(int n) { char v[n]; memset(v, 1, n); return ext(n, v) + v[n / 2]; }
int leaf(int x) { return x * 7; }
int va(int n, ...) { va_list ap; va_start(ap, n); int s = 0; for (int i = 0; i < n; i++) s += va_arg(ap, int); va_end(ap); return ext(s); }
"""


def test_rich_cfi_rows_match_dwarfdump(ctx):
    """Frames with large stack adjustments, VLAs, varargs, with and without frame
    pointers, at several optimisation levels."""
    src = os.path.join(ctx.tmp, "rich.c")
    with open(src, "w") as f:
        f.write(RICH)
    n = 0
    for flags in (["-O0"], ["-O2"], ["-O2", "-fno-omit-frame-pointer"], ["-Os", "-fomit-frame-pointer"],
                  ["-O3", "-mno-red-zone", "-fstack-protector-all"]):
        obj = os.path.join(ctx.tmp, "rich%d.o" % n)
        ctx.run(["clang-22", "--target=" + TRIPLE, "-c", "-fasynchronous-unwind-tables", src,
                 "-o", obj] + flags, check=True)
        compare(ctx, obj)
        n += 1
