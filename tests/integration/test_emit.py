"""Generated emitters against the runtime's hole tables (tests/unit/test_emit.c)
on every x86-64 relocation fixture: random programs emitted both ways must give
the same status, message and bytes. (The bundled set runs as a unit program;
the AArch64 fixtures run under qemu in test_aarch64_qemu.py.)"""
import os
import re

from sgtest import X86_MANIFESTS, check, patch_kinds

ASAN = False
TRIPLE = "x86_64-unknown-linux-gnu"



def emit_differential(ctx, label, manifest):
    out = os.path.join(ctx.tmp, label)
    ctx.build_stencils(manifest, out, "--target", TRIPLE, timeout=120)
    exe = os.path.join(ctx.tmp, "test_emit_" + label)
    ctx.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
             "-I", out, "-I", ctx.path("runtime"), ctx.path("tests", "unit", "test_emit.c"),
             os.path.join(ctx.build, "runtime", "libstencilrt.a"), "-lpthread", "-o", exe],
            timeout=120, check=True)
    p = ctx.run([exe, "2000"], timeout=120)
    m = re.search(r"^(\d+) passed, (\d+) failed$", p.stdout, re.M)
    check(p.returncode == 0 and m and m.group(2) == "0", "%s: exit %d\n%s%s", label,
          p.returncode, p.stdout[-3000:], p.stderr[-2000:])
    return p.stdout


def test_generated_emitters_match_tables_on_fixtures(ctx):
    """Every x86-64 patch kind and hole value, both ways, on random programs."""
    kinds = set()
    for label, parts in sorted(X86_MANIFESTS.items()):
        if label == "bundled":  # a unit program of its own
            continue
        emit_differential(ctx, label, ctx.path(*parts))
        header = os.path.join(ctx.tmp, label, "jit_stencils-%s.h" % TRIPLE)
        with open(header) as f:
            kinds |= set(re.findall(r"sg_patch_\w+(?=\(code|\(data)", f.read()))
    want = {"sg_patch_" + k for k in patch_kinds() if not k.startswith("AARCH64_")}
    check(want <= kinds, "patch kinds never generated: %s", sorted(want - kinds))
