"""macOS (x86_64-apple-darwin, aarch64-apple-darwin: Mach-O) on the generator's side.

Patching differential (test_patched_bytes_equal_ld64_lld): for every Mach-O
relocation kind stencilgen reads (tests/fixtures/macho/ops.c: x86-64
UNSIGNED in code and data, SIGNED, SIGNED_1/2/4, non-extern SIGNED to
__literal8/__literal16, BRANCH, GOT_LOAD, GOT; arm64 UNSIGNED in data,
BRANCH26, PAGE21, PAGEOFF12 on add, strb, strh, str w, ldr x and ldr q,
ADDEND pairs, GOT_LOAD_PAGE21/PAGEOFF12), the bytes the generated emitters
patch (tests/patch/emit_diff.c, run on this machine) equal what ld64.lld-22
links from the op's own object at the same address, with the same values:
absolute symbols for the holes the code reaches directly, and symbols of a
.tbd stub library for those it loads from GOT slots (lld keeps a __got slot,
bound at load time, only for a dylib's symbol). A GOT hole is compared by
what its instruction(s) load, decoded from the instructions: in the
emitter's output the contents of the slot reached, in lld's the value of the
symbol bound to its __got slot (or, for the op's own data, the address lld
computes after relaxing the load, or keeps in a slot); every other bit of the
code, and all the data, byte for byte. The trailing jump the generator
removed lands, in lld's image, exactly after the stencil.

The same with the emitter's free GOT slots starting at the last slot of a
page (test_got_pairs_across_a_page_boundary: an ADRP and its LDR must name
one slot), and for GOT loads of an op's own data, one of them 16 bytes into
it (test_got_loads_of_the_ops_own_data, tests/fixtures/macho/got_data.c).

The darwin shims' frame as the header states it (SG_UNWIND_*) equals what
llvm-objdump-22 reads in the shim's object: its compact unwind encoding
(x86-64 RBP_FRAME; arm64 FRAME, or DWARF mode) and the row of its __eh_frame
FDE at the call into JIT code.

expect_frame pins the darwin shims' shapes like the others'. The fixture
also builds for both Linux triples.

Refusals: relocations stencilgen cannot patch (a thread-local variable's TLV
relocations, a SUBTRACTOR pair in an op's data) exit 1 naming the op, the
relocation, its section and offset, and write no header.
"""
import os
import re
import struct

from sgtest import Header, check, got_reach, manifest_symbols, masked, read, write

ASAN = True  # the Mach-O reader in the sanitized generator too

TRIPLES = ["x86_64-apple-darwin", "aarch64-apple-darwin"]
ARCH = {"x86_64-apple-darwin": "x86_64", "aarch64-apple-darwin": "arm64"}
LD64 = "ld64.lld-22"
OBJDUMP = "llvm-objdump-22"
FIXTURE = ("tests", "fixtures", "macho", "macho.yaml")
GOT_DATA_FIXTURE = ("tests", "fixtures", "macho", "got_data.yaml")
# The same manifests for the ELF targets of the same architectures.
TO_LINUX = (("x86_64-apple-darwin", "x86_64-unknown-linux-gnu"),
            ("aarch64-apple-darwin", "aarch64-unknown-linux-gnu"))

PAGEZERO = 0x7F0000000
# With -sectalign __TEXT __text 0x1000 lld puts __text on the page after the
# header's. Run-time symbols and the jump target are in reach of BL (+-128
# MiB) and of x86-64's rel32; vm_cells is 16-byte aligned, as every scaled
# PAGEOFF12 access to it needs.
CODE_AT = PAGEZERO + 0x1000
TARGET_AT = CODE_AT + 0x800
SYMBOL_AT = CODE_AT + 0x100000
# The emitter's GOT (its own slots, apart from lld's __got): at a page start,
# and so that its first free slot is the last of a page.
EMIT_GOT_PAGE = CODE_AT + 0x200000
OPERANDS = [0x8877665544332211, 0x0123456789ABCDEF, 0x8877665544332210, 0xFEDCBA9876543210]

# Mach-O relocation types (<mach-o/x86_64/reloc.h>, <mach-o/arm64/reloc.h>).
RELOC_NAMES = {
    "x86_64": ["X86_64_RELOC_UNSIGNED", "X86_64_RELOC_SIGNED", "X86_64_RELOC_BRANCH",
               "X86_64_RELOC_GOT_LOAD", "X86_64_RELOC_GOT", "X86_64_RELOC_SUBTRACTOR",
               "X86_64_RELOC_SIGNED_1", "X86_64_RELOC_SIGNED_2", "X86_64_RELOC_SIGNED_4",
               "X86_64_RELOC_TLV"],
    "arm64": ["ARM64_RELOC_UNSIGNED", "ARM64_RELOC_SUBTRACTOR", "ARM64_RELOC_BRANCH26",
              "ARM64_RELOC_PAGE21", "ARM64_RELOC_PAGEOFF12", "ARM64_RELOC_GOT_LOAD_PAGE21",
              "ARM64_RELOC_GOT_LOAD_PAGEOFF12", "ARM64_RELOC_POINTER_TO_GOT",
              "ARM64_RELOC_TLVP_LOAD_PAGE21", "ARM64_RELOC_TLVP_LOAD_PAGEOFF12",
              "ARM64_RELOC_ADDEND"],
}
GOT_RELOCS = {"X86_64_RELOC_GOT_LOAD", "X86_64_RELOC_GOT", "ARM64_RELOC_GOT_LOAD_PAGE21",
              "ARM64_RELOC_GOT_LOAD_PAGEOFF12"}

