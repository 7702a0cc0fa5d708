"""AArch64 target, generator side (for
aarch64-unknown-linux-gnu): holes, the frame-pointer check, the shim's frame
shape and the generated header. Every expectation is derived independently of
the generator: relocations and section bytes from llvm-readelf-22, instruction
offsets and texts from llvm-objdump-22, CFI rows from llvm-dwarfdump-22.

* holes differential: every hole of every bundled op for AArch64, and of the
  relocation-kind fixtures (tests/fixtures/aarch64/relocs: small, tiny and
  large code models, branches and MOVZ/MOVK written in asm, a PC-relative word
  in data), against llvm-readelf-22's reading of the same object; together
  they cover every relocation type the target supports;
* the frame-pointer check: one fixture op per instruction form that writes
  x29 or w29 (tests/fixtures/aarch64/fpcheck/writes.c), each reported exactly
  at its offset, and controls that store or read x29 (frame records with sp
  written back, x29 as a base without writeback) or write x28/x30, accepted;
* the shim: the derived frame shape equals the manifest's pin and the row
  llvm-dwarfdump gives at the shim's `blr`; the header's CFI blobs decode to
  those rows; a shim without frame pointer, and a wrong pin, are exit 1;
* the headers compile as C11 for AArch64 (the dispatcher picks AArch64).

The runtime side (qemu-user) is in test_aarch64_qemu.py."""
import os
import re
import shutil

from sgtest import (BUNDLED_OPS, BUNDLED_TRIPLES, Header, TestFailure, check, manifest_symbols, read, readelf_relocs,
                    section_bytes, sections_of, value_of, write)

ASAN = True

A64 = "aarch64-unknown-linux-gnu"
T = 180
OBJDUMP = ["llvm-objdump-22", "-d", "--no-show-raw-insn", "--no-print-imm-hex"]
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "aarch64")

# How the generator must classify each ELF relocation type (AAELF64).
PATCH_OF = {
    "R_AARCH64_ABS64": "ABS64",
    "R_AARCH64_PREL32": "PCREL32",
    "R_AARCH64_CALL26": "AARCH64_BRANCH26",
    "R_AARCH64_JUMP26": "AARCH64_BRANCH26",
    "R_AARCH64_CONDBR19": "AARCH64_PCREL19",
    "R_AARCH64_LD_PREL_LO19": "AARCH64_PCREL19",
    "R_AARCH64_TSTBR14": "AARCH64_TSTBR14",
    "R_AARCH64_ADR_PREL_LO21": "AARCH64_ADR21",
    "R_AARCH64_ADR_PREL_PG_HI21": "AARCH64_ADRP",
    "R_AARCH64_ADD_ABS_LO12_NC": "AARCH64_ADD_LO12",
    "R_AARCH64_LDST8_ABS_LO12_NC": "AARCH64_LDST8_LO12",
    "R_AARCH64_LDST16_ABS_LO12_NC": "AARCH64_LDST16_LO12",
    "R_AARCH64_LDST32_ABS_LO12_NC": "AARCH64_LDST32_LO12",
    "R_AARCH64_LDST64_ABS_LO12_NC": "AARCH64_LDST64_LO12",
    "R_AARCH64_LDST128_ABS_LO12_NC": "AARCH64_LDST128_LO12",
    "R_AARCH64_ADR_GOT_PAGE": "AARCH64_GOT_ADRP",
    "R_AARCH64_LD64_GOT_LO12_NC": "AARCH64_GOT_LO12",
    "R_AARCH64_GOT_LD_PREL19": "AARCH64_GOT_PCREL19",
    "R_AARCH64_MOVW_UABS_G0": "AARCH64_MOVW_G0",
    "R_AARCH64_MOVW_UABS_G0_NC": "AARCH64_MOVW_G0_NC",
    "R_AARCH64_MOVW_UABS_G1": "AARCH64_MOVW_G1",
    "R_AARCH64_MOVW_UABS_G1_NC": "AARCH64_MOVW_G1_NC",
    "R_AARCH64_MOVW_UABS_G2": "AARCH64_MOVW_G2",
    "R_AARCH64_MOVW_UABS_G2_NC": "AARCH64_MOVW_G2_NC",
    "R_AARCH64_MOVW_UABS_G3": "AARCH64_MOVW_G3",
}

