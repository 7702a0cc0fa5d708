"""Windows on ARM64 (aarch64-pc-windows-msvc, COFF) on the generator's side.

No Windows on ARM64 runs here, so the stencils and the unwind facts are
proven against independent readers of the same objects:

Patching differential (test_patched_bytes_equal_lld_link): for every ARM64
COFF relocation kind clang emits in stencils (tests/fixtures/coff_arm64/ops.c:
BRANCH26 to the continuation, the jump target and a run-time symbol,
PAGEBASE_REL21 with and without addends, PAGEOFFSET_12A, PAGEOFFSET_12L on
ldr x, ldrsh and ldrb with scaled addends, ADDR64 in data to the op's data
and to a symbol, and an operand's dllimport load through its import slot),
the bytes the generated emitters patch (tests/patch/emit_diff.c, run on this
machine) equal what lld-link-22 links from the op's own object at the same
address, with the same values as absolute symbols. An import-slot load is
compared by what it loads: the emitter's GOT slot and lld-link's local
import pointer hold the same value; every other bit of the code, and all the
data, byte for byte.

Unwind facts: the rows the generator derives from the shim's .pdata/.xdata
(the header's comment) equal, at every prolog instruction, the frame the
shim's own instructions (llvm-objdump-22's disassembly) build, for tinyvm's
shim and four shapes of tests/fixtures/coff_arm64/shims.c, one of them
packed; llvm-readobj-22 reads the same form (packed or not) the header
states; the executors' record, placed in an object, is read back by
llvm-readobj-22 as end_c followed by the shim's prolog codes. Packed words:
for 60 words over the fields' ranges, the rows test_arm64_unwind prints
equal those of the prolog llvm-readobj-22 synthesizes from the same word.

Refusals: a shim without a frame record, and a relocation stencilgen cannot
patch (a section-relative one), fail the build by name.
"""
import os
import re
import struct

from sgtest import Header, check, got_reach, masked, pe_sections, read, write

ASAN = True  # the ARM64 COFF reader and unwind decoder in the sanitized generator too

TRIPLE = "aarch64-pc-windows-msvc"
LLD_LINK = "lld-link-22"
FIXTURE = ("tests", "fixtures", "coff_arm64", "coff_arm64.yaml")
IMAGE_BASE = 0x10000000
CODE_AT = IMAGE_BASE + 0x1000
SYMBOLS = {"vm_call": 0x10400000, "vm_print": 0x10400040, "vm_native": 0x10400080,
           "vm_trap": 0x104000C0}
OPERANDS = [0x07654321, 0x89ABCDEF, 0x00000123, 0x00000456]


def build(ctx, name, shim=None, ops=None, **target_keys):
    """The fixture built for the triple (sgtest's build_fixture), with `shim`,
    a function of shims.c, in place of tinyvm's when given."""
    return ctx.build_fixture(FIXTURE, TRIPLE, name, ops,
                             shim and os.path.join(os.path.dirname(ctx.path(*FIXTURE)),
                                                   "shims.c"), shim, **target_keys)


def header_path(out):
    return os.path.join(out, "jit_stencils-%s.h" % TRIPLE)


# --- the patching differential ---------------------------------------------

def absolute_symbols(ctx, values):
    src = os.path.join(ctx.tmp, "defs.s")
    write(src, "".join(".globl %s\n.set %s, 0x%x\n" % (n, n, v) for n, v in values.items()))
    obj = os.path.join(ctx.tmp, "defs.o")
    ctx.run(["clang-22", "--target=%s" % TRIPLE, "-c", src, "-o", obj], check=True, timeout=60)
    return obj


def link(ctx, name, obj, values):
    """lld-link's image of the op's object; a dllimport operand gets a local
    import pointer (lld-link warns that it is defined locally)."""
    exe = os.path.join(ctx.tmp, "%s.exe" % name)
    p = ctx.run([LLD_LINK, "/machine:arm64", "/out:" + exe, "/base:0x%x" % IMAGE_BASE,
                 "/entry:_JIT_ENTRY", "/subsystem:console", "/nodefaultlib", obj,
                 absolute_symbols(ctx, values)], timeout=120)
    check(p.returncode == 0, "%s: lld-link failed:\n%s%s", name, p.stdout, p.stderr)
    return pe_sections(read(exe, "rb"))


