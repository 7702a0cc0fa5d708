"""Generated emitters against the runtime's hole tables (tests/unit/test_emit.c)
on every x86-64 relocation fixture: random programs emitted both ways must give
the same status, message and bytes. (The bundled set runs as a unit program;
the AArch64 fixtures run under qemu in test_aarch64_qemu.py.)"""
import os
import re
import sys

import sgtest
from sgtest import X86_MANIFESTS, check, emitted_patch_kinds, patch_kinds, read, write

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
        kinds |= emitted_patch_kinds(read(header))
    want = {"sg_patch_" + k for k in patch_kinds() if not k.startswith("AARCH64_")}
    check(want <= kinds, "patch kinds never generated: %s", sorted(want - kinds))


def corpus_manifest(ctx, ops, triple):
    """tests/bench/make_corpus.py's corpus of `ops` ops, for `triple` alone."""
    corpus = os.path.join(ctx.tmp, "corpus-%d-%s" % (ops, triple))
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus, "--ops",
             str(ops)], timeout=60, check=True)
    manifest = os.path.join(corpus, "corpus.yaml")
    text = read(manifest)
    check("x86_64-unknown-linux-gnu" in text, "make_corpus.py names no x86-64 target")
    write(manifest, text.replace("x86_64-unknown-linux-gnu", triple))
    return manifest


def test_corpus_emitters_match_tables(ctx):
    """Every stencil of a 200-op corpus (four emitter functions, a partial one
    last) written by its generated emitter and by the table-driven patcher:
    the same bytes, on random programs that use every op (the AArch64 twin is
    test_aarch64_qemu::test_aarch64_corpus_emitters_match_tables)."""
    out = emit_differential(ctx, "corpus", corpus_manifest(ctx, 200, TRIPLE))
    check("ops never in an emitted one" in out and ", 0 ops never" in out,
          "not every corpus op was emitted both ways:\n%s", out[-2000:])


def test_tabled_emitters_match_tables_on_the_cpython_shape(ctx):
    """A stencil with more than 2 code holes whose values are at hand hands
    them to sg_emit_table instead of a patch each (docs/runtime.md,
    "Emitters"), which CPython's shape, 4 holes a stencil, needs for its
    header to compile in about a second: on make_corpus.py --cpython most of
    its x86-64 stencils do, the rest keep their patches, and every one emits
    what the table-driven patcher does, status and message included, on
    random programs that use every op (values that do not fit among them)."""
    corpus = os.path.join(ctx.tmp, "cpython")
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus, "--cpython"],
            timeout=60, check=True)
    out = emit_differential(ctx, "cpython", os.path.join(corpus, "corpus.yaml"))
    check("ops never in an emitted one" in out and ", 0 ops never" in out,
          "not every op of the CPython shape was emitted both ways:\n%s", out[-2000:])
    text = read(os.path.join(ctx.tmp, "cpython", "jit_stencils-%s.h" % TRIPLE))
    holes = dict(re.findall(r"^static const sg_hole sg_code_holes_(\w+)\[(\d+)\]", text, re.M))
    sizes = dict(re.findall(r"^static const uint8_t sg_code_(\w+)\[(\d+)\]", text, re.M))
    tabled = sgtest.TABLED_EMITTER.findall(text)
    check(len(tabled) > len(holes) // 2, "%d of %d stencils with holes hand them to "
          "sg_emit_table", len(tabled), len(holes))
    check(all(code == name and sizes[code] == size for code, size, name, _ in tabled),
          "sg_emit_table is handed another stencil's code, or a wrong size")
    check(all(holes[name] == n and int(n) > 2 for _, _, name, n in tabled),
          "a stencil of 2 holes or fewer, or a wrong count, goes to sg_emit_table")
    few = [name for name, n in holes.items() if int(n) <= 2]
    check(few and not set(few) & set(name for _, _, name, _ in tabled),
          "stencils of 1-2 holes should keep their patches")


def emitter_functions(header):
    """The emitter functions a generated header defines."""
    return re.findall(r"^SG_EMITTER_ATTRIBUTES\nstatic unsigned (sg_emit_\w+)\(", read(header),
                      re.M)


