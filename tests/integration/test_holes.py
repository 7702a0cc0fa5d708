"""Holes differential, for x86-64 and AArch64 Linux: every hole the generator
emits, checked against an independent reading of the same object with
llvm-readelf-22 (relocations, section bytes). Covers the bundled ops and the
relocation-kind fixtures of each target; together the fixtures produce every
relocation type the target supports. Each check is written once and runs as
one test per target (test_<check>_x86_64, test_<check>_aarch64)."""
import os

from sgtest import (BUNDLED_OPS, TRIPLE, Header, check, for_targets, manifest_symbols,
                    readelf_relocs, section_bytes, sections_of, value_of)

ASAN = True

T = 180
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


class Target:
    """What the differential needs to know about one target."""

    def __init__(self, name, triple, patch_of, jump, landing_pad, bundled_relocs, fixtures):
        self.name, self.triple, self.patch_of = name, triple, patch_of
        # The trailing jump to the continuation the generator cuts: its size,
        # a test of its bytes, its relocation types and addend.
        self.jump_size, self.is_jump, self.jump_relocs, self.jump_addend = jump
        self.landing_pad = landing_pad  # the bytes every bundled op starts with
        self.bundled_relocs = bundled_relocs  # types the bundled ops must have
        self.fixtures = fixtures  # [(manifest, types it must produce)]


X86_64 = Target(
    "x86_64", TRIPLE,
    # How the generator must classify each ELF relocation type (x86-64 psABI).
    {
        "R_X86_64_64": "ABS64",
        "R_X86_64_32": "ABS32",
        "R_X86_64_32S": "ABS32S",
        "R_X86_64_PC32": "PCREL32",
        "R_X86_64_PLT32": "X86_BRANCH32",
        "R_X86_64_GOTPCREL": "GOTPCREL32",
        "R_X86_64_GOTPCRELX": "GOTPCREL32",
        "R_X86_64_REX_GOTPCRELX": "GOTPCREL32",
    },
    (5, lambda b: b[0] == 0xE9, ("R_X86_64_PLT32", "R_X86_64_PC32"), -4),  # jmp rel32
    bytes.fromhex("f30f1efa"),  # endbr64 (-fcf-protection)
    ["R_X86_64_PLT32", "R_X86_64_PC32", "R_X86_64_64", "R_X86_64_GOTPCRELX"],
    # Absolute (-fno-pic), 64-bit (large code model), non-relaxable GOT
    # forms, and operands loaded from the GOT (STENCIL_OPERANDS_IN_GOT).
    [(os.path.join(FIXTURES, "relocs", "nopic.yaml"), ["R_X86_64_32", "R_X86_64_32S"]),
     (os.path.join(FIXTURES, "relocs", "large.yaml"), ["R_X86_64_64"]),
     (os.path.join(FIXTURES, "relocs", "norelax.yaml"), ["R_X86_64_GOTPCREL"]),
     (os.path.join(FIXTURES, "relocs", "got.yaml"), ["R_X86_64_REX_GOTPCRELX"])])

AARCH64 = Target(
    "aarch64", "aarch64-unknown-linux-gnu",
    # How the generator must classify each ELF relocation type (AAELF64).
    {
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
    },
    (4, lambda b: int.from_bytes(b, "little") & 0xFC000000 == 0x14000000,  # b imm26
     ("R_AARCH64_JUMP26",), 0),
    bytes.fromhex("5f2403d5"),  # bti c (-mbranch-protection)
    ["R_AARCH64_JUMP26", "R_AARCH64_ADR_GOT_PAGE", "R_AARCH64_LD64_GOT_LO12_NC",
     "R_AARCH64_ADR_PREL_PG_HI21", "R_AARCH64_ADD_ABS_LO12_NC"],
    # Small (default, with -fplt), tiny and large code models; asm branches
    # and MOVZ/MOVK; a PC-relative word and absolute pointers in data.
    [(os.path.join(FIXTURES, "aarch64", "relocs", name + ".yaml"), [])
     for name in ("small", "tiny", "large")])


def local_value(where, sym, code_sec, data_base):
    """(value, base) of a hole against a local symbol: a data section at its
    offset in the stencil's data, a .L label in the only data section, or
    this stencil's code."""
    if sym in data_base:
        return "DATA", data_base[sym]
    if sym.startswith(".L") and len(data_base) == 1:
        return "DATA", 0
    check(sym == code_sec or sym.startswith(".text"),
          "%s: %s is neither a data section nor code", where, sym)
    return "CODE", 0


def check_holes(t, where, holes, relocs, symbols, code_sec, data_base):
    """Holes against relocations (one section each), offsets included."""
    check(len(holes) == len(relocs), "%s: %d holes, %d relocations: %s vs %s", where, len(holes),
          len(relocs), holes, relocs)
    for hole, (off, rtype, sym, addend, symval) in zip(holes, relocs):
        at = "%s+0x%x" % (where, off)
        check(hole["offset"] == off, "%s: hole offset 0x%x", at, hole["offset"])
        check(rtype in t.patch_of, "%s: relocation %s is not in the test's table", at, rtype)
        check(hole["reloc"] == rtype, "%s: reloc %s vs %s", at, hole["reloc"], rtype)
        check(hole["symbol"] == sym, "%s: symbol %s vs %s", at, hole["symbol"], sym)
        check(hole["patch"] == t.patch_of[rtype], "%s: %s classified %s", at, rtype,
              hole["patch"])
        value, index = value_of(sym, symbols)
        if value:
            check(hole["value"] == value and hole["index"] == index,
                  "%s: value %s/%d, want %s/%d", at, hole["value"], hole["index"], value, index)
            check(hole["addend"] == addend, "%s: addend %d vs %d", at, hole["addend"], addend)
        else:
            want, base = local_value(at, sym, code_sec, data_base)
            check(hole["value"] == want, "%s: value %s, want %s", at, hole["value"], want)
            check(hole["addend"] == base + addend + symval, "%s: addend %d vs %d+%d+%d", at,
                  hole["addend"], base, addend, symval)