def test_patched_bytes_equal_lld_link(ctx):
    out, p = build(ctx, "out")
    check(p.returncode == 0, "the fixture did not build:\n%s", p.stderr)
    exe = os.path.join(ctx.tmp, "emit_diff")
    ctx.run(["clang-22", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror",
             '-DJIT_HEADER="jit_stencils-%s.h"' % TRIPLE, "-I", out, "-I", ctx.path("runtime"),
             ctx.path("tests", "patch", "emit_diff.c"), "-o", exe], check=True, timeout=300)
    header = Header(header_path(out))
    stencils = [l.split() for l in ctx.run([exe, "list"], check=True).stdout.splitlines()]
    objdir = os.path.join(out, ".stencilgen", TRIPLE)
    problems, kinds = [], set()
    for index, name, code_size, data_size, falls in stencils:
        code_size, data_size = int(code_size), int(data_size)
        holes = header.code_holes(name)
        values = dict(SYMBOLS, _JIT_CONTINUE=CODE_AT + code_size, _JIT_JUMP_TARGET=CODE_AT + 0x800,
                      **{"_JIT_OPERAND%d" % i: v for i, v in enumerate(OPERANDS)})
        secs = link(ctx, name, os.path.join(objdir, "op_%s.o" % name), values)
        text_at, text = secs[".text"]
        data_at, rdata = secs.get(".rdata", (text_at + 0x1000, b""))
        check(text_at == CODE_AT, "%s: .text at 0x%x, not 0x%x", name, text_at, CODE_AT)
        got_at = (data_at + len(rdata) + 0x1000) & ~0xfff
        p = ctx.run([exe, "emit", index, "%x" % CODE_AT, "%x" % data_at, "%x" % got_at,
                     "%x" % (CODE_AT + 0x800)] + ["%x" % v for v in OPERANDS] +
                    ["%x" % v for v in SYMBOLS.values()], timeout=60)
        if p.returncode != 0:
            problems.append("%s: the emitter failed: %s%s" % (name, p.stdout, p.stderr))
            continue
        got = dict(l.split(" ", 1) if " " in l else (l, "") for l in p.stdout.splitlines())
        code, data = bytes.fromhex(got["code"]), bytes.fromhex(got["data"])
        slots = bytes.fromhex(got["got"])
        emit_reach, emit_owned = got_reach(code, CODE_AT, holes)
        lld_reach, lld_owned = got_reach(text[:code_size], CODE_AT, holes)
        if masked(code, emit_owned, lld_owned) != masked(text[:code_size], emit_owned, lld_owned):
            problems.append("%s: code\n  emitter  %s\n  lld-link %s" % (name, code.hex(),
                                                                      text[:code_size].hex()))
        if data != rdata[:data_size]:
            problems.append("%s: data\n  emitter  %s\n  lld-link %s" % (name, data.hex(),
                                                                      rdata[:data_size].hex()))
        for h in holes:
            if h["offset"] not in emit_reach or h["patch"] != "AARCH64_GOT_LO12":
                continue
            want = OPERANDS[h["index"]]
            lld_slot = lld_reach[h["offset"]][0]
            at = None if lld_slot is None else lld_slot - data_at
            theirs = (struct.unpack_from("<Q", rdata, at)[0]
                      if at is not None and data_size <= at <= len(rdata) - 8 else None)
            k = None if emit_reach[h["offset"]][0] is None else emit_reach[h["offset"]][0] - got_at
            ours = (struct.unpack_from("<Q", slots, k)[0]
                    if k is not None and 0 <= k <= len(slots) - 8 else None)
            if not (theirs == ours == want):
                problems.append("%s: the load at +0x%x reads %s from lld-link's import pointer "
                                "and %s from the emitter's slot, want 0x%x" % (
                                    name, h["offset"], theirs, ours, want))
        # The jump the generator removed goes, in lld-link's image, to right
        # after the stencil: b .+0.
        if falls == "1" and text[code_size:code_size + 4] != b"\x00\x00\x00\x14":
            problems.append("%s: falls through, but lld-link's code goes on with %s" % (
                name, text[code_size:code_size + 4].hex()))
        kinds |= {(h["patch"], h["value"]) for h in holes + header.data_holes(name)}
    check(not problems, "patched bytes differ from lld-link's:\n%s", "\n".join(problems))
    want = {("AARCH64_BRANCH26", "CONTINUE"), ("AARCH64_BRANCH26", "JUMP_TARGET"),
            ("AARCH64_BRANCH26", "SYMBOL"), ("AARCH64_ADRP", "DATA"),
            ("AARCH64_ADD_LO12", "DATA"), ("AARCH64_LDST64_LO12", "DATA"),
            ("AARCH64_LDST16_LO12", "DATA"), ("AARCH64_LDST8_LO12", "DATA"),
            ("AARCH64_GOT_ADRP", "OPERAND"), ("AARCH64_GOT_LO12", "OPERAND"),
            ("ABS64", "DATA"), ("ABS64", "SYMBOL")}
    check(want <= kinds, "kinds not covered by the fixture: %s", sorted(want - kinds))


