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

from sgtest import BUNDLED_TRIPLES, TRIPLE, TestFailure, check, read, sleb, uleb, write

ASAN = True

T = 180  # seconds; one generator run takes well under 5 s, even under ASan
OBJDUMP = ["llvm-objdump-22", "-d", "--no-show-raw-insn", "--no-print-imm-hex"]
HEADERS = ["jit_stencils.h", "jit_stencils-%s.h" % TRIPLE]
# The bundled manifest's other targets.
EXTRA_HEADERS = ["jit_stencils-%s.h" % t for t in BUNDLED_TRIPLES if t != TRIPLE]
FP_NAMES = ("%rbp", "%ebp", "%bp", "%bpl")
FP_REG = re.compile(r"%(?:rbp|ebp|bp|bpl)\b")

ERR_FP = re.compile(r"^\S+\.c:\d+:\d+: error: op (\w+) \(%s\) at \+0x([0-9a-f]+): (.*): "
                    r"writes the frame pointer$" % re.escape(TRIPLE), re.M)

# Every op of tests/fixtures/fpcheck/writes.c and the one instruction in it that
# writes the frame pointer, as LLVM prints it (AT&T). Where LLVM's spelling
# differs from the source, the source form is in the comment.
FORBIDDEN = {
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
CONTROLS = {
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

# DWARF register numbers of x86-64 (psABI), as the generator names them.
DWARF_REGS = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp"] + \
    ["r%d" % i for i in range(8, 16)] + ["rip"]
GPRS = ["rax", "rbx", "rcx", "rdx", "rsi", "rdi"] + ["r%d" % i for i in range(8, 16)]
GPR_ALIASES = {
    "rax": "rax eax ax al", "rbx": "rbx ebx bx bl", "rcx": "rcx ecx cx cl",
    "rdx": "rdx edx dx dl", "rsi": "rsi esi si sil", "rdi": "rdi edi di dil",
}


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


def norm(text):
    """An instruction as llvm-objdump or the generator prints it, comparable."""
    text = text.split("#")[0]  # objdump's "# 0xd <sym+0xd>" comments
    text = re.sub(r"\s*<[^>]*>\s*$", "", text)
    return re.sub(r"\s+", " ", text).strip()


def objdir(outdir):
    return os.path.join(outdir, ".stencilgen", TRIPLE)


# For the builds whose ops llvm-objdump reads: each op's own object
# (op_<name>.o), which only per-op units keep.
PER_OP = ("--units", "per-op")


def disassemble(ctx, obj):
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
            cur["insns"].append((int(m.group(1), 16) - base, norm(m.group(2))))
    return funcs


def op_insns(ctx, outdir, op):
    funcs = disassemble(ctx, os.path.join(objdir(outdir), "op_%s.o" % op))
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


def snapshot(outdir):
    """The published outputs: {name: (bytes, inode, mtime_ns)}."""
    snap = {}
    for name in HEADERS + [h for h in EXTRA_HEADERS if os.path.exists(os.path.join(outdir, h))]:
        path = os.path.join(outdir, name)
        st = os.stat(path)
        snap[name] = (read(path, "rb"), st.st_ino, st.st_mtime_ns)
    return snap


def check_untouched(outdir, before, what):
    """A failed build left the previous outputs exactly as they were, and no
    temporary file anywhere in the outdir."""
    entries = sorted(os.listdir(outdir))
    # The bundled manifest also writes its other targets' headers; they are
    # previous outputs too, and must be left alone like the others.
    extra = [h for h in EXTRA_HEADERS if h in before]
    check(entries == sorted(HEADERS + extra + [".stencilgen"]),
          "%s: the outdir holds %s, want only the previous outputs", what, entries)
    after = snapshot(outdir)
    for name in HEADERS + extra:
        check(after[name][0] == before[name][0], "%s: %s changed", what, name)
        check(after[name][1:] == before[name][1:],
              "%s: %s was replaced (inode/mtime changed) though the build failed", what, name)
    leftovers = [os.path.join(d, f) for d, _, files in os.walk(outdir) for f in files
                 if ".tmp" in f or f.startswith(".tmp")]
    check(not leftovers, "%s: temporary files left behind: %s", what, leftovers)


def good_build(ctx, manifest, outdir, *extra):
    p = ctx.build_stencils(manifest, outdir, *extra, check=False, timeout=T)
    check(p.returncode == 0, "good build of %s exited %d:\n%s", manifest, p.returncode,
          p.stderr[-4000:])
    return snapshot(outdir)


def failing_build(ctx, manifest, outdir, before, what, *extra, rc=1):
    """Build into an outdir holding good outputs; want exit rc and the outputs kept."""
    p = ctx.build_stencils(manifest, outdir, *extra, check=False, timeout=T)
    check(p.returncode == rc, "%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what,
          p.returncode, rc, p.stdout[-2000:], p.stderr[-6000:])
    check_untouched(outdir, before, what)
    return p


def indirect_calls(func):
    """[(offset, text, via_reloc)] of the indirect calls of a disassembled function."""
    insns, relocs = func["insns"], func["relocs"]
    calls = []
    for i, (off, text) in enumerate(insns):
        end = insns[i + 1][0] if i + 1 < len(insns) else off + 16
        if re.match(r"^call[qlw]? \*", text):
            calls.append((off, text, any(off <= r < end for r in relocs)))
    return calls


def shim_func(ctx, outdir, name):
    funcs = disassemble(ctx, os.path.join(objdir(outdir), "shim.o"))
    check(name in funcs, "shim.o has no function %s: %s", name, sorted(funcs))
    return funcs[name]


# --- DWARF CFI, read independently ------------------------------------------

def dwarfdump_rows(ctx, obj):
    """[(loc, end, row)] of the (single) FDE in obj's .eh_frame, by
    llvm-dwarfdump-22, with rows spelled as the generator spells them
    ("CFA=rbp+16 rbp=[CFA-16] rip=[CFA-8]")."""
    out = ctx.run(["llvm-dwarfdump-22", "--eh-frame", obj], check=True, timeout=T).stdout
    fdes = re.findall(r"^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ "
                      r"pc=([0-9a-f]+)\.\.\.([0-9a-f]+)\n(.*?)(?=\n\n[0-9a-f]+ |\Z)",
                      out, re.S | re.M)
    check(len(fdes) == 1, "%s: %d FDEs in llvm-dwarfdump output, want 1:\n%s", obj, len(fdes),
          out)
    start, end, body = fdes[0]
    rows = []
    for loc, cfa, regs in re.findall(r"^\s+0x([0-9a-f]+): CFA=(\S+?):?(?: (.*))?$", body, re.M):
        text = "CFA=" + cfa.lower()
        for rule in filter(None, (regs or "").split(", ")):
            text += " " + rule.lower().replace("[cfa", "[CFA")
        rows.append([int(loc, 16), None, text])
    for i, row in enumerate(rows):
        row[1] = rows[i + 1][0] if i + 1 < len(rows) else int(end, 16)
    check(rows and rows[0][0] == int(start, 16), "%s: cannot read the FDE's rows:\n%s", obj, body)
    return [tuple(r) for r in rows]


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


# --- 1. the frame-pointer check ---------------------------------------------

def test_every_fp_write_form_is_reported(ctx):
    src = read(fixture("fpcheck", "writes.c"))
    in_source = re.findall(r"^FP_WRITE(?:_LATE)?\((\w+),", src, re.M)
    check(sorted(in_source) == sorted(FORBIDDEN),
          "writes.c and FORBIDDEN disagree: %s", set(in_source) ^ set(FORBIDDEN))
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, fixture("fpcheck", "controls.yaml"), out)
    p = failing_build(ctx, fixture("fpcheck", "writes.yaml"), out, before,
                      "build of fpcheck/writes.yaml", *PER_OP)
    errors = diagnostics(p.stderr)
    reported = {}
    for op, off, text in ERR_FP.findall(p.stderr):
        reported.setdefault(op, []).append((int(off, 16), norm(text)))
    unexpected = [l for l in errors if not ERR_FP.match(l)]
    check(not unexpected, "errors other than frame-pointer writes:\n%s", "\n".join(unexpected))
    problems = []
    for op, want in sorted(FORBIDDEN.items()):
        hits = [(off, text) for off, text in op_insns(ctx, out, op) if text == want]
        if len(hits) != 1:
            problems.append("%s: llvm-objdump shows %d instructions '%s' (fixture broken?)"
                            % (op, len(hits), want))
            continue
        got = reported.get(op, [])
        if not got:
            problems.append("%s: NOT reported; it writes the frame pointer at +0x%x: %s"
                            % (op, hits[0][0], want))
        elif got != hits:
            problems.append("%s: reported %s, want exactly %s"
                            % (op, ["+0x%x: %s" % g for g in got], "+0x%x: %s" % hits[0]))
    extra = sorted(set(reported) - set(FORBIDDEN))
    if extra:
        problems.append("reported ops that are not in the fixture: %s" % extra)
    n = len(ERR_FP.findall(p.stderr))
    if n != len(FORBIDDEN):
        problems.append("%d frame-pointer errors, want one per op: %d" % (n, len(FORBIDDEN)))
    check(not problems, "%d problem(s):\n%s", len(problems), "\n".join(problems))


def test_fp_reads_stores_and_other_registers_pass(ctx):
    src = read(fixture("fpcheck", "controls.c"))
    check(sorted(re.findall(r"^OP\((\w+)\)", src, re.M)) == sorted(CONTROLS),
          "controls.c and CONTROLS disagree")
    out = os.path.join(ctx.tmp, "out")
    p = ctx.build_stencils(fixture("fpcheck", "controls.yaml"), out, *PER_OP, check=False,
                           timeout=T)
    check(p.returncode == 0 and not diagnostics(p.stderr),
          "the controls were rejected (exit %d):\n%s", p.returncode, p.stderr[-4000:])
    for op, pattern in sorted(CONTROLS.items()):
        texts = [t for _, t in op_insns(ctx, out, op)]
        check(any(re.fullmatch(pattern, t) for t in texts),
              "%s: no instruction matching '%s' in the object (the control tests nothing): %s",
              op, pattern, texts)
        check(not any(writes_fp_text(t) for t in texts), "%s really writes rbp: %s", op, texts)
    header = read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
    for op in CONTROLS:
        check("SG_OP_%s = " % op in header, "%s missing from the header", op)


# --- 3. register pressure: the check is what keeps rbp safe -----------------

def test_register_pressure_without_reserved_fp_is_caught(ctx):
    out = os.path.join(ctx.tmp, "out")
    manifest = fixture("fpcheck", "pressure.yaml")
    # Control: the generator's own flags keep the allocator off rbp, however
    # high the pressure.
    before = good_build(ctx, manifest, out, *PER_OP)
    good = op_insns(ctx, out, "pressure")
    text = "\n".join(t for _, t in good)
    check(not FP_REG.search(text), "with -mframe-pointer=reserved the op uses rbp:\n%s", text)
    # ... and the pressure is real: every other GPR is in use and values spill.
    for reg in GPRS:
        names = GPR_ALIASES.get(reg, "%s %sd %sw %sb" % (reg, reg, reg, reg)).split()
        check(any(re.search(r"%%%s\b" % n, text) for n in names),
              "%s unused: the fixture no longer has high register pressure", reg)
    check(re.search(r"\(%rsp\)", text), "no spill: the fixture's pressure is too low")

    # Without the reserved frame pointer, rbp is allocated and the check fires.
    p = failing_build(ctx, manifest, out, before, "pressure op with -mframe-pointer=none",
                      "--extra-cflags=-Xclang -mframe-pointer=none", *PER_OP)
    bad = op_insns(ctx, out, "pressure")
    writes = [(off, t) for off, t in bad if writes_fp_text(t)]
    check(any(not t.startswith("pop") for _, t in writes),
          "rbp was not allocated as a general register; the test proves nothing: %s", writes)
    got = [(int(off, 16), norm(t)) for op, off, t in ERR_FP.findall(p.stderr)]
    ops = {op for op, _, _ in ERR_FP.findall(p.stderr)}
    check(ops == {"pressure"}, "reported ops %s, want only pressure:\n%s", ops, p.stderr[-3000:])
    check(sorted(got) == sorted(writes),
          "reported %s\nllvm-objdump shows these writes of rbp: %s", got, writes)
    errors = diagnostics(p.stderr)
    check(len(errors) == len(writes), "other errors: %s", errors)


# --- 2. the shim ---------------------------------------------------------------

def bundled(ctx):
    base = ctx.bundled_copy()
    return base, os.path.join(base, "stencils", "stencils.yaml")


def test_shim_without_frame_pointer(ctx):
    # -fomit-frame-pointer alone is enough: it comes after the generator's
    # -fno-omit-frame-pointer, and the shim is not a leaf, so
    # -mno-omit-leaf-frame-pointer does not keep the frame.
    base, manifest = bundled(ctx)
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, manifest, out)
    p = failing_build(ctx, manifest, out, before, "shim built with -fomit-frame-pointer",
                      "--extra-shim-cflags=-fomit-frame-pointer")
    err = p.stderr
    check("shim tinyvm_shim (%s): the frame is not frame-pointer based at the call into JIT "
          "code" % TRIPLE in err, "no frame-shape error:\n%s", err)
    # The bundled manifest's AArch64 target fails too, in either order: read
    # the x86-64 error's own lines.
    err = err[err.index("shim tinyvm_shim (%s): the frame is not" % TRIPLE):]
    found = re.search(r"^\s+found:\s+(CFA=\S+(?: \S+=\[CFA[-+]\d+\])*)\s+at shim\+0x([0-9a-f]+) "
                      r"(.*)$", err, re.M)
    check(found, "no 'found:' line with a row and the call:\n%s", err)
    check(found.group(1).startswith("CFA=rsp+"), "found row not based on rsp: %s",
          found.group(1))
    check(re.search(r"^\s+expected:\s+CFA=rbp\+k", err, re.M), "no 'expected:' line:\n%s", err)
    check(re.search(r"^\s+fix:\s+.*-fno-omit-frame-pointer", err, re.M), "no 'fix:' line:\n%s",
          err)
    # The row and the call, read independently from the object the build kept.
    calls = indirect_calls(shim_func(ctx, out, "tinyvm_shim"))
    jit = [(off, text) for off, text, via_reloc in calls if not via_reloc]
    check(len(jit) == 1, "llvm-objdump: %s", calls)
    check((int(found.group(2), 16), norm(found.group(3))) == jit[0],
          "found line names +0x%s %s, llvm-objdump says %s", found.group(2), found.group(3),
          jit[0])
    rows = dwarfdump_rows(ctx, os.path.join(objdir(out), "shim.o"))
    check(found.group(1) == row_at(rows, jit[0][0]),
          "found row %s, llvm-dwarfdump says %s", found.group(1), row_at(rows, jit[0][0]))


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


