"""Unwind checks (docs/unwind.md; docs/ops.md, "What the frame-pointer check proves"):
the pinned-frame-pointer check on every op, the shim's frame shape, the expect_frame
pin, and the unwind facts in the
header. Every expectation is derived independently of the generator:
instruction offsets and texts from llvm-objdump-22, CFI rows from
llvm-dwarfdump-22 and from a small DWARF CFA decoder in this file.

Every failing build goes into an outdir that already holds a good header; the
test then checks that the failed run left those files alone (same bytes, same
inode, same mtime) and left no temporary file behind.

Fixtures: tests/fixtures/fpcheck/ (ops) and tests/fixtures/shim/ (shims)."""
import os
import re

from sgtest import (BUNDLED_TRIPLES, TRIPLE, X86_64_DWARF_REGS, TestFailure, aarch64_register,
                    check, dwarfdump_rows, for_targets, read, sleb, uleb, write, x86_64_register)

ASAN = True

T = 180  # seconds; one generator run takes well under 5 s, even under ASan
OBJDUMP = ["llvm-objdump-22", "-d", "--no-show-raw-insn", "--no-print-imm-hex"]
A64 = "aarch64-unknown-linux-gnu"
DWARF_REGS = X86_64_DWARF_REGS


# --- helpers -----------------------------------------------------------------

def fixture(*parts):
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", *parts)


def diagnostics(stderr):
    """The generator's own error lines. UBSan's non-fatal "runtime error:"
    reports (seen when run against a sanitized build) are not diagnostics of
    the check under test and are left out; ASan reports abort the run, which
    the exit-code checks catch."""
    return [l for l in stderr.splitlines() if " error: " in l and "runtime error:" not in l]


def norm(text, comment="#"):
    """An instruction as llvm-objdump or the generator prints it, comparable.
    comment: where llvm-objdump's comments start ("# 0xd <sym+0xd>" on
    x86-64, "// =0x10" on AArch64, where '#' starts immediates)."""
    text = text.split(comment)[0]
    text = re.sub(r"\s*<[^>]*>\s*$", "", text.strip())
    return re.sub(r"\s+", " ", text).strip()


def objdir(outdir, triple=TRIPLE):
    return os.path.join(outdir, ".stencilgen", triple)


# For the builds whose ops llvm-objdump reads: each op's own object
# (op_<name>.o), which only per-op units keep.
PER_OP = ("--units", "per-op")


def disassemble(ctx, obj, comment="#"):
    """{function: {"insns": [(offset, text)], "relocs": [offset]}} from
    llvm-objdump-22 -dr; offsets are relative to the function's symbol."""
    out = ctx.run(OBJDUMP + ["-r", obj], check=True, timeout=T).stdout
    funcs, cur, base = {}, None, 0
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <([^>]+)>:$", line)
        if m:
            base = int(m.group(1), 16)
            cur = funcs.setdefault(m.group(2), {"insns": [], "relocs": []})
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+R_\S+\s", line)
        if m and cur is not None:
            cur["relocs"].append(int(m.group(1), 16) - base)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S.*)$", line)
        if m and cur is not None:
            cur["insns"].append((int(m.group(1), 16) - base, norm(m.group(2), comment)))
    return funcs


def op_insns(ctx, outdir, op, t=None):
    """[(offset, text)] of op's code in its own object, for target t (x86-64
    when None)."""
    triple, comment = (t.triple, t.comment) if t else (TRIPLE, "#")
    funcs = disassemble(ctx, os.path.join(objdir(outdir, triple), "op_%s.o" % op), comment)
    check("op_" + op in funcs, "op_%s.o has no function op_%s: %s", op, op, sorted(funcs))
    return funcs["op_" + op]["insns"]


def split_operands(ops):
    """AT&T operands, split at commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for c in ops:
        depth += c == "("
        depth -= c == ")"
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


FP_NAMES = ("%rbp", "%ebp", "%bp", "%bpl")


def writes_fp_text(text):
    """Whether compiler-generated x86-64 code (AT&T) writes rbp, judged from the
    text alone: the destination (last operand) is rbp/ebp/bp/bpl and the
    instruction is not a compare, test, bit test or push; or an exchange
    names it anywhere; or leave/enter."""
    mnem, _, rest = text.partition(" ")
    operands = split_operands(rest)
    if mnem.startswith(("leave", "enter")):
        return True
    if mnem.startswith(("xchg", "xadd")):
        return any(o in FP_NAMES for o in operands)
    if re.match(r"^(cmp[bwlq]?|test[bwlq]?|bt[wlq]?|push[wq]?)$", mnem):
        return False
    return bool(operands) and operands[-1] in FP_NAMES


def headers(triple):
    """The outputs a build for triple writes, and the bundled manifest's other
    targets' headers, which it may write too."""
    return (["jit_stencils.h", "jit_stencils-%s.h" % triple],
            ["jit_stencils-%s.h" % t for t in BUNDLED_TRIPLES if t != triple])


def snapshot(outdir, triple=TRIPLE):
    """The published outputs: {name: (bytes, inode, mtime_ns)}."""
    snap = {}
    mine, others = headers(triple)
    for name in mine + [h for h in others if os.path.exists(os.path.join(outdir, h))]:
        path = os.path.join(outdir, name)
        st = os.stat(path)
        snap[name] = (read(path, "rb"), st.st_ino, st.st_mtime_ns)
    return snap


def check_untouched(outdir, before, what, triple=TRIPLE):
    """A failed build left the previous outputs exactly as they were, and no
    temporary file anywhere in the outdir."""
    entries = sorted(os.listdir(outdir))
    # The bundled manifest also writes its other targets' headers; they are
    # previous outputs too, and must be left alone like the others.
    mine, others = headers(triple)
    extra = [h for h in others if h in before]
    check(entries == sorted(mine + extra + [".stencilgen"]),
          "%s: the outdir holds %s, want only the previous outputs", what, entries)
    after = snapshot(outdir, triple)
    for name in mine + extra:
        check(after[name][0] == before[name][0], "%s: %s changed", what, name)
        check(after[name][1:] == before[name][1:],
              "%s: %s was replaced (inode/mtime changed) though the build failed", what, name)
    leftovers = [os.path.join(d, f) for d, _, files in os.walk(outdir) for f in files
                 if ".tmp" in f or f.startswith(".tmp")]
    check(not leftovers, "%s: temporary files left behind: %s", what, leftovers)


