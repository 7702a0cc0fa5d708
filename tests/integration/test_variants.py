"""Ops with variants (docs/ops.md, "Variants"): OP(name, VARIANT(axis, first,
last), ...) compiles one stencil per combination of the axes' values, each
named in C `<op>__<axis><value>...` and for people `<op>[<axis>=<value>,...]`.
Through the whole pipeline: batched and per-op units give the same headers on
every bundled target; the header's enumerators, SG_OP_VARIANT_<op>() and the
sg_variant_ops table agree when a VM compiles against them; each variant is
cached on its own; bad axes and a compile error in one variant are reported
naming it; identical variants fold; GDB, LLDB, perf, sr_lookup_pc and
stencilrt-stack (the registry) name them, and libgcc unwinds at every PC of
an executor of variant stencils (tests/variants/vrun.c)."""
import glob
import os
import re
import signal
import subprocess
import time

import sgtest
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
_Static_assert(SG_OP__COUNT == 1 + 9 + 2 + 2 + 1, "push, add's 9, pad's 2 after folding, print's 2, ret");
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
    SG_OP_VARIANT_add() and sg_variant_ops (run on this machine; and
    compiled as C++17, warnings as errors)."""
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
                check("    SG_OP_add__in%d_out%d,\n" % (i, o) in h, "no enumerator add__in%d_out%d", i, o)
                check('{"add[in=%d,out=%d]", sg_code_add__in%d_out%d,' % (i, o, i, o) in h,
                      "add[in=%d,out=%d] has no stencil of its own in %s", i, o, triple)
        check("SG_OP_add =" not in h and "SG_OP_add " not in h, "an op with variants has SG_OP_add")
        check("#define SG_OP_pad__width2 SG_OP_pad__width1 /* folded" in h,
              "pad[width=2] not folded into pad[width=1] on %s", triple)
        enumerators = sgtest.enumerators(h)
        check(len(enumerators) == 15, "%d stencils (SG_OP__COUNT), not 15 on %s",
              len(enumerators), triple)
        check('{"add", 2, sg_variant_axes_add, 9, sg_variant_stencils_add}' in h,
              "no table row for add on %s", triple)
    out = os.path.join(ctx.tmp, "batched")
    src = os.path.join(ctx.tmp, "consumer.c")
    write(src, CONSUMER)
    exe = os.path.join(ctx.tmp, "consumer")
    ctx.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", out, "-I",
             ctx.path("runtime"), src, "-o", exe], check=True)
    # C++ too (C++17, as the header promises), warnings as errors.
    cxx = os.path.join(ctx.tmp, "consumer.cpp")
    write(cxx, CONSUMER.replace("_Static_assert", "static_assert"))
    ctx.run(["c++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", out, "-I",
             ctx.path("runtime"), cxx], check=True)
    p = ctx.run([exe], check=True)
    want = ["%d %d %s" % (i, o, "add[in=%d,out=%d]" % (i, o) if i < 3 else "-")
            for i in range(4) for o in range(3)]
    want.append("pad pad[width=1] 2 out 0 2")
    check(p.stdout.splitlines() == want, "the table says:\n%s", p.stdout)


def summary(stdout, triple=TRIPLE):
    """(stencils, compiled, cached, folded) of a run's summary line for triple."""
    m = re.search(r"^stencilgen: %s: (\d+) ops \((\d+) compiled, (\d+) cached(?:, (\d+) "
                  r"folded)?\)" % re.escape(triple), stdout, re.M)
    check(m, "no summary for %s in: %s", triple, stdout)
    return tuple(int(x or 0) for x in m.groups())


