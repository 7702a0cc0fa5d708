"""Patching differential: for every stencil and hole kind, the bytes stencilrt
patches equal what ld.lld-22 produces linking the same object at the same
address with the same symbol values.

Runtime side: tests/patch/patch_dump.c, compiled here against a generated
header and the static runtime, emits executors and dumps every instruction's
address and the executor's page run (code, data, GOT). Linker side: each
instruction's op object (OUTDIR/.stencilgen/TRIPLE/op_NAME.o, the object the
header was made from) is linked by ld.lld-22 with a linker script that puts its
code at the instruction's address and its read-only data at the address the
runtime chose, and --defsym gives _JIT_CONTINUE, _JIT_JUMP_TARGET,
_JIT_OPERANDn and the run-time symbols the runtime's values. lld runs with
--no-relax (the runtime never relaxes GOT loads into LEAs) and -O0 (sections
are copied verbatim, as the generator does; no string merging).

Compared: every non-hole byte exactly; absolute and PC-relative holes
exactly; GOT-relative holes semantically (both displacements followed to their
GOT slot, the slots' contents equal each other and the expected value); the
trailing `jmp _JIT_CONTINUE` the generator removed must be, in lld's output, a
jump to exactly where the runtime placed the next instruction; read-only data
bytes at the runtime's data address, which must be after the code and aligned
to the stencil's data_align.

Each stencil set runs twice: in the runtime's normal (high) memory and,
through MAP_32BIT, below 2 GiB, where holes that need 32-bit addresses
(R_X86_64_32/32S against data or code) can be patched. Per run: every op alone
([op, pad, end]: continuation and jump target apart), ops with data twice
(consecutive page runs), all ops twice in one executor (jumps back and forth,
operand values shared, so GOT slots are shared), and a run of them over more
than two pages with distinct operands. Where a value cannot fit its hole the
runtime must fail with SR_ERANGE naming the op and the hole, and lld must
reject the same link (test_range_checks_match_lld sweeps the boundaries).

Sets: the bundled stencils; the relocation-kind fixtures of test_holes.py
(tests/fixtures/relocs: nopic, large, norelax, got); this suite's own
tests/patch/fixtures (jump tables and pointer tables: holes in data, holes
against the op's own code, a const table of function pointers in .data.rel.ro;
a direct call to a run-time symbol; data aligned to 64 bytes and to 8 KiB; a
string address as a 32-bit immediate).
"""
import os
import re
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

from sgtest import BUNDLED_OPS, TRIPLE, X86_MANIFESTS, Header, TestFailure, check, write

LLD = "ld.lld-22"
PAGE = os.sysconf("SC_PAGE_SIZE")
SR_ERANGE = 3
M64 = (1 << 64) - 1

# x86-64 psABI relocation numbers: (name, field width, sg_patch kind).
RELOCS = {
    1: ("R_X86_64_64", 8, "ABS64"),
    2: ("R_X86_64_PC32", 4, "PCREL32"),
    4: ("R_X86_64_PLT32", 4, "X86_BRANCH32"),
    9: ("R_X86_64_GOTPCREL", 4, "GOTPCREL32"),
    10: ("R_X86_64_32", 4, "ABS32"),
    11: ("R_X86_64_32S", 4, "ABS32S"),
    41: ("R_X86_64_GOTPCRELX", 4, "GOTPCREL32"),
    42: ("R_X86_64_REX_GOTPCRELX", 4, "GOTPCREL32"),
}
ALL_RELOCS = sorted(r[0] for r in RELOCS.values())
ALL_PATCHES = ["ABS64", "ABS32", "ABS32S", "PCREL32", "GOTPCREL32", "X86_BRANCH32"]

SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
SHT_PROGBITS, SHT_SYMTAB, SHT_RELA, SHT_NOBITS = 1, 2, 4, 8
STT_SECTION = 3

# Distinctive run-time symbol values (nothing is executed): far from the JIT
# memory in the normal run, so a PC-relative reference to one must be refused
# and a call goes through a veneer; below 2 GiB in the low run, so from low code
# it reaches.
SYM_HIGH = 0x7E5A00001000
VENEER_X86 = bytes([0xFF, 0x25, 0x02, 0x00, 0x00, 0x00, 0x0F, 0x0B])  # jmp *2(%rip); ud2
SYM_LOW = 0x1111000
# Operand pools, by the narrowest hole kind the operand is patched into.
# Near neighbours (...11/...10, 0/1) so that GOT slots shared by mistake show.
OPERANDS_64 = [0x8877665544332211, 0x0123456789ABCDEF, 0x8877665544332210, 0xFEDCBA9876543210,
               0, 0xDEADBEEF, 1, M64, 1 << 63]
OPERANDS_ABS32 = [0xFEDCBA98, 0x9ABCDEF0, 0xFFFFFFFF, 0x12345678, 0]
OPERANDS_ABS32S = [(-0x12345678) & M64, 0x7EDCBA98, (-0x80000000) & M64, 0x7FFFFFFF, 0]


def fail_list(problems, what):
    if problems:
        shown = problems[:40]
        more = "\n  ... and %d more" % (len(problems) - len(shown)) if len(problems) > 40 else ""
        raise TestFailure("%s: %d problem(s):\n  %s%s" % (what, len(problems),
                                                         "\n  ".join(shown), more))


def s32(b):
    return struct.unpack("<i", b)[0]


def fits(kind, v):
    """Whether the 64-bit value v (S + A, or S + A - P, modulo 2^64) fits the field."""
    v &= M64
    sv = v - (1 << 64) if v >> 63 else v
    if kind == "ABS32":
        return v <= 0xFFFFFFFF
    if kind in ("ABS32S", "PCREL32", "GOTPCREL32", "X86_BRANCH32"):
        return -(1 << 31) <= sv < (1 << 31)
    return True


def align_up(v, a):
    return (v + a - 1) // a * a if a > 1 else v


# --- a small ELF64 reader (independent of the generator's LLVM-based one) ---