def good_build(ctx, manifest, outdir, *extra, triple=TRIPLE):
    """A build that must succeed; the snapshot of its outputs (triple: the
    target whose header is read)."""
    p = ctx.build_stencils(manifest, outdir, *extra, check=False, timeout=T)
    check(p.returncode == 0, "good build of %s exited %d:\n%s", manifest, p.returncode,
          p.stderr[-4000:])
    return snapshot(outdir, triple)


def failing_build(ctx, manifest, outdir, before, what, *extra, rc=1, triple=TRIPLE):
    """Build into an outdir holding good outputs; want exit rc and the outputs kept."""
    p = ctx.build_stencils(manifest, outdir, *extra, check=False, timeout=T)
    check(p.returncode == rc, "%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what,
          p.returncode, rc, p.stdout[-2000:], p.stderr[-6000:])
    check_untouched(outdir, before, what, triple)
    return p


def indirect_calls(func, pattern=r"^call[qlw]? \*"):
    """[(offset, text, via_reloc)] of the indirect calls of a disassembled
    function (pattern: what an indirect call looks like; x86-64's by default)."""
    insns, relocs = func["insns"], func["relocs"]
    calls = []
    for i, (off, text) in enumerate(insns):
        end = insns[i + 1][0] if i + 1 < len(insns) else off + 16
        if re.match(pattern, text):
            calls.append((off, text, any(off <= r < end for r in relocs)))
    return calls


def shim_func(ctx, outdir, name, t=None):
    """The shim function `name`, disassembled, of target t (x86-64 when None)."""
    triple, comment = (t.triple, t.comment) if t else (TRIPLE, "#")
    funcs = disassemble(ctx, os.path.join(objdir(outdir, triple), "shim.o"), comment)
    check(name in funcs, "shim.o has no function %s: %s", name, sorted(funcs))
    return funcs[name]


# --- DWARF CFI, read independently ------------------------------------------

def row_at(rows, pc):
    hit = [r for r in rows if r[0] <= pc < r[1]]
    check(len(hit) == 1, "no single CFI row covers 0x%x: %s", pc, rows)
    return hit[0][2]


def format_row(cfa, regs):
    text = "CFA=%s%+d" % (DWARF_REGS[cfa[0]], cfa[1])
    for r in sorted(regs):
        text += " %s=[CFA%+d]" % (DWARF_REGS[r], regs[r])
    return text


def decode_cfa(data, data_align, code_align=1, state=None):
    """Run DWARF CFA instructions; returns ([(loc, row text)], final state).
    Knows what a compiler's x86-64 .eh_frame uses: advance_loc(1/2/4),
    def_cfa(_sf/_register/_offset), offset(_extended_sf), restore, nop."""
    cfa, regs = state if state else ((7, 0), {})
    initial = dict(regs)
    regs, rows, loc, i = dict(regs), [], 0, 0
    while i < len(data):
        op = data[i]
        i += 1
        hi, lo = op & 0xc0, op & 0x3f
        if hi == 0x40 or op in (0x02, 0x03, 0x04):  # advance_loc, advance_loc1/2/4
            if hi == 0x40:
                delta = lo
            else:
                n = {0x02: 1, 0x03: 2, 0x04: 4}[op]
                delta = int.from_bytes(data[i:i + n], "little")
                i += n
            rows.append((loc, format_row(cfa, regs)))
            loc += delta * code_align
        elif hi == 0x80:  # offset: reg in the low bits, ULEB factored offset
            off, i = uleb(data, i)
            regs[lo] = off * data_align
        elif hi == 0xc0:  # restore
            if lo in initial:
                regs[lo] = initial[lo]
            else:
                regs.pop(lo, None)
        elif op == 0x00:  # nop
            pass
        elif op == 0x0c:  # def_cfa reg, ULEB offset
            reg, i = uleb(data, i)
            off, i = uleb(data, i)
            cfa = (reg, off)
        elif op == 0x12:  # def_cfa_sf reg, SLEB factored offset
            reg, i = uleb(data, i)
            off, i = sleb(data, i)
            cfa = (reg, off * data_align)
        elif op == 0x0d:  # def_cfa_register
            reg, i = uleb(data, i)
            cfa = (reg, cfa[1])
        elif op == 0x0e:  # def_cfa_offset
            off, i = uleb(data, i)
            cfa = (cfa[0], off)
        elif op == 0x11:  # offset_extended_sf reg, SLEB factored offset
            reg, i = uleb(data, i)
            off, i = sleb(data, i)
            regs[reg] = off * data_align
        else:
            raise TestFailure("CFA opcode 0x%02x at byte %d: not in the test's decoder (%s)" %
                              (op, i - 1, data.hex()))
    rows.append((loc, format_row(cfa, regs)))
    return rows, (cfa, regs)


def header_bytes(text, name):
    m = re.search(r"static const uint8_t %s\[(\d+)\] = \{([^}]*)\};" % name, text)
    check(m, "the header has no byte array %s", name)
    data = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", m.group(2)))
    check(len(data) == int(m.group(1)), "%s: declared %s bytes, has %d", name, m.group(1),
          len(data))
    return data


def header_define(text, name):
    m = re.search(r"^#define %s (\S+)" % name, text, re.M)
    check(m, "the header has no #define %s", name)
    return m.group(1)


# --- 1. the frame-pointer check, on x86-64 and AArch64 ------------------------
#
# Each check is written once, for a FpTarget, and runs as one test per target
# (test_<check>_x86_64, test_<check>_aarch64).