# The bundled shim's frame, as pinned in stencils/stencils.yaml.
PIN = {"cfa_register": "x29", "cfa_offset": 96, "fp_offset": -96, "ra_offset": -88}

# Every op of fpcheck/writes.c and the one instruction in it that writes x29
# or w29, as llvm-objdump-22 prints it.
FORBIDDEN = {
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
UNPREDICTABLE = {"w_stp_fp_pre_fp"}

# Every op of fpcheck/controls.c and the instruction that makes it a control.
CONTROLS = {
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

ERR_FP = re.compile(r"^\S+\.c:\d+:\d+: error: op (\w+) \(%s\) at \+0x([0-9a-f]+): (.*): "
                    r"writes the frame pointer$" % re.escape(A64), re.M)
ERR_UNDECODABLE = re.compile(r"^\S+\.c:\d+:\d+: error: op (\w+) \(%s\) at \+0x([0-9a-f]+): "
                             r"cannot decode the instruction .*cannot prove it leaves the "
                             r"frame pointer alone$" % re.escape(A64), re.M)


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


# --- 1. holes differential ----------------------------------------------------

def is_b(word):
    return word & 0xFC000000 == 0x14000000


def check_holes(where, holes, relocs, symbols, data_base):
    """Holes against relocations (one section each); data_base maps a rodata
    section name to its offset in the stencil's data."""
    check(len(holes) == len(relocs), "%s: %d holes, %d relocations: %s vs %s", where, len(holes),
          len(relocs), holes, relocs)
    for hole, (off, rtype, sym, addend, symval) in zip(holes, relocs):
        at = "%s+0x%x" % (where, off)
        check(rtype in PATCH_OF, "%s: relocation %s is not in the test's table", at, rtype)
        check(hole["reloc"] == rtype, "%s: reloc %s vs %s", at, hole["reloc"], rtype)
        check(hole["symbol"] == sym, "%s: symbol %s vs %s", at, hole["symbol"], sym)
        check(hole["patch"] == PATCH_OF[rtype], "%s: %s classified %s", at, rtype, hole["patch"])
        value, index = value_of(sym, symbols)
        if value:
            check(hole["value"] == value and hole["index"] == index,
                  "%s: value %s/%d, want %s/%d", at, hole["value"], hole["index"], value, index)
            check(hole["addend"] == addend, "%s: addend %d vs %d", at, hole["addend"], addend)
        else:
            # A section symbol (or local label) of this stencil's data or code.
            check(sym in data_base or sym.startswith(".text"),
                  "%s: %s is neither a data section nor code", at, sym)
            want = "DATA" if sym in data_base else "CODE"
            base = data_base.get(sym, 0)
            check(hole["value"] == want, "%s: value %s, want %s", at, hole["value"], want)
            check(hole["addend"] == base + addend + symval, "%s: addend %d vs %d+%d+%d", at,
                  hole["addend"], base, addend, symval)


def check_op(ctx, header, op, obj, symbols):
    """The op's code, data and holes against the object, independently read."""
    secs = sections_of(ctx, obj)
    relocs = readelf_relocs(ctx, obj)
    code_secs = [n for n, s in secs.items() if "X" in s[2] and s[1] > 0]
    check(len(code_secs) == 1, "%s: code sections %s, extend the test", op, code_secs)
    text = section_bytes(ctx, obj, code_secs[0])
    code = header.code(op)
    holes = header.code_holes(op)
    text_relocs = relocs.get(code_secs[0], [])
    if len(code) != len(text):
        # The trailing `b _JIT_CONTINUE` (4 bytes, JUMP26, addend 0) was cut.
        check(len(code) == len(text) - 4, "%s: code %d bytes, .text %d", op, len(code), len(text))
        check(is_b(int.from_bytes(text[-4:], "little")), "%s: removed bytes are not a b", op)
        last = text_relocs[-1]
        check(last[:4] == (len(text) - 4, "R_AARCH64_JUMP26", "_JIT_CONTINUE", 0),
              "%s: removed jump was not to the continuation: %s", op, last)
        text_relocs = text_relocs[:-1]
        check(not any(h["value"] == "CONTINUE" and h["offset"] == len(code) for h in holes),
              "%s: a hole is left past the code", op)
    check(code == text[:len(code)], "%s: code bytes differ from .text", op)
    for hole, rel in zip(holes, text_relocs):
        check(hole["offset"] == rel[0], "%s: hole offset 0x%x vs relocation at 0x%x", op,
              hole["offset"], rel[0])
    # Read-only data: every allocated, non-writable, non-executable section
    # with contents, laid out in section order at its alignment.
    rodata = [(n, s) for n, s in secs.items()
              if s[0] == "PROGBITS" and "A" in s[2] and not set("WX") & set(s[2]) and s[1] > 0]
    data, base = b"", {}
    data_holes = []
    for name, (_, size, _, align) in rodata:
        at = -(-len(data) // max(align, 1)) * max(align, 1)
        data += b"\0" * (at - len(data)) + section_bytes(ctx, obj, name)
        base[name] = at
        data_holes += [(off + at,) + r[1:] for r in relocs.get(name, []) for off in [r[0]]]
    check(header.data(op) == data, "%s: data bytes differ (%d vs %d bytes)", op,
          len(header.data(op)), len(data))
    check_holes(op, holes, text_relocs, symbols, base)
    dh = header.data_holes(op)
    for hole, rel in zip(dh, data_holes):
        check(hole["offset"] == rel[0], "%s: data hole offset 0x%x vs 0x%x", op, hole["offset"],
              rel[0])
    check_holes(op + " (data)", dh, data_holes, symbols, base)
    return [r[1] for r in text_relocs] + [r[1] for r in data_holes]


def run_differential(ctx, manifest, expect_ops=None):
    out = os.path.join(ctx.tmp, "out-" + os.path.basename(manifest))
    header = good_build(ctx, manifest, out, "-j", "2", *PER_OP)
    if expect_ops is not None:
        check(len(header.ops) == expect_ops, "%d ops, want %d", len(header.ops), expect_ops)
    symbols = manifest_symbols(manifest)
    seen = set()
    for op in header.ops:
        obj = os.path.join(objdir(out), "op_%s.o" % op)
        seen.update(check_op(ctx, header, op, obj, symbols))
    return header, seen


def test_aarch64_bundled_ops_match_readelf(ctx):
    h, seen = run_differential(ctx, ctx.path("stencils", "stencils.yaml"), expect_ops=BUNDLED_OPS)
    for r in ("R_AARCH64_JUMP26", "R_AARCH64_ADR_GOT_PAGE", "R_AARCH64_LD64_GOT_LO12_NC",
              "R_AARCH64_ADR_PREL_PG_HI21", "R_AARCH64_ADD_ABS_LO12_NC"):
        check(r in seen, "no %s hole in the bundled ops (saw %s)", r, sorted(seen))
    # Plain continuation ops end up without the jump: `add` is its landing pad
    # (the bundled AArch64 target is built with -mbranch-protection) and two
    # instructions.
    check(len(h.code("add")) == 12 and h.code("add")[:4] == bytes.fromhex("5f2403d5")
          and not h.code_holes("add"),
          "add: %d bytes (bti c, ldr, add), holes %s", len(h.code("add")), h.code_holes("add"))
    check("(jump to the continuation removed: 4 bytes)" in h.text, "no removed-jump note")


def test_aarch64_relocation_kinds_match_readelf(ctx):
    """Small (default, with -fplt), tiny and large code models; asm branches
    and MOVZ/MOVK; a PC-relative word and absolute pointers in data."""
    seen = set()
    for name in ("small", "tiny", "large"):
        _, s = run_differential(ctx, os.path.join(FIXTURES, "relocs", name + ".yaml"))
        seen |= s
    missing = sorted(set(PATCH_OF) - seen)
    check(not missing, "relocation types no fixture produced: %s", missing)


def test_aarch64_unsupported_relocation(ctx):
    """A relocation the target does not support (ABS32 in data) is exit 1
    naming op, target, section, offset and type; nothing is written."""
    proj = os.path.join(ctx.tmp, "proj")
    os.makedirs(proj)
    write(os.path.join(proj, "abs32.c"), """
__asm__(".pushsection .rodata.abs32,\\"a\\",@progbits\\n.p2align 2\\n"
        "abs32_word: .word _JIT_OPERAND0\\n.popsection");
extern const int32_t abs32_word __attribute__((visibility("hidden")));
OP(abs32)
{
    tos = abs32_word;
    CONTINUE();
}
""")
    manifest = os.path.join(proj, "m.yaml")
    write(manifest, read(os.path.join(FIXTURES, "fpcheck", "controls.yaml"))
          .replace("../../../../", os.path.dirname(os.path.dirname(FIXTURES)) + "/../")
          .replace("controls.c", "abs32.c"))
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
    proj = os.path.join(ctx.tmp, "proj")
    os.makedirs(proj)
    write(os.path.join(proj, "atomic.c"), """
/* tos = old value of *sp, which gets tos added atomically */
OP(fetch_add)
{
    tos = __atomic_fetch_add((int64_t *)sp, tos, __ATOMIC_SEQ_CST);
    CONTINUE();
}
""")
    manifest = os.path.join(proj, "m.yaml")
    write(manifest, read(os.path.join(FIXTURES, "fpcheck", "controls.yaml"))
          .replace("../../../../", os.path.dirname(os.path.dirname(FIXTURES)) + "/../")
          .replace("controls.c", "atomic.c"))
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


# --- 2. the frame-pointer check ----------------------------------------------

def test_aarch64_every_fp_write_form_is_reported(ctx):
    src = read(os.path.join(FIXTURES, "fpcheck", "writes.c"))
    in_source = re.findall(r"^FP_WRITE(?:_LATE)?\((\w+),", src, re.M)
    check(sorted(in_source) == sorted(FORBIDDEN),
          "writes.c and FORBIDDEN disagree: %s", set(in_source) ^ set(FORBIDDEN))
    out = os.path.join(ctx.tmp, "out")
    good_build(ctx, os.path.join(FIXTURES, "fpcheck", "controls.yaml"), out)
    before = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out) if f.endswith(".h")}
    p = build(ctx, os.path.join(FIXTURES, "fpcheck", "writes.yaml"), out, *PER_OP)
    check(p.returncode == 1, "exit %d, want 1:\n%s", p.returncode, p.stderr[-4000:])
    after = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out) if f.endswith(".h")}
    check(after == before, "the failed build changed the previous headers")
    reported = {}
    for op, off, text in ERR_FP.findall(p.stderr):
        reported.setdefault(op, []).append((int(off, 16), norm(text)))
    undecodable = {op: int(off, 16) for op, off in ERR_UNDECODABLE.findall(p.stderr)}
    errors = [l for l in p.stderr.splitlines() if " error: " in l and "runtime error:" not in l]
    unexpected = [l for l in errors if not ERR_FP.match(l) and not ERR_UNDECODABLE.match(l)]
    check(not unexpected, "other errors:\n%s", "\n".join(unexpected))
    problems = []
    for op, want in sorted(FORBIDDEN.items()):
        hits = [(off, text) for off, text in op_insns(ctx, out, op) if text == want]
        if len(hits) != 1:
            problems.append("%s: llvm-objdump shows %d instructions '%s' (fixture broken?)"
                            % (op, len(hits), want))
            continue
        got = reported.get(op, [])
        if op in UNPREDICTABLE and not got:
            if undecodable.get(op) != hits[0][0]:
                problems.append("%s: NOT reported (neither as a write nor as undecodable) at "
                                "+0x%x: %s" % (op, hits[0][0], want))
        elif not got:
            problems.append("%s: NOT reported; it writes the frame pointer at +0x%x: %s"
                            % (op, hits[0][0], want))
        elif got != hits:
            problems.append("%s: reported %s, want exactly %s"
                            % (op, ["+0x%x: %s" % g for g in got], "+0x%x: %s" % hits[0]))
    extra = sorted((set(reported) | set(undecodable)) - set(FORBIDDEN))
    if extra:
        problems.append("reported ops that are not in the fixture: %s" % extra)
    check(not problems, "%d problem(s):\n%s", len(problems), "\n".join(problems))


