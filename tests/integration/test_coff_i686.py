"""32-bit Windows (i686-pc-windows-msvc, COFF) on the generator's side.

Patching differential (test_patched_bytes_equal_lld_link): for every 32-bit
x86 COFF relocation kind clang emits in stencils (tests/fixtures/coff_i686/
ops.c: DIR32 in code, with and without addends, and in data to the op's data
and to a symbol; an operand as a DIR32 immediate; REL32 after E8, E9 and
0F 8x to a symbol, the continuation and the jump target), the bytes the
generated emitters patch (tests/patch/emit_diff.c, run on this machine)
equal what lld-link-22 links from the op's own object at the same address,
with the same values as absolute symbols under the object's own names
(C's underscore, regcall's __regcall3__), which the test strips on its own
to match them to the header's holes.

The ebp chain: 32-bit Windows has no unwind tables; the rows the generator
reads from the shim's prolog (the header's comment) equal, at every prolog
instruction, the frame llvm-objdump-22's disassembly of those instructions
builds, and at the call into JIT code the frame is CFA = ebp + 8 with ebp
and the return address under it. A shim without push ebp; mov ebp, esp, and
one that writes ebp between its prolog and its call, fail the build by
name; so does a relocation stencilgen cannot patch (a section-relative one).
"""
import os
import re
import time

from sgtest import Header, check, pe_sections, read, write

ASAN = True  # the 32-bit COFF reader and the prolog replay in the sanitized generator too

TRIPLE = "i686-pc-windows-msvc"
LLD_LINK = "lld-link-22"
FIXTURE = ("tests", "fixtures", "coff_i686", "coff_i686.yaml")
IMAGE_BASE = 0x10000000
CODE_AT = IMAGE_BASE + 0x1000
SYMBOLS = {"vm_call": 0x30000000, "vm_print": 0x30000040, "vm_native": 0x30000080,
           "vm_trap": 0x300000C0}
OPERANDS = [0x07654321, 0x89ABCDEF, 0x00000123, 0x00000456]


def build(ctx, name, ops=None, shim_source=None, **target_keys):
    """The fixture built for the triple (sgtest's build_fixture), with
    `shim_source` (C text defining tinyvm_shim) in place of tinyvm's shim."""
    shim = None
    if shim_source:
        shim = os.path.join(ctx.tmp, name + "-shim.c")
        write(shim, shim_source)
    return ctx.build_fixture(FIXTURE, TRIPLE, name, ops, shim, **target_keys)


def c_name(symbol):
    """C's name of a 32-bit COFF symbol: no underscore, no regcall prefix."""
    name = symbol[1:] if symbol.startswith("_") else symbol
    return name[len("__regcall3__"):] if name.startswith("__regcall3__") else name


def object_symbols(ctx, obj):
    """{C name: object name} of the object's undefined symbols, and its entry's name."""
    p = ctx.run(["llvm-nm-22", obj], check=True, timeout=60)
    undefined, entry = {}, None
    for line in p.stdout.splitlines():
        f = line.split()
        if f[-2] == "U":
            undefined[c_name(f[-1])] = f[-1]
        elif c_name(f[-1]) == "_JIT_ENTRY":
            entry = f[-1]
    return undefined, entry


def link(ctx, name, obj, values):
    """lld-link's image of the op's object with its symbols at `values` (by C name)."""
    undefined, entry = object_symbols(ctx, obj)
    src = os.path.join(ctx.tmp, "defs.s")
    write(src, "".join(".globl %s\n.set %s, 0x%x\n" % (n, n, values[c]) for c, n in
                       undefined.items()))
    defs = os.path.join(ctx.tmp, "defs.o")
    ctx.run(["clang-22", "--target=%s" % TRIPLE, "-c", src, "-o", defs], check=True, timeout=60)
    exe = os.path.join(ctx.tmp, "%s.exe" % name)
    p = ctx.run([LLD_LINK, "/machine:x86", "/out:" + exe, "/base:0x%x" % IMAGE_BASE,
                 "/entry:" + entry[1:], "/subsystem:console", "/nodefaultlib",
                 "/dynamicbase:no", "/fixed", "/safeseh:no", obj, defs], timeout=120)
    check(p.returncode == 0, "%s: lld-link failed:\n%s%s", name, p.stdout, p.stderr)
    return pe_sections(read(exe, "rb"))