# Every op of tests/fixtures/fpcheck/writes.c and the one instruction in it that
# writes the frame pointer, as LLVM prints it (AT&T). Where LLVM's spelling
# differs from the source, the source form is in the comment.
X86_FORBIDDEN = {
    "w_mov_reg": "movq %rax, %rbp",
    "w_mov_imm32": "movl $1, %ebp",
    "w_movb_imm": "movb $1, %bpl",
    "w_movw_imm": "movw $1, %bp",
    "w_load": "movq 8(%r12), %rbp",
    "w_movzbl": "movzbl %al, %ebp",
    "w_movsbq": "movsbq %al, %rbp",
    "w_cmovz": "cmoveq %rax, %rbp",  # cmovzq
    "w_movq_xmm": "movq %xmm0, %rbp",
    "w_lea": "leaq 8(%rax,%rcx,2), %rbp",
    "w_add": "addq %rax, %rbp",
    "w_sub": "subq $8, %rbp",
    "w_xor": "xorl %ebp, %ebp",
    "w_and": "andq $-16, %rbp",
    "w_or": "orq %rcx, %rbp",
    "w_inc": "incq %rbp",
    "w_dec": "decq %rbp",
    "w_neg": "negq %rbp",
    "w_not": "notq %rbp",
    "w_shl": "shlq $3, %rbp",
    "w_imul": "imulq %rax, %rbp",
    "w_popcnt": "popcntq %rax, %rbp",
    "w_bswap": "bswapq %rbp",
    "w_pop": "popq %rbp",
    "w_leave": "leave",
    "w_enter": "enter $0, $0",
    "w_xchg": "xchgq %rbp, %rax",  # xchgq %rax, %rbp: the one-byte 0x95 form
    "w_xadd": "xaddq %rax, %rbp",
    "w_cmpxchg": "cmpxchgq %rax, %rbp",
    "x_enter_nested": "enter $16, $1",
    "x_mov_rev_encoding": "movq %rax, %rbp",  # 48 8b e8
    "x_xchg_mem": "xchgq %rbp, (%rsp)",
    "x_xchg32_short": "xchgl %ebp, %eax",  # xchgl %eax, %ebp
    "x_sete": "sete %bpl",
    "x_pop16": "popw %bp",
    "x_movabs": "movabsq $1234605616436508552, %rbp",
    "x_imul3": "imulq $3, %rax, %rbp",
    "x_shrx": "shrxq %rax, %rcx, %rbp",
    "x_rdrand": "rdrandq %rbp",
}

# Every op of tests/fixtures/fpcheck/controls.c and a pattern of the
# instruction that makes it a meaningful control (it must be in the code).
X86_CONTROLS = {
    "r_read": r"movq %rbp, %rax",
    "r_store": r"movq %rbp, -?\d*\(%rsp\)",
    "r_push_pop": r"pushq %rbp",
    "r_cmpxchg_mem": r"cmpxchgq %rbp, -?\d*\(%rsp\)",
    "r_lea": r"leaq \(%rbp\), %rax",
    "r_base": r"movq 8\(%rbp\), %rax",
    "r_compare": r"btq \$1, %rbp",
    "r_to_xmm": r"movq %rbp, %xmm0",
    "r_rbx": r"movq \$1, %rbx",
    "r_branches": r"jne 0x[0-9a-f]+",
}

# Every op of tests/fixtures/aarch64/fpcheck/writes.c and the one instruction in it that writes x29
# or w29, as llvm-objdump-22 prints it.
A64_FORBIDDEN = {
    "w_mov_reg": "mov x29, x0",
    "w_mov_w": "mov w29, w1",
    "w_mov_sp": "mov x29, sp",
    "w_movz": "mov x29, #16",
    "w_movk": "movk x29, #1, lsl #16",
    "w_movn": "mov x29, #-1",
    "w_csel": "csel x29, x0, x1, eq",
    "w_cset": "cset w29, ne",
    "w_fmov": "fmov x29, d0",
    "w_umov": "mov x29, v0.d[1]",
    "w_mrs": "mrs x29, TPIDR_EL0",
    "w_adr": "adr x29, 0x0",
    "w_add_imm": "add x29, sp, #16",
    "w_add_reg": "add x29, x0, x1",
    "w_sub": "sub x29, x29, #16",
    "w_subs": "subs x29, x0, #1",
    "w_and": "and x29, x0, #0xfffffffffffffff0",
    "w_eor": "eor x29, x29, x0",
    "w_neg": "neg x29, x0",
    "w_mul": "mul x29, x0, x1",
    "w_madd": "madd x29, x0, x1, x2",
    "w_lsl": "lsl x29, x0, #3",
    "w_ubfx": "ubfx x29, x0, #4, #8",
    "w_rev": "rev x29, x0",
    "w_ldr": "ldr x29, [x0]",
    "w_ldr_w": "ldr w29, [x0, #8]",
    "w_ldur": "ldur x29, [x0, #-8]",
    "w_ldrb": "ldrb w29, [x0]",
    "w_ldrsw": "ldrsw x29, [x0, #4]",
    "w_ldr_post": "ldr x29, [sp], #16",
    "w_ldp": "ldp x29, x30, [sp]",
    "w_ldp_post": "ldp x29, x30, [sp], #16",
    "w_ldp_second": "ldp x0, x29, [x1]",
    "w_ldxr": "ldxr x29, [x0]",
    "w_ldaxp": "ldaxp x0, x29, [x1]",
    "w_stxr_status": "stxr w29, x0, [x1]",
    "w_stp_pre_base": "stp x0, x1, [x29, #16]!",
    "w_stp_fp_pre_fp": "stp x29, x30, [x29, #16]!",
    "w_str_post_base": "str x0, [x29], #8",
    "w_ldr_pre_base": "ldr x0, [x29, #-8]!",
    "w_ldp_post_base": "ldp x0, x1, [x29], #16",
}
# CONSTRAINED UNPREDICTABLE encodings: LLVM's disassembler reports them as
# "soft fail", which the generator refuses as undecodable (also exit 1, also
# at the right offset) rather than as a frame-pointer write.
A64_UNPREDICTABLE = {"w_stp_fp_pre_fp"}

# Every op of tests/fixtures/aarch64/fpcheck/controls.c and the instruction that
# makes it a control (exactly).
A64_CONTROLS = {
    "r_stp_pre": "stp x29, x30, [sp, #-16]!",
    "r_stp_post": "stp x29, x30, [sp], #16",
    "r_stp": "stp x29, x30, [sp, #16]",
    "r_str": "str x29, [sp, #-16]!",
    "r_read": "mov x0, x29",
    "r_add_src": "add x0, x29, #16",
    "r_cmp": "cmp x29, x0",
    "r_tst": "tst x29, #0x1",
    "r_base": "ldr x0, [x29, #16]",
    "r_base_pair": "ldp x0, x1, [x29]",
    "r_store_base": "str x0, [x29, #8]",
    "r_x28": "mov x28, x0",
    "r_x30": "mov x30, x0",
    "r_ldp_x28_x30": "ldp x28, x30, [sp, #-16]",
}