def test_aarch64_fp_stores_reads_and_neighbours_pass(ctx):
    src = read(os.path.join(FIXTURES, "fpcheck", "controls.c"))
    check(sorted(re.findall(r"^USES_FP\((\w+),", src, re.M)) == sorted(CONTROLS),
          "controls.c and CONTROLS disagree")
    out = os.path.join(ctx.tmp, "out")
    p = build(ctx, os.path.join(FIXTURES, "fpcheck", "controls.yaml"), out, *PER_OP)
    check(p.returncode == 0 and " error: " not in p.stderr,
          "the controls were rejected (exit %d):\n%s", p.returncode, p.stderr[-4000:])
    header = read(os.path.join(out, "jit_stencils-%s.h" % A64))
    for op, want in sorted(CONTROLS.items()):
        texts = [t for _, t in op_insns(ctx, out, op)]
        check(want in texts, "%s: no '%s' in the object (the control tests nothing): %s", op,
              want, texts)
        check("SG_OP_%s = " % op in header, "%s missing from the header", op)


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


def test_aarch64_register_pressure_stays_off_x29(ctx):
    """The generator's flags keep clang's register allocator off x29 under
    more live values than registers; without the frame pointer reserved, x29
    is allocated and the check reports every write llvm-objdump shows."""
    manifest = os.path.join(FIXTURES, "fpcheck", "pressure.yaml")
    out = os.path.join(ctx.tmp, "out")
    good_build(ctx, manifest, out, *PER_OP)
    body = "\n".join(t for _, t in op_insns(ctx, out, "pressure"))
    check(not re.search(r"\b[xw]29\b", body), "x29 used with the reserved flag:\n%s", body)
    regs = set(re.findall(r"\bx(\d+)\b", body))
    check(len(regs) >= 27 and re.search(r"\[sp", body),
          "the fixture no longer presses on the registers (%d used, spills: %s)", len(regs),
          bool(re.search(r"\[sp", body)))
    p = build(ctx, manifest, out, "--extra-cflags=-Xclang -mframe-pointer=none", *PER_OP)
    writes = [(off, t) for off, t in op_insns(ctx, out, "pressure") if writes_x29_text(t)]
    check(any(not t.startswith("ldp") for _, t in writes),
          "x29 was not allocated as a general register; the test proves nothing: %s", writes)
    check(p.returncode == 1, "x29 written %s, yet exit %d", writes, p.returncode)
    got = sorted((int(o, 16), norm(t)) for _, o, t in ERR_FP.findall(p.stderr))
    check(got == sorted(writes), "reported %s\nllvm-objdump shows these writes of x29: %s", got,
          writes)


