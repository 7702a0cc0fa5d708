"""AArch64 target, generator side (for aarch64-unknown-linux-gnu): what only
AArch64 has. Every expectation is derived independently of the generator:
relocations and section bytes from llvm-readelf-22, instruction offsets and
texts from llvm-objdump-22, CFI rows from llvm-dwarfdump-22.

The checks both targets share are written once and run for each: the holes
differential in test_holes.py; the frame-pointer check (every write form,
the controls, register pressure), a shim without frame pointer and a wrong
expect_frame pin in test_frame_checks.py.

* relocations: one the target does not support (ABS32 in data) is exit 1;
  atomics stay inline (no libgcc helper to patch);
* the shim: the derived frame shape equals the manifest's pin and the row
  llvm-dwarfdump gives at the shim's `blr`; the header's rows are those rows
  (a shim without frame pointer, and a wrong pin: test_frame_checks.py);
* the headers compile as C11 for AArch64 (the dispatcher picks AArch64).

The runtime side (qemu-user) is in test_aarch64_qemu.py."""
import os
import re
import shutil

from sgtest import (BUNDLED_OPS, BUNDLED_TRIPLES, Header, aarch64_register, check,
                    dwarfdump_rows, read, write)

ASAN = True

A64 = "aarch64-unknown-linux-gnu"
T = 180
OBJDUMP = ["llvm-objdump-22", "-d", "--no-show-raw-insn", "--no-print-imm-hex"]
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "aarch64")

# The bundled shim's frame, as pinned in stencils/stencils.yaml.
PIN = {"cfa_register": "x29", "cfa_offset": 96, "fp_offset": -96, "ra_offset": -88}

# --- helpers -----------------------------------------------------------------

def objdir(outdir):
    return os.path.join(outdir, ".stencilgen", A64)


def build(ctx, manifest, outdir, *extra):
    return ctx.build_stencils(manifest, outdir, "--target", A64, *extra, check=False, timeout=T)


# For the builds whose ops llvm-readelf and llvm-objdump read: each op's own
# object (op_<name>.o), which only per-op units keep.
PER_OP = ("--units", "per-op")


def good_build(ctx, manifest, outdir, *extra):
    p = build(ctx, manifest, outdir, *extra)
    check(p.returncode == 0, "build of %s exited %d:\n%s", manifest, p.returncode,
          p.stderr[-4000:])
    return Header(os.path.join(outdir, "jit_stencils-%s.h" % A64))


def norm(text):
    """An instruction as llvm-objdump or the generator prints it, comparable."""
    text = text.split("//")[0]  # objdump's "// =0x10" comments
    text = re.sub(r"\s*<[^>]*>\s*$", "", text.strip())
    return re.sub(r"\s+", " ", text).strip()


def disassemble(ctx, obj):
    """{function: [(offset, text)]} from llvm-objdump-22 -d."""
    out = ctx.run(OBJDUMP + [obj], check=True, timeout=T).stdout
    funcs, cur, base = {}, None, 0
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <([^>]+)>:$", line)
        if m:
            base = int(m.group(1), 16)
            cur = funcs.setdefault(m.group(2), [])
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S.*)$", line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16) - base, norm(m.group(2))))
    return funcs


def op_insns(ctx, outdir, op):
    funcs = disassemble(ctx, os.path.join(objdir(outdir), "op_%s.o" % op))
    check("op_" + op in funcs, "op_%s.o has no function op_%s: %s", op, op, sorted(funcs))
    return funcs["op_" + op]


# --- 1. relocations the target refuses or must not see ---------------------

def one_op_project(ctx, name, source):
    """A manifest (the fpcheck controls' settings) whose one op file is
    name.c holding source; returns its path."""
    proj = os.path.join(ctx.tmp, "proj")
    write(os.path.join(proj, name + ".c"), source)
    manifest = os.path.join(proj, "m.yaml")
    write(manifest, read(os.path.join(FIXTURES, "fpcheck", "controls.yaml"))
          .replace("../../../../", os.path.dirname(os.path.dirname(FIXTURES)) + "/../")
          .replace("controls.c", name + ".c"))
    return manifest


