"""Any recent clang (docs/build.md, "Which clang"): Debian's clang-19, an
executable beside the clang 22 the generator links, compiles the bundled
stencils for every target, every frame-shape, pin and frame-pointer check
passes, the headers name the compiler that made them, and the runtime's
unwind facts are the same as clang 22's. What differs is tested too: clang 19's
x86-64 backend does not honour -mframe-pointer=reserved, so an op that keeps
more values across a call than the other callee-saved registers hold is
refused on x86-64 (with a note naming the compiler) and compiles with clang
22. The unwinding and AArch64 qemu suites run on clang-19's stencils as well
(test_unwind and test_aarch64_qemu set CLANG19: tests/run.py --clang19-build),
and a compiler older than 19 is one clear error (test_robust_builds)."""
import os
import re

from sgtest import BUNDLED_TRIPLES, check, read

ASAN = True  # the generator's reading of another compiler's objects, sanitized too

T = 300
CLANG19 = "clang-19"
X86_64 = ("x86_64-unknown-linux-gnu", "x86_64-apple-darwin")


def build(ctx, manifest, out, *extra, check=True):
    return ctx.build_stencils(manifest, out, "--cache-dir", os.path.join(ctx.tmp, "cache"),
                              *extra, check=check, timeout=T)


def header(out, triple):
    return read(os.path.join(out, "jit_stencils-%s.h" % triple))


def unwind_facts(text):
    """What the runtime builds its unwind data from: the SG_UNWIND_* constants
    and the executor's CFI bytes."""
    defines = re.findall(r"^#define (SG_UNWIND_\w+) (.*)$", text, re.M)
    cfi = re.search(r"sg_executor_cfi\[\d+\] = \{([^}]*)\}", text)
    return defines, cfi.group(1).split() if cfi else None


def test_clang19_builds_the_bundled_stencils_for_every_target(ctx):
    """The bundled manifest with --clang clang-19: exit 0 for the five targets
    (each shim's frame equals its expect_frame pin, every op passes the
    frame-pointer check); each header names clang 19 and clang 22's names 22;
    the unwind facts the runtime uses are the same under both."""
    manifest = ctx.path("stencils", "stencils.yaml")
    old, new = os.path.join(ctx.tmp, "19"), os.path.join(ctx.tmp, "22")
    p = build(ctx, manifest, old, "--clang", CLANG19)
    build(ctx, manifest, new)
    for triple in BUNDLED_TRIPLES:
        check(re.search(r"^stencilgen: %s: 22 ops" % re.escape(triple), p.stdout, re.M),
              "no summary for %s:\n%s", triple, p.stdout)
        a, b = header(old, triple), header(new, triple)
        check(re.search(r"^ \* sg-compiler clang, LLVM 19\.\d+\.\d+$", a, re.M),
              "%s: clang-19's header does not name clang 19", triple)
        check(re.search(r"^ \* sg-compiler clang, LLVM 22\.\d+\.\d+$", b, re.M),
              "%s: clang 22's header does not name clang 22", triple)
        check(unwind_facts(a) == unwind_facts(b), "%s: the unwind facts differ:\n%s\n%s",
              triple, unwind_facts(a), unwind_facts(b))


def test_the_compiler_is_named_from_the_cache_too(ctx):
    """A header rewritten from cached objects alone (nothing compiles) still
    names the compiler that made them, not the generator's own clang."""
    manifest = ctx.path("stencils", "stencils.yaml")
    out = os.path.join(ctx.tmp, "out")
    triple = BUNDLED_TRIPLES[0]
    build(ctx, manifest, out, "--clang", CLANG19, "--target", triple)
    os.unlink(os.path.join(out, "jit_stencils-%s.h" % triple))
    p = build(ctx, manifest, out, "--clang", CLANG19, "--target", triple)
    check("(0 compiled, 22 cached)" in p.stdout, "the rebuild compiled:\n%s", p.stdout)
    check(re.search(r"^ \* sg-compiler clang, LLVM 19\.", header(out, triple), re.M),
          "the header rewritten from the cache does not name clang 19")


def test_clang19_on_x86_64_refuses_an_op_that_needs_rbp(ctx):
    """tinyvm's cached set (stencils-cached.yaml) with clang-19: on the two
    x86-64 targets one variant, tos_call[in=1,out=0,args=3], is given %rbp
    for a value it keeps across its call to vm_call; the frame-pointer check
    refuses it (exit 1) with a note naming clang 19 and clang 22. Every other
    target compiles, and clang 22 compiles all of them."""
    manifest = ctx.path("stencils", "stencils-cached.yaml")
    out = os.path.join(ctx.tmp, "out")
    p = build(ctx, manifest, out, "--clang", CLANG19, check=False)
    check(p.returncode == 1, "exit %d, want 1:\n%s", p.returncode, p.stderr[-3000:])
    errors = [l for l in p.stderr.splitlines() if " error: " in l]
    notes = [l for l in p.stderr.splitlines() if " note: " in l]
    refused = {re.search(r"op (\S+) \((\S+)\)", l).groups() for l in errors}
    check(refused == {("tos_call[in=1,out=0,args=3]", t) for t in X86_64},
          "refused %s:\n%s", sorted(refused), p.stderr[-3000:])
    check(all("writes the frame pointer" in l and "%rbp" in l for l in errors),
          "other errors:\n%s", "\n".join(errors))
    check(len(notes) == 2 and all(re.search(r"clang 19\.\d+\.\d+ does not keep x86-64 code "
                                            r"off %rbp", l) and "clang 22" in l for l in notes),
          "the notes:\n%s", "\n".join(notes))
    others = ("aarch64-unknown-linux-gnu", "x86_64-w64-windows-gnu")
    build(ctx, manifest, os.path.join(ctx.tmp, "others"), "--clang", CLANG19,
          *[a for t in others for a in ("--target", t)])
    build(ctx, manifest, os.path.join(ctx.tmp, "22"))