# --- the shim's unwind facts ---------------------------------------------------

REG = {"fp": 29, "lr": 30}


def reg_number(name):
    name = name.strip()
    if name in REG:
        return REG[name]
    if name[0] in "xw":
        return int(name[1:])
    if name[0] in "dq":
        return 64 + int(name[1:])
    raise AssertionError("register %r" % name)


def imm(text):
    m = re.match(r"#(-?(?:0x[0-9a-f]+|\d+))(?:, lsl #12)?$", text.strip())
    check(m, "immediate %r", text)
    v = int(m.group(1), 0)
    return v << 12 if "lsl #12" in text else v


class Frame:
    """The frame a prolog's instructions build, as the generator's rows
    write it: CFA = reg + k, each saved register at [CFA + n]."""

    def __init__(self):
        self.depth, self.cfa_reg, self.fp_at, self.saved = 0, "sp", None, {}

    def step(self, text):
        """Apply one instruction, as llvm-objdump-22 or llvm-readobj-22 prints it."""
        text = " ".join(text.split())
        op = text.split(" ")[0]
        if op in ("pacibsp", "paciasp", "nop"):
            return
        m = re.match(r"(stp|str) (\w+), (?:(\w+), )?\[sp(?:, (#[^\]]+))?\](!?)$", text)
        if m:
            off = imm(m.group(4)) if m.group(4) else 0
            if m.group(5):
                self.depth -= off
                off = 0
            regs = [m.group(2)] + ([m.group(3)] if m.group(3) else [])
            for k, r in enumerate(regs):
                n = reg_number(r)
                if n < 8 or 64 <= n < 72:
                    continue  # homed parameters: volatile, no unwind effect
                self.saved[n] = off + 8 * k - self.depth
            return
        m = re.match(r"sub sp, sp, (#.+)$", text)
        if m:
            self.depth += imm(m.group(1))
            return
        m = re.match(r"(?:mov|add) (?:x29|fp), sp(?:, (#.+))?$", text)
        if m:
            self.cfa_reg, self.fp_at = "x29", imm(m.group(1)) if m.group(1) else 0
            return
        raise AssertionError("prolog instruction %r" % text)

    def row(self):
        off = self.depth - (self.fp_at if self.cfa_reg == "x29" else 0)
        parts = ["CFA=%s+%d" % (self.cfa_reg, off)]
        for n in sorted(self.saved):
            name = "x%d" % n if n < 32 else "v%d" % (n - 64)
            v = self.saved[n]
            parts.append("%s=[CFA%s%d]" % (name, "+" if v >= 0 else "-", abs(v)))
        return " ".join(parts)


def header_rows(text):
    """{offset: row} of the header's comment of the shim's rows."""
    block = text[text.index("The shim's unwind data as an .xdata record; its rows:"):]
    block = block[:block.index("*/")]
    return {int(o, 16): r for o, r in re.findall(r"shim\+0x([0-9a-f]+): (.*)", block)}