# What the fixture must make the generator write: (patch kind, value) pairs
# of the header's hole listings, and the relocations they came from.
WANT_KINDS = {
    "x86_64-apple-darwin": {
        ("ABS64", "OPERAND"), ("ABS64", "SYMBOL"), ("ABS64", "DATA"), ("PCREL32", "DATA"),
        ("PCREL32", "SYMBOL"), ("GOTPCREL32", "SYMBOL"), ("X86_BRANCH32", "SYMBOL"),
        ("X86_BRANCH32", "CONTINUE"), ("X86_BRANCH32", "JUMP_TARGET")},
    "aarch64-apple-darwin": {
        ("ABS64", "SYMBOL"), ("ABS64", "DATA"), ("AARCH64_BRANCH26", "SYMBOL"),
        ("AARCH64_BRANCH26", "CONTINUE"), ("AARCH64_BRANCH26", "JUMP_TARGET"),
        ("AARCH64_ADRP", "DATA"), ("AARCH64_ADRP", "SYMBOL"), ("AARCH64_ADD_LO12", "DATA"),
        ("AARCH64_LDST8_LO12", "SYMBOL"), ("AARCH64_LDST16_LO12", "SYMBOL"),
        ("AARCH64_LDST32_LO12", "SYMBOL"), ("AARCH64_LDST64_LO12", "SYMBOL"),
        ("AARCH64_LDST128_LO12", "DATA"), ("AARCH64_GOT_ADRP", "OPERAND"),
        ("AARCH64_GOT_LO12", "OPERAND"), ("AARCH64_GOT_ADRP", "SYMBOL"),
        ("AARCH64_GOT_LO12", "SYMBOL")},
}
WANT_RELOCS = {
    "x86_64-apple-darwin": {"X86_64_RELOC_UNSIGNED", "X86_64_RELOC_SIGNED",
                            "X86_64_RELOC_BRANCH", "X86_64_RELOC_GOT_LOAD", "X86_64_RELOC_GOT",
                            "X86_64_RELOC_SIGNED_1", "X86_64_RELOC_SIGNED_2",
                            "X86_64_RELOC_SIGNED_4"},
    "aarch64-apple-darwin": {"ARM64_RELOC_UNSIGNED", "ARM64_RELOC_BRANCH26",
                             "ARM64_RELOC_PAGE21", "ARM64_RELOC_PAGEOFF12",
                             "ARM64_RELOC_GOT_LOAD_PAGE21", "ARM64_RELOC_GOT_LOAD_PAGEOFF12",
                             "ARM64_RELOC_ADDEND"},
}

LC_SEGMENT_64, LC_SYMTAB = 0x19, 0x2


# --- a small Mach-O reader (independent of the generator's LLVM-based one) ---

def macho_sections(image):
    """[(segment, section, address, bytes, relocation offset, count)] of a
    64-bit little-endian Mach-O file; zero-fill sections read as zeros."""
    magic, _cpu, _sub, _ftype, ncmds = struct.unpack_from("<IiiII", image, 0)
    check(magic == 0xFEEDFACF, "not a 64-bit Mach-O file (magic 0x%x)", magic)
    found, at = [], 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", image, at)
        if cmd == LC_SEGMENT_64:
            nsects = struct.unpack_from("<I", image, at + 64)[0]
            for i in range(nsects):
                s = at + 72 + 80 * i
                sect, seg = (image[s + o:s + o + 16].rstrip(b"\0").decode() for o in (0, 16))
                addr, sz, off, _align, reloff, nreloc, flags = struct.unpack_from(
                    "<QQIIIII", image, s + 32)
                zerofill = (flags & 0xFF) in (1, 0xC, 0x12)  # S_ZEROFILL, GB_ZEROFILL, TLV
                body = b"\0" * sz if zerofill or not off else image[off:off + sz]
                found.append((seg, sect, addr, body, reloff, nreloc))
        at += size
    return found


def macho_relocations(image, arch):
    """[(section, offset, type name, symbol name or None)] of an object."""
    symbols, at = [], 32
    ncmds = struct.unpack_from("<I", image, 16)[0]
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", image, at)
        if cmd == LC_SYMTAB:
            symoff, nsyms, stroff = struct.unpack_from("<III", image, at + 8)
            for k in range(nsyms):
                strx = struct.unpack_from("<I", image, symoff + 16 * k)[0]
                symbols.append(image[stroff + strx:image.index(b"\0", stroff + strx)].decode())
        at += size
    relocs = []
    for seg, sect, _addr, _body, reloff, nreloc in macho_sections(image):
        for k in range(nreloc):
            address, info = struct.unpack_from("<iI", image, reloff + 8 * k)
            check(address >= 0, "%s,%s: a scattered relocation", seg, sect)
            num, extern, typ = info & 0xFFFFFF, (info >> 27) & 1, info >> 28
            names = RELOC_NAMES[arch]
            relocs.append(("%s,%s" % (seg, sect), address,
                           names[typ] if typ < len(names) else "type %d" % typ,
                           symbols[num] if extern else None))
    return relocs