def writes_x29_text(text):
    """Whether an instruction as llvm-objdump prints it writes x29/w29, from the
    text alone: x29/w29 is the first operand of anything but a store, compare,
    test or branch, or the second of a load pair, or a written-back base."""
    mnem, _, ops = text.partition(" ")
    ops = [o.strip() for o in ops.split(",")]
    fp = re.compile(r"^\[?[xw]29\]?!?$")
    if re.search(r"\[[xw]29(, #-?\d+)?\]!|\[[xw]29\], #", text):
        return True  # pre/post-indexed with x29 as the base
    if mnem.startswith(("st", "cmp", "cmn", "tst", "cb", "tb", "b", "prfm")):
        return mnem.startswith("st") and mnem[2:3] in ("x", "l") and bool(ops) and \
            bool(fp.match(ops[0]))  # stxr/stlxr status register
    if mnem.startswith("ldp") or mnem.startswith("ldax") or mnem.startswith("ldxp"):
        return any(fp.match(o) for o in ops[:2])
    return bool(ops) and bool(fp.match(ops[0]))


GPRS = ["rax", "rbx", "rcx", "rdx", "rsi", "rdi"] + ["r%d" % i for i in range(8, 16)]
GPR_ALIASES = {
    "rax": "rax eax ax al", "rbx": "rbx ebx bx bl", "rcx": "rcx ecx cx cl",
    "rdx": "rdx edx dx dl", "rsi": "rsi esi si sil", "rdi": "rdi edi di dil",
}


def x86_pressure_is_real(text):
    """Every other GPR is in use and values spill."""
    for reg in GPRS:
        names = GPR_ALIASES.get(reg, "%s %sd %sw %sb" % (reg, reg, reg, reg)).split()
        check(any(re.search(r"%%%s\b" % n, text) for n in names),
              "%s unused: the fixture no longer has high register pressure", reg)
    check(re.search(r"\(%rsp\)", text), "no spill: the fixture's pressure is too low")


def a64_pressure_is_real(text):
    """At least 27 x registers in use and values spill."""
    regs = set(re.findall(r"\bx(\d+)\b", text))
    check(len(regs) >= 27 and re.search(r"\[sp", text),
          "the fixture no longer presses on the registers (%d used, spills: %s)", len(regs),
          bool(re.search(r"\[sp", text)))


class FpTarget:
    """What the frame-pointer and shim checks need to know about one target."""

    def __init__(self, name, triple, fixtures, comment, fp, fp_reg, forbidden, unpredictable,
                 controls, control_decl, writes_fp, pressure_is_real, restore, shim):
        self.name, self.triple, self.comment = name, triple, comment
        # The bundled shim: its pin (stencils.yaml), the stack pointer's and
        # return address's names, its call into JIT code, how llvm-dwarfdump
        # names registers.
        self.pin, self.sp, self.ra, self.call, self.register = shim
        self.fp, self.fp_reg = fp, re.compile(fp_reg)  # its name, any spelling of it
        self.fixtures = fixtures  # the fpcheck fixtures' folder
        self.forbidden, self.unpredictable = forbidden, unpredictable
        self.controls = controls  # op: pattern of the instruction that makes it a control
        self.control_decl = control_decl  # how controls.c declares its ops
        self.writes_fp = writes_fp  # does an instruction's text write the frame pointer?
        self.pressure_is_real = pressure_is_real
        self.restore = restore  # the mnemonic that restores a saved frame pointer
        self.err_fp = re.compile(r"^\S+\.c:\d+:\d+: error: op (\w+) \(%s\) at \+0x([0-9a-f]+): "
                                 r"(.*): writes the frame pointer$" % re.escape(triple), re.M)
        self.err_undecodable = re.compile(
            r"^\S+\.c:\d+:\d+: error: op (\w+) \(%s\) at \+0x([0-9a-f]+): cannot decode the "
            r"instruction .*cannot prove it leaves the frame pointer alone$" % re.escape(triple),
            re.M)

    def fixture(self, name):
        return os.path.join(self.fixtures, name)

    def build_args(self, *extra):
        return ("--target", self.triple) + extra


X86_64_FP = FpTarget("x86_64", TRIPLE, fixture("fpcheck"), "#", "rbp", r"%(?:rbp|ebp|bp|bpl)\b",
                     X86_FORBIDDEN, set(), X86_CONTROLS, r"^OP\((\w+)\)", writes_fp_text,
                     x86_pressure_is_real, "pop",
                     (dict(cfa_register="rbp", cfa_offset=16, fp_offset=-16, ra_offset=-8), "rsp",
                      "rip", r"^call[qlw]? \*", x86_64_register))
AARCH64_FP = FpTarget("aarch64", A64, fixture("aarch64", "fpcheck"), "//", "x29", r"\b[xw]29\b",
                      A64_FORBIDDEN, A64_UNPREDICTABLE,
                      {op: re.escape(text) for op, text in A64_CONTROLS.items()},
                      r"^USES_FP\((\w+),", writes_x29_text, a64_pressure_is_real, "ldp",
                      (dict(cfa_register="x29", cfa_offset=96, fp_offset=-96, ra_offset=-88), "sp",
                       "x30", r"^blr x\d+$", aarch64_register))