def disassembly(ctx, obj, start, size):
    """[(offset, instruction text)] of the object's .text in [start, start + size)."""
    p = ctx.run(["llvm-objdump-22", "-d", "--no-show-raw-insn", obj], check=True, timeout=60)
    out = []
    for off, insn in re.findall(r"^\s+([0-9a-f]+):\s+(.+)$", p.stdout, re.M):
        if start <= int(off, 16) < start + size:
            out.append((int(off, 16), insn.split("//")[0].strip()))
    return out


def define(text, name):
    m = re.search(r"^#define %s (\S+)" % name, text, re.M)
    check(m, "no #define %s", name)
    return int(m.group(1).strip("()"), 0)


def unwind_array(text, name):
    m = re.search(r"static const uint8_t %s\[(\d+)\] = \{([^}]*)\};" % name, text)
    check(m, "no %s", name)
    data = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", m.group(2)))
    check(len(data) == int(m.group(1)), "%s: declared %s bytes, has %d", name, m.group(1),
          len(data))
    return data


def readobj_unwind(ctx, obj):
    return ctx.run(["llvm-readobj-22", "--unwind", obj], check=True, timeout=60).stdout


def readobj_prologs(text):
    """Per RuntimeFunction of llvm-readobj-22's output: its name and its
    prolog's lines [(code or None, instruction)], as printed (last first)."""
    out = []
    for entry in text.split("RuntimeFunction {")[1:]:
        name = re.search(r"Function: (\S+)", entry).group(1)
        lines = entry[entry.index("Prologue ["):].splitlines()[1:]
        prolog = []
        for l in lines:
            if l.strip() == "]":
                break
            m = re.match(r"\s*(?:(0x[0-9a-f]+)\s+; )?(.*)$", l)
            prolog.append((m.group(1), m.group(2).strip()))
        out.append((name, prolog))
    return out


SHIMS = [("tinyvm", None, False), ("packed", "shim_packed", True), ("saves", "shim_saves", False),
         ("locals", "shim_locals", False), ("fp", "shim_fp", False)]


def test_shim_rows_follow_its_instructions(ctx):
    problems = []
    for name, shim, packed in SHIMS:
        out, p = build(ctx, "shim-" + name, shim)
        check(p.returncode == 0, "%s: did not build:\n%s", name, p.stderr)
        text = read(header_path(out))
        rows = header_rows(text)
        start = define(text, "SG_SHIM_FUNCTION_START")
        obj = os.path.join(out, ".stencilgen", TRIPLE, "shim.o")
        insns = disassembly(ctx, obj, start, define(text, "SG_SHIM_FUNCTION_SIZE"))
        frame = Frame()
        want = {start: frame.row()}
        for off, insn in insns[:len(rows) - 1]:
            frame.step(insn)
            want[off + 4] = frame.row()
        if rows != want:
            problems.append("%s: the header's rows\n  %s\nthe instructions'\n  %s" % (
                name, "\n  ".join("0x%x %s" % kv for kv in sorted(rows.items())),
                "\n  ".join("0x%x %s" % kv for kv in sorted(want.items()))))
        # The call into JIT code is after the prolog, and its row is the last.
        call = define(text, "SG_SHIM_CALL_OFFSET")
        if call < max(rows) or define(text, "SG_UNWIND_CFA_REGISTER") != 29:
            problems.append("%s: the call at 0x%x, the prolog to 0x%x" % (name, call, max(rows)))
        said = define(text, "SG_SHIM_UNWIND_PACKED")
        readobj = readobj_unwind(ctx, obj)
        entry = readobj[readobj.index("Function: %s (" % (shim or "tinyvm_shim")):]
        entry = entry[:entry.index("RuntimeFunction {")] if "RuntimeFunction {" in entry else entry
        is_packed = "ExceptionRecord" not in entry
        if said != packed or is_packed != packed:
            problems.append("%s: SG_SHIM_UNWIND_PACKED %d, llvm-readobj reads it %s, want %s" % (
                name, said, "packed" if is_packed else "unpacked",
                "packed" if packed else "unpacked"))
    check(not problems, "\n".join(problems))