def test_aarch64_unsupported_relocation(ctx):
    """A relocation the target does not support (ABS32 in data) is exit 1
    naming op, target, section, offset and type; nothing is written."""
    manifest = one_op_project(ctx, "abs32", """
__asm__(".pushsection .rodata.abs32,\\"a\\",@progbits\\n.p2align 2\\n"
        "abs32_word: .word _JIT_OPERAND0\\n.popsection");
extern const int32_t abs32_word __attribute__((visibility("hidden")));
OP(abs32)
{
    tos = abs32_word;
    CONTINUE();
}
""")
    out = os.path.join(ctx.tmp, "out")
    p = build(ctx, manifest, out)
    check(p.returncode == 1, "exit %d, want 1:\n%s", p.returncode, p.stderr[-3000:])
    check(re.search(r"error: op abs32 \(%s\): unsupported relocation R_AARCH64_ABS32 \(type 258\) "
                    r"in \.rodata\.abs32 at offset 0x0 against '_JIT_OPERAND0'" % A64, p.stderr),
          "no unsupported-relocation error:\n%s", p.stderr)
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")


def test_aarch64_atomics_stay_inline(ctx):
    """clang-22 outlines AArch64 atomics into libgcc helpers (__aarch64_ldadd8_*)
    by default; the target's -mno-outline-atomics keeps them inline, so an op
    using one has no hole but its own. Forcing them out of line makes the
    helper an unknown symbol: exit 1."""
    manifest = one_op_project(ctx, "atomic", """
/* tos = old value of *sp, which gets tos added atomically */
OP(fetch_add)
{
    tos = __atomic_fetch_add((int64_t *)sp, tos, __ATOMIC_SEQ_CST);
    CONTINUE();
}
""")
    out = os.path.join(ctx.tmp, "out")
    h = good_build(ctx, manifest, out, *PER_OP)
    check(h.code_holes("fetch_add") == [] or all(x["value"] == "CONTINUE"
                                                 for x in h.code_holes("fetch_add")),
          "holes: %s", h.code_holes("fetch_add"))
    texts = [t for _, t in op_insns(ctx, out, "fetch_add")]
    check(any(t.startswith(("ldaxr", "ldadd")) for t in texts), "no inline atomic: %s", texts)
    p = build(ctx, manifest, out, "--extra-cflags=-moutline-atomics")
    check(p.returncode == 1 and re.search(r"refers to unknown symbol '__aarch64_ldadd8_acq_rel'",
                                          p.stderr),
          "outlined atomics: exit %d\n%s", p.returncode, p.stderr[-2000:])


# --- 2. the shim, the pin, the header ----------------------------------------------

def header_define(text, name):
    m = re.search(r"^#define %s (\S+)" % name, text, re.M)
    check(m, "the header has no #define %s", name)
    return m.group(1)