def fp_problems(ctx, t, out, stderr):
    """What is wrong with the errors a build of writes.yaml printed: each op
    reported once, exactly at the instruction llvm-objdump shows writing the
    frame pointer (or, for an UNPREDICTABLE encoding, as undecodable there)."""
    reported = {}
    for op, off, text in t.err_fp.findall(stderr):
        reported.setdefault(op, []).append((int(off, 16), norm(text, t.comment)))
    undecodable = {op: int(off, 16) for op, off in t.err_undecodable.findall(stderr)
                   if op in t.unpredictable}
    unexpected = [l for l in diagnostics(stderr) if not t.err_fp.match(l) and not (
        t.err_undecodable.match(l) and t.err_undecodable.match(l).group(1) in t.unpredictable)]
    problems = ["errors other than frame-pointer writes:\n%s" % "\n".join(unexpected)] \
        if unexpected else []
    for op, want in sorted(t.forbidden.items()):
        hits = [(off, text) for off, text in op_insns(ctx, out, op, t) if text == want]
        if len(hits) != 1:
            problems.append("%s: llvm-objdump shows %d instructions '%s' (fixture broken?)"
                            % (op, len(hits), want))
            continue
        got = reported.get(op, [])
        if op in t.unpredictable and not got:
            if undecodable.get(op) != hits[0][0]:
                problems.append("%s: NOT reported (neither as a write nor as undecodable) at "
                                "+0x%x: %s" % (op, hits[0][0], want))
        elif not got:
            problems.append("%s: NOT reported; it writes the frame pointer at +0x%x: %s"
                            % (op, hits[0][0], want))
        elif got != hits:
            problems.append("%s: reported %s, want exactly %s"
                            % (op, ["+0x%x: %s" % g for g in got], "+0x%x: %s" % hits[0]))
    extra = sorted((set(reported) | set(undecodable)) - set(t.forbidden))
    if extra:
        problems.append("reported ops that are not in the fixture: %s" % extra)
    n = len(t.err_fp.findall(stderr)) + len(undecodable)
    if n != len(t.forbidden):
        problems.append("%d frame-pointer errors, want one per op: %d" % (n, len(t.forbidden)))
    return problems


@for_targets(X86_64_FP, AARCH64_FP)
def every_fp_write_form_is_reported(ctx, t):
    src = read(t.fixture("writes.c"))
    in_source = re.findall(r"^FP_WRITE(?:_LATE)?\((\w+),", src, re.M)
    check(sorted(in_source) == sorted(t.forbidden),
          "writes.c and the test's table disagree: %s", set(in_source) ^ set(t.forbidden))
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, t.fixture("controls.yaml"), out, *t.build_args(), triple=t.triple)
    p = failing_build(ctx, t.fixture("writes.yaml"), out, before, "build of fpcheck/writes.yaml",
                      *t.build_args(*PER_OP), triple=t.triple)
    problems = fp_problems(ctx, t, out, p.stderr)
    check(not problems, "%d problem(s):\n%s", len(problems), "\n".join(problems))


@for_targets(X86_64_FP, AARCH64_FP)
def fp_reads_stores_and_other_registers_pass(ctx, t):
    src = read(t.fixture("controls.c"))
    check(sorted(re.findall(t.control_decl, src, re.M)) == sorted(t.controls),
          "controls.c and the test's table disagree")
    out = os.path.join(ctx.tmp, "out")
    p = ctx.build_stencils(t.fixture("controls.yaml"), out, *t.build_args(*PER_OP), check=False,
                           timeout=T)
    check(p.returncode == 0 and not diagnostics(p.stderr),
          "the controls were rejected (exit %d):\n%s", p.returncode, p.stderr[-4000:])
    for op, pattern in sorted(t.controls.items()):
        texts = [text for _, text in op_insns(ctx, out, op, t)]
        check(any(re.fullmatch(pattern, text) for text in texts),
              "%s: no instruction matching '%s' in the object (the control tests nothing): %s",
              op, pattern, texts)
        check(not any(t.writes_fp(text) for text in texts), "%s really writes %s: %s", op,
              t.fp, texts)
    header = read(os.path.join(out, "jit_stencils-%s.h" % t.triple))
    for op in t.controls:
        check("SG_OP_%s," % op in header, "%s missing from the header", op)


# --- 3. register pressure: the check is what keeps the frame pointer safe ----

@for_targets(X86_64_FP, AARCH64_FP)
def register_pressure_without_reserved_fp_is_caught(ctx, t):
    out = os.path.join(ctx.tmp, "out")
    manifest = t.fixture("pressure.yaml")
    # Control: the generator's own flags keep the allocator off the frame
    # pointer, however high the pressure...
    before = good_build(ctx, manifest, out, *t.build_args(*PER_OP), triple=t.triple)
    text = "\n".join(insn for _, insn in op_insns(ctx, out, "pressure", t))
    check(not t.fp_reg.search(text), "with -mframe-pointer=reserved the op uses %s:\n%s",
          t.fp, text)
    # ... and the pressure is real.
    t.pressure_is_real(text)

    # Without the reserved frame pointer, it is allocated and the check fires.
    p = failing_build(ctx, manifest, out, before, "pressure op with -mframe-pointer=none",
                      *t.build_args("--extra-cflags=-Xclang -mframe-pointer=none", *PER_OP),
                      triple=t.triple)
    writes = [(off, insn) for off, insn in op_insns(ctx, out, "pressure", t)
              if t.writes_fp(insn)]
    check(any(not insn.startswith(t.restore) for _, insn in writes),
          "%s was not allocated as a general register; the test proves nothing: %s", t.fp,
          writes)
    found = t.err_fp.findall(p.stderr)
    got = [(int(off, 16), norm(insn, t.comment)) for _, off, insn in found]
    ops = {op for op, _, _ in found}
    check(ops == {"pressure"}, "reported ops %s, want only pressure:\n%s", ops, p.stderr[-3000:])
    check(sorted(got) == sorted(writes),
          "reported %s\nllvm-objdump shows these writes of %s: %s", got, t.fp, writes)
    errors = diagnostics(p.stderr)
    check(len(errors) == len(writes), "other errors: %s", errors)


# --- 2. the shim ---------------------------------------------------------------

def bundled(ctx):
    base = ctx.bundled_copy()
    return base, os.path.join(base, "stencils", "stencils.yaml")


def bundled_pin(t, text):
    """(line number, the line) of target t's expect_frame in the bundled manifest."""
    lines = text.splitlines()
    start = lines.index("  - triple: %s" % t.triple)
    line = next(i for i in range(start + 1, len(lines)) if re.match(r"\s*expect_frame:", lines[i]))
    check(not any("- triple:" in l for l in lines[start + 1:line]),
          "the bundled manifest has no expect_frame for %s", t.triple)
    return line + 1, lines[line]