def test_pointer_authentication_is_stated_and_the_key_checked(ctx):
    """A shim that signs its return address: with the B key (pacibsp, what
    the unwind code pac_sign_lr stands for) the header says so; with the A
    key, which clang 22 uses for -mbranch-protection=standard on this triple
    while writing the same code, the build fails naming the fix."""
    # The ops land indirect calls on bti c; the shim's pacibsp is its landing pad.
    out, p = build(ctx, "signed", "shim_saves", cflags="[-mbranch-protection=bti]",
                   shim_cflags="[-mbranch-protection=bti+pac-ret+b-key]")
    check(p.returncode == 0, "did not build:\n%s", p.stderr)
    text = read(header_path(out))
    check(define(text, "SG_UNWIND_RA_SIGNED") == 1, "SG_UNWIND_RA_SIGNED is not 1")
    obj = os.path.join(out, ".stencilgen", TRIPLE, "shim.o")
    start = define(text, "SG_SHIM_FUNCTION_START")
    insns = disassembly(ctx, obj, start, 4)
    check([i for _, i in insns] == ["pacibsp"], "the shim does not start with pacibsp: %s", insns)
    flag = "[-mbranch-protection=standard]"
    out, p = build(ctx, "a-key", "shim_saves", cflags=flag, shim_cflags=flag)
    check(p.returncode == 1 and "paciasp (A key)" in p.stderr and "+b-key" in p.stderr
          and "shim_saves" in p.stderr, "an A-key shim: want exit 1 naming the key and the fix, "
          "got %d:\n%s", p.returncode, p.stderr)
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")


def test_executor_record_reads_back_as_the_shims_codes(ctx):
    out, p = build(ctx, "exec")
    check(p.returncode == 0, "did not build:\n%s", p.stderr)
    shim, ex = (unwind_array(read(header_path(out)), name)
                for name in ("sg_shim_unwind_info", "sg_executor_unwind_info"))
    # An object whose one function is covered by the executors' record, with
    # a length of 16 instructions written in, as the runtime would.
    ex = struct.pack("<I", struct.unpack_from("<I", ex)[0] | 16) + ex[4:]
    src = os.path.join(ctx.tmp, "exec.s")
    write(src, "\t.text\n\t.globl executor\n\t.p2align 2\nexecutor:\n" + "\tnop\n" * 16 +
          "\t.section .xdata,\"dr\"\n\t.p2align 2\nrecord:\n\t.byte %s\n"
          "\t.section .pdata,\"dr\"\n\t.p2align 2\n\t.rva executor\n\t.rva record\n"
          % ", ".join("0x%02x" % b for b in ex))
    obj = os.path.join(ctx.tmp, "exec.o")
    ctx.run(["clang-22", "--target=%s" % TRIPLE, "-c", src, "-o", obj], check=True, timeout=60)
    theirs = [c for c, _ in readobj_prologs(readobj_unwind(ctx, obj))[0][1]]
    shim_obj = os.path.join(out, ".stencilgen", TRIPLE, "shim.o")
    prolog = [c for c, _ in readobj_prologs(readobj_unwind(ctx, shim_obj))[0][1]]
    check(theirs[:1] == ["0xe5"] and theirs[1:] == prolog,
          "llvm-readobj reads the executors' record as %s; want end_c (0xe5) and the shim's "
          "prolog codes %s", theirs, prolog)
    check(len(shim) >= 8, "no shim record")


# --- packed words against llvm-readobj ---------------------------------------------