def test_variants_every_bundled_target_generates_alike_in_both_unit_modes(ctx):
    """The five bundled triples (Windows x64's COFF, both Mach-O with their
    _JIT_ENTRY tail-call form): every variant compiles, batched and per-op
    headers are byte-identical, each target's header lists the variants."""
    man = manifest(ctx)
    outs = {}
    for units in ("batched", "per-op"):
        out = os.path.join(ctx.tmp, units)
        p = build(ctx, man, out, "--units", units)
        for triple in BUNDLED_TRIPLES:
            check(summary(p.stdout, triple)[1] == 16, "%s (%s): not 16 variants compiled:\n%s",
                  triple, units, p.stdout)
        outs[units] = headers(out)
    check(sorted(outs["batched"]) == sorted(["jit_stencils.h"] +
                                            ["jit_stencils-%s.h" % t for t in BUNDLED_TRIPLES]),
          "headers: %s", sorted(outs["batched"]))
    for name in outs["batched"]:
        check(outs["batched"][name] == outs["per-op"][name], "%s: batched and per-op differ", name)
    for triple in BUNDLED_TRIPLES:
        h = outs["batched"]["jit_stencils-%s.h" % triple].decode()
        check('"print[twice=1]", sg_code_print__twice1,' in h and
              "#define SG_OP_VARIANT_print(v_twice)" in h,
              "%s: print[twice=1] is missing", triple)


def test_variants_are_cached_each_on_its_own(ctx):
    """A second run compiles nothing; editing add's body recompiles add's nine
    variants only, editing pad's its three; in both unit modes."""
    src = os.path.join(ctx.tmp, "ops.c")
    original = read(ctx.path(*FIXTURE[:-1], "ops.c"))
    for units in ("batched", "per-op"):
        write(src, original)
        man = manifest(ctx, "variants-%s.yaml" % units, src)
        out = os.path.join(ctx.tmp, units)
        got = [summary(build(ctx, man, out, "--units", units, "--target", TRIPLE).stdout)]
        got.append(summary(build(ctx, man, out, "--units", units, "--target", TRIPLE).stdout))
        write(src, original.replace("+ STENCIL_V(out) * 10 + 1;", "+ STENCIL_V(out) * 10 + 3;"))
        got.append(summary(build(ctx, man, out, "--units", units, "--target", TRIPLE).stdout))
        write(src, read(src).replace("tos ^= 1;", "tos ^= 2;"))
        got.append(summary(build(ctx, man, out, "--units", units, "--target", TRIPLE).stdout))
        want = [(15, 16, 0, 1), (15, 0, 16, 1), (15, 9, 7, 1), (15, 3, 13, 1)]
        check(got == want, "%s: (stencils, compiled, cached, folded) per run %s, expected %s",
              units, got, want)


BAD_AXES = [
    ("VARIANT(in, 2, 1)", "its first value is greater than its last"),
    ("VARIANT(in, 0, 256)", "integer literals of 0 to 255"),
    ("VARIANT(in, 0, x)", "integer literals of 0 to 255"),
    ("VARIANT(1in, 0, 1)", "its name must be a C identifier"),
    ("VARIANT(in, 0, 1), VARIANT(in, 0, 2)", "an axis of that name comes before it"),
    ("VARIANT(in, 0)", "it must be written VARIANT(axis, first, last)"),
    ("VARIANT(a, 0, 1), VARIANT(b, 0, 1), VARIANT(c, 0, 1), VARIANT(d, 0, 1), VARIANT(e, 0, 1)",
     "declares more than 4 variant axes"),
    ("VARIANT(a, 0, 15), VARIANT(b, 0, 16)", "the op's axes make more than 256 variants"),
]


def test_variants_bad_axes_are_refused_naming_the_place_and_op(ctx):
    """Each limit of docs/ops.md's "Variants" refused with exit 2 and a message
    at the op's file:line:col (the offending VARIANT's column) naming the op."""
    original = read(ctx.path(*FIXTURE[:-1], "ops.c"))
    line = [i + 1 for i, l in enumerate(original.splitlines()) if l.startswith("OP(add, ")][0]
    for k, (axes, why) in enumerate(BAD_AXES):
        src = os.path.join(ctx.tmp, "bad%d.c" % k)
        write(src, original.replace("OP(add, VARIANT(in, 0, 2), VARIANT(out, 0, 2))",
                                    "OP(add, %s)" % axes))
        man = manifest(ctx, "bad%d.yaml" % k, src)
        p = build(ctx, man, os.path.join(ctx.tmp, "bad%d" % k), "--target", TRIPLE,
                  check_rc=False)
        m = re.search(r"^%s:%d:(\d+): error: op 'add'.*%s" % (re.escape(src), line,
                                                             re.escape(why)), p.stderr, re.M)
        check(p.returncode == 2 and m, "%s: exit %d, expected 2 and '%s' at %s:%d:\n%s", axes,
              p.returncode, why, src, line, p.stderr)
        col = int(m.group(1))
        check(why.startswith("declares") or ("OP(add, %s)" % axes)[col - 1:].startswith(
              "VARIANT"), "%s: column %d is not a VARIANT's", axes, col)