@for_targets(X86_64_FP, AARCH64_FP)
def shim_without_frame_pointer(ctx, t):
    # -fomit-frame-pointer alone is enough: it comes after the generator's
    # -fno-omit-frame-pointer, and the shim is not a leaf, so
    # -mno-omit-leaf-frame-pointer does not keep the frame.
    base, manifest = bundled(ctx)
    out = os.path.join(ctx.tmp, "out")
    # Every target is built: the other targets' headers must be left alone too.
    before = good_build(ctx, manifest, out, triple=t.triple)
    p = failing_build(ctx, manifest, out, before, "shim built with -fomit-frame-pointer",
                      "--extra-shim-cflags=-fomit-frame-pointer", triple=t.triple)
    # The other targets fail too, in any order: read this target's own lines.
    err = p.stderr
    head = ("shim tinyvm_shim (%s): the frame is not frame-pointer based at the call into JIT "
            "code" % t.triple)
    check(head in err, "no frame-shape error:\n%s", err)
    err = err[err.index(head):]
    found = re.search(r"^\s+found:\s+(CFA=.*?)\s+at shim\+0x([0-9a-f]+) (.*)$", err, re.M)
    check(found, "no 'found:' line with a row and the call:\n%s", err)
    check(found.group(1).startswith("CFA=%s+" % t.sp), "found row not based on %s: %s", t.sp,
          found.group(1))
    check(re.search(r"^\s+expected:\s+CFA=%s\+k, %s=\[CFA\+m\], %s=\[CFA\+n\]"
                    % (t.fp, t.fp, t.ra), err, re.M), "no 'expected:' line:\n%s", err)
    check(re.search(r"^\s+fix:\s+.*-fno-omit-frame-pointer", err, re.M), "no 'fix:' line:\n%s",
          err)
    # The row and the call, read independently from the object the build kept.
    calls = indirect_calls(shim_func(ctx, out, "tinyvm_shim", t), t.call)
    jit = [(off, text) for off, text, via_reloc in calls if not via_reloc]
    check(len(jit) == 1, "llvm-objdump: %s", calls)
    check((int(found.group(2), 16), norm(found.group(3), t.comment)) == jit[0],
          "found line names +0x%s %s, llvm-objdump says %s", found.group(2), found.group(3),
          jit[0])
    rows = dwarfdump_rows(ctx, os.path.join(objdir(out, t.triple), "shim.o"), t.register)
    check(found.group(1) == row_at(rows, jit[0][0]),
          "found row %s, llvm-dwarfdump says %s", found.group(1), row_at(rows, jit[0][0]))


@for_targets(X86_64_FP, AARCH64_FP)
def expect_frame_mismatch(ctx, t):
    """The bundled pin with a cfa_offset 8 too large: exit 1 at the pin's
    '{', with the derived and expected shapes side by side."""
    base, manifest = bundled(ctx)
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, manifest, out, triple=t.triple)  # every target: all are kept
    text = read(manifest)
    line, pin_line = bundled_pin(t, text)
    m = re.search(r"expect_frame: \{(.*)\}", pin_line)
    check(m, "%s's expect_frame is not a flow mapping: %s", t.triple, pin_line)
    pinned = dict((k.strip(), v.strip()) for k, v in (kv.split(":") for kv in m.group(1).split(",")))
    check(pinned == {k: str(v) for k, v in t.pin.items()}, "pin %s, want %s", pinned, t.pin)
    col = pin_line.index("{") + 1  # where the flow mapping starts
    lines = text.splitlines(True)
    wrong = t.pin["cfa_offset"] + 8
    lines[line - 1] = pin_line.replace("cfa_offset: %d" % t.pin["cfa_offset"],
                                       "cfa_offset: %d" % wrong) + "\n"
    write(manifest, "".join(lines))
    p = failing_build(ctx, manifest, out, before, "expect_frame cfa_offset %d" % wrong,
                      triple=t.triple)
    want = ("%s:%d:%d: error: shim tinyvm_shim (%s): the shim's frame shape differs from "
            "expect_frame" % (manifest, line, col, t.triple))
    check(want in p.stderr, "want\n  %s\ngot:\n%s", want, p.stderr)
    check(re.search(r"^\s+derived\s+expected\s*$", p.stderr, re.M), "no table header:\n%s",
          p.stderr)
    for key, derived in sorted(t.pin.items()):
        expected = wrong if key == "cfa_offset" else derived
        check(re.search(r"^\s+%s\s+%s\s+%s\s*$" % (key, derived, expected), p.stderr, re.M),
              "no row '%s %s %s' in:\n%s", key, derived, expected, p.stderr)


def test_shim_with_two_indirect_calls(ctx):
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, ctx.path("stencils", "stencils.yaml"), out)
    for name in ("two_calls", "call_and_hook"):
        p = failing_build(ctx, fixture("shim", name + ".yaml"), out, before, "shim " + name)
        calls = indirect_calls(shim_func(ctx, out, name + "_shim"))
        check(len(calls) == 2 and not any(c[2] for c in calls),
              "%s: llvm-objdump shows %s, the fixture should have 2 indirect calls", name,
              calls)
        head = ("shim %s_shim (%s): expected exactly one indirect call into JIT code, found 2:"
                % (name, TRIPLE))
        check(head in p.stderr, "%s: no 'found 2' error:\n%s", name, p.stderr)
        listed = [(int(o, 16), norm(t))
                  for o, t in re.findall(r"^  \+0x([0-9a-f]+): (.*)$", p.stderr, re.M)]
        check(listed == [(o, t) for o, t, _ in calls],
              "%s: listed calls %s, llvm-objdump says %s", name, listed, calls)