def binds(ctx, image_path):
    """{address: symbol} of the image's bind table (its GOT slots' symbols)."""
    p = ctx.run([OBJDUMP, "--macho", "--bind", image_path], timeout=60, check=True)
    found = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) >= 7 and f[1] == "__got" and f[2].startswith("0x"):
            found[int(f[2], 16)] = f[-1]
    return found


# --- building and linking ---

def build_fixture(ctx, manifest=None, out=None):
    out = out or os.path.join(ctx.tmp, "out")
    # Per-op units keep each op's own object, which ld64.lld links.
    ctx.build_stencils(manifest or ctx.path(*FIXTURE), out, "--units", "per-op", timeout=300)
    return out


def compile_emitter(ctx, out, triple):
    exe = os.path.join(ctx.tmp, "emit_diff-" + triple)
    ctx.run(["clang-22", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror",
             '-DJIT_HEADER="jit_stencils-%s.h"' % triple, "-I", out, "-I", ctx.path("runtime"),
             ctx.path("tests", "patch", "emit_diff.c"), "-o", exe], check=True, timeout=300)
    return exe


def link(ctx, triple, name, obj, values, from_dylib):
    """ld64.lld's image of the op's object: each name of `values` (C names)
    an absolute symbol, except those in from_dylib, which a .tbd stub exports
    (their values are bound at load time: lld keeps their GOT slots)."""
    arch = ARCH[triple]
    work = os.path.join(ctx.tmp, triple, name)
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "holes.s")
    write(src, "".join(".globl _%s\n.set _%s, 0x%x\n" % (n, n, v) for n, v in values.items()
                       if n not in from_dylib))
    holes = os.path.join(work, "holes.o")
    ctx.run(["clang-22", "--target=%s-apple-macosx11.0" % arch, "-c", src, "-o", holes],
            check=True, timeout=60)
    inputs = [obj, holes]
    if from_dylib:
        tbd = os.path.join(work, "holes.tbd")
        write(tbd, "--- !tapi-tbd\ntbd-version: 4\ntargets: [ %s-macos ]\n"
                   "install-name: /stencilgen/libholes.dylib\nexports:\n"
                   "  - targets: [ %s-macos ]\n    symbols: [ %s ]\n...\n" % (
                       arch, arch, ", ".join("_" + n for n in sorted(from_dylib))))
        inputs.append(tbd)
    image = os.path.join(work, "image")
    args = [LD64, "-arch", arch, "-platform_version", "macos", "11.0", "11.0",
            "-e", "__JIT_ENTRY", "-pagezero_size", "0x%x" % PAGEZERO,
            "-sectalign", "__TEXT", "__text", "0x1000", "-o", image]
    if arch == "arm64":
        args.append("-ignore_optimization_hints")  # else adrp+add may become adr+nop
    p = ctx.run(args + inputs, timeout=120)
    check(p.returncode == 0, "%s %s: ld64.lld failed:\n%s%s", triple, name, p.stdout, p.stderr)
    return image


# --- the instructions of GOT holes ---

def hole_value(h, symbols):
    """The value a GOT hole's slot must hold and the C name lld binds it to;
    None for the op's own code or data, whose address only the image knows."""
    if h["value"] == "OPERAND":
        return OPERANDS[h["index"]], "_JIT_OPERAND%d" % h["index"]
    if h["value"] == "SYMBOL":
        return SYMBOL_AT + 0x40 * h["index"], symbols[h["index"]]
    return None, None


def hole_text(h, symbols):
    """A hole's value as the header's listing writes it: OPERAND0, SYMBOL
    vm_print, DATA + 0x10."""
    what = {"OPERAND": "OPERAND%d" % h["index"],
            "SYMBOL": "SYMBOL %s" % symbols[h["index"]]}.get(h["value"], h["value"])
    a = h["addend"]
    return what + (" + 0x%x" % a if a > 0 else " - 0x%x" % -a if a < 0 else "")


def lld_value(lld, address, relaxed):
    """What a GOT hole's instructions load in lld's image: the address itself
    when relaxed, else the slot's: its bound symbol's value, or the address
    lld wrote there for a symbol the image defines (rebased, not bound)."""
    if relaxed:
        return address, "the address 0x%x (the load relaxed)" % address
    if address is None:
        return None, "no slot"
    if address in lld["bound"]:
        sym = lld["bound"][address]
        v = lld["values"].get(sym[1:])
        return v, "0x%x, a slot bound to %s (%s)" % (address, sym,
                                                     "?" if v is None else "0x%x" % v)
    at = address - lld["got"][0]
    if 0 <= at <= len(lld["got_bytes"]) - 8 and at % 8 == 0:
        v = struct.unpack_from("<Q", lld["got_bytes"], at)[0]
        return v, "0x%x, a slot holding 0x%x" % (address, v)
    return None, "0x%x, outside __got" % address