def test_variants_written_across_line_continuations(ctx):
    """Discovery reads an op's tokens with their line continuations
    (backslash-newline) left out, as clang does: `OP(...) \\<newline>{` has its
    body next (libclang spells a brace by its bytes, so discovery missed it,
    cut the op short and its compile failed), and `VARI\\<newline>ANT` is
    VARIANT. An op so written builds the fixture's stencils, and a bad axis so
    written is reported at its own line and column."""
    original = read(ctx.path(*FIXTURE[:-1], "ops.c"))
    plain = "OP(add, VARIANT(in, 0, 2), VARIANT(out, 0, 2))"
    line = [i + 1 for i, l in enumerate(original.splitlines()) if l.startswith(plain)][0]

    def stencils(out):  # the header without its provenance (which digests each op's lines)
        return [l for l in read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE)).splitlines()
                if not l.startswith(" * sg-")]

    for kind, text in (("plain", original), ("split", original.replace(
            plain, "OP(add, VARI\\\nANT(in, 0, 2), VARIANT(out, 0, 2)) \\"))):
        os.makedirs(os.path.join(ctx.tmp, kind))
        src = os.path.join(ctx.tmp, kind, "ops.c")  # one name: the header names the file
        write(src, text)
        build(ctx, manifest(ctx, os.path.join(kind, "v.yaml"), src),
              os.path.join(ctx.tmp, kind, "out"), "--target", TRIPLE)
    check(stencils(os.path.join(ctx.tmp, "split", "out")) ==
          stencils(os.path.join(ctx.tmp, "plain", "out")),
          "an op written across line continuations built other stencils than the fixture's")
    src = os.path.join(ctx.tmp, "badsplit.c")
    write(src, original.replace(plain, "OP(add, VARIANT(in, 0, 2),\n    VARI\\\nANT(out, 2, 1))"))
    p = build(ctx, manifest(ctx, "badsplit.yaml", src), os.path.join(ctx.tmp, "badsplit"),
              "--target", TRIPLE, check_rc=False)
    where = "%s:%d:5: error: op 'add': VARIANT(out, 2, 1): its first value is greater" % (
        src, line + 1)
    check(p.returncode == 2 and where in p.stderr, "exit %d, expected 2 and %r:\n%s",
          p.returncode, where, p.stderr)


def test_variants_compile_error_in_one_variant_names_it(ctx):
    """An #error that only add[in=2,out=1] sees: the run fails (exit 3) and
    names that variant as the one that did not compile, in both unit modes
    (a batch holding all of add's variants tells which by compiling them
    alone); no other variant is said to fail."""
    original = read(ctx.path(*FIXTURE[:-1], "ops.c"))
    src = os.path.join(ctx.tmp, "ops.c")
    write(src, original.replace("#if STENCIL_V(in) == 0\n",
                                "#if STENCIL_V(in) == 2 && STENCIL_V(out) == 1\n"
                                "#error \"not in this variant\"\n#endif\n"
                                "#if STENCIL_V(in) == 0\n", 1))
    man = manifest(ctx, "err.yaml", src)
    for units in ("batched", "per-op"):
        p = build(ctx, man, os.path.join(ctx.tmp, units), "--units", units, "--target", TRIPLE,
                  check_rc=False)
        failed = re.findall(r"error: op (\S+) \(%s\): compile failed" % re.escape(TRIPLE),
                            p.stderr)
        check(p.returncode == 3 and failed == ["add[in=2,out=1]"],
              "%s: exit %d, failed ops %s:\n%s", units, p.returncode, failed, p.stderr)
        check('error: "not in this variant"' in p.stderr, "%s: no compiler error:\n%s", units,
              p.stderr)