def cut_jump(t, op, code, text, text_relocs, holes):
    """The code ends where .text does, or the trailing jump to the
    continuation was cut: check it was exactly that; the relocations left."""
    if len(code) == len(text):
        return text_relocs
    n = t.jump_size
    check(len(code) == len(text) - n, "%s: code %d bytes, .text %d", op, len(code), len(text))
    check(t.is_jump(text[-n:]), "%s: removed bytes %s are not the jump", op, text[-n:].hex())
    last = text_relocs[-1]
    check(last[0] == len(text) - 4 and last[1] in t.jump_relocs and last[2] == "_JIT_CONTINUE"
          and last[3] == t.jump_addend, "%s: removed jump was not to the continuation: %s", op,
          last)
    check(not any(h["value"] == "CONTINUE" and h["offset"] >= len(code) for h in holes),
          "%s: a hole is left past the code", op)
    return text_relocs[:-1]


def check_op(ctx, t, header, op, obj, symbols):
    """The op's code, data and holes against the object, independently read;
    returns the relocation types seen."""
    secs = sections_of(ctx, obj)
    relocs = readelf_relocs(ctx, obj)
    # Selected by flags, not names: the large code model uses .ltext/.lrodata.
    code_secs = [n for n, s in secs.items() if "X" in s[2] and s[1] > 0]
    check(len(code_secs) == 1, "%s: code sections %s, extend the test", op, code_secs)
    text = section_bytes(ctx, obj, code_secs[0])
    code = header.code(op)
    holes = header.code_holes(op)
    text_relocs = cut_jump(t, op, code, text, relocs.get(code_secs[0], []), holes)
    check(code == text[:len(code)], "%s: code bytes differ from .text", op)
    # Read-only data: every allocated, non-writable, non-executable section
    # with contents, laid out in section order at its alignment.
    rodata = [(n, s) for n, s in secs.items()
              if s[0] == "PROGBITS" and "A" in s[2] and not set("WX") & set(s[2]) and s[1] > 0]
    data, base, data_relocs = b"", {}, []
    for name, (_, _, _, align) in rodata:
        at = -(-len(data) // max(align, 1)) * max(align, 1)
        data += b"\0" * (at - len(data)) + section_bytes(ctx, obj, name)
        base[name] = at
        data_relocs += [(r[0] + at,) + r[1:] for r in relocs.get(name, [])]
    check(header.data(op) == data, "%s: data bytes differ (%d vs %d bytes)", op,
          len(header.data(op)), len(data))
    check_holes(t, op, holes, text_relocs, symbols, code_secs[0], base)
    check_holes(t, op + " (data)", header.data_holes(op), data_relocs, symbols, code_secs[0],
                base)
    return {r[1] for r in text_relocs + data_relocs}


def run_differential(ctx, t, manifest, expect_ops=None, expect_relocs=()):
    """Every op of manifest for target t; returns (header, relocation types seen)."""
    out = os.path.join(ctx.tmp, "out-" + os.path.basename(manifest))
    # llvm-readelf reads each op's own object (op_<name>.o), which only per-op units keep;
    # ops whole, as their objects lay them out (split ops are checked by running their
    # hot and cold parts: test_hot_cold, test_unwind, test_emit).
    ctx.build_stencils(manifest, out, "--target", t.triple, "-j", "2", "--units", "per-op",
                       "--no-hot-cold", timeout=T)
    header = Header(os.path.join(out, "jit_stencils-%s.h" % t.triple))
    if expect_ops is not None:
        check(len(header.ops) == expect_ops, "%d ops, want %d", len(header.ops), expect_ops)
    symbols = manifest_symbols(manifest)
    seen = set()
    for op in header.ops:
        obj = os.path.join(out, ".stencilgen", t.triple, "op_%s.o" % op)
        seen |= check_op(ctx, t, header, op, obj, symbols)
    for r in expect_relocs:
        check(r in seen, "no %s hole in %s (saw %s)", r, manifest, sorted(seen))
    return header, seen


@for_targets(X86_64, AARCH64)
def bundled_ops_match_readelf(ctx, t):
    h, _ = run_differential(ctx, t, ctx.path("stencils", "stencils.yaml"),
                            expect_ops=BUNDLED_OPS, expect_relocs=t.bundled_relocs)
    # Plain continuation ops end up without the jump: `add` is its landing pad
    # (the bundled targets are built with -fcf-protection and
    # -mbranch-protection) and two instructions, 12 bytes on both targets.
    add = h.code("add")
    check(len(add) == 12 and add.startswith(t.landing_pad) and not h.code_holes("add"),
          "add: %d bytes %s (want 12, from %s), holes %s", len(add), add.hex(),
          t.landing_pad.hex(), h.code_holes("add"))
    check("(jump to the continuation removed: %d bytes)" % t.jump_size in h.text,
          "no removed-jump note")


@for_targets(X86_64, AARCH64)
def relocation_kinds_match_readelf(ctx, t):
    """Each relocation-kind fixture (see the Target's fixtures) produces the
    types it is there for; together, every type of the target's table."""
    seen = set()
    for manifest, expect in t.fixtures:
        seen |= run_differential(ctx, t, manifest, expect_relocs=expect)[1]
    missing = sorted(set(t.patch_of) - seen)
    check(not missing, "relocation types no fixture produced: %s", missing)
