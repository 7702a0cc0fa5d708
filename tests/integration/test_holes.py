"""Holes differential: every hole the generator emits, checked against an
independent reading of the same object with llvm-readelf-22 (relocations,
section bytes). Covers the bundled ops and the relocation-kind fixtures."""
import os
import re

from sgtest import (BUNDLED_OPS, TRIPLE, Header, check, manifest_symbols, readelf_relocs, section_bytes,
                    sections_of, value_of)

ASAN = True

# How the generator must classify each ELF relocation type (x86-64 psABI).
PATCH_OF = {
    "R_X86_64_64": "ABS64",
    "R_X86_64_32": "ABS32",
    "R_X86_64_32S": "ABS32S",
    "R_X86_64_PC32": "PCREL32",
    "R_X86_64_PLT32": "X86_BRANCH32",
    "R_X86_64_GOTPCREL": "GOTPCREL32",
    "R_X86_64_GOTPCRELX": "GOTPCREL32",
    "R_X86_64_REX_GOTPCRELX": "GOTPCREL32",
}


def check_op(ctx, header, op, obj, symbols):
    """The op's code, data and holes against the object, independently read."""
    secs = sections_of(ctx, obj)
    relocs = readelf_relocs(ctx, obj)
    # Selected by flags, not names: the large code model uses .ltext/.lrodata.
    code_secs = [n for n, s in secs.items() if "X" in s[2] and s[1] > 0]
    check(len(code_secs) == 1, "%s: code sections %s, extend the test", op, code_secs)
    text = section_bytes(ctx, obj, code_secs[0])
    code = header.code(op)
    holes = header.code_holes(op)
    text_relocs = relocs.get(code_secs[0], [])
    # The trailing jump to the continuation: exactly `jmp rel32` (5 bytes) cut.
    if len(code) != len(text):
        check(len(code) == len(text) - 5, "%s: code %d bytes, .text %d", op, len(code), len(text))
        check(text[-5] == 0xE9, "%s: removed bytes are not a jmp rel32", op)
        last = text_relocs[-1]
        check(last[0] == len(text) - 4 and last[2] == "_JIT_CONTINUE" and last[3] == -4,
              "%s: removed jump was not to the continuation: %s", op, last)
        text_relocs = text_relocs[:-1]
    check(code == text[:len(code)], "%s: code bytes differ from .text", op)
    check(len(holes) == len(text_relocs), "%s: %d holes, %d relocations: %s vs %s",
          op, len(holes), len(text_relocs), holes, text_relocs)
    rodata = [n for n, s in secs.items()
              if s[0] == "PROGBITS" and "A" in s[2] and not set("WX") & set(s[2]) and s[1] > 0]
    check(len(rodata) <= 1, "%s: several rodata sections, extend the test", op)
    for hole, (off, rtype, sym, addend, symval) in zip(holes, text_relocs):
        where = "%s+0x%x" % (op, off)
        check(hole["offset"] == off, "%s: hole offset 0x%x", where, hole["offset"])
        check(hole["reloc"] == rtype, "%s: reloc %s vs %s", where, hole["reloc"], rtype)
        check(hole["symbol"] == sym, "%s: symbol %s vs %s", where, hole["symbol"], sym)
        check(hole["patch"] == PATCH_OF[rtype], "%s: %s classified %s", where, rtype,
              hole["patch"])
        value, index = value_of(sym, symbols)
        if value:
            check(hole["value"] == value and hole["index"] == index,
                  "%s: value %s/%d, want %s/%d", where, hole["value"], hole["index"], value, index)
            check(hole["addend"] == addend, "%s: addend %d vs %d", where, hole["addend"], addend)
        else:
            # A local symbol: this stencil's data (one rodata section at offset 0) or code.
            in_data = sym in rodata or (rodata and sym.startswith(".L"))
            want = "DATA" if in_data else "CODE"
            check(hole["value"] == want, "%s: value %s, want %s", where, hole["value"], want)
            check(hole["addend"] == addend + symval, "%s: addend %d vs %d+%d", where,
                  hole["addend"], addend, symval)
    if rodata:
        check(header.data(op) == section_bytes(ctx, obj, rodata[0]), "%s: data bytes differ", op)
    else:
        check(header.data(op) == b"", "%s: data without a rodata section", op)


def run_differential(ctx, manifest, expect_ops=None, expect_relocs=()):
    out = os.path.join(ctx.tmp, "out")
    # llvm-readelf reads each op's own object (op_<name>.o), which only per-op units keep.
    ctx.build_stencils(manifest, out, "-j", "2", "--units", "per-op")
    header = Header(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
    if expect_ops is not None:
        check(len(header.ops) == expect_ops, "%d ops, want %d", len(header.ops), expect_ops)
    symbols = manifest_symbols(manifest)
    seen = set()
    for op in header.ops:
        obj = os.path.join(out, ".stencilgen", TRIPLE, "op_%s.o" % op)
        check_op(ctx, header, op, obj, symbols)
        for hs in header.code_holes(op):
            seen.add(hs["reloc"])
    for r in expect_relocs:
        check(r in seen, "no %s hole in %s (saw %s)", r, manifest, sorted(seen))
    return header


def test_bundled_ops_match_readelf(ctx):
    h = run_differential(ctx, ctx.path("stencils", "stencils.yaml"), expect_ops=BUNDLED_OPS,
                         expect_relocs=["R_X86_64_PLT32", "R_X86_64_PC32", "R_X86_64_64",
                                        "R_X86_64_GOTPCRELX"])
    # Plain continuation ops end up without the jump: `add` is two instructions.
    check(not any(x["value"] == "CONTINUE" for x in h.code_holes("add")),
          "add still has its continuation jump")


def test_relocation_kinds_match_readelf(ctx):
    """Absolute (-fno-pic), 64-bit (large code model), non-relaxable GOT forms,
    and operands loaded from the GOT (STENCIL_OPERANDS_IN_GOT)."""
    fx = ctx.path("tests", "fixtures", "relocs")
    run_differential(ctx, os.path.join(fx, "nopic.yaml"),
                     expect_relocs=["R_X86_64_32", "R_X86_64_32S"])
    run_differential(ctx, os.path.join(fx, "large.yaml"), expect_relocs=["R_X86_64_64"])
    run_differential(ctx, os.path.join(fx, "norelax.yaml"), expect_relocs=["R_X86_64_GOTPCREL"])
    run_differential(ctx, os.path.join(fx, "got.yaml"), expect_relocs=["R_X86_64_REX_GOTPCRELX"])