def emit(ctx, emitter, index, data_at, got_at, symbols):
    args = [emitter, "emit", index, "%x" % CODE_AT, "%x" % data_at, "%x" % got_at,
            "%x" % TARGET_AT] + ["%x" % v for v in OPERANDS]
    args += ["%x" % (SYMBOL_AT + 0x40 * i) for i in range(len(symbols))]
    p = ctx.run(args, timeout=60)
    if p.returncode != 0:
        return None, "the emitter failed (exit %d): %s%s" % (p.returncode, p.stdout, p.stderr)
    return dict(l.split(" ", 1) if " " in l else (l, "") for l in p.stdout.splitlines()), None


def emitted_problems(name, where, emitted, got_at, lld, code_holes, symbols):
    """How the emitter's output (its GOT at got_at) differs from ld64.lld's
    image: every bit of code but the GOT holes', all the data, and what each
    GOT hole loads on either side."""
    problems = []
    code, data, got = (bytes.fromhex(emitted[k]) for k in ("code", "data", "got"))
    emit_reach, emit_owned = got_reach(code, CODE_AT, code_holes)
    lld_reach, lld_owned = got_reach(lld["code"], CODE_AT, code_holes)
    if masked(code, emit_owned, lld_owned) != masked(lld["code"], emit_owned, lld_owned):
        problems.append("%s: code\n  emitter %s\n  ld64.lld %s" % (name, code.hex(),
                                                                  lld["code"].hex()))
    if data != lld["data"]:
        problems.append("%s: data\n  emitter %s\n  ld64.lld %s" % (name, data.hex(),
                                                                  lld["data"].hex()))
    slots = [struct.unpack_from("<Q", got, k)[0] for k in range(0, len(got), 8)]
    for h in code_holes:
        off = h["offset"]
        if off not in emit_reach:
            continue
        want, sym = hole_value(h, symbols)
        theirs, how = lld_value(lld, *lld_reach[off])
        if want is not None and theirs != want:
            problems.append("%s: in ld64.lld's image %s hole +0x%x loads from %s, not a slot "
                            "bound to _%s (0x%x)" % (name, h["patch"], off, how, sym, want))
        want = theirs if want is None else want
        slot = emit_reach[off][0]
        k = None if slot is None else slot - got_at
        held = slots[k // 8] if k is not None and k % 8 == 0 and 0 <= k < len(got) else None
        if held != want or want is None:
            holding = ["0x%x" % (got_at + 8 * i) for i, v in enumerate(slots) if v == want]
            problems.append("%s (GOT %s): %s hole +0x%x (%s) reaches %s, which holds %s; "
                            "ld64.lld's loads %s (the emitter's slots holding that value: %s)" % (
                                name, where, h["patch"], off,
                                hole_text(h, symbols),
                                "no slot" if slot is None else "0x%x" % slot,
                                "nothing" if held is None else "0x%x" % held, how,
                                ", ".join(holding) or "none"))
    return problems


# Where the emitter's GOT goes: its symbol slots first, then one slot per
# other GOT hole, from a page start, or from the last slot of a page.
IN_ONE_PAGE, ACROSS_A_PAGE = "in one page", "across a page boundary"


def fixture_ops(fixture):
    """The OP names of a fixture manifest's op files, in order."""
    here = os.path.dirname(fixture)
    files = re.findall(r"^  - (\S+\.c)$", read(fixture), re.M)
    return [op for f in files for op in re.findall(r"^OP\((\w+)\)$",
                                                   read(os.path.join(here, f)), re.M)]


def differential(ctx, triple, where, fixture=FIXTURE):
    """Problems found and the header's (patch kind, value) pairs and
    relocation names, for one triple, with the emitter's GOT placed `where`,
    for the fixture build_fixture built into ctx.tmp/out."""
    arch = ARCH[triple]
    out = os.path.join(ctx.tmp, "out")
    emitter = compile_emitter(ctx, out, triple)
    header = Header(os.path.join(out, "jit_stencils-%s.h" % triple))
    symbols = manifest_symbols(ctx.path(*fixture))
    stencils = [l.split() for l in ctx.run([emitter, "list"], check=True).stdout.splitlines()]
    ops = fixture_ops(ctx.path(*fixture))
    check(sorted(s[1] for s in stencils) == sorted(ops), "%s: the header's stencils %s are not "
          "the fixture's ops %s", triple, [s[1] for s in stencils], ops)
    objdir = os.path.join(out, ".stencilgen", triple)
    problems, kinds, relocs = [], set(), set()
    for index, name, code_size, data_size, falls in stencils:
        code_size, data_size = int(code_size), int(data_size)
        obj = os.path.join(objdir, "op_%s.o" % name)
        obj_relocs = macho_relocations(read(obj, "rb"), arch)
        relocs |= {r[2] for r in obj_relocs}
        # Symbols loaded from GOT slots come from the stub library.
        from_dylib = {r[3][1:] for r in obj_relocs if r[2] in GOT_RELOCS}
        values = {"_JIT_CONTINUE": CODE_AT + code_size, "_JIT_JUMP_TARGET": TARGET_AT}
        values.update(("_JIT_OPERAND%d" % i, v) for i, v in enumerate(OPERANDS))
        values.update((n, SYMBOL_AT + 0x40 * i) for i, n in enumerate(symbols))
        image = link(ctx, triple, name, obj, values, from_dylib)
        secs = macho_sections(read(image, "rb"))
        text = [s for s in secs if s[:2] == ("__TEXT", "__text")]
        check(text and text[0][2] == CODE_AT, "%s %s: __text not at 0x%x: %s", triple, name,
              CODE_AT, [(s[0], s[1], hex(s[2])) for s in secs])
        text = text[0][3]
        got_secs = [s for s in secs if s[1] == "__got"]
        lld_got = (got_secs[0][2], got_secs[0][2] + len(got_secs[0][3])) if got_secs else (0, 0)
        bound = binds(ctx, image) if got_secs else {}
        others = [s for s in secs if s[1] not in ("__text", "__got", "__unwind_info",
                                                  "__eh_frame") and s[3]]
        odd = [s for s in others if s[1] in ("__stubs", "__stub_helper", "__la_symbol_ptr",
                                             "__thread_vars", "__thread_data", "__thread_bss")]
        if odd:
            problems.append("%s: lld made %s: a call or reference went through the stub "
                            "library" % (name, ", ".join(s[1] for s in odd)))
            continue
        # The stencil's data is every data section of the op, in one run:
        # compare lld's bytes from the first one's address on.
        data_at = min((s[2] for s in others), default=CODE_AT + 0x10000)
        lld_data = bytearray(data_size)
        for seg, sect, addr, body, _r, _n in others:
            if addr + len(body) > data_at + data_size:
                problems.append("%s: lld placed %s,%s at 0x%x, past the stencil's %d bytes of "
                                "data from 0x%x" % (name, seg, sect, addr, data_size, data_at))
            at = addr - data_at
            lld_data[at:at + len(body)] = body[:max(0, data_size - at)]
        code_holes = header.code_holes(name)
        got_at = EMIT_GOT_PAGE - 8 * len(symbols) - (8 if where == ACROSS_A_PAGE else 0)
        emitted, error = emit(ctx, emitter, index, data_at, got_at, symbols)
        if error:
            problems.append("%s (GOT %s): %s" % (name, where, error))
        else:
            lld = dict(code=text[:code_size], data=bytes(lld_data), got=lld_got, bound=bound,
                       got_bytes=got_secs[0][3] if got_secs else b"", values=values)
            problems += emitted_problems(name, where, emitted, got_at, lld, code_holes, symbols)
        # The jump the generator removed goes, in lld's image, to where it
        # stands: right after the stencil, where the next one is placed.
        tail = text[code_size:code_size + (5 if arch == "x86_64" else 4)]
        want_tail = b"\xe9\xfb\xff\xff\xff" if arch == "x86_64" else b"\x00\x00\x00\x14"
        if falls == "1" and tail != want_tail:
            problems.append("%s: falls through, but ld64.lld's code goes on with %s, not a jump "
                            "to right after the stencil" % (name, tail.hex() or "nothing"))
        section = header.text[header.text.index("/* %s - " % name):]
        listing = section[:section.index("static const")]
        kinds |= set(re.findall(r"hole \+0x[0-9a-f]+: (\w+) <- ([A-Z_]+[A-Z])", listing))
    return list(dict.fromkeys(problems)), kinds, relocs  # once each, in order


def test_patched_bytes_equal_ld64_lld(ctx):
    build_fixture(ctx)
    failures = []
    for triple in TRIPLES:
        problems, kinds, relocs = differential(ctx, triple, IN_ONE_PAGE)
        if problems:
            failures.append("%s: patched bytes differ from ld64.lld's:\n%s" % (
                triple, "\n".join(problems)))
        # The fixture covers every kind the Mach-O reader produces, in code and data.
        if not WANT_KINDS[triple] <= kinds:
            failures.append("%s: kinds not covered by the fixture: %s" % (
                triple, sorted(WANT_KINDS[triple] - kinds)))
        if not WANT_RELOCS[triple] <= relocs:
            failures.append("%s: relocations not in the fixture's objects: %s" % (
                triple, sorted(WANT_RELOCS[triple] - relocs)))
    check(not failures, "\n".join(failures))


def test_got_loads_of_the_ops_own_data(ctx):
    # A GOT hole against the start of the op's data: the slot holds the
    # table's address, and the instruction names the slot itself.
    build_fixture(ctx, ctx.path(*GOT_DATA_FIXTURE))
    want = {"x86_64-apple-darwin": {("GOTPCREL32", "DATA")},
            "aarch64-apple-darwin": {("AARCH64_GOT_ADRP", "DATA"), ("AARCH64_GOT_LO12", "DATA")}}
    failures = []
    for triple in TRIPLES:
        problems, kinds, _ = differential(ctx, triple, IN_ONE_PAGE, GOT_DATA_FIXTURE)
        if problems:
            failures.append("%s: GOT loads of the op's own data: patched bytes differ from "
                            "ld64.lld's:\n%s" % (triple, "\n".join(problems)))
        if not want[triple] <= kinds:
            failures.append("%s: kinds not covered: %s" % (triple, sorted(want[triple] - kinds)))
    check(not failures, "\n".join(failures))


# Ops whose GOT loads name a symbol 16 bytes into their data: a hole's addend
# applies to the slot's address, so the slot cannot hold data + 16. Once
# generated as a load 16 bytes past the slot; now refused by name.
GOT_PAST_THE_START = """
OP(load_second)
{
    tos += second_table[tos & 1];
    CONTINUE();
}

OP(add_second)
{
    tos += (vm_value)(uintptr_t)second_table;
    CONTINUE();
}
"""
ELF_TABLES = """#include <stdint.h>
__asm__(".section .rodata\\n\\t.p2align 3\\n\\t.globl first_table\\nfirst_table:\\n"
        "\\t.quad 1, 2\\n\\t.globl second_table\\nsecond_table:\\n\\t.quad 3, 4\\n\\t.text");
extern const int64_t first_table[2], second_table[2];
"""


def test_got_loads_past_the_data_start_are_refused(ctx):
    fixture = ctx.path(*GOT_DATA_FIXTURE)
    base = os.path.join(ctx.tmp, "past")
    os.makedirs(base)
    tables = read(os.path.join(os.path.dirname(fixture), "got_data.c"))
    tables = tables[:tables.index("OP(")]
    cases = [("macho", tables, (), TRIPLES),
             ("elf", ELF_TABLES, TO_LINUX, [new for _, new in TO_LINUX])]
    for name, head, retarget, triples in cases:
        write(os.path.join(base, "got_data.c"), head + GOT_PAST_THE_START)
        manifest = ctx.fixture_manifest(fixture, os.path.join(base, "%s.yaml" % name), *retarget)
        out = os.path.join(ctx.tmp, "out-" + name)
        p = ctx.build_stencils(manifest, out, "--units", "per-op", check=False, timeout=300)
        check(p.returncode == 1, "%s: want exit 1, got %d:\n%s", name, p.returncode, p.stderr)
        for triple in triples:
            for op in ("load_second", "add_second"):
                want = (r"op %s \(%s\).* loads the address of 'second_table' from a GOT slot, "
                        r"and 'second_table' is at \+0x10 in the stencil's data" % (op, triple))
                check(re.search(want, p.stderr), "%s: op %s not refused by name:\n%s", triple, op,
                      p.stderr)
        check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "%s: a header was "
              "written", name)