def test_aarch64_frame_shape_header_and_dump(ctx):
    manifest = ctx.path("stencils", "stencils.yaml")
    pin = re.search(r"- triple: %s\n(?:\s+(?:#|cflags:|shim_cflags:).*\n)*\s+expect_frame: \{(.*)\}"
                    % A64, read(manifest))
    check(pin, "the bundled manifest has no AArch64 pin")
    pinned = dict((k.strip(), v.strip()) for k, v in (kv.split(":") for kv in pin.group(1)
                                                       .split(",")))
    check(pinned == {k: str(v) for k, v in PIN.items()}, "pin %s, want %s", pinned, PIN)
    out = os.path.join(ctx.tmp, "out")
    good_build(ctx, manifest, out)
    header = read(os.path.join(out, "jit_stencils-%s.h" % A64))
    shim_obj = os.path.join(objdir(out), "shim.o")
    rows = dwarfdump_rows(ctx, shim_obj, aarch64_register)
    shim = disassemble(ctx, shim_obj)["tinyvm_shim"]
    calls = [(off, t) for off, t in shim if re.match(r"^blr x\d+$", t)]
    check(len(calls) == 1, "llvm-objdump: the shim's indirect calls are %s", calls)
    call = int(header_define(header, "SG_SHIM_CALL_OFFSET"), 16)
    check(call == calls[0][0], "SG_SHIM_CALL_OFFSET 0x%x, llvm-objdump: %s", call, calls)
    row = [r for r in rows if r[0] <= call < r[1]]
    check(len(row) == 1, "no single row at the call: %s", rows)
    row = row[0][2]
    check(row.startswith("CFA=x29+96 ") and " x29=[CFA-96]" in row and " x30=[CFA-88]" in row
          and " ra_sign_state=1" in row, "llvm-dwarfdump's row at the call: %s", row)
    for name, value in (("SG_UNWIND_CFA_REGISTER", "29"), ("SG_UNWIND_CFA_OFFSET", "96"),
                        ("SG_UNWIND_FP_OFFSET", "(-96)"), ("SG_UNWIND_RA_OFFSET", "(-88)"),
                        ("SG_UNWIND_RA_COLUMN", "30"), ("SG_UNWIND_FP_REGISTER", "29"),
                        ("SG_UNWIND_DATA_ALIGN", "(-4)"), ("SG_UNWIND_CODE_ALIGN", "1"),
                        ("SG_TARGET_ELF_MACHINE", "183"), ("SG_UNWIND_RA_SIGNED", "1"),
                        ("SG_TARGET_LANDING_PADS", "1")):
        check(header_define(header, name) == value, "%s is %s, want %s", name,
              header_define(header, name), value)
    m = re.search(r"/\* The row at the call as CFA instructions, for executor FDEs:\n"
                  r" \*   (.*)\n \*/\nstatic const uint8_t sg_executor_cfi\[", header)
    check(m and m.group(1) == row, "executor row %s, llvm-dwarfdump at +0x%x: %s",
          m and m.group(1), call, row)
    commented = re.search(r"its rows:\n((?: \*   shim\+0x[0-9a-f]+: .*\n)+) \*/", header)
    check(commented, "no row list above sg_shim_fde_insns")
    commented = [(int(o, 16), r) for o, r in
                 re.findall(r"shim\+0x([0-9a-f]+): (.*)", commented.group(1))]
    check(commented == [(lo, r) for lo, _, r in rows], "header rows %s\nllvm-dwarfdump: %s",
          commented, rows)
    p = ctx.generator("dump", "--manifest", manifest, "--target", A64, timeout=T)
    check(p.returncode == 0, "dump exited %d:\n%s", p.returncode, p.stderr[-3000:])
    check(re.search(r"^  CFI rows of the shim \(code_align 1, data_align -4, return address in "
                    r"x30\):$", p.stdout, re.M), "dump lacks the CFI rows heading")
    dumped = [(int(a, 16), int(b, 16), r) for a, b, r in
              re.findall(r"^    0x([0-9a-f]+)-0x([0-9a-f]+): (CFA=.*)$", p.stdout, re.M)]
    check(dumped == rows, "dump rows %s\nllvm-dwarfdump: %s", dumped, rows)
    check(re.search(r"^  frame shape: CFA=x29\+96, x29 saved at CFA-96, return address at "
                    r"CFA-88$", p.stdout, re.M), "dump lacks the frame shape line")


def test_aarch64_headers_compile_as_c11(ctx):
    """Every target from one run; the dispatcher picks AArch64 for an AArch64
    compile (gcc cross compiler, when installed, and clang-22)."""
    out = os.path.join(ctx.tmp, "out")
    p = ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out, timeout=T)
    lines = p.stdout.splitlines()
    check(len(lines) == len(BUNDLED_TRIPLES) and lines[1].startswith("stencilgen: %s: %d ops" % (A64, BUNDLED_OPS)),
          "summary: %s", p.stdout)
    disp = read(os.path.join(out, "jit_stencils.h"))
    check("#elif defined(__aarch64__) && defined(__linux__)\n#include \"jit_stencils-%s.h\"" % A64
          in disp, "dispatcher:\n%s", disp)
    src = os.path.join(ctx.tmp, "use.c")
    write(src, """#include "jit_stencils.h"
#ifndef __aarch64__
#error "not an AArch64 compile"
#endif
_Static_assert(SG_TARGET_ELF_MACHINE == 183, "EM_AARCH64");
_Static_assert(SG_UNWIND_RA_COLUMN == 30, "x30");
size_t total(void);
size_t total(void)
{
    size_t n = sg_shim.code_size;
    for (int i = 0; i < SG_OP__COUNT; i++)
        n += sg_stencils[i].code_size + sg_stencils[i].code_hole_count;
    return n + sizeof sg_executor_cfi;
}
""")
    compilers = [["clang-22", "--target=%s" % A64, "-ffreestanding"]]
    if shutil.which("aarch64-linux-gnu-gcc"):
        compilers.append(["aarch64-linux-gnu-gcc"])
    for cc in compilers:
        ctx.run(cc + ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", out,
                      "-I", ctx.path("runtime"), "-c", src, "-o", os.path.join(ctx.tmp, "use.o")],
                check=True, timeout=T)