A64 = "aarch64-unknown-linux-gnu"


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


def test_expect_frame_mismatch(ctx):
    base, manifest = bundled(ctx)
    out = os.path.join(ctx.tmp, "out")
    before = good_build(ctx, manifest, out)
    text = read(manifest)
    # The first pin is x86-64 Linux's (macOS x86-64 has the same shape).
    first = text.index("expect_frame:")
    check(text.find("cfa_offset: 16", first) == text.find("cfa_offset:", first),
          "the bundled pin is not cfa_offset: 16")
    with open(manifest, "w") as f:
        f.write(text.replace("cfa_offset: 16", "cfa_offset: 24", 1))
    # Where the expect_frame mapping starts (flow style: its '{').
    lines = text.splitlines()
    line = next(i for i, l in enumerate(lines, 1) if re.match(r"\s*expect_frame:", l))
    check("{" in lines[line - 1], "the bundled expect_frame is not a flow mapping")
    col = lines[line - 1].index("{") + 1
    p = failing_build(ctx, manifest, out, before, "expect_frame cfa_offset 24")
    want = ("%s:%d:%d: error: shim tinyvm_shim (%s): the shim's frame shape differs from "
            "expect_frame" % (manifest, line, col, TRIPLE))
    check(want in p.stderr, "want\n  %s\ngot:\n%s", want, p.stderr)
    check(re.search(r"^\s+derived\s+expected\s*$", p.stderr, re.M), "no table header:\n%s",
          p.stderr)
    for key, derived, expected in (("cfa_register", "rbp", "rbp"), ("cfa_offset", "16", "24"),
                                   ("fp_offset", "-16", "-16"), ("ra_offset", "-8", "-8")):
        check(re.search(r"^\s+%s\s+%s\s+%s\s*$" % (key, derived, expected), p.stderr, re.M),
              "no row '%s %s %s' in:\n%s", key, derived, expected, p.stderr)


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
    rows = dwarfdump_rows(ctx, shim_obj)

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