def test_shim_with_no_call_into_jit_code(ctx):
    out = os.path.join(ctx.tmp, "out")
    # Control: a call to C through its GOT slot next to the call into JIT
    # code does not count, and the JIT call is the one the header names.
    before = good_build(ctx, fixture("shim", "jit_and_c_call.yaml"), out)
    calls = indirect_calls(shim_func(ctx, out, "jit_and_c_call_shim"))
    jit = [c for c in calls if not c[2]]
    check(len(calls) == 2 and len(jit) == 1, "jit_and_c_call: llvm-objdump shows %s", calls)
    header = read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
    check(int(header_define(header, "SG_SHIM_CALL_OFFSET"), 16) == jit[0][0],
          "SG_SHIM_CALL_OFFSET is not the JIT call at +0x%x", jit[0][0])

    for name in ("no_call", "c_call_only"):
        p = failing_build(ctx, fixture("shim", name + ".yaml"), out, before, "shim " + name)
        check("shim %s_shim (%s): expected exactly one indirect call into JIT code, found 0"
              % (name, TRIPLE) in p.stderr, "%s: no 'found 0' error:\n%s", name, p.stderr)
        calls = indirect_calls(shim_func(ctx, out, name + "_shim"))
        c_calls = [(o, t) for o, t, via_reloc in calls if via_reloc]
        check(len(calls) == len(c_calls), "%s: the fixture has a JIT call: %s", name, calls)
        listed = [(int(o, 16), norm(t)) for o, t in
                  re.findall(r"^  \+0x([0-9a-f]+): (.*) \(a call to C, not JIT code\)$",
                             p.stderr, re.M)]
        check(listed == c_calls, "%s: C calls listed %s, llvm-objdump says %s", name, listed,
              c_calls)
    check(len(c_calls) == 1, "c_call_only has no call to C: %s", calls)


def calls_in_dump(ctx, manifest, triple):
    """(call line, [(offset, text) of every blr/call *]) from `stencilgen dump`."""
    p = ctx.generator("dump", "--manifest", manifest, "--target", triple, timeout=T)
    check(p.returncode == 0, "dump of %s for %s exited %d:\n%s", manifest, triple,
          p.returncode, p.stderr[-3000:])
    m = re.search(r"^  at the call into JIT code, shim\+0x([0-9a-f]+) (.*):$", p.stdout, re.M)
    check(m, "dump names no call into JIT code:\n%s", p.stdout[-3000:])
    calls = [(int(o, 16), t) for o, t in
             re.findall(r"^  ([0-9a-f]{4}): (?:[0-9a-f]{2} )+\s*((?:blr|callq \*).*)$",
                        p.stdout, re.M)]
    return (int(m.group(1), 16), m.group(2)), calls


def test_shim_calls_to_c_through_the_got_on_both_targets(ctx):
    """A shim may call C functions besides JIT code on both targets. On
    AArch64 every such call (vm_print, __stack_chk_fail under the stack
    protector) is a load from the symbol's GOT slot and a `blr`, told apart
    from the call into JIT code by where its register was loaded from."""
    for i, (manifest, triple) in enumerate(((fixture("shim", "jit_and_c_call.yaml"), A64),
                                            (fixture("shim", "stack_protector.yaml"), A64),
                                            (fixture("shim", "stack_protector.yaml"), TRIPLE))):
        out = os.path.join(ctx.tmp, "out%d" % i)
        ctx.build_stencils(manifest, out, "--target", triple, timeout=T)
        (offset, text), calls = calls_in_dump(ctx, manifest, triple)
        # The code pointer is the third argument: x2 (AAPCS64), %rdx (SysV).
        want = "blr x2" if triple == A64 else "callq *%rdx"
        check(text == want and (offset, want) in calls,
              "%s (%s): the call into JIT code is +0x%x %s, want the call through the code "
              "argument among %s", manifest, triple, offset, text, calls)
        check(len(calls) >= 2, "%s (%s): the fixture should call C too: %s", manifest, triple,
              calls)
        header = read(os.path.join(out, "jit_stencils-%s.h" % triple))
        check(int(header_define(header, "SG_SHIM_CALL_OFFSET"), 16) == offset,
              "%s (%s): SG_SHIM_CALL_OFFSET is not +0x%x", manifest, triple, offset)
    # A shim whose one call is to C, through a register loaded from the GOT.
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, fixture("shim", "stack_protector.yaml"), out)
    p = failing_build(ctx, fixture("shim", "c_call_only.yaml"), out, before,
                      "shim c_call_only (AArch64)", "--target", A64)
    check("shim c_call_only_shim (%s): expected exactly one indirect call into JIT code, found 0"
          % A64 in p.stderr and re.search(r"^  \+0x[0-9a-f]+: blr x\d+ \(a call to C, not JIT "
                                          r"code\)$", p.stderr, re.M),
          "c_call_only on AArch64: want 'found 0' with the blr listed as a call to C:\n%s",
          p.stderr)


def test_shim_without_unwind_tables(ctx):
    base, manifest = bundled(ctx)
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, manifest, out)
    p = failing_build(ctx, manifest, out, before, "shim without unwind tables",
                      "--extra-shim-cflags=-fno-asynchronous-unwind-tables -fno-unwind-tables")
    check(re.search(r"^\S*shim\.c: error: shim tinyvm_shim \(%s\): .*compile it with "
                    r"-fasynchronous-unwind-tables" % re.escape(TRIPLE), p.stderr, re.M),
          "no error telling to compile with -fasynchronous-unwind-tables:\n%s", p.stderr)


# --- 4. the bundled build: pin, dump and header agree with the object ------------