def test_emitter_functions_stay_grouped(ctx):
    """A VM compiles the header on every build and gcc -O2 pays about 1 ms per
    function, even an empty one (docs/build.md, "What a header holds"): the
    ops' emitters come 128 to a function, so 300 ops get 3 and the shim 1,
    where one per stencil made 301; each carries SG_EMITTER_ATTRIBUTES."""
    out = os.path.join(ctx.tmp, "grouped")
    ctx.build_stencils(corpus_manifest(ctx, 300, TRIPLE), out, "-j2", timeout=600)
    header = os.path.join(out, "jit_stencils-%s.h" % TRIPLE)
    fns = emitter_functions(header)
    want = ["sg_emit_ops%d" % k for k in range(3)] + ["sg_emit_shim"]
    check(fns == want, "emitter functions of a 300-op header: %d (%s ...), want %d",
          len(fns), ", ".join(fns[:4]), len(want))
    cases = re.findall(r"^    case (SG_CASE_\w+|0): \{ /\* (\w+) \*/$", read(header), re.M)
    check(len(cases) == 301, "%d emitter cases, want 300 ops and the shim", len(cases))
    # Each function's cases are numbered from 0 by an enum written before it,
    # in the order of its cases, so that its switch is one jump table.
    text = read(header)
    for fn in want[:-1]:
        m = re.search(r"enum \{\n((?:    SG_CASE_\w+,\n)+)\};\nSG_EMITTER_ATTRIBUTES\n"
                      r"static unsigned %s\(.*?\n\}\n" % fn, text, re.S)
        check(m, "%s has no enum of its cases right before it", fn)
        enum = re.findall(r"SG_CASE_\w+", m.group(1))
        labels = re.findall(r"^    case (SG_CASE_\w+): \{", m.group(0), re.M)
        check(enum == labels, "%s: its enum (%d) does not number its cases (%d) in order", fn,
              len(enum), len(labels))


def test_emitters_compile_at_o1_under_gcc_only(ctx):
    """gcc compiles the emitters as fast code at -O1 as at -O2, in less time
    (docs/runtime.md, "Emitters"): under gcc -O2 and -O3 the header asks for
    O1 on its emitter functions; at -O0 and -Os, under clang, or when the VM
    defines SG_EMITTER_ATTRIBUTES itself, it adds nothing. Each way compiles
    with -Wall -Wextra -Werror -pedantic, as C11 and as C++17."""
    out = os.path.join(ctx.tmp, "attrs")
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out, "--target", TRIPLE,
                       timeout=600)
    src = os.path.join(ctx.tmp, "vm.c")
    write(src, '#include "jit_stencils.h"\n'
               'const sg_stencil *vm_stencils(void);\n'
               'const sg_stencil *vm_stencils(void) { return sg_stencils; }\n')
    o1 = '__attribute__((optimize("O1")))'
    cxx = ["-x", "c++", "-std=c++17", "-O2"]
    cases = [("gcc", ["-O2"], o1), ("gcc", ["-O3"], o1), ("gcc", ["-O0"], ""),
             ("gcc", ["-Os"], ""), ("clang-22", ["-O2"], ""), ("g++", cxx, o1),
             ("clang++-22", cxx, ""),
             ("gcc", ["-O2", "-DSG_EMITTER_ATTRIBUTES=__attribute__((cold))"],
              "__attribute__((cold))")]
    for cc, flags, want in cases:
        std = [] if "c++" in flags else ["-std=c11"]
        args = [cc] + std + ["-Wall", "-Wextra", "-Werror", "-pedantic", "-I", out, "-I",
                             ctx.path("runtime")] + flags
        p = ctx.run(args + ["-E", "-dM", src], timeout=120)
        m = re.search(r"^#define SG_EMITTER_ATTRIBUTES ?(.*)$", p.stdout, re.M)
        check(p.returncode == 0 and m and m.group(1).strip() == want,
              "%s %s: SG_EMITTER_ATTRIBUTES is %r, want %r\n%s", cc, " ".join(flags),
              m and m.group(1), want, p.stderr[-2000:])
        p = ctx.run(args + ["-c", src, "-o", os.path.join(ctx.tmp, "vm.o")], timeout=120)
        check(p.returncode == 0, "%s %s: the header does not compile:\n%s", cc, " ".join(flags),
              p.stderr[-3000:])
