"""Windows x64 (x86_64-w64-windows-gnu, COFF) on the generator's side.

Patching differential: for every COFF relocation kind stencilgen reads
(tests/fixtures/coff/ops.c: ADDR64 in code and in data, ADDR32, REL32 to data
with addends, REL32 calls, jumps and conditional jumps), the bytes the
generated emitters patch (tests/patch/emit_diff.c, run on this machine) equal
what lld-link-22 links from the op's own object at the same address, with the
same values given as absolute symbols; the trailing jump the generator removed
lands, in lld-link's image, exactly after the stencil.

Refusals: relocations stencilgen cannot patch (a section-relative or
image-relative one in an op) name the op, section, offset and instruction;
a Windows shim without a frame register, or one whose frame is not the
pinned one, fails the build like an ELF shim does.
"""
import os
import re
import struct

from sgtest import check, for_targets, pe_sections, read, write

ASAN = True  # the COFF reader and the UNWIND_INFO replay in the sanitized generator too

TRIPLE = "x86_64-w64-windows-gnu"


class CoffTarget:
    def __init__(self, name, triple):
        self.name, self.triple = name, triple


COFF_TARGETS = (CoffTarget("mingw", TRIPLE), CoffTarget("msvc", "x86_64-pc-windows-msvc"))
LLD_LINK = "lld-link-22"
FIXTURE = ("tests", "fixtures", "coff", "coff.yaml")
IMAGE_BASE = 0x10000000
# Run-time symbols in reach of the image's code (the emitters' veneers are
# the runtime's business; lld-link has none).
SYMBOLS = {"vm_call": 0x30000000, "vm_print": 0x30000040, "vm_native": 0x30000080,
           "vm_trap": 0x300000C0}
# COFF symbol values are 32 bits: operands given to lld-link as absolute
# symbols are too.
OPERANDS = [0x07654321, 0x89ABCDEF, 0x00000123, 0x00000456]


def build_fixture(ctx, triple=TRIPLE):
    out = os.path.join(ctx.tmp, "out")
    ops = os.path.join(os.path.dirname(ctx.path(*FIXTURE)), "ops.c")
    manifest = ctx.fixture_manifest(ctx.path(*FIXTURE), os.path.join(ctx.tmp, "coff.yaml"),
                                    ("triple: %s" % TRIPLE, "triple: %s" % triple),
                                    ("  - ops.c", "  - " + ops))
    # Per-op units keep each op's own object, which lld-link links.
    ctx.build_stencils(manifest, out, "--units", "per-op", timeout=300)
    return out


def compile_emitter(ctx, out, triple=TRIPLE):
    exe = os.path.join(ctx.tmp, "emit_diff")
    ctx.run(["clang-22", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror",
             '-DJIT_HEADER="jit_stencils-%s.h"' % triple, "-I", out, "-I", ctx.path("runtime"),
             ctx.path("tests", "patch", "emit_diff.c"), "-o", exe], check=True, timeout=300)
    return exe


def absolute_symbols(ctx, values):
    """An object defining each name as an absolute symbol of the given value."""
    src = os.path.join(ctx.tmp, "defs.s")
    write(src, "".join(".globl %s\n.set %s, 0x%x\n" % (n, n, v) for n, v in values.items()))
    obj = os.path.join(ctx.tmp, "defs.o")
    ctx.run(["clang-22", "--target=%s" % TRIPLE, "-c", src, "-o", obj], check=True, timeout=60)
    return obj


def link(ctx, name, obj, values):
    """lld-link's image of the op's object with the hole symbols at `values`."""
    exe = os.path.join(ctx.tmp, "%s.exe" % name)
    p = ctx.run([LLD_LINK, "/out:" + exe, "/base:0x%x" % IMAGE_BASE, "/entry:_JIT_ENTRY",
                 "/subsystem:console", "/nodefaultlib", "/dynamicbase:no", "/fixed", obj,
                 absolute_symbols(ctx, values)], timeout=120)
    check(p.returncode == 0, "%s: lld-link failed:\n%s%s", name, p.stdout, p.stderr)
    return pe_sections(read(exe, "rb"))


