"""Ops with variants (docs/ops.md, "Variants"): OP(name, VARIANT(axis, first,
last), ...) compiles one stencil per combination of the axes' values, each
named in C `<op>__<axis><value>...` and for people `<op>[<axis>=<value>,...]`.
Through the whole pipeline: batched and per-op units give the same headers on
every bundled target; the header's enumerators, SG_OP_VARIANT_<op>() and the
sg_variant_ops table agree when a VM compiles against them; each variant is
cached on its own; bad axes and a compile error in one variant are reported
naming it; identical variants fold; GDB, perf and every-PC unwinding see the
variants' names."""
import glob
import os
import re

from sgtest import BUNDLED_TRIPLES, TRIPLE, check, read, write

FIXTURE = ("tests", "fixtures", "variants", "variants.yaml")
AARCH64 = "aarch64-unknown-linux-gnu"


def manifest(ctx, name="variants.yaml", ops=None):
    """The fixture's manifest in ctx.tmp, its ops the fixture's (or `ops`)."""
    ops = ops or ctx.path(*FIXTURE[:-1], "ops.c")
    return ctx.fixture_manifest(ctx.path(*FIXTURE), os.path.join(ctx.tmp, name),
                                ("  - ops.c", "  - " + ops))


def build(ctx, man, out, *extra, check_rc=True):
    return ctx.build_stencils(man, out, "-j", "2", *extra, check=check_rc, timeout=900)


def headers(out):
    return {os.path.basename(p): read(p, "rb")
            for p in sorted(glob.glob(os.path.join(out, "jit_stencils*.h")))}


# A VM's use of a header with variants: the constant form in static asserts,
# the table at run time (what it prints is compared below).
CONSUMER = r"""
#include <stdio.h>
#include "jit_stencils.h"
_Static_assert(SG_OP_VARIANT_add(1, 2) == SG_OP_add__in1_out2, "add[in=1,out=2]");
_Static_assert(SG_OP_VARIANT_add(0, 0) == SG_OP_add__in0_out0, "add[in=0,out=0]");
_Static_assert(SG_OP_VARIANT_add(3, 0) == SG_OP__COUNT, "in=3 is out of range");
_Static_assert(SG_OP_VARIANT_pad(2) == SG_OP_pad__width1, "pad[width=2] folds into width=1");
_Static_assert(SG_OP_pad__width2 == SG_OP_pad__width1, "the folded enumerator is its twin's");
_Static_assert(SG_OP__COUNT == 1 + 9 + 2, "push, add's 9, pad's 2 after folding");
int main(void)
{
    const sg_variant_op *add = sg_variant_find(sg_variant_ops, SG_VARIANT_OP__COUNT, "add");
    if (!add || add != &sg_variant_ops[SG_VARIANT_OP_add])
        return 1;
    for (unsigned in = 0; in <= 3; in++)
        for (unsigned out = 0; out <= 2; out++) {
            unsigned v[2] = {in, out};
            uint32_t s = sg_variant_stencil(add, v, 2);
            printf("%u %u %s\n", in, out, s == UINT32_MAX ? "-" : sg_stencils[s].name);
        }
    unsigned w = 2;
    uint32_t pad = sg_variant_stencil(&sg_variant_ops[SG_VARIANT_OP_pad], &w, 1);
    printf("pad %s %zu %s %u %u\n", sg_stencils[pad].name, add->axis_count, add->axes[1].name,
           add->axes[1].first, add->axes[1].last);
    return 0;
}
"""


def test_variants_batched_and_per_op_give_the_same_headers_with_names_and_table(ctx):
    """Both Linux targets, both unit modes: equal headers, one stencil per
    variant named as the contract says, the folded variant a macro of its
    twin, and a VM compiled against the header finds every variant through
    SG_OP_VARIANT_add() and sg_variant_ops (run on this machine)."""
    man = manifest(ctx)
    outs = {}
    for units in ("batched", "per-op"):
        out = os.path.join(ctx.tmp, units)
        build(ctx, man, out, "--units", units, "--target", TRIPLE, "--target", AARCH64)
        outs[units] = headers(out)
    check(outs["batched"] == outs["per-op"], "batched and per-op headers differ")
    for triple in (TRIPLE, AARCH64):
        h = outs["batched"]["jit_stencils-%s.h" % triple].decode()
        for i in range(3):
            for o in range(3):
                check("SG_OP_add__in%d_out%d = " % (i, o) in h, "no enumerator add__in%d_out%d", i, o)
                check('{"add[in=%d,out=%d]", sg_code_add__in%d_out%d,' % (i, o, i, o) in h,
                      "add[in=%d,out=%d] has no stencil of its own in %s", i, o, triple)
        check("SG_OP_add =" not in h and "SG_OP_add " not in h, "an op with variants has SG_OP_add")
        check("#define SG_OP_pad__width2 SG_OP_pad__width1 /* folded" in h,
              "pad[width=2] not folded into pad[width=1] on %s", triple)
        check("SG_OP__COUNT = 12" in h, "SG_OP__COUNT is not 12 on %s", triple)
        check('{"add", 2, sg_variant_axes_add, 9, sg_variant_stencils_add}' in h,
              "no table row for add on %s", triple)
    out = os.path.join(ctx.tmp, "batched")
    src = os.path.join(ctx.tmp, "consumer.c")
    write(src, CONSUMER)
    exe = os.path.join(ctx.tmp, "consumer")
    ctx.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", out, "-I",
             ctx.path("runtime"), src, "-o", exe], check=True)
    p = ctx.run([exe], check=True)
    want = ["%d %d %s" % (i, o, "add[in=%d,out=%d]" % (i, o) if i < 3 else "-")
            for i in range(4) for o in range(3)]
    want.append("pad pad[width=1] 2 out 0 2")
    check(p.stdout.splitlines() == want, "the table says:\n%s", p.stdout)