def test_got_pairs_across_a_page_boundary(ctx):
    # An ADRP and its LDR name one GOT slot: the page of the first and the
    # offset of the second. With the emitter's free slots starting at the
    # last slot of a page, a pair given a slot each would read the start of
    # the ADRP's page (arm64 operands are such pairs; x86-64 GOT loads are
    # one field and must be unaffected).
    build_fixture(ctx)
    failures = []
    for triple in TRIPLES:
        problems = differential(ctx, triple, ACROSS_A_PAGE)[0]
        if problems:
            failures.append("%s: with the emitter's GOT across a page boundary, patched bytes "
                            "differ from ld64.lld's:\n%s" % (triple, "\n".join(problems)))
    check(not failures, "\n".join(failures))


# --- the shim's frame ---

UNWIND_MODE = {"x86_64": {1: "RBP_FRAME", 2: "STACK_IMMD", 3: "STACK_IND", 4: "DWARF"},
               "arm64": {2: "FRAMELESS", 3: "DWARF", 4: "FRAME"}}
# Compact-unwind register numbers of x86-64 RBP_FRAME, as DWARF numbers.
X86_COMPACT_REGS = {1: 3, 2: 12, 3: 13, 4: 14, 5: 15, 6: 6}  # rbx r12 r13 r14 r15 rbp