def test_bundled_frame_shape_in_header_and_dump(ctx):
    base, manifest = bundled(ctx)
    check(re.search(r"expect_frame: \{cfa_register: rbp, cfa_offset: 16, fp_offset: -16, "
                    r"ra_offset: -8\}", read(manifest)), "the bundled manifest has no pin")
    out = os.path.join(ctx.tmp, "out")
    good_build(ctx, manifest, out)  # the pin holds
    header = read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
    shim_obj = os.path.join(objdir(out), "shim.o")
    rows = dwarfdump_rows(ctx, shim_obj, x86_64_register)

    for line in ("#define SG_UNWIND_CFA_OFFSET 16", "#define SG_UNWIND_FP_OFFSET (-16)",
                 "#define SG_UNWIND_RA_OFFSET (-8)"):
        check(re.search(r"^%s(?: /\*.*\*/)?$" % re.escape(line), header, re.M),
              "header lacks '%s'", line)
    call = int(header_define(header, "SG_SHIM_CALL_OFFSET"), 16)
    jit = [c for c in indirect_calls(shim_func(ctx, out, "tinyvm_shim")) if not c[2]]
    check(len(jit) == 1 and jit[0][0] == call, "SG_SHIM_CALL_OFFSET 0x%x, llvm-objdump: %s",
          call, jit)
    call_row = row_at(rows, call)

    # sg_executor_cfi, decoded, is the row in the comment above it, which is the
    # row llvm-dwarfdump gives at the call.
    data_align = int(header_define(header, "SG_UNWIND_DATA_ALIGN").strip("()"))
    m = re.search(r"/\* The row at the call as CFA instructions, for executor FDEs:\n"
                  r" \*   (.*)\n \*/\nstatic const uint8_t sg_executor_cfi\[", header)
    check(m, "no row comment right above sg_executor_cfi")
    decoded, _ = decode_cfa(header_bytes(header, "sg_executor_cfi"), data_align)
    check(len(decoded) == 1 and decoded[0][1] == m.group(1),
          "sg_executor_cfi decodes to %s, its comment says %s", decoded, m.group(1))
    check(m.group(1) == call_row, "executor row %s, llvm-dwarfdump at +0x%x: %s", m.group(1),
          call, call_row)
    check(call_row.startswith("CFA=rbp+16 ") and " rbp=[CFA-16]" in call_row and
          call_row.endswith(" rip=[CFA-8]"), "unexpected row at the call: %s", call_row)

    # The shim's CIE and FDE instructions, decoded, give the rows in the comment
    # and llvm-dwarfdump's rows.
    _, state = decode_cfa(header_bytes(header, "sg_shim_cie_insns"), data_align)
    fde_rows, _ = decode_cfa(header_bytes(header, "sg_shim_fde_insns"), data_align, state=state)
    commented = re.search(r"its rows:\n((?: \*   shim\+0x[0-9a-f]+: .*\n)+) \*/", header)
    check(commented, "no row list above sg_shim_fde_insns")
    commented = [(int(o, 16), r) for o, r in
                 re.findall(r"shim\+0x([0-9a-f]+): (.*)", commented.group(1))]
    check(fde_rows == commented, "FDE bytes decode to %s\ncomment says %s", fde_rows, commented)
    check(commented == [(lo, r) for lo, _, r in rows], "header rows %s\nllvm-dwarfdump: %s",
          commented, rows)

    # stencilgen dump prints the same rows and the frame shape.
    p = ctx.generator("dump", "--manifest", manifest, "--target", TRIPLE, timeout=T)
    check(p.returncode == 0, "dump exited %d:\n%s", p.returncode, p.stderr[-3000:])
    check(re.search(r"^  CFI rows of the shim \(code_align 1, data_align -8, return address in "
                    r"rip\):$", p.stdout, re.M), "dump lacks the CFI rows heading:\n%s",
          p.stdout[-3000:])
    dumped = [(int(a, 16), int(b, 16), r) for a, b, r in
              re.findall(r"^    0x([0-9a-f]+)-0x([0-9a-f]+): (CFA=.*)$", p.stdout, re.M)]
    check(dumped == rows, "dump rows %s\nllvm-dwarfdump: %s", dumped, rows)
    check(re.search(r"^  frame shape: CFA=rbp\+16, rbp saved at CFA-16, return address at "
                    r"CFA-8$", p.stdout, re.M), "dump lacks the frame shape line:\n%s",
          p.stdout[-3000:])


def test_check_command_writes_nothing(ctx):
    base, _ = bundled(ctx)

    def tree():
        snap = {}
        for d, dirs, files in os.walk(base):
            for name in dirs + files:
                path = os.path.join(d, name)
                st = os.lstat(path)
                snap[path] = (st.st_size, st.st_mtime_ns)
        return snap

    before = tree()
    p = ctx.generator("check", "--manifest", "stencils/stencils.yaml", cwd=base, timeout=T)
    check(p.returncode == 0, "check exited %d:\n%s", p.returncode, p.stderr[-3000:])
    check(not diagnostics(p.stderr), "check printed errors:\n%s", p.stderr)
    after = tree()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    check(not changed, "check wrote into the project: %s", changed[:10])


def test_landing_pads_all_or_none(ctx):
    """Every op and the shim start with a landing pad (the bundled stencils are
    built with -fcf-protection and -mbranch-protection), which the header says,
    so the runtime may guard JIT pages; a shim built without one while the ops
    have theirs is exit 1 naming the first op and the flag, outputs kept."""
    base, manifest = bundled(ctx)
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, manifest, out)
    for triple, pad in ((TRIPLE, "endbr64"), ("aarch64-unknown-linux-gnu", "bti c")):
        text = read(os.path.join(out, "jit_stencils-%s.h" % triple))
        check(header_define(text, "SG_TARGET_LANDING_PADS") == "1",
              "%s: SG_TARGET_LANDING_PADS is not 1", triple)
        check(re.search(r"^ \*   0000: [0-9a-f ]+\s+%s$" % pad, text, re.M),
              "%s: no op starts with %s", triple, pad)
    p = failing_build(ctx, manifest, out, before, "shim without a landing pad",
                      "--target", TRIPLE, "--extra-shim-cflags=-fcf-protection=none")
    want = ("ops/stack.c:5:1: error: %s: op push starts with a landing pad for "
            "indirect calls and the shim tinyvm_shim does not" % TRIPLE)
    check(want in norm(p.stderr) and "-fcf-protection=branch" in p.stderr,
          "no landing-pad error naming op push and the flag:\n%s", p.stderr[-3000:])


def test_return_address_signed_with_the_b_key_is_refused(ctx):
    """pac-ret with the B key needs a 'B' CIE augmentation in every executor
    FDE, which the runtime's CIE does not have: exit 1, saying which key works."""
    base, manifest = bundled(ctx)
    text = read(manifest).replace("shim_cflags: [-mbranch-protection=standard]",
                                  "shim_cflags: [-mbranch-protection=pac-ret+b-key]")
    check("pac-ret+b-key" in text, "the bundled AArch64 target has no shim_cflags to edit")
    write(manifest, text)
    out = os.path.join(ctx.tmp, "out")
    p = ctx.build_stencils(manifest, out, "--target", "aarch64-unknown-linux-gnu", check=False,
                           timeout=T)
    check(p.returncode == 1 and "signs its return address with the B key" in p.stderr
          and "-mbranch-protection=pac-ret or standard (A key)" in p.stderr,
          "exit %d:\n%s", p.returncode, p.stderr[-3000:])