def test_variants_identical_stencils_fold_and_are_reported(ctx):
    """pad[width=1] and pad[width=2] compile to the same bytes: -v says the
    second is folded into the first, the summary counts it, the header has
    one stencil for both (the folded enumerator a macro of its twin's); add's
    nine variants, all different, stay nine. Without -v nothing is said."""
    man = manifest(ctx)
    out = os.path.join(ctx.tmp, "out")
    p = build(ctx, man, out, "-v", "--target", TRIPLE)
    folds = re.findall(r"^stencilgen: %s: op (\S+) is folded into (\S+): their stencils are "
                       r"the same$" % re.escape(TRIPLE), p.stderr, re.M)
    check(folds == [("pad[width=2]", "pad[width=1]")], "folds reported: %s\n%s", folds, p.stderr)
    check(summary(p.stdout) == (15, 16, 0, 1), "summary: %s", p.stdout)
    h = read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
    check("sg_code_pad__width2" not in h and "sg_code_pad__width1[" in h and
          "    SG_OP_pad__width3,\n" in h and "    SG_OP_pad__width2,\n" not in h,
          "pad[width=2] still has a stencil of its own")
    codes = re.findall(r"static const uint8_t sg_code_add__in\d_out\d\[\d+\] = \{([^}]*)\}", h)
    check(len(codes) == 9 and len(set(codes)) == 9, "add's variants: %d stencils, %d distinct",
          len(codes), len(set(codes)))
    p = build(ctx, man, os.path.join(ctx.tmp, "quiet"), "--target", TRIPLE)
    check("folded into" not in p.stderr, "folds reported without -v:\n%s", p.stderr)


# --- at run time: tests/variants/vrun.c over the fixture's x86-64 header ---

def vrun(ctx):
    """vrun built against the fixture's x86-64 header and this build's runtime."""
    out = os.path.join(ctx.tmp, "stencils")
    build(ctx, manifest(ctx), out, "--target", TRIPLE)
    exe = os.path.join(ctx.tmp, "vrun")
    lib = os.path.join(ctx.build, "runtime")
    ctx.run(["cc", "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-rdynamic",
             "-I", out, "-I", ctx.path("runtime"), "-I", ctx.path("stencils"),
             ctx.path("tests", "variants", "vrun.c"), "-o", exe, "-L", lib, "-lstencilrt",
             "-Wl,-rpath," + lib, "-ldl"], check=True)
    return exe, os.path.join(out, "jit_stencils-%s.h" % TRIPLE)


# The executor vrun emits: each instruction's name, as SG_OP_VARIANT_*() and
# sg_variant_stencil picked it (pad[width=2] runs as its twin pad[width=1]).
VRUN_NAMES = ["push", "add[in=1,out=2]", "pad[width=1]", "pad[width=3]", "print[twice=1]",
              "push", "add[in=0,out=0]", "ret"]


def instructions(stdout):
    got = re.findall(r"^instr (\d+) (\S+)@variants\[\1\] \+(\d+) (\S+)$", stdout, re.M)
    return [(name, int(off), ok) for _, name, off, ok in got]


def test_variants_run_and_carry_their_names_to_perf_and_lookups(ctx):
    """The executor runs (5 + 121, ^ 1, printed twice, + 1000 + 1 = 1129);
    sr_executor_instr_name and sr_lookup_pc name each instruction by its
    variant, and the perf map (STENCILRT_PERF=map) says add[in=1,out=2]."""
    exe, _ = vrun(ctx)
    p = ctx.run([exe, "run"], env={"STENCILRT_PERF": "map"}, check=True, timeout=60)
    pid = re.search(r"^pid (\d+)$", p.stdout, re.M)
    perf_map = "/tmp/perf-%s.map" % (pid.group(1) if pid else "?")
    try:
        text = read(perf_map) if pid and os.path.exists(perf_map) else ""
    finally:
        if os.path.exists(perf_map):
            os.unlink(perf_map)
    got = instructions(p.stdout)
    check([n for n, _, _ in got] == VRUN_NAMES and all(ok == "lookup-ok" for _, _, ok in got),
          "instructions: %s", got)
    check("print 127\nprint 128\n" in p.stdout and "result 1129" in p.stdout, "ran: %s",
          p.stdout)
    for i, name in enumerate(VRUN_NAMES):
        if name != "pad[width=1]":  # an empty stencil has no range in the map
            check(re.search(r"^[0-9a-f]+ [0-9a-f]+ %s@variants\[%d\]$" % (re.escape(name), i),
                            text, re.M), "perf map has no %s@variants[%d]:\n%s", name, i, text)