def header_define(text, name):
    m = re.search(r"^#define %s \(?(-?(?:0x[0-9a-f]+|\d+))\)?" % name, text, re.M)
    check(m, "the header has no #define %s", name)
    return int(m.group(1), 0)


def compact_unwind(ctx, obj):
    """[(start, length, encoding)] of the object's __compact_unwind entries."""
    out = ctx.run([OBJDUMP, "--unwind-info", obj], timeout=60, check=True).stdout
    return [(int(s, 16), int(n, 16), int(e, 16)) for s, n, e in re.findall(
        r"start:\s+(0x[0-9a-f]+).*?\n\s+length:\s+(0x[0-9a-f]+)\s*\n"
        r"\s+compact encoding:\s+(0x[0-9a-f]+)", out)]


def fde_rows(ctx, obj):
    """The rows of the object's one FDE: [(offset from its start, CFA register,
    CFA offset, {register: CFA offset of its slot})], and the FDE's size."""
    out = ctx.run([OBJDUMP, "--dwarf=frames", obj], timeout=60, check=True).stdout
    fdes = re.findall(r"^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ "
                      r"pc=([0-9a-f]+)\.\.\.([0-9a-f]+)$", out, re.M)
    check(len(fdes) == 1, "%s: want one FDE, --dwarf=frames shows %d:\n%s", obj, len(fdes), out)
    start, end = (int(x, 16) for x in fdes[0])
    fde = out[out.index("FDE cie="):]
    rows = []
    for at, reg, off, rules in re.findall(r"^\s+0x([0-9a-f]+): CFA=reg(\d+)([+-]\d+)?:? ?(.*)$",
                                          fde, re.M):
        slots = {int(r): int(o) for r, o in re.findall(r"reg(\d+)=\[CFA([+-]\d+)\]", rules)}
        rows.append((int(at, 16) - start, int(reg), int(off or 0), slots))
    return rows, end - start