# --- 3. the shim, the pin, the header ----------------------------------------------

def dwarf_name(reg):
    """llvm-dwarfdump's AArch64 register names (W29, WSP, B8) as the generator's."""
    reg = reg.lower()
    if reg == "wsp":
        return "sp"
    if re.match(r"^[wx]\d+$", reg):
        return "x" + reg[1:]
    if re.match(r"^[bhsdqv]\d+$", reg):
        return "v" + reg[1:]
    raise TestFailure("unknown register name %s" % reg)


def dwarfdump_rows(ctx, obj):
    """[(loc, end, row)] of the shim's FDE, spelled as the generator spells
    rows, registers in DWARF order."""
    out = ctx.run(["llvm-dwarfdump-22", "--eh-frame", obj], check=True, timeout=T).stdout
    fdes = re.findall(r"^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ "
                      r"pc=([0-9a-f]+)\.\.\.([0-9a-f]+)\n(.*?)(?=\n\n[0-9a-f]+ |\Z)",
                      out, re.S | re.M)
    check(len(fdes) == 1, "%s: %d FDEs, want 1:\n%s", obj, len(fdes), out)
    start, end, body = fdes[0]
    rows = []
    for loc, cfa, regs in re.findall(r"^\s+0x([0-9a-f]+): CFA=(\S+?):?(?: (.*))?$", body, re.M):
        m = re.match(r"(\w+)([+-]\d+)?$", cfa)
        text = "CFA=%s%+d" % (dwarf_name(m.group(1)), int(m.group(2) or 0))
        rules = []
        for rule in filter(None, (regs or "").split(", ")):
            r, val = rule.split("=", 1)
            if r == "reg34":  # RA_SIGN_STATE (pointer authentication)
                rules.append((34, "ra_sign_state=%s" % val))
                continue
            name = dwarf_name(r)
            num = int(name[1:]) + (64 if name[0] == "v" else 0)
            rules.append((num, "%s=%s" % (name, val)))
        text += "".join(" " + r for _, r in sorted(rules))
        rows.append([int(loc, 16), None, text])
    for i, row in enumerate(rows):
        row[1] = rows[i + 1][0] if i + 1 < len(rows) else int(end, 16)
    return [tuple(r) for r in rows]


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
    rows = dwarfdump_rows(ctx, shim_obj)
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