@for_targets(*COFF_TARGETS)
def patched_bytes_equal_lld_link(ctx, triple):
    """Each op of the fixture, for MinGW-w64's triple and for MSVC's."""
    out = build_fixture(ctx, triple.triple)
    emitter = compile_emitter(ctx, out, triple.triple)
    stencils = [l.split() for l in ctx.run([emitter, "list"], check=True).stdout.splitlines()]
    objdir = os.path.join(out, ".stencilgen", triple.triple)
    problems, kinds = [], set()
    header = read(os.path.join(out, "jit_stencils-%s.h" % triple.triple))
    for index, name, code_size, data_size, falls in stencils:
        code_size, data_size = int(code_size), int(data_size)
        # The image's layout fixes the addresses: .text at base + 0x1000,
        # .rdata on the next page. Link once to learn them, then again with
        # the continuation right after the code.
        code_at = IMAGE_BASE + 0x1000
        values = dict(SYMBOLS, _JIT_CONTINUE=code_at + code_size, _JIT_JUMP_TARGET=code_at + 0x800,
                      **{"_JIT_OPERAND%d" % i: v for i, v in enumerate(OPERANDS)})
        secs = link(ctx, name, os.path.join(objdir, "op_%s.o" % name), values)
        text_at, text = secs[".text"]
        data_at, data = secs.get(".rdata", (text_at + 0x1000, b""))
        check(text_at == code_at, "%s: .text at 0x%x, not 0x%x", name, text_at, code_at)
        # COFF stencils have no GOT holes: the emitter's GOT goes past the data.
        got_at = (data_at + data_size + 0x1000) & ~0xfff
        args = [emitter, "emit", index, "%x" % code_at, "%x" % data_at, "%x" % got_at,
                "%x" % (code_at + 0x800)]
        args += ["%x" % v for v in OPERANDS] + ["%x" % v for v in SYMBOLS.values()]
        p = ctx.run(args)
        if p.returncode != 0:
            problems.append("%s: the emitter failed: %s%s" % (name, p.stdout, p.stderr))
            continue
        got = dict(l.split(" ", 1) if " " in l else (l, "") for l in p.stdout.splitlines())
        if got["code"] != text[:code_size].hex():
            problems.append("%s: code\n  emitter  %s\n  lld-link %s" % (
                name, got["code"], text[:code_size].hex()))
        if got["data"] != data[:data_size].hex():
            problems.append("%s: data\n  emitter  %s\n  lld-link %s" % (
                name, got["data"], data[:data_size].hex()))
        # The jump the generator removed goes, in lld-link's image, to where it
        # stands: right after the stencil, where the next one is placed.
        tail = text[code_size:code_size + 5]
        if falls == "1" and len(text) > code_size and tail != b"\xe9\xfb\xff\xff\xff":
            problems.append("%s: falls through, but lld-link's code goes on with %s, not a jump "
                            "to right after the stencil" % (name, tail.hex()))
        section = header[header.index("/* %s - " % name):]
        kinds |= set(re.findall(r"hole \+0x[0-9a-f]+: (\w+) <- ([A-Z_]+[A-Z])",
                                section[:section.index("static const")]))
    check(not problems, "patched bytes differ from lld-link's:\n%s", "\n".join(problems))
    # The fixture covers every kind the COFF reader produces, in code and data.
    want = {("ABS64", "OPERAND"), ("ABS64", "DATA"), ("ABS64", "SYMBOL"), ("ABS32", "OPERAND"),
            ("PCREL32", "DATA"), ("X86_BRANCH32", "SYMBOL"), ("X86_BRANCH32", "CONTINUE"),
            ("X86_BRANCH32", "JUMP_TARGET")}
    check(want <= kinds, "kinds not covered by the fixture: %s", sorted(want - kinds))


def fixture_copy(ctx, ops_text, **manifest_changes):
    """The fixture's manifest with one op file, in a private directory."""
    base = os.path.join(ctx.tmp, "proj")
    os.makedirs(base, exist_ok=True)
    write(os.path.join(base, "ops.c"), ops_text)
    under = "  - triple: %s\n" % TRIPLE
    return ctx.fixture_manifest(ctx.path(*FIXTURE), os.path.join(base, "m.yaml"),
                                *[(under, under + "    %s: %s\n" % (key, value))
                                  for key, value in manifest_changes.items()])


def test_unpatchable_relocations_are_refused_by_name(ctx):
    cases = [
        ("section-relative", ".secrel32", "IMAGE_REL_AMD64_SECREL"),
        ("image-relative", ".rva", "IMAGE_REL_AMD64_ADDR32NB"),
    ]
    for what, directive, reloc in cases:
        ops = ("static const int table[2] = {1, 2};\n"
               "OP(odd)\n{\n    __asm__ volatile(\"jmp 1f\\n\\t%s table\\n1:\" :: \"X\"(table));\n"
               "    CONTINUE();\n}\n" % directive)
        out = os.path.join(ctx.tmp, "out-" + what)
        p = ctx.build_stencils(fixture_copy(ctx, ops), out, check=False, timeout=300)
        check(p.returncode == 1, "%s: expected exit 1: %d\n%s", what, p.returncode, p.stderr)
        m = re.search(r"op odd \(%s\).*unsupported relocation %s \(type \d+\) in \.text\S* at "
                      r"offset 0x[0-9a-f]+ against 'table' \(instruction at \+0x[0-9a-f]+: " %
                      (TRIPLE, reloc), p.stderr)
        check(m, "%s: the error does not name op, relocation, section, offset and "
                 "instruction:\n%s", what, p.stderr)
        check(not os.path.exists(os.path.join(out, "jit_stencils.h")),
              "%s: a header was written", what)


def test_windows_shim_frame_is_checked_and_pinned(ctx):
    ops = "OP(nop)\n{\n    CONTINUE();\n}\n"
    # Without a frame pointer the Windows x64 shim has no frame register: its
    # CFA is rsp-based at the call into JIT code.
    out = os.path.join(ctx.tmp, "out-fp")
    p = ctx.build_stencils(fixture_copy(ctx, ops, shim_cflags="[-fomit-frame-pointer]"), out,
                           check=False, timeout=300)
    check(p.returncode == 1 and "is not frame-pointer based at the call into JIT code" in p.stderr
          and "CFA=rsp+" in p.stderr, "no frame register: want exit 1 naming the rule, got %d:\n%s",
          p.returncode, p.stderr)
    # The shape derived from the UNWIND_INFO is what expect_frame pins.
    good = "{cfa_register: rbp, cfa_offset: 112, fp_offset: -16, ra_offset: -8}"
    p = ctx.build_stencils(fixture_copy(ctx, ops, expect_frame=good),
                           os.path.join(ctx.tmp, "out-good"), check=False, timeout=300)
    check(p.returncode == 0, "the bundled shim's shape was refused:\n%s", p.stderr)
    bad = good.replace("112", "120")
    p = ctx.build_stencils(fixture_copy(ctx, ops, expect_frame=bad),
                           os.path.join(ctx.tmp, "out-bad"), check=False, timeout=300)
    check(p.returncode == 1 and "expect_frame" in p.stderr and "112" in p.stderr,
          "a wrong expect_frame: want exit 1 naming the found offset, got %d:\n%s", p.returncode,
          p.stderr)