def frame_problems(ctx, triple, header_text, shim_obj):
    """Where the header's statement of the shim's frame differs from the
    compact unwind encoding and the FDE of the shim's object."""
    arch = ARCH[triple]
    said = {k: header_define(header_text, "SG_UNWIND_" + k) for k in (
        "CFA_REGISTER", "CFA_OFFSET", "FP_REGISTER", "FP_OFFSET", "RA_COLUMN", "RA_OFFSET")}
    call = header_define(header_text, "SG_SHIM_CALL_OFFSET")
    size = header_define(header_text, "SG_SHIM_FDE_SIZE")
    fp, ra = {"x86_64": (6, 16), "arm64": (29, 30)}[arch]
    problems = []
    if (said["FP_REGISTER"], said["RA_COLUMN"]) != (fp, ra):
        problems.append("the header's frame pointer and return address columns are %d and %d, "
                        "not %d and %d" % (said["FP_REGISTER"], said["RA_COLUMN"], fp, ra))
    # The FDE's row at the call into JIT code.
    rows, fde_size = fde_rows(ctx, shim_obj)
    at_call = [r for r in rows if r[0] <= call]
    if not at_call:
        return problems + ["the FDE has no row at the call (+0x%x): %s" % (call, rows)]
    _, cfa_reg, cfa_off, slots = at_call[-1]
    from_fde = {"CFA_REGISTER": cfa_reg, "CFA_OFFSET": cfa_off, "FP_OFFSET": slots.get(fp),
                "RA_OFFSET": slots.get(ra)}
    for k, v in from_fde.items():
        if said[k] != v:
            problems.append("SG_UNWIND_%s is %d, the FDE's row at the call (+0x%x) says %s" % (
                k, said[k], call, v))
    if fde_size != size:
        problems.append("SG_SHIM_FDE_SIZE is 0x%x, the FDE covers 0x%x bytes" % (size, fde_size))
    # The compact encoding the linker would put in __unwind_info.
    entries = compact_unwind(ctx, shim_obj)
    if len(entries) != 1:
        return problems + ["want one __compact_unwind entry, found %s" % entries]
    start, length, enc = entries[0]
    mode = UNWIND_MODE[arch].get(enc >> 24 & 0xF, "mode %d" % (enc >> 24 & 0xF))
    if (start, length) != (0, size):
        problems.append("the compact unwind entry covers 0x%x+0x%x, not the shim's 0x%x bytes"
                        % (start, length, size))
    if mode in ("RBP_FRAME", "FRAME"):
        # Both: CFA = frame pointer + 16, the caller's frame pointer at
        # CFA-16 and the return address at CFA-8.
        compact = {"CFA_REGISTER": fp, "CFA_OFFSET": 16, "FP_OFFSET": -16, "RA_OFFSET": -8}
        for k, v in compact.items():
            if said[k] != v:
                problems.append("SG_UNWIND_%s is %d, the compact encoding 0x%08x (%s) says %d"
                                % (k, said[k], enc, mode, v))
        if mode == "RBP_FRAME":
            # The registers saved below rbp: each where the FDE says too.
            at = -16 - 8 * (enc >> 16 & 0xFF)
            for i in range(5):
                reg = enc >> (3 * i) & 7
                if reg:
                    dwarf = X86_COMPACT_REGS[reg]
                    if slots.get(dwarf) != at:
                        problems.append("the compact encoding 0x%08x saves DWARF register %d at "
                                        "CFA%+d, the FDE says %s" % (enc, dwarf, at,
                                                                     slots.get(dwarf)))
                at += 8
    elif not (arch == "arm64" and mode == "DWARF"):
        problems.append("the shim's compact encoding 0x%08x is %s: not a frame-pointer frame"
                        % (enc, mode))
    return problems


def test_darwin_shim_frame_equals_compact_unwind_and_fde(ctx):
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(ctx.path(*FIXTURE), out, timeout=300)
    for triple in TRIPLES:
        header = read(os.path.join(out, "jit_stencils-%s.h" % triple))
        shim = os.path.join(out, ".stencilgen", triple, "shim.o")
        problems = frame_problems(ctx, triple, header, shim)
        check(not problems, "%s: the header's shim frame is not the object's:\n%s", triple,
              "\n".join(problems))