def test_variants_gdb_names_the_variant_in_a_backtrace(ctx):
    """GDB stopped in vm_print, which print[twice=1] called: the backtrace's
    JIT frame is named print[twice=1]@variants[4] (GDB's JIT interface),
    then run_executor and main."""
    exe, _ = vrun(ctx)
    p = ctx.run(["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off",
                 "-ex", "break vm_print", "-ex", "run", "-ex", "bt", "--args", exe, "run"],
                timeout=120)
    frames = re.findall(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+)", p.stdout, re.M)
    names = [n for _, n in frames]
    check(names[:4] == ["vm_print", "print[twice=1]@variants[4]", "run_executor", "main"],
          "gdb frames %s:\n%s\n%s", names, p.stdout, p.stderr)


def test_variants_lldb_names_the_variant_in_a_backtrace(ctx):
    """LLDB (lldb-22, the same JIT interface) stopped in vm_print: the frame
    that called it is print[twice=1]@variants[4], then run_executor and main."""
    exe, _ = vrun(ctx)
    p = ctx.run(["lldb-22", "-b", "-o", "breakpoint set -n vm_print", "-o", "run", "-o", "bt",
                 "--", exe, "run"], timeout=240)
    frames = re.findall(r"^\s+\*? ?frame #(\d+): 0x[0-9a-f]+ \S+?`(\S+?)(?:\(| \+ |$)",
                        p.stdout.split("(lldb) bt", 1)[-1], re.M)
    names = [n for _, n in frames]
    check(names[:4] == ["vm_print", "print[twice=1]@variants[4]", "run_executor", "main"],
          "lldb frames %s:\n%s\n%s", names, p.stdout[-3000:], p.stderr[-2000:])


def listing(header, name):
    """Offsets of the instructions of stencil `name` in the header's listing."""
    m = re.search(r"^/\* %s - .*?\n((?: \*   [0-9a-f]{4}: .*\n| \*       .*\n)*)" %
                  re.escape(name), header, re.M)
    check(m, "no listing of %s", name)
    return [int(o, 16) for o in re.findall(r"^ \*   ([0-9a-f]{4}): ", m.group(1), re.M)]


def test_variants_unwind_at_every_pc_of_variant_stencils(ctx):
    """Single-stepped (EFLAGS.TF), libgcc's _Unwind_Backtrace at every
    instruction of an executor made of variant stencils reaches run_executor
    and main through the JIT frame, and sr_lookup_pc names the instruction
    the PC is in; every instruction boundary of the executor (from the
    header's listings) was stepped, nothing else. The control: with
    STENCILRT_FRAMES=0 (no unwind info registered) every check fails."""
    exe, header = vrun(ctx)
    p = ctx.run([exe, "step"], timeout=120)
    check(p.returncode == 0 and "vrun: PASS" in p.stdout, "vrun step failed:\n%s\n%s",
          p.stdout, p.stderr)
    got = instructions(p.stdout)
    end = int(re.search(r"^end \+(\d+)$", p.stdout, re.M).group(1))
    h = read(header)
    boundaries = set()
    for i, (name, off, _) in enumerate(got):
        nxt = got[i + 1][1] if i + 1 < len(got) else end
        boundaries |= {off + o for o in listing(h, name) if off + o < nxt}
    stepped = set(int(x) for x in re.search(r"^stepped(.*)$", p.stdout, re.M).group(1).split())
    check(stepped == boundaries, "stepped %s, instruction boundaries %s", sorted(stepped),
          sorted(boundaries))
    checks = re.search(r"^checks (\d+) failed (\d+)$", p.stdout, re.M)
    check(int(checks.group(1)) >= len(boundaries) and checks.group(2) == "0", "checks: %s",
          checks.group(0))
    p = ctx.run([exe, "step"], env={"STENCILRT_FRAMES": "0"}, timeout=120)
    checks = re.search(r"^checks (\d+) failed (\d+)$", p.stdout, re.M)
    check(p.returncode == 1 and checks and checks.group(1) == checks.group(2) != "0",
          "with STENCILRT_FRAMES=0 the checks still passed:\n%s", p.stdout)


