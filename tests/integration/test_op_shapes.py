"""Op sources written the ways C allows: static helpers and tables that only
op bodies use (under the bundled -Wall -Wextra -Werror), ops defined through a
macro (the whole definition inside the invocation, or OP() with the body
after it), and, refused with a clear message, an op defined in a header that a
listed file includes. (A const table of pointers under PIC, in .data.rel.ro,
is in tests/patch/fixtures/relro.c, where the ld.lld differential checks it.)"""
import os
import re

from sgtest import BUNDLED_OPS, TRIPLE, check, read, write

ASAN = True

TIMEOUT = 240
HEADER = "jit_stencils-%s.h" % TRIPLE

EXTRA_OPS = '''
#define BITOP(name, expr) \\
    OP(name)              \\
    {                     \\
        BINARY(expr);     \\
        CONTINUE();       \\
    }

BITOP(band, a & b)
BITOP(bor, a | b);

static const vm_value scale_table[4] = {1, 3, 5, 7};

static vm_value scaled(vm_value v)
{
    return v * scale_table[v & 3];
}

OP(scale)
{
    tos = scaled(tos);
    CONTINUE();
}

OP(after_macros) /* a comment between the name and the body */
{
    tos = tos ^ 0x5a5a;
    CONTINUE();
}

OP(last) // and one more
{
    tos = tos + 0x77;
    CONTINUE();
}
'''


def build(ctx, proj, out):
    return ctx.generator("build", "--manifest", os.path.join(proj, "stencils", "stencils.yaml"),
                         "--outdir", out, "--target", TRIPLE, timeout=TIMEOUT)


def listing(text, op):
    m = re.search(r"^/\* %s - .*?\*/" % re.escape(op), text, re.M | re.S)
    check(m, "no listing of op %s", op)
    return m.group(0)


def summary_counts(p):
    m = re.search(r"(\d+) ops \((\d+) compiled, (\d+) cached\)", p.stdout)
    check(m, "no summary: %s", p.stdout)
    return tuple(int(x) for x in m.groups())


def test_macro_ops_and_static_helpers(ctx):
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    arith = os.path.join(proj, "stencils", "ops", "arith.c")
    write(arith, read(arith) + EXTRA_OPS)
    p = build(ctx, proj, out)
    check(p.returncode == 0, "build failed (exit %d):\n%s", p.returncode, p.stderr[-4000:])
    text = read(os.path.join(out, HEADER))
    check("andq" in listing(text, "band") and "orq" in listing(text, "bor"),
          "band/bor have the wrong code:\n%s\n%s", listing(text, "band"), listing(text, "bor"))
    check("<- DATA" in listing(text, "scale") and "imulq" in listing(text, "scale"),
          "scale lost its helper or table:\n%s", listing(text, "scale"))
    check("xorq" in listing(text, "after_macros") or "xorl" in listing(text, "after_macros"),
          "the op after the macro ops is wrong:\n%s", listing(text, "after_macros"))
    check("$119," in listing(text, "last") or "$0x77," in listing(text, "last"),
          "op last is wrong:\n%s", listing(text, "last"))
    total, _, _ = summary_counts(p)
    check(total == BUNDLED_OPS + 5, "expected %d ops, got %d", BUNDLED_OPS + 5, total)
    # Editing one macro invocation recompiles that op alone.
    text = read(arith).replace("BITOP(band, a & b)", "BITOP(band, b & a)")
    write(arith, text)
    p = build(ctx, proj, out)
    check(p.returncode == 0, "rebuild failed:\n%s", p.stderr[-3000:])
    check(summary_counts(p)[1] == 1, "one edited invocation should recompile one op: %s",
          p.stdout)


def test_op_in_an_included_header_is_refused(ctx):
    proj = ctx.bundled_copy()
    ops = os.path.join(proj, "stencils", "ops")
    write(os.path.join(ops, "more_ops.h"), "\n\nOP(from_header)\n{\n    CONTINUE();\n}\n")
    arith = os.path.join(ops, "arith.c")
    write(arith, read(arith) + '\n#include "more_ops.h"\n')
    p = build(ctx, proj, os.path.join(ctx.tmp, "out"))
    check(p.returncode == 2, "expected exit 2, got %d:\n%s", p.returncode, p.stderr[-3000:])
    want = "more_ops.h:3:1: error: op 'from_header' is defined in a header included by"
    check(want in p.stderr and "arith.c" in p.stderr, "message lacks %r:\n%s", want, p.stderr)