class Elf:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        check(data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1,
              "%s: not a little-endian ELF64 file", path)
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        self.sections = []
        for i in range(shnum):
            (name, typ, flags, addr, off, size, link, info, align,
             entsize) = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
            body = b"\0" * size if typ == SHT_NOBITS else data[off:off + size]
            self.sections.append(dict(index=i, name_off=name, type=typ, flags=flags, addr=addr,
                                      size=size, link=link, info=info, align=max(align, 1),
                                      entsize=entsize, bytes=body))
        strtab = self.sections[shstrndx]["bytes"]
        for s in self.sections:
            s["name"] = strtab[s["name_off"]:strtab.index(b"\0", s["name_off"])].decode()
        self.symbols = []
        self.relocs = {}  # target section index -> [(offset, type, symbol index, addend)]
        for s in self.sections:
            if s["type"] == SHT_SYMTAB:
                names = self.sections[s["link"]]["bytes"]
                for k in range(s["size"] // 24):
                    nm, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ",
                                                                              s["bytes"], k * 24)
                    self.symbols.append(dict(name=names[nm:names.index(b"\0", nm)].decode(),
                                             type=info & 15, shndx=shndx, value=value))
        for s in self.sections:
            if s["type"] == SHT_RELA:
                rel = self.relocs.setdefault(s["info"], [])
                for k in range(s["size"] // 24):
                    off, info, addend = struct.unpack_from("<QQq", s["bytes"], k * 24)
                    rel.append((off, info & 0xFFFFFFFF, info >> 32, addend))

    def section(self, name):
        found = [s for s in self.sections if s["name"] == name]
        return found[0] if found else None


class OpObject:
    """One op's object, laid out as the generator lays out stencils: the
    entry function's section first, then the other code sections, each at its
    alignment; read-only data sections likewise, apart."""

    def __init__(self, name, path, entry_symbol="_JIT_ENTRY"):
        self.name, self.path, self.entry_symbol = name, path, entry_symbol
        elf = self.elf = Elf(path)
        entry = [s for s in elf.symbols if s["name"] == entry_symbol and s["shndx"] != 0]
        check(entry, "%s: %s defines no %s", name, path, entry_symbol)
        esec = entry[0]["shndx"]
        self.entry_offset = entry[0]["value"]  # its section comes first
        code = [s for s in elf.sections
                if s["flags"] & SHF_ALLOC and s["flags"] & SHF_EXECINSTR and s["size"] > 0
                and s["index"] != esec]
        self.code_secs = [elf.sections[esec]] + code
        # .data.rel.ro is const data the loader relocates (pointer tables under
        # PIC): read-only data to the generator, which patches it like .rodata.
        relro = lambda s: s["name"] == ".data.rel.ro" or s["name"].startswith(".data.rel.ro.")
        self.data_secs = [s for s in elf.sections
                          if s["flags"] & SHF_ALLOC and not s["flags"] & SHF_EXECINSTR
                          and (not s["flags"] & SHF_WRITE or relro(s))
                          and s["type"] == SHT_PROGBITS and s["size"] > 0
                          and s["name"] != ".eh_frame"]
        for group in (self.code_secs, self.data_secs):
            names = [s["name"] for s in group]
            check(len(set(names)) == len(names),
                  "%s: several sections named alike (%s); extend the test's linker script",
                  name, names)
        self.base = {}  # section index -> ("code"|"data", offset)
        self.code_size_full = self._place(self.code_secs, "code")
        self.data_size = self._place(self.data_secs, "data")
        self.holes = []
        for sec_index, rels in sorted(elf.relocs.items()):
            if sec_index not in self.base:
                continue  # .eh_frame and such: not part of the stencil
            where, base = self.base[sec_index]
            for off, typ, symi, addend in rels:
                check(typ in RELOCS, "%s: relocation type %d at %s+0x%x: unknown to this test",
                      name, typ, elf.sections[sec_index]["name"], off)
                rname, width, patch = RELOCS[typ]
                sym = elf.symbols[symi]
                shown = (elf.sections[sym["shndx"]]["name"] if sym["type"] == STT_SECTION
                         else sym["name"])
                self.holes.append(dict(where=where, offset=base + off, type=rname, width=width,
                                       patch=patch, symbol=sym, shown=shown, addend=addend,
                                       value=self._value_kind(sym)))
        self.undefined = sorted({h["symbol"]["name"] for h in self.holes
                                 if h["symbol"]["shndx"] == 0})
        self.got_holes = sum(h["patch"] == "GOTPCREL32" for h in self.holes)
        self.veneer_holes = sum(h["patch"] == "X86_BRANCH32" and h["value"] == "SYMBOL"
                                for h in self.holes)

    def _place(self, secs, where):
        at = 0
        for s in secs:
            at = align_up(at, s["align"])
            self.base[s["index"]] = (where, at)
            at += s["size"]
        return at

    def _value_kind(self, sym):
        n = sym["name"]
        if sym["shndx"] != 0:
            return "CODE" if self.base.get(sym["shndx"], ("?",))[0] == "code" else "DATA"
        if n == "_JIT_CONTINUE":
            return "CONTINUE"
        if n == "_JIT_JUMP_TARGET":
            return "JUMP_TARGET"
        if re.match(r"_JIT_OPERAND\d$", n):
            return "OPERAND"
        return "SYMBOL"

    def operand_kinds(self, k):
        return {h["patch"] for h in self.holes if h["symbol"]["name"] == "_JIT_OPERAND%d" % k}


class StencilSet:
    """A manifest built into a temporary directory, its objects, and a
    patch_dump compiled against its header."""

    def __init__(self, ctx, label, manifest):
        self.ctx, self.label = ctx, label
        self.out = os.path.join(ctx.tmp, label)
        # lld links each op's own object (op_<name>.o), which only per-op units keep;
        # and lays it out as compiled: ops in one part (split ones are checked by
        # running them, test_hot_cold).
        ctx.build_stencils(manifest, self.out, "-j", "2", "--units", "per-op", "--no-hot-cold",
                           timeout=120)
        hpath = os.path.join(self.out, "jit_stencils-%s.h" % TRIPLE)
        self.header = Header(hpath)
        self.symbols = [n for n, _ in sorted(
            ((m.group(1), int(m.group(2))) for m in
             re.finditer(r"^\s+SG_SYM_(\w+) = (\d+),?$", self.header.text, re.M)
             if m.group(1) != "_COUNT"), key=lambda x: x[1])]
        self.exe = os.path.join(ctx.tmp, "patch_dump_" + label)
        ctx.run(["gcc", "-std=c11", "-O1", "-g", "-Wall", "-Wextra",
                 "-I", self.out, "-I", ctx.path("runtime"), "-I", ctx.path("tests", "common"),
                 ctx.path("tests", "patch", "patch_dump.c"),
                 ctx.path("tests", "common", "emit_plan.c"),
                 os.path.join(ctx.build, "runtime", "libstencilrt.a"), "-lpthread",
                 "-Wl,--wrap=mmap,--wrap=mmap64", "-o", self.exe], timeout=120, check=True)
        info = ctx.run([self.exe, "info"], timeout=30, check=True).stdout
        self.stencils = []
        for m in re.finditer(r"^(stencil|shim) (\d+) (\S+) (\d+) (\d+) (\d+) (\d+) (\d+) "
                             r"(\d+)$", info, re.M):
            i, name = int(m.group(2)), m.group(3)
            d = dict(index=i, name=name, code_size=int(m.group(4)), data_size=int(m.group(5)),
                     data_align=int(m.group(6)), falls_through=int(m.group(7)),
                     code_holes=int(m.group(8)), data_holes=int(m.group(9)))
            if m.group(1) == "shim":
                self.shim = d
                continue
            check(i == len(self.stencils), "%s: stencil numbering", label)
            self.stencils.append(d)
        self.ops = self.header.ops
        check([s["name"] for s in self.stencils] == self.ops + ["pad", "end"],
              "%s: patch_dump sees stencils %s, the header %s", label,
              [s["name"] for s in self.stencils], self.ops)
        self.pad, self.end = len(self.ops), len(self.ops) + 1
        self.objects = {}
        for op in self.ops:
            obj = OpObject(op, os.path.join(self.out, ".stencilgen", TRIPLE, "op_%s.o" % op))
            self._check_model(op, obj, self.stencils[self.ops.index(op)])
            self.objects[op] = obj
        self.shim_obj = OpObject(self.shim["name"], os.path.join(
            self.out, ".stencilgen", TRIPLE, "shim.o"), entry_symbol=self.shim["name"])
        check(self.shim_obj.entry_offset == self.shim["index"], "%s: shim entry at +%d, "
              "SG_SHIM_ENTRY %d", label, self.shim_obj.entry_offset, self.shim["index"])
        self._check_model("shim", self.shim_obj, self.shim)

    def _check_model(self, op, obj, st):
        """The object, as this test lays it out, is the stencil the header holds."""
        removed = obj.code_size_full - st["code_size"]
        check(removed in (0, 5), "%s/%s: code %d bytes, object code %d", self.label, op,
              st["code_size"], obj.code_size_full)
        check(bool(removed) == bool(st["falls_through"]), "%s/%s: falls_through %d, %d bytes cut",
              self.label, op, st["falls_through"], removed)
        check(st["data_size"] == obj.data_size, "%s/%s: data %d bytes, object rodata %d",
              self.label, op, st["data_size"], obj.data_size)
        mine = sorted((h["offset"], h["type"]) for h in obj.holes
                      if h["where"] == "code" and h["offset"] < st["code_size"])
        theirs = sorted((h["offset"], h["reloc"]) for h in self.header.code_holes(op))
        check(mine == theirs, "%s/%s: code holes %s in the object, %s in the header",
              self.label, op, mine, theirs)
        mine = sorted((h["offset"], h["type"]) for h in obj.holes if h["where"] == "data")
        theirs = sorted((h["offset"], h["reloc"]) for h in self.header.data_holes(op))
        check(mine == theirs, "%s/%s: data holes %s in the object, %s in the header",
              self.label, op, mine, theirs)

    def symbol_values(self, low):
        base = SYM_LOW if low else SYM_HIGH
        return {n: base + i * 0x10000 for i, n in enumerate(self.symbols)}

    def dumplen(self, code):
        """Upper bound of an executor's page run: [code][data][GOT] (emit.c)."""
        return self._run_size([(self.stencils[i[0]], self.objects.get(self.stencils[i[0]]["name"]))
                               for i in code])

    def shim_dumplen(self):
        return self._run_size([(self.shim, self.shim_obj)])

    @staticmethod
    def _run_size(stencils):
        size = align_up(sum(s["code_size"] for s, _ in stencils), 16)
        # A 16-byte veneer per call or jump to a run-time symbol, at most (emit.c).
        size += 16 * sum(o.veneer_holes for _, o in stencils if o)
        size += sum(s["data_size"] + s["data_align"] for s, _ in stencils)
        # GOT: a slot per GOT hole at most, and one spare (emit.c).
        size = align_up(size, 8) + 8 * (sum(o.got_holes for _, o in stencils if o) + 1)
        return align_up(size, PAGE)

    def emit(self, low, executors):
        """executors: [(label, [(op, target, [o0..o3])])] -> {label: result}."""
        lines = ["sym %d %x" % (i, v) for i, v in
                 enumerate(self.symbol_values(low)[n] for n in self.symbols)]
        lines.append("shim %x" % self.shim_dumplen())
        for label, code in executors:
            lines.append("exec %s %d %x" % (label, len(code), self.dumplen(code)))
            for op, target, ops in code:
                lines.append("ins %d %d %s" % (op, target, " ".join("%x" % o for o in ops)))
        cmd = [self.exe, "run"] + (["--low"] if low else [])
        p = self.ctx.run(cmd, input="\n".join(lines) + "\n", timeout=60, check=True)
        results, cur = {}, None
        for line in p.stdout.splitlines():
            f = line.split(" ", 4)
            if f[0] == "exec" and f[2] == "ok":
                cur = results[f[1]] = dict(ok=True, addr=[], mem_at=0, mem=b"")
            elif f[0] == "exec" and f[2] == "err":
                results[f[1]] = dict(ok=False, status=int(f[3]), message=f[4] if len(f) > 4 else "")
                cur = None
            elif f[0] == "addr":
                cur["addr"].append(int(f[2], 16))
            elif f[0] == "mem":
                cur["mem_at"], cur["mem"] = int(f[1], 16), bytes.fromhex(f[2] if len(f) > 2 else "")
            elif f[0] == "shim":
                results["<shim>"] = dict(ok=True, mem_at=int(f[1], 16),
                                         mem=bytes.fromhex(f[2] if len(f) > 2 else ""))
        for label, code in executors:
            check(label in results, "%s: patch_dump printed nothing for %s", self.label, label)
            r = results[label]
            if r["ok"]:
                check(len(r["addr"]) == len(code) + 1, "%s: %s: %d addresses", self.label, label,
                      len(r["addr"]))
        return results


# --- the differential ------------------------------------------------------

class Differential:
    def __init__(self, ctx):
        self.ctx = ctx
        self.problems = []
        self.counts = {}  # relocation type / patch kind / value kind -> holes compared
        self.links = 0
        self.pool = ThreadPoolExecutor(max_workers=4)
        self.lock = threading.Lock()
        self.slots = {}  # (set, executor, mode) -> {runtime GOT slot: {holes using it}}

    def count(self, key):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def lld(self, st, obj, where, a0, data_at, defs):
        """Link obj with its code at a0 and data at data_at; returns (Elf|None, stderr)."""
        tag = "%s_%x_%d" % (obj.name, a0, len(defs))
        base = os.path.join(self.ctx.tmp, "lld", st.label, where.replace("/", "_").replace(
            "[", "_").replace("]", "") + "_" + tag)
        # One output section per input section, at the address the generator's
        # layout gives it; SUBALIGN(1): the address is exact, not re-aligned.
        script = ["SECTIONS {"]
        for k, s in enumerate(obj.code_secs):
            script.append("  .sr_code%d 0x%x : SUBALIGN(1) { KEEP(*(%s)) }" % (
                k, a0 + obj.base[s["index"]][1], s["name"]))
        for k, s in enumerate(obj.data_secs):
            script.append("  .sr_data%d 0x%x : SUBALIGN(1) { KEEP(*(%s)) }" % (
                k, data_at + obj.base[s["index"]][1], s["name"]))
        # The GOT: anywhere within reach of the code, clear of code and data.
        script.append("  .got 0x%x : { *(.got) }" % (a0 + 0x1000000))
        script.append("  /DISCARD/ : { *(.eh_frame) *(.note.GNU-stack) *(.note.gnu.property) }")
        script.append("}")
        write(base + ".ld", "\n".join(script) + "\n")
        cmd = [LLD, "-static", "--no-relax", "-O0", "--build-id=none", "-e", obj.entry_symbol,
               "-T", base + ".ld", obj.path, "-o", base + ".elf"]
        cmd += ["--defsym=%s=0x%x" % (n, v & M64) for n, v in sorted(defs.items())]
        p = self.ctx.run(cmd, timeout=60)
        with self.lock:
            self.links += 1
        if p.returncode != 0:
            return None, p.stderr.strip()
        return Elf(base + ".elf"), p.stderr.strip()

    @staticmethod
    def image(elf, obj, what, secs, at, size, bad):
        """lld's bytes for [at, at + size): its .sr_<what>K sections, the gaps
        between them zero (the generator's padding)."""
        img = bytearray(size)
        for k, s in enumerate(secs):
            off = obj.base[s["index"]][1]
            out = elf.section(".sr_%s%d" % (what, k))
            if out is None or out["addr"] != at + off or out["size"] != s["size"]:
                bad.append("lld did not place %s (%d bytes) at 0x%x: %s" % (
                    s["name"], s["size"], at + off,
                    None if out is None else "0x%x, %d bytes" % (out["addr"], out["size"])))
                return None
            img[off:off + s["size"]] = out["bytes"]
        return bytes(img)

    @staticmethod
    def definitions(st, obj, low, addr, i, target, operands):
        syms = st.symbol_values(low)
        defs = {}
        for n in obj.undefined:
            if n == "_JIT_CONTINUE":
                defs[n] = addr[i + 1]
            elif n == "_JIT_JUMP_TARGET":
                defs[n] = addr[target]
            elif re.match(r"_JIT_OPERAND(\d)$", n):
                defs[n] = operands[int(n[-1])]
            else:
                check(n in syms, "%s/%s: undefined symbol %s is no run-time symbol", st.label,
                      obj.name, n)
                defs[n] = syms[n]
        return defs

    def predicted_misfits(self, st, low, code, region):
        """[(instruction, op, hole)] that cannot fit: known values exactly, addresses
        from the region (the address of a probe executor in the same memory)."""
        syms = st.symbol_values(low)
        out = []
        for i, (op, target, operands) in enumerate(code):
            name = st.stencils[op]["name"]
            obj = st.objects.get(name)
            for h in obj.holes if obj else []:
                if h["where"] == "code" and h["offset"] >= st.stencils[op]["code_size"]:
                    continue  # the removed trailing jump
                kind, n, v = h["patch"], h["symbol"]["name"], None
                if h["value"] == "OPERAND":
                    v = operands[int(n[-1])]
                elif h["value"] == "SYMBOL":
                    v = syms[n]
                if kind in ("ABS32", "ABS32S"):
                    value = (v if v is not None else region) + h["addend"]
                    if not fits(kind, value):
                        out.append((i, name, h))
                elif kind == "X86_BRANCH32" and h["value"] == "SYMBOL":
                    continue  # out of reach, it goes through a veneer
                elif kind in ("PCREL32", "X86_BRANCH32") and v is not None and \
                        not fits(kind, v - region):
                    out.append((i, name, h))
        return out

    def compare(self, st, low, label, code, res, only=None):
        """Each instruction (or those in `only`) of one emitted executor against lld."""
        addr, mem_at, mem = res["addr"], res["mem_at"], res["mem"]
        run_end = mem_at + st.dumplen(code)
        mode = "low" if low else "high"

        def rd(a, n, what):
            if not (mem_at <= a and a + n <= mem_at + len(mem) and a + n <= run_end):
                raise LookupError("%s at 0x%x..0x%x is outside the executor's page run "
                                  "0x%x..0x%x" % (what, a, a + n, mem_at, run_end))
            return mem[a - mem_at:a - mem_at + n]

        jobs = []
        for i, (op, target, operands) in enumerate(code):
            name = st.stencils[op]["name"]
            if name not in st.objects or (only is not None and i not in only):
                continue  # pad, end: the test's own
            info = st.stencils[op]
            obj = st.objects[name]
            where = "%s/%s[%s] instr %d (%s)" % (st.label, label, mode, i, name)
            size = addr[i + 1] - addr[i]
            if size != info["code_size"]:
                self.problems.append("%s: placed in %d bytes, the stencil has %d" % (
                    where, size, info["code_size"]))
                continue
            defs = self.definitions(st, obj, low, addr, i, target, operands)
            jobs.append(self.pool.submit(
                self.compare_one, st, where, (st.label, label, mode), "%s_%s_%d" % (
                    label, mode, i), info, obj, addr[i], addr[i + 1], addr[0], addr[-1], defs,
                rd))
        for j in jobs:
            j.result()

    def compare_shim(self, st, low, res):
        """The shim, placed by sr_runtime_create like a one-op executor."""
        mem_at, mem = res["mem_at"], res["mem"]
        run_end = mem_at + st.shim_dumplen()

        def rd(a, n, what):
            if not (mem_at <= a and a + n <= mem_at + len(mem) and a + n <= run_end):
                raise LookupError("%s at 0x%x..0x%x is outside the shim's page run "
                                  "0x%x..0x%x" % (what, a, a + n, mem_at, run_end))
            return mem[a - mem_at:a - mem_at + n]

        mode = "low" if low else "high"
        syms = st.symbol_values(low)
        obj = st.shim_obj
        unknown = [n for n in obj.undefined if n not in syms]
        check(not unknown, "%s: the shim refers to %s", st.label, unknown)
        self.compare_one(st, "%s/shim[%s] (%s)" % (st.label, mode, obj.name),
                         (st.label, "shim", mode), "shim_" + mode, st.shim, obj, mem_at, None,
                         mem_at, mem_at + st.shim["code_size"],
                         {n: syms[n] for n in obj.undefined}, rd)
        self.count("shim")

    def compare_one(self, st, where, ex_key, tag, info, obj, a0, cont, ex_at, code_end, defs,
                    rd):
        """One stencil placed at a0 (the next instruction at cont; the executor's
        code at ex_at..code_end) against lld linking its object with defs."""
        size = info["code_size"]
        bad = []
        try:
            rt_code = rd(a0, size, "code")
        except LookupError as e:
            self.problems.append("%s: %s" % (where, e))
            return

        def target_of(h, field, p):
            """The S + A (or G + A) a hole's field encodes at place p."""
            if h["patch"] in ("PCREL32", "GOTPCREL32", "X86_BRANCH32"):
                return (p + s32(field)) & M64
            if h["patch"] == "ABS32S":
                return s32(field) & M64
            return int.from_bytes(field, "little")

        # The data address the runtime chose, read back from its holes.
        data_at, data_known = None, False
        code_holes = [h for h in obj.holes if h["where"] == "code"]
        for h in code_holes:
            sym = h["symbol"]
            if h["value"] != "DATA" or h["offset"] >= size or h["patch"] == "GOTPCREL32":
                continue
            field = rt_code[h["offset"]:h["offset"] + h["width"]]
            sbase = obj.base[sym["shndx"]][1] + (0 if sym["type"] == STT_SECTION else sym["value"])
            d = (target_of(h, field, a0 + h["offset"]) - h["addend"] - sbase) & M64
            if data_at is not None and d != data_at:
                bad.append("data address 0x%x from the hole at +0x%x, 0x%x from an earlier hole"
                           % (d, h["offset"], data_at))
            data_at, data_known = d, True
        if obj.data_secs and data_at is None:
            data_at = align_up(code_end, 16)  # no hole refers to it: any address will do
        if obj.data_secs and data_known:
            if data_at % info["data_align"]:
                bad.append("data (data_align %d) placed at 0x%x, which is only %d-aligned "
                           "(executor at 0x%x)" % (info["data_align"], data_at,
                                                   data_at & -data_at, ex_at))
            if data_at < code_end:
                bad.append("data at 0x%x overlaps the code (ends 0x%x)" % (data_at, code_end))

        defs = self.through_veneers(obj, code_holes, size, rt_code, a0, code_end, defs, rd, bad)
        elf, err = self.lld(st, obj, tag, a0, data_at or 0, defs)
        if elf is None:
            self.problems.append("%s: the runtime patched it, ld.lld-22 rejects the same link: %s%s"
                                 % (where, err.splitlines()[0] if err else "?",
                                    "".join("; " + b for b in bad)))
            return
        lgot = elf.section(".got")
        lbytes = self.image(elf, obj, "code", obj.code_secs, a0, obj.code_size_full, bad)
        ldata = self.image(elf, obj, "data", obj.data_secs, data_at, obj.data_size, bad)
        if lbytes is None or ldata is None:
            for b in bad:
                self.problems.append("%s: %s" % (where, b))
            return

        def lld_slot(g):
            if lgot and lgot["addr"] <= g and g + 8 <= lgot["addr"] + lgot["size"]:
                return int.from_bytes(lgot["bytes"][g - lgot["addr"]:g - lgot["addr"] + 8],
                                      "little")
            return None

        def expected_value(h):
            sym = h["symbol"]
            if sym["shndx"] == 0:
                return defs[sym["name"]] & M64
            kind, off = obj.base[sym["shndx"]]
            off += 0 if sym["type"] == STT_SECTION else sym["value"]
            return ((a0 if kind == "code" else data_at) + off) & M64

        def compare_region(what, rt, ll, base_addr, holes):
            covered = set()
            for h in holes:
                off, w = h["offset"], h["width"]
                if off + w > len(rt):
                    if off < len(rt):
                        bad.append("%s hole at +0x%x straddles the stencil's end" % (what, off))
                    continue
                covered.update(range(off, off + w))
                rf, lf = rt[off:off + w], ll[off:off + w]
                hname = "%s hole +0x%x %s/%s (%s %s%+d)" % (
                    what, off, h["patch"], h["type"], h["value"], h["shown"],
                    h["addend"])
                p = base_addr + off
                if h["patch"] == "GOTPCREL32":
                    g_rt = (p + s32(rf) - h["addend"]) & M64
                    g_ll = (p + s32(lf) - h["addend"]) & M64
                    want = expected_value(h)
                    try:
                        slot_rt = int.from_bytes(rd(g_rt, 8, "GOT slot"), "little")
                    except LookupError as e:
                        bad.append("%s: %s" % (hname, e))
                        continue
                    slot_ll = lld_slot(g_ll)
                    with self.lock:
                        self.slots.setdefault(ex_key, {}).setdefault(g_rt, set()).add(
                            (a0, what, off))
                    if g_rt % 8 or g_rt < code_end:
                        bad.append("%s: GOT slot 0x%x misaligned or inside the code" % (hname,
                                                                                       g_rt))
                    if slot_rt != slot_ll or slot_rt != want:
                        bad.append("%s: runtime slot 0x%x holds 0x%x, lld slot 0x%x holds %s, "
                                   "want 0x%x" % (hname, g_rt, slot_rt, g_ll,
                                                  "?" if slot_ll is None else "0x%x" % slot_ll,
                                                  want))
                        continue
                elif rf != lf:
                    bad.append("%s: runtime %s, lld %s (S+A=0x%x, P=0x%x)" % (
                        hname, rf.hex(), lf.hex(), (expected_value(h) + h["addend"]) & M64, p))
                    continue
                self.count(h["type"])
                self.count(h["patch"])
                self.count("value " + h["value"])
                self.count("%s hole %s %s" % (what, h["patch"], h["value"]))
            diffs = [j for j in range(min(len(rt), len(ll))) if j not in covered and rt[j] != ll[j]]
            if diffs:
                bad.append("%s bytes differ outside holes at +%s: runtime %s, lld %s" % (
                    what, ",".join("0x%x" % j for j in diffs[:8]),
                    rt[diffs[0]:diffs[0] + 8].hex(), ll[diffs[0]:diffs[0] + 8].hex()))

        compare_region("code", rt_code, lbytes[:size], a0,
                       [h for h in code_holes if h["offset"] < size])
        # The removed `jmp _JIT_CONTINUE`: in lld's output it must land exactly
        # where the runtime put the next instruction.
        if len(lbytes) != size:
            tail = lbytes[size:]
            dest = a0 + size + 5 + s32(tail[1:5]) if len(tail) == 5 and tail[0] == 0xE9 else None
            if dest != cont or cont != a0 + size or not info["falls_through"]:
                bad.append("removed tail %s: lld jumps to %s, the next instruction is at %s"
                           % (tail.hex(), "?" if dest is None else "0x%x" % dest,
                              "?" if cont is None else "0x%x" % cont))
        elif info["falls_through"]:
            bad.append("falls_through set but nothing was removed")
        if obj.data_secs and data_known:
            try:
                rt_data = rd(data_at, info["data_size"], "data")
            except LookupError as e:
                bad.append(str(e))
            else:
                compare_region("data", rt_data, ldata, data_at,
                               [h for h in obj.holes if h["where"] == "data"])
        for b in bad:
            self.problems.append("%s: %s" % (where, b))

    def through_veneers(self, obj, code_holes, size, rt_code, a0, code_end, defs, rd, bad):
        """A call or jump to a run-time symbol out of its rel32's reach goes through a
        veneer after the code (`jmp *2(%rip); ud2; .quad target`): check the
        veneer, then let lld link the call to it, as a linker's range-extension
        thunk would be linked. Returns the definitions to link with."""
        out = dict(defs)
        for h in code_holes:
            name = h["symbol"]["name"]
            if h["patch"] != "X86_BRANCH32" or h["value"] != "SYMBOL" or h["offset"] >= size:
                continue
            p = a0 + h["offset"]
            if fits("X86_BRANCH32", defs[name] + h["addend"] - p):
                continue
            dest = (p + s32(rt_code[h["offset"]:h["offset"] + 4]) - h["addend"]) & M64
            try:
                v = rd(dest, 16, "veneer")
            except LookupError as e:
                bad.append("call to %s at +0x%x: %s" % (name, h["offset"], e))
                continue
            want = VENEER_X86 + defs[name].to_bytes(8, "little")
            if dest < code_end or dest % 16 or v != want:
                bad.append("call to %s at +0x%x goes to 0x%x, not to a veneer after the code "
                           "(ends 0x%x) jumping to 0x%x: %s" % (name, h["offset"], dest,
                                                                code_end, defs[name], v.hex()))
                continue
            others = [x for x in obj.holes if x["symbol"]["name"] == name and
                      (x["patch"] != "X86_BRANCH32" or x["where"] != "code")]
            if others:
                bad.append("%s is reached through a veneer and otherwise too" % name)
            out[name] = dest
            self.count("veneer X86_BRANCH32")
        return out

    def check_rejected(self, st, low, label, code, res, region):
        """An executor the runtime refused: it must be SR_ERANGE naming the op and
        a hole that really does not fit, and lld must refuse that link too."""
        misfits = self.predicted_misfits(st, low, code, region)
        where = "%s/%s[%s]" % (st.label, label, "low" if low else "high")
        over = [st.stencils[c[0]]["name"] for c in code if st.stencils[c[0]]["data_align"] > PAGE]
        if not misfits and over and res["status"] != SR_ERANGE and over[0] in res["message"]:
            self.count("refused data aligned beyond a page")
            return "overaligned"  # refusing data it cannot align is correct too
        if not misfits:
            self.problems.append("%s: sr_emit failed (%d: %s) though every value fits" % (
                where, res["status"], res["message"]))
            return "unexpected"
        i, name, h = misfits[0]
        msg = res["message"]
        if res["status"] != SR_ERANGE or "(%s)" % name not in msg or \
                "+0x%x" % h["offset"] not in msg or "instruction %d " % i not in msg:
            self.problems.append("%s: want SR_ERANGE naming instruction %d (%s) and its hole "
                                 "+0x%x, got %d: %s" % (where, i, name, h["offset"],
                                                        res["status"], msg))
        # lld, at an address of the same memory, with the same values.
        op, target, operands = code[i]
        obj = st.objects[name]
        addr = [region + k * 0x1000 for k in range(len(code) + 1)]
        defs = self.definitions(st, obj, low, addr, i, target, operands)
        elf, err = self.lld(st, obj, "%s_rej_%d" % (label, i), addr[i], addr[-1], defs)
        if elf is not None:
            self.problems.append("%s: the runtime refused %s, lld links it" % (where, name))
        elif "out of range" not in err:
            self.problems.append("%s: lld failed otherwise: %s" % (where, err[:300]))
        self.count("rejected " + h["patch"])
        return "range"


def operands_for(obj, seed, unique=None):
    """Distinctive operands that fit every hole each is patched into: from the
    pools (values repeat across instructions), or unique to instruction
    `unique` (many distinct GOT values)."""
    out = []
    for k in range(4):
        kinds = obj.operand_kinds(k) if obj else set()
        if unique is not None:
            u = unique * 4 + k + 1
            out.append((-u) & M64 if "ABS32S" in kinds else
                       0x80000000 + u if "ABS32" in kinds else 0xA5A5000000000000 | u << 3)
            continue
        pool = (OPERANDS_ABS32S if "ABS32S" in kinds else
                OPERANDS_ABS32 if "ABS32" in kinds else OPERANDS_64)
        out.append(pool[(seed + 3 * k) % len(pool)])
    return out


def tail(st):
    return [(st.pad, 0, [0] * 4), (st.end, 0, [0] * 4)]


def run_set(diff, st, low):
    """One stencil set in one kind of memory: every op alone; all of them twice
    in one executor with jumps forward and back and shared operands; and a run
    of them over several pages, with an operand of its own per instruction."""
    probe = st.emit(low, [("probe", tail(st))])["probe"]
    check(probe["ok"], "%s: cannot emit [pad, end]: %s", st.label, probe)
    region = probe["addr"][0]
    if low:
        check(region + (64 << 20) < (1 << 31), "%s: MAP_32BIT memory at 0x%x", st.label, region)
    else:
        check(region >= (1 << 32), "%s: the runtime's memory is at 0x%x, below 4 GiB; the "
              "high run assumes the usual x86-64 mmap layout", st.label, region)
    executors = []
    for n, op in enumerate(st.ops):
        executors.append(("op_" + op, [(n, 2, operands_for(st.objects[op], n))] + tail(st)))
        if st.stencils[n]["data_size"]:  # again, in the next page run (data alignment)
            executors.append(("op_%s.2" % op, [(n, 2, operands_for(st.objects[op], n + 1))] +
                              tail(st)))
    # The chains: only ops whose values fit here (and whose data alignment
    # the page runs can give, refused or not: op alone covers that).
    fit = [n for n, op in enumerate(st.ops)
           if not diff.predicted_misfits(st, low, [(n, 0, operands_for(st.objects[op], n))],
                                         region) and st.stencils[n]["data_align"] <= PAGE]
    if fit:
        chain = [(n, 0, operands_for(st.objects[st.ops[n]], rep + n))
                 for rep in range(2) for n in fit]
        total = len(chain) + 2
        chain = [(n, (7 * i + 3) % total, ops) for i, (n, _, ops) in enumerate(chain)]
        executors.append(("chain", chain + tail(st)))
        # Code, data and GOT over more than two pages; the first and the last
        # repetitions are compared (lld links are the cost).
        rep_size = sum(st.stencils[n]["code_size"] for n in fit)
        reps = 2 * PAGE // max(rep_size, 1) + 2
        long = [(n, 0, operands_for(st.objects[st.ops[n]], 0, unique=r * len(fit) + j))
                for r in range(reps) for j, n in enumerate(fit)]
        total = len(long) + 2
        long = [(n, (i * 37 + 11) % total, ops) for i, (n, _, ops) in enumerate(long)]
        executors.append(("long", long + tail(st)))
        long_only = set(range(len(fit))) | set(range(len(long) - len(fit), len(long)))
    results = st.emit(low, executors)
    check("<shim>" in results, "%s: patch_dump printed no shim", st.label)
    diff.compare_shim(st, low, results["<shim>"])
    rejected = []
    for label, code in executors:
        res = results[label]
        if res["ok"]:
            diff.compare(st, low, label, code, res, long_only if label == "long" else None)
            if label == "long":
                check(res["addr"][-1] - res["addr"][0] > 2 * PAGE, "long: only %d bytes of code",
                      res["addr"][-1] - res["addr"][0])
        elif diff.check_rejected(st, low, label, code, res, region) != "overaligned":
            rejected.append(label)
    return rejected


MANIFESTS = X86_MANIFESTS  # the bundled stencils and every x86-64 fixture


def build_sets(ctx, which):
    with ThreadPoolExecutor(max_workers=2) as pool:
        futs = [(w, pool.submit(StencilSet, ctx, w, ctx.path(*MANIFESTS[w]))) for w in which]
        return {w: f.result() for w, f in futs}


def run_differential(ctx, which):
    """Every op of the sets, in high and low memory, alone and chained."""
    sets = build_sets(ctx, which)
    diff = Differential(ctx)
    rejected = {}
    try:
        for label, st in sets.items():
            for low in (False, True):
                rejected[(label, low)] = run_set(diff, st, low)
    finally:
        diff.pool.shutdown()
    if diff.problems:
        report(diff)  # what was compared, for the failure's context
    fail_list(diff.problems, "patched bytes differ from ld.lld-22 (%d links)" % diff.links)
    # Everything fits in low memory; in high memory only what needs a 32-bit
    # absolute address of code or data may be refused.
    for (label, low), labels in sorted(rejected.items()):
        check(not low or not labels, "%s [low]: refused %s", label, labels)
    return sets, diff


def report(diff, extra=""):
    print("     compared holes: %s%s; %d lld links" % (
        ", ".join("%s %d" % (k, v) for k, v in sorted(diff.counts.items())
                  if " hole " not in k), extra, diff.links))


def test_patched_bytes_match_lld(ctx):
    """Every op of the bundled set and of the nopic/large/norelax/got fixtures
    against ld.lld-22: every sg_patch kind, every relocation type."""
    sets, diff = run_differential(ctx, ["bundled", "nopic", "large", "norelax", "got"])
    check(len(sets["bundled"].ops) == BUNDLED_OPS, "bundled: %d ops, want %d", len(sets["bundled"].ops),
          BUNDLED_OPS)
    missing = [r for r in ALL_RELOCS + ALL_PATCHES if not diff.counts.get(r)]
    for v in ("DATA", "CONTINUE", "JUMP_TARGET", "OPERAND", "SYMBOL"):
        if not diff.counts.get("value " + v):
            missing.append("value " + v)
    if diff.counts.get("shim") != 2 * len(sets):
        missing.append("the shims")
    check(not missing, "never compared: %s (counts %s)", missing, diff.counts)
    # The runtime shares a GOT slot among equal values (emit.c); the chains
    # repeat values, so that path was taken and its slots checked above.
    shared = sum(len(uses) >= 2 for ex in diff.slots.values() for uses in ex.values())
    check(shared, "no GOT slot served two holes: deduplication went untested")
    report(diff, "; %d GOT slots shared" % shared)


def test_data_holes_and_direct_calls_match_lld(ctx):
    """Holes in read-only data (jump tables, pointer tables), holes whose value
    is the op's own code, and a PC-relative call to a run-time symbol (through a
    veneer when it is out of reach), against
    ld.lld-22 (tests/patch/fixtures)."""
    _, diff = run_differential(ctx, ["shapes_pic", "shapes_nopic", "shapes_large"])
    want = ["data hole PCREL32 CODE", "data hole ABS64 CODE", "data hole ABS64 DATA",
            "code hole PCREL32 DATA", "code hole ABS64 DATA", "code hole ABS32S DATA",
            "code hole ABS32 DATA", "code hole X86_BRANCH32 SYMBOL", "veneer X86_BRANCH32",
            "rejected ABS32", "rejected ABS32S"]
    missing = [k for k in want if not diff.counts.get(k)]
    check(not missing, "never compared: %s (counts %s)", missing, diff.counts)
    report(diff, "; in data: %s" % ", ".join(
        "%s %d" % (k[10:], v) for k, v in sorted(diff.counts.items()) if k.startswith("data hole")))


def test_range_checks_match_lld(ctx):
    """A value that does not fit an R_X86_64_32/32S hole is SR_ERANGE naming the
    op (never a truncation) exactly when lld refuses it too; at the boundaries
    that do fit, the bytes match lld's."""
    st = build_sets(ctx, ["nopic"])["nopic"]
    diff = Differential(ctx)
    probe = st.emit(False, [("probe", tail(st))])["probe"]
    check(probe["ok"], "cannot emit [pad, end]: %s", probe)
    region = probe["addr"][0]
    values = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x100000000, 0xFFFFFFFF7FFFFFFF,
              0xFFFFFFFF80000000, M64, 1 << 63, 0x123456789]
    executors, expect = [], {}
    for n, op in enumerate(st.ops):
        obj = st.objects[op]
        for h in obj.holes:
            if h["patch"] not in ("ABS32", "ABS32S") or h["value"] != "OPERAND":
                continue
            k = int(h["symbol"]["name"][-1])
            for j, v in enumerate(values):
                ops = operands_for(obj, n)
                ops[k] = v
                label = "%s_op%d_%d" % (op, k, j)
                executors.append((label, [(n, 2, ops)] + tail(st)))
                expect[label] = (h["patch"], v, all(fits(x["patch"], v + x["addend"])
                                                    for x in obj.holes
                                                    if x["symbol"]["name"] == h["symbol"]["name"]))
    kinds = {e[0] for e in expect.values()}
    check(kinds == {"ABS32", "ABS32S"}, "nopic: operand holes of kinds %s, want ABS32 and "
          "ABS32S", sorted(kinds))
    results = st.emit(False, executors)
    try:
        for label, code in executors:
            res = results[label]
            kind, v, ok = expect[label]
            if res["ok"] and not ok:
                diff.problems.append("%s: operand 0x%x does not fit its %s hole, yet sr_emit "
                                     "succeeded (truncated?)" % (label, v, kind))
            elif not res["ok"] and ok:
                diff.problems.append("%s: sr_emit refused 0x%x, which fits its %s hole: %d %s"
                                     % (label, v, kind, res["status"], res["message"]))
            elif res["ok"]:
                diff.compare(st, False, label, code, res)
            else:
                diff.check_rejected(st, False, label, code, res, region)
    finally:
        diff.pool.shutdown()
    fail_list(diff.problems, "range checks")
    for k in ("ABS32", "ABS32S"):
        check(diff.counts.get(k) and diff.counts.get("rejected " + k),
              "%s: accepted %s, rejected %s times", k, diff.counts.get(k),
              diff.counts.get("rejected " + k))
    report(diff)