def fixture_copy(ctx, name, ops_text, **per_triple):
    """The fixture's manifest with one op file, in a private directory;
    per_triple: {key: {triple: value}} added under each triple."""
    base = os.path.join(ctx.tmp, name)
    os.makedirs(base, exist_ok=True)
    write(os.path.join(base, "ops.c"), ops_text)
    return ctx.fixture_manifest(ctx.path(*FIXTURE), os.path.join(base, "m.yaml"),
                                *[("  - triple: %s\n" % triple,
                                   "  - triple: %s\n    %s: %s\n" % (triple, key, value))
                                  for key, values in per_triple.items()
                                  for triple, value in values.items()])


def test_darwin_shim_frame_is_pinned(ctx):
    ops = "OP(nop)\n{\n    CONTINUE();\n}\n"
    good = {"x86_64-apple-darwin": "{cfa_register: rbp, cfa_offset: 16, fp_offset: -16, "
                                   "ra_offset: -8}",
            "aarch64-apple-darwin": "{cfa_register: x29, cfa_offset: 16, fp_offset: -16, "
                                    "ra_offset: -8}"}
    p = ctx.build_stencils(fixture_copy(ctx, "good", ops, expect_frame=good),
                           os.path.join(ctx.tmp, "out-good"), check=False, timeout=300)
    check(p.returncode == 0, "the shims' shapes were refused:\n%s", p.stderr)
    for triple in TRIPLES:
        bad = dict(good, **{triple: good[triple].replace("cfa_offset: 16", "cfa_offset: 24")})
        p = ctx.build_stencils(fixture_copy(ctx, "bad-" + triple, ops, expect_frame=bad),
                               os.path.join(ctx.tmp, "out-bad-" + triple), check=False,
                               timeout=300)
        check(p.returncode == 1 and re.search(r"%s.*expect_frame" % triple, p.stderr) and
              "16" in p.stderr, "%s: a wrong expect_frame: want exit 1 naming the target and the "
              "found offset, got %d:\n%s", triple, p.returncode, p.stderr)


# --- refusals ---

REFUSALS = [
    # An extern thread-local variable: its address comes from a TLV descriptor.
    ("thread-local", "tls",
     "extern _Thread_local vm_value vm_counter;\n"
     "OP(tls)\n{\n    tos += vm_counter++;\n    CONTINUE();\n}\n",
     {"x86_64-apple-darwin": "X86_64_RELOC_TLV", "aarch64-apple-darwin":
      "ARM64_RELOC_TLVP_LOAD_PAGE21"}, r"__TEXT,__text"),
    # &tens[1] - &diff in the op's data: a SUBTRACTOR pair (C cannot write it
    # as a constant initializer; the assembler can).
    ("subtractor", "difference",
     "static const int64_t tens[2] = {100, 200};\n"
     "__asm__(\".section __TEXT,__const\\n\\t.p2align 3\\n_diff:\\n\\t"
     ".quad _tens + 8 - _diff\\n\\t.text\");\n"
     "extern const int64_t diff;\n"
     "OP(difference)\n{\n"
     "    tos = *(const int64_t *)((uintptr_t)&diff + (uintptr_t)diff + "
     "(uintptr_t)tens[tos & 1]);\n"
     "    CONTINUE();\n}\n",
     {"x86_64-apple-darwin": "X86_64_RELOC_SUBTRACTOR", "aarch64-apple-darwin":
      "ARM64_RELOC_SUBTRACTOR"}, r"__TEXT,__const"),
]


def test_unpatchable_relocations_are_refused_by_name(ctx):
    for what, op, ops, relocs, section in REFUSALS:
        out = os.path.join(ctx.tmp, "out-" + what)
        p = ctx.build_stencils(fixture_copy(ctx, what, ops), out, check=False, timeout=300)
        check(p.returncode == 1, "%s: expected exit 1: %d\n%s", what, p.returncode, p.stderr)
        for triple in TRIPLES:
            m = re.search(r"op %s \(%s\).*unsupported relocation %s \(type \d+\) in %s at "
                          r"offset 0x[0-9a-f]+" % (op, triple, relocs[triple], section), p.stderr)
            check(m, "%s: %s: the error does not name op, relocation (%s), section (%s) and "
                     "offset:\n%s", what, triple, relocs[triple], section, p.stderr)
        written = [f for f in os.listdir(out) if f.endswith(".h")] if os.path.isdir(out) else []
        check(not written, "%s: headers were written: %s", what, written)


def test_fixture_builds_for_linux_too(ctx):
    # The same ops for the ELF targets: the fixture stays plain C for every
    # target, not Mach-O-only code.
    manifest = ctx.fixture_manifest(ctx.path(*FIXTURE), os.path.join(ctx.tmp, "linux.yaml"),
                                    *TO_LINUX, ("  - ops.c", "  - " + ctx.path(*FIXTURE[:-1],
                                                                               "ops.c")))
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(manifest, out, timeout=300)
    for triple in ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"):
        check(os.path.exists(os.path.join(out, "jit_stencils-%s.h" % triple)), "no header for %s",
              triple)