def test_patched_bytes_equal_lld_link(ctx):
    out, p = build(ctx, "out")
    check(p.returncode == 0, "the fixture did not build:\n%s", p.stderr)
    exe = os.path.join(ctx.tmp, "emit_diff")
    ctx.run(["clang-22", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror",
             '-DJIT_HEADER="jit_stencils-%s.h"' % TRIPLE, "-I", out, "-I", ctx.path("runtime"),
             ctx.path("tests", "patch", "emit_diff.c"), "-o", exe], check=True, timeout=300)
    header = Header(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
    stencils = [l.split() for l in ctx.run([exe, "list"], check=True).stdout.splitlines()]
    objdir = os.path.join(out, ".stencilgen", TRIPLE)
    problems, kinds = [], set()
    for index, name, code_size, data_size, falls in stencils:
        code_size, data_size = int(code_size), int(data_size)
        values = dict(SYMBOLS, _JIT_CONTINUE=CODE_AT + code_size, _JIT_JUMP_TARGET=CODE_AT + 0x800,
                      **{"_JIT_OPERAND%d" % i: v for i, v in enumerate(OPERANDS)})
        secs = link(ctx, name, os.path.join(objdir, "op_%s.o" % name), values)
        text_at, text = secs[".text"]
        data_at, data = secs.get(".rdata", (text_at + 0x1000, b""))
        check(text_at == CODE_AT, "%s: .text at 0x%x, not 0x%x", name, text_at, CODE_AT)
        got_at = (data_at + data_size + 0x1000) & ~0xfff
        p = ctx.run([exe, "emit", index, "%x" % CODE_AT, "%x" % data_at, "%x" % got_at,
                     "%x" % (CODE_AT + 0x800)] + ["%x" % v for v in OPERANDS] +
                    ["%x" % v for v in SYMBOLS.values()], timeout=60)
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
        # The removed jump goes, in lld-link's image, to where it stands: right
        # after the stencil, where the next one is placed.
        tail = text[code_size:code_size + 5]
        if falls == "1" and len(text) > code_size and tail != b"\xe9\xfb\xff\xff\xff":
            problems.append("%s: falls through, but lld-link's code goes on with %s" % (
                name, tail.hex()))
        kinds |= {(h["patch"], h["value"])
                  for h in header.code_holes(name) + header.data_holes(name)}
    check(not problems, "patched bytes differ from lld-link's:\n%s", "\n".join(problems))
    want = {("ABS32", "DATA"), ("ABS32", "SYMBOL"), ("ABS32", "OPERAND"),
            ("X86_BRANCH32", "SYMBOL"), ("X86_BRANCH32", "CONTINUE"),
            ("X86_BRANCH32", "JUMP_TARGET")}
    check(want <= kinds, "kinds not covered by the fixture: %s", sorted(want - kinds))


# --- the ebp chain ------------------------------------------------------------

DWARF = {"eax": 0, "ecx": 1, "edx": 2, "ebx": 3, "esp": 4, "ebp": 5, "esi": 6, "edi": 7}
NAMES = {v: k for k, v in DWARF.items()}


def prolog_rows(insns):
    """{offset: row} the instructions build while they are prolog ones
    (push, mov %esp, %ebp, sub $n, %esp), written as the generator writes rows."""
    depth, cfa, saved = 4, "esp", {8: -4}
    rows = {}

    def row():
        parts = ["CFA=%s+%d" % (cfa, 8 if cfa == "ebp" else depth)]
        parts += ["%s=[CFA-%d]" % (NAMES.get(r, "eip"), -v) for r, v in sorted(saved.items())]
        return " ".join(parts)

    rows[insns[0][0]] = row()
    for off, size, text in insns:
        m = re.match(r"pushl %(\w+)$", text)
        if m and m.group(1) in DWARF and m.group(1) != "esp":
            depth += 4
            saved[DWARF[m.group(1)]] = -depth
        elif text == "movl %esp, %ebp":
            cfa = "ebp"
        elif re.match(r"subl \$(0x[0-9a-f]+|\d+), %esp$", text):
            depth += int(re.match(r"subl \$(\S+),", text).group(1), 0)
        else:
            break
        rows[off + size] = row()
    return rows


def disassembly(ctx, obj):
    """[(offset, size, text)] of the object's code, AT&T syntax as llvm-objdump-22 prints it."""
    p = ctx.run(["llvm-objdump-22", "-d", obj], check=True, timeout=60)
    out = []
    for off, raw, text in re.findall(r"^\s+([0-9a-f]+):\s+((?:[0-9a-f]{2} )+)\s*(.*)$",
                                     p.stdout, re.M):
        out.append((int(off, 16), len(raw.split()), " ".join(text.split())))
    return out


def header_rows(text):
    block = text[text.index("The shim's prolog, replayed; its rows:"):]
    block = block[:block.index("*/")]
    return {int(o, 16): r for o, r in re.findall(r"shim\+0x([0-9a-f]+): (.*)", block)}


SHIMS = {
    "tinyvm": None,
    # values live across the call: ebx, esi and edi pushed, and locals
    "saves": "vm_value tinyvm_shim(vm_frame *frame, vm_value *sp, stencil_fn *code);\n"
             "vm_value tinyvm_shim(vm_frame *frame, vm_value *sp, stencil_fn *code)\n{\n"
             "    volatile vm_value keep[20];\n    keep[0] = *sp;\n"
             "    vm_value r = code(TINYVM_ENTRY_ARGS(frame, (vm_value *)keep));\n"
             "    return r + keep[1] + *sp + (vm_value)(uintptr_t)frame;\n}\n",
}


def test_shim_rows_follow_its_prolog(ctx):
    problems = []
    for name, source in sorted(SHIMS.items()):
        out, p = build(ctx, "shim-" + name, shim_source=source)
        check(p.returncode == 0, "%s: did not build:\n%s", name, p.stderr)
        text = read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
        rows = header_rows(text)
        want = prolog_rows(disassembly(ctx, os.path.join(out, ".stencilgen", TRIPLE, "shim.o")))
        if rows != want:
            problems.append("%s: the header's rows\n  %s\nthe instructions'\n  %s" % (
                name, "\n  ".join("0x%x %s" % kv for kv in sorted(rows.items())),
                "\n  ".join("0x%x %s" % kv for kv in sorted(want.items()))))
        for macro, value in (("SG_UNWIND_FP_CHAIN", "1"), ("SG_UNWIND_CFA_REGISTER", "5"),
                             ("SG_UNWIND_CFA_OFFSET", "8"), ("SG_UNWIND_FP_OFFSET", "(-8)"),
                             ("SG_UNWIND_RA_OFFSET", "(-4)")):
            if not re.search(r"^#define %s %s(?=\s)" % (macro, re.escape(value)), text, re.M):
                problems.append("%s: no #define %s %s" % (name, macro, value))
    check(not problems, "\n".join(problems))


def test_shim_off_the_chain_is_refused(ctx):
    out, p = build(ctx, "nofp", shim_cflags="[-fomit-frame-pointer]")
    check(p.returncode == 1 and "does not start with push ebp; mov ebp, esp" in p.stderr
          and TRIPLE in p.stderr, "no frame pointer: want exit 1 naming the prolog, got %d:\n%s",
          p.returncode, p.stderr)
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")
    source = SHIMS["saves"].replace("    vm_value r = code(",
                                    "    __asm__ volatile(\"xchgl %%ebp, %%ebp\" ::: \"memory\");\n"
                                    "    vm_value r = code(")
    out, p = build(ctx, "ebp-written", shim_source=source)
    check(p.returncode == 1 and "writes ebp between the shim's prolog and its call" in p.stderr
          and "xchgl" in p.stderr, "ebp written: want exit 1 naming the instruction, got %d:\n%s",
          p.returncode, p.stderr)


def test_section_relative_relocation_is_refused_by_name(ctx):
    ops = ("static const int table[2] = {1, 2};\n"
           "OP(odd)\n{\n    __asm__ volatile(\"jmp 1f\\n\\t.secrel32 _table\\n1:\" :: \"X\"(table));\n"
           "    CONTINUE();\n}\n")
    out, p = build(ctx, "secrel", ops=ops)
    check(p.returncode == 1, "expected exit 1: %d\n%s", p.returncode, p.stderr)
    check(re.search(r"op odd \(%s\).*unsupported relocation IMAGE_REL_I386_SECREL \(type \d+\) "
                    r"in \.text\S* at offset 0x[0-9a-f]+ against 'table'" % TRIPLE, p.stderr),
          "the error does not name op, relocation, section, offset and symbol:\n%s", p.stderr)
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")


def test_tinyvm_bundled_ops_build(ctx):
    """tinyvm's bundled ops, shim and frame on this triple (and on ARM64
    Windows): every op builds, and div and mod divide without the C library's
    _alldiv and _allrem, which are no run-time symbols (stencils/ops/arith.c)."""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    text = read(manifest)
    targets = ("targets:\n  - triple: %s\n"
               "    expect_frame: {cfa_register: ebp, cfa_offset: 8, fp_offset: -8, ra_offset: -4}\n"
               "  - triple: aarch64-pc-windows-msvc\n"
               "    expect_frame: {cfa_register: x29, cfa_offset: 80, fp_offset: -80, "
               "ra_offset: -72}\n\n" % TRIPLE)
    write(manifest, re.sub(r"(?ms)^targets:\n.*?^(?=template:)", targets, text))
    out = os.path.join(ctx.tmp, "bundled")
    p = ctx.build_stencils(manifest, out, check=False, timeout=300)
    check(p.returncode == 0, "tinyvm's bundled ops did not build:\n%s", p.stderr[-3000:])
    for triple in (TRIPLE, "aarch64-pc-windows-msvc"):
        check(re.search(r"^stencilgen: %s: 22 ops \(22 compiled" % triple, p.stdout, re.M),
              "no summary of 22 ops for %s:\n%s", triple, p.stdout)
    header = read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
    check("_alldiv" not in header and "_allrem" not in header, "a helper of the C library is called")


def test_msvc_objects_do_not_depend_on_the_time(ctx):
    """MSVC's environment writes the compile's time into a COFF header (for
    incremental linking) unless told not to: the same build a second later
    leaves byte-identical objects, for each of its three triples."""
    fixtures = {TRIPLE: FIXTURE,
                "aarch64-pc-windows-msvc": ("tests", "fixtures", "coff_arm64", "coff_arm64.yaml"),
                "x86_64-pc-windows-msvc": ("tests", "fixtures", "coff", "coff.yaml")}
    for triple, fixture in sorted(fixtures.items()):
        here = os.path.dirname(ctx.path(*fixture))
        manifest = ctx.fixture_manifest(
            ctx.path(*fixture), os.path.join(ctx.tmp, triple + ".yaml"),
            ("  - ops.c", "  - " + os.path.join(here, "ops.c")),
            ("triple: x86_64-w64-windows-gnu", "triple: " + triple))
        objects = []
        for run in ("first", "second"):
            out = os.path.join(ctx.tmp, "%s-%s" % (triple, run))
            p = ctx.build_stencils(manifest, out, "--units", "per-op", check=False, timeout=300)
            check(p.returncode == 0, "%s: did not build:\n%s", triple, p.stderr[-2000:])
            objdir = os.path.join(out, ".stencilgen", triple)
            objects.append({n: read(os.path.join(objdir, n), "rb")
                            for n in sorted(os.listdir(objdir)) if n.endswith(".o")})
            time.sleep(1.1)
        check(objects[0] and objects[0].keys() == objects[1].keys(), "%s: objects %s and %s",
              triple, sorted(objects[0]), sorted(objects[1]))
        changed = [n for n in objects[0] if objects[0][n] != objects[1][n]]
        check(not changed, "%s: objects differ a second later: %s", triple, changed)