def packed_words():
    """Words over the fields' ranges: RegI 0-10, RegF 0-7, H, CR 0-3 and frames
    around the 512 and 4080-byte boundaries (FrameSize counts 16 bytes)."""
    words = []
    cases = [(ri, rf, h, cr) for ri in (0, 1, 2, 3, 4, 7, 10) for rf in (0, 1, 2, 7)
             for h in (0, 1) for cr in (0, 1, 3)]
    cases += [(0, 0, 0, 2), (2, 1, 0, 2), (10, 7, 1, 2)]
    for k, (ri, rf, h, cr) in enumerate(cases):
        if (cr == 1 and ri == 1) or (h and not ri and not rf and cr != 1):
            continue  # no canonical prolog: refused (test_arm64_unwind's bad_packed)
        intsz = 8 * ri + (8 if cr == 1 else 0)
        fpsz = 8 * rf + 8 if rf else 0
        savsz = (intsz + fpsz + 64 * h + 15) & ~15
        locsz = (16, 496, 528, 4096, 4800)[k % 5]
        frame = (savsz + (locsz if cr >= 2 or k % 3 else 0)) // 16
        words.append(1 | 64 << 2 | rf << 13 | ri << 16 | h << 20 | cr << 21 | frame << 23)
    return words[::max(1, len(words) // 60)]


def test_packed_words_follow_llvm_readobj(ctx):
    words = packed_words()
    src = os.path.join(ctx.tmp, "packed.s")
    body = "".join("\t.globl f%d\nf%d:\n%s" % (i, i, "\tnop\n" * 64) for i in range(len(words)))
    pdata = "".join("\t.rva f%d\n\t.word 0x%08x\n" % (i, w) for i, w in enumerate(words))
    write(src, "\t.text\n\t.p2align 2\n" + body + "\t.section .pdata,\"dr\"\n" + pdata)
    obj = os.path.join(ctx.tmp, "packed.o")
    ctx.run(["clang-22", "--target=%s" % TRIPLE, "-c", src, "-o", obj], check=True, timeout=60)
    readobj = readobj_unwind(ctx, obj)
    theirs = {}
    for i, (_, prolog) in enumerate(readobj_prologs(readobj)):
        frame = Frame()
        rows = [frame.row()]
        for _, insn in reversed([p for p in prolog if p[1] != "end"]):
            frame.step(insn)
            rows.append(frame.row())
        theirs[words[i]] = rows
    unit = os.path.join(ctx.build, "tests", "unit", "test_arm64_unwind")
    p = ctx.run([unit, "--packed-rows"] + ["%x" % w for w in words], check=True, timeout=60)
    ours, current = {}, None
    for line in p.stdout.splitlines():
        if re.match(r"^[0-9a-f]{8}$", line):
            current = int(line, 16)
            ours[current] = []
        elif " error " in line:
            ours[int(line.split()[0], 16)] = line
        else:
            ours[current].append(line.split(" ", 1)[1])
    problems = ["0x%08x:\n  ours   %s\n  theirs %s" % (w, ours.get(w), theirs.get(w))
                for w in words if ours.get(w) != theirs.get(w)]
    check(len(words) >= 40, "only %d words", len(words))
    check(not problems, "%d of %d packed words differ:\n%s", len(problems), len(words),
          "\n".join(problems))


# --- refusals ---------------------------------------------------------------

def test_shim_without_a_frame_record_is_refused(ctx):
    out, p = build(ctx, "nofp", "shim_saves", shim_cflags="[-fomit-frame-pointer]")
    check(p.returncode == 1 and "is not frame-pointer based at the call into JIT code" in p.stderr
          and TRIPLE in p.stderr, "want exit 1 naming the rule and the target, got %d:\n%s",
          p.returncode, p.stderr)
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")


def test_section_relative_relocation_is_refused_by_name(ctx):
    ops = ("static const int table[2] = {1, 2};\n"
           "OP(odd)\n{\n    __asm__ volatile(\"b 1f\\n\\t.secrel32 table\\n1:\" :: \"X\"(table));\n"
           "    CONTINUE();\n}\n")
    out, p = build(ctx, "secrel", ops=ops)
    check(p.returncode == 1, "expected exit 1: %d\n%s", p.returncode, p.stderr)
    check(re.search(r"op odd \(%s\).*unsupported relocation IMAGE_REL_ARM64_SECREL \(type \d+\) "
                    r"in \.text\S* at offset 0x[0-9a-f]+ against 'table'" % TRIPLE, p.stderr),
          "the error does not name op, relocation, section, offset and symbol:\n%s", p.stderr)
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")