def bundled_a64(ctx):
    base = ctx.bundled_copy()
    return base, os.path.join(base, "stencils", "stencils.yaml")


def test_aarch64_pin_mismatch_and_shim_without_frame_pointer(ctx):
    base, manifest = bundled_a64(ctx)
    out = os.path.join(ctx.tmp, "out")
    good_build(ctx, manifest, out)
    before = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out) if f.endswith(".h")}
    # A shim without frame pointer: exit 1, the row found at the call is sp-based.
    p = build(ctx, manifest, out, "--extra-shim-cflags=-fomit-frame-pointer")
    check(p.returncode == 1, "no frame pointer: exit %d\n%s", p.returncode, p.stderr[-3000:])
    check("shim tinyvm_shim (%s): the frame is not frame-pointer based at the call into JIT code"
          % A64 in p.stderr, "no frame-shape error:\n%s", p.stderr)
    found = re.search(r"^\s+found:\s+(CFA=\S+)", p.stderr, re.M)
    check(found and found.group(1).startswith("CFA=sp+"), "found row: %s", p.stderr)
    check(re.search(r"^\s+expected:\s+CFA=x29\+k, x29=\[CFA\+m\], x30=\[CFA\+n\]", p.stderr, re.M),
          "no 'expected:' line:\n%s", p.stderr)
    # A wrong pin: exit 1 with both shapes.
    text = read(manifest)
    write(manifest, text.replace("cfa_register: x29, cfa_offset: 96",
                                 "cfa_register: x29, cfa_offset: 80"))
    p = build(ctx, manifest, out)
    check(p.returncode == 1, "wrong pin: exit %d\n%s", p.returncode, p.stderr[-3000:])
    check("shim tinyvm_shim (%s): the shim's frame shape differs from expect_frame" % A64
          in p.stderr, "no pin error:\n%s", p.stderr)
    for key, derived, expected in (("cfa_register", "x29", "x29"), ("cfa_offset", "96", "80"),
                                   ("fp_offset", "-96", "-96"), ("ra_offset", "-88", "-88")):
        check(re.search(r"^\s+%s\s+%s\s+%s\s*$" % (key, derived, expected), p.stderr, re.M),
              "no row '%s %s %s' in:\n%s", key, derived, expected, p.stderr)
    after = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out) if f.endswith(".h")}
    check(after == before, "a failed build changed the previous headers")


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