def stopped(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_variants_registry_names_the_variant_for_stencilrt_stack(ctx):
    """stencilrt-stack, reading the registry of a process stopped in vm_print
    (SIGSTOP, VRUN_STOP), names the JIT frame that called it
    print[twice=1]@variants[4], between vm_print and run_executor."""
    exe, _ = vrun(ctx)
    tool = os.path.join(ctx.build, "tools", "stack", "stencilrt-stack")
    proc = subprocess.Popen([exe, "run"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, VRUN_STOP="1"))
    try:
        deadline = time.monotonic() + 30
        while not stopped(proc.pid):
            check(time.monotonic() < deadline and proc.poll() is None,
                  "vrun did not stop in vm_print within 30 s")
            time.sleep(0.01)
        p = ctx.run([tool, str(proc.pid)], timeout=60)
    finally:
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            os.kill(proc.pid, signal.SIGCONT)  # each call of vm_print stops
            time.sleep(0.02)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    frames = re.findall(r"^\s+#\d+\s+0x[0-9a-f]+ (\S+)", p.stdout, re.M)
    names = [re.sub(r"\+0x[0-9a-f]+$", "", f) for f in frames]
    check(p.returncode == 0 and "print[twice=1]@variants[4]" in names and
          names[names.index("print[twice=1]@variants[4]") - 1] == "vm_print" and
          names[names.index("print[twice=1]@variants[4]") + 1] == "run_executor",
          "stencilrt-stack (exit %d): frames %s\n%s%s", p.returncode, names, p.stdout, p.stderr)


def test_variants_misspelled_axis_and_an_op_defined_twice_are_errors(ctx):
    """`#if STENCIL_V(widht)` inside an op with variants is an error (-Wundef
    there), not a silent 0, naming each variant that failed; and an op `pad`
    in a second file beside pad's variants is "defined twice" (exit 2); a plain op whose
    name is a variant's C name, and two variants of one C name, are errors naming both."""
    original = read(ctx.path(*FIXTURE[:-1], "ops.c"))
    src = os.path.join(ctx.tmp, "typo.c")
    write(src, original.replace("#if STENCIL_V(width) == 3", "#if STENCIL_V(widht) == 3"))
    p = build(ctx, manifest(ctx, "typo.yaml", src), os.path.join(ctx.tmp, "typo"), "--target",
              TRIPLE, "--units", "per-op", check_rc=False)
    failed = sorted(re.findall(r"error: op (\S+) \(%s\): compile failed" % re.escape(TRIPLE),
                               p.stderr))
    check(p.returncode == 3 and "'STENCIL_V_widht' is not defined" in p.stderr and
          failed == ["pad[width=%d]" % w for w in (1, 2, 3)],
          "exit %d, failed %s:\n%s", p.returncode, failed, p.stderr)
    clash = "error: op '%s' and variant '%s' are both named '%s' in C"
    for k, (other, message) in enumerate([
            ("OP(pad)\n{\n    CONTINUE();\n}\n", "error: op 'pad' is defined twice"),
            ("OP(add__in1_out2)\n{\n    CONTINUE();\n}\n",
             clash % ("add__in1_out2", "add[in=1,out=2]", "add__in1_out2")),
            # x_'s variant a=0 and x's _a=0 are both x___a0 in C
            ("OP(x_, VARIANT(a, 0, 0))\n{\n    CONTINUE();\n}\n"
             "OP(x, VARIANT(_a, 0, 0))\n{\n    CONTINUE();\n}\n",
             "error: variant 'x[_a=0]' and variant 'x_[a=0]' are both named 'x___a0' in C")]):
        more = os.path.join(ctx.tmp, "more%d.c" % k)
        write(more, other)
        man = manifest(ctx, "twice%d.yaml" % k)
        write(man, read(man).replace("\ninclude_dirs:", "\n  - %s\ninclude_dirs:" % more))
        p = build(ctx, man, os.path.join(ctx.tmp, "twice%d" % k), "--target", TRIPLE,
                  check_rc=False)
        at = "%d:1" % (other.count("\n") - 3)  # the last op's OP(, where the second name is
        check(p.returncode == 2 and ("ops.c:" in p.stderr or k == 2) and
              re.search(r"^%s:%s: %s$" % (re.escape(more), at, re.escape(message)), p.stderr, re.M),
              "%s: exit %d:\n%s", message, p.returncode, p.stderr)