def test_calls_out_of_reach_go_through_veneers(ctx):
    """A call to a run-time symbol more than 2 GiB from JIT memory, as in any
    position-independent executable (it lives near 0x55..., the arenas near
    0x7f...): an op's direct call, and the shim's call to __stack_chk_fail
    under -fstack-protector-all, both reach their target through a veneer
    (tests/patch/veneer_run.c runs them). Without veneers the op is SR_ERANGE
    and sr_runtime_create fails for the shim. A shim's PC-relative data
    reference out of reach is refused, and the message names the shim."""
    shims = ctx.path("tests", "fixtures", "shim")
    cases = [("call", ctx.path("tests", "patch", "fixtures", "pic.yaml"), "vm_print called 1"),
             ("shim", os.path.join(shims, "stack_protector.yaml"), "far: 1"),
             # Data, not a call, so no veneer: refused, naming the shim as the shim.
             ("data", os.path.join(shims, "far_data.yaml"), "sr_runtime_create: the shim "
              "far_data_shim: value 0x")]
    for mode, manifest, want in cases:
        out = os.path.join(ctx.tmp, mode)
        ctx.build_stencils(manifest, out, "--target", TRIPLE, timeout=120)
        exe = os.path.join(ctx.tmp, "veneer_run_" + mode)
        ctx.run(["gcc", "-std=c11", "-O2", "-fPIE", "-pie", "-Wall", "-Wextra", "-Werror",
                 "-D_GNU_SOURCE", "-I", out, "-I", ctx.path("runtime"), "-I",
                 ctx.path("stencils"), ctx.path("tests", "patch", "veneer_run.c"),
                 os.path.join(ctx.build, "runtime", "libstencilrt.a"), "-lpthread", "-o", exe],
                timeout=120, check=True)
        p = ctx.run([exe], timeout=60, env={"STENCILRT_PERF": "off"})
        check(p.returncode == 0 and "veneer_run: PASS" in p.stdout and want in p.stdout,
              "%s: exit %d\n%s%s", mode, p.returncode, p.stdout, p.stderr)
