"""sgtest - the small test harness behind ./run.sh test.

A test is a function named test_* in tests/integration/test_*.py taking one
argument, a Ctx. Every external command goes through Ctx.run, which enforces a
timeout, so no test can hang the suite.
"""
import os
import re
import shutil
import struct
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIPLE = "x86_64-unknown-linux-gnu"

# Ops in the bundled stencils (stencils/stencils.yaml), and its targets in order.
BUNDLED_OPS = 22
# DWARF register numbers of x86-64 (psABI), as the generator names them.
X86_64_DWARF_REGS = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp"] + \
    ["r%d" % i for i in range(8, 16)] + ["rip"]
BUNDLED_TRIPLES = [TRIPLE, "aarch64-unknown-linux-gnu", "x86_64-w64-windows-gnu",
                   "x86_64-apple-darwin", "aarch64-apple-darwin"]

# The x86-64 stencil sets the patching differentials run on: the bundled
# stencils, the relocation-kind fixtures of test_holes.py, and the shapes of
# tests/patch/fixtures, which none of the others have: read-only data with
# relocations in it (jump tables against the op's code, pointer tables against
# its data), a direct call to a run-time symbol, data aligned to 64 bytes and
# to 8 KiB, a string address as an imm32.
X86_MANIFESTS = {
    "bundled": ("stencils", "stencils.yaml"),
    "nopic": ("tests", "fixtures", "relocs", "nopic.yaml"),
    "large": ("tests", "fixtures", "relocs", "large.yaml"),
    "norelax": ("tests", "fixtures", "relocs", "norelax.yaml"),
    "got": ("tests", "fixtures", "relocs", "got.yaml"),
    "shapes_pic": ("tests", "patch", "fixtures", "pic.yaml"),
    "shapes_nopic": ("tests", "patch", "fixtures", "nopic.yaml"),
    "shapes_large": ("tests", "patch", "fixtures", "large.yaml"),
}


# The sanitized generator: LeakSanitizer's tracer can crash (SIGSEGV in its
# walk of the DTV, "Tracer caught signal 11") scanning the thread-local
# storage of the LLVM module the generator dlopens, and then fails the run
# with no report. Leaks are still found from the heap, stacks, globals and
# registers; the blocks glibc allocates for that storage are suppressed by
# LSan's defaults, quietly, so that a successful run's stderr stays empty.
# Only for the generator: other programs' dlopens keep their TLS scanned.
GENERATOR_ENV = {"LSAN_OPTIONS": "use_tls=0:print_suppressions=0"}


class TestFailure(AssertionError):
    pass


class Skip(Exception):
    """This machine cannot run the test (no root, no namespaces): tests/run.py
    reports it as skipped, with the reason, and does not count it."""


class Ctx:
    def __init__(self, build, name):
        self.root = ROOT
        self.build = os.path.abspath(build)
        self.stencilgen = os.path.join(self.build, "generator", "stencilgen")
        self.tmp = tempfile.mkdtemp(prefix="sgtest-%s-" % name)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def run(self, cmd, timeout=300, cwd=None, env=None, check=False, input=None):
        """Run cmd (a list), capture text output, enforce a timeout."""
        full_env = dict(os.environ)
        if cmd and cmd[0] == self.stencilgen:
            full_env.update(GENERATOR_ENV)
        full_env.update(env or {})
        try:
            p = subprocess.run(cmd, cwd=cwd, env=full_env, input=input,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure("timed out after %ss: %s" % (timeout, " ".join(cmd)))
        if check and p.returncode != 0:
            raise TestFailure("%s exited %d\nstdout:\n%s\nstderr:\n%s" % (
                " ".join(cmd), p.returncode, p.stdout[-4000:], p.stderr[-4000:]))
        return p

    def generator(self, *args, **kw):
        return self.run([self.stencilgen] + list(args), **kw)

    def build_stencils(self, manifest, outdir, *extra, check=True, **kw):
        return self.generator("build", "--manifest", manifest, "--outdir", outdir,
                              *extra, check=check, **kw)

    def fixture_manifest(self, fixture, dest, *replacements):
        """The fixture manifest `fixture`, whose paths climb to the repository
        with ../../../, written to `dest` with those paths absolute and each
        (old, new) of `replacements` applied in turn."""
        text = read(fixture).replace("../../../", self.path("") + "/")
        for old, new in replacements:
            text = text.replace(old, new)
        write(dest, text)
        return dest

    def build_fixture(self, fixture, triple, name, ops=None, shim=None, function=None,
                      **target_keys):
        """The fixture manifest `fixture` (its path's parts) built for `triple`
        into tmp/name, per-op units: `ops` (C text) in place of its ops.c,
        `shim` (a path) in place of tinyvm's shim.c, `function` the shim's
        name, and keys added to the target's entry (cflags=..., ...).
        Returns the outdir and the process."""
        here = os.path.dirname(self.path(*fixture))
        ops_file = os.path.join(here, "ops.c")
        if ops:
            ops_file = os.path.join(self.tmp, name + "-ops.c")
            write(ops_file, ops)
        changes = [("  - ops.c", "  - " + ops_file)]
        if shim:
            changes.append((self.path("") + "/stencils/shim.c", shim))
        if function:
            changes.append(("function: tinyvm_shim", "function: " + function))
        under = "  - triple: %s\n" % triple
        changes += [(under, under + "    %s: %s\n" % kv) for kv in sorted(target_keys.items())]
        manifest = self.fixture_manifest(self.path(*fixture),
                                         os.path.join(self.tmp, name + ".yaml"), *changes)
        out = os.path.join(self.tmp, name)
        return out, self.build_stencils(manifest, out, "--units", "per-op", check=False,
                                        timeout=300)

    def copy_tree(self, src, dst):
        shutil.copytree(src, dst, symlinks=True)
        return dst

    def bundled_copy(self, name="proj"):
        """A private copy of stencils/ and templates/, for tests that edit them."""
        base = os.path.join(self.tmp, name)
        os.makedirs(base)
        self.copy_tree(self.path("stencils"), os.path.join(base, "stencils"))
        self.copy_tree(self.path("templates"), os.path.join(base, "templates"))
        return base

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def leb128(data, i, signed=False):
    """The LEB128 number at data[i] (signed or not), and the index after it."""
    v = shift = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            if signed and b & 0x40:
                v -= 1 << shift
            return v, i


def uleb(data, i):
    return leb128(data, i)


def sleb(data, i):
    return leb128(data, i, signed=True)


def plain_op_name(name):
    """A JIT symbol's language op: tinyvm's JIT runs the cached forms in
    variants (stencils/ops/cached.c), tos_mul[in=2,out=1]@work[7] is mul@work[7].
    Other names are returned as they are."""
    return re.sub(r"^tos_(\w+?)(?:\[[\w=,]+\])?@", r"\1@", name) if name else name


def shim_facts(path):
    """What the debugger single-step checkers need from a generated header: the
    op names (SG_OP_* order) and where the shim and its FDE are."""
    h = Header(path)

    def define(name):
        m = re.search(r"^#define %s (0x[0-9a-f]+|\d+)\b" % name, h.text, re.M)
        if not m:
            raise TestFailure("%s: no #define %s" % (path, name))
        return int(m.group(1), 0)

    m = re.search(r'^static const sg_stencil sg_shim = \{"(\w+)"', h.text, re.M)
    check(m, "%s: no sg_shim", path)
    check(h.ops, "%s: no SG_OP_* enum", path)
    # Display names (an op's variant is "op[axis=value,...]"), as debuggers show them.
    shown = dict(re.findall(r'^    /\* SG_OP_(\w+) \*/ \{"([^"]+)"', h.text, re.M))
    return {"op_names": [shown.get(op, op) for op in h.ops], "shim_name": m.group(1),
            "shim_entry": define("SG_SHIM_ENTRY"),
            "shim_fde_start": define("SG_SHIM_FDE_START"),
            "shim_fde_size": define("SG_SHIM_FDE_SIZE")}


def patch_kinds():
    """The patch kinds of runtime/stencilrt_abi.h's SG_PATCH_KINDS table, in order."""
    lines = read(os.path.join(ROOT, "runtime", "stencilrt_abi.h")).splitlines()
    start = lines.index(next(l for l in lines if l.startswith("#define SG_PATCH_KINDS(X)")))
    end = next(i for i in range(start, len(lines)) if not lines[i].endswith("\\"))
    return re.findall(r"\bX\((\w+),", "\n".join(lines[start:end + 1]))


# A stencil whose emitter hands its copy and holes to sg_emit_table: the code
# array's name, its size, the hole table's name and its count.
TABLED_EMITTER = re.compile(r"return sg_emit_table\(code, env, sg_code_(\w+), (\d+), "
                            r"sg_code_holes_(\w+), (\d+)\);")


def emitted_patch_kinds(header_text):
    """The patch kinds a generated header's emitters write: sg_patch_<KIND>
    calls, and the kinds in the hole tables of stencils whose emitter hands
    its holes to sg_emit_table (as sg_patch_<KIND> too)."""
    kinds = set(re.findall(r"(sg_patch_\w+)\((?:code|data)", header_text))
    for _, _, name, _ in TABLED_EMITTER.findall(header_text):
        table = re.search(r"^static const sg_hole sg_code_holes_%s\[\d+\] = \{\n(.*?)^\};"
                          % name, header_text, re.M | re.S)
        kinds |= set("sg_patch_" + k for k in re.findall(r"SG_PATCH_(\w+),", table.group(1)))
    return kinds


def check(cond, msg, *args):
    if not cond:
        raise TestFailure(msg % args if args else msg)


# --- the AArch64 cross build, its programs run under qemu-user ---------------

A64_SYSROOT = "/usr/aarch64-linux-gnu"
A64_QEMU = ["qemu-aarch64", "-cpu", "max", "-L", A64_SYSROOT]  # max: PAC and BTI enforced
A64_CC = "aarch64-linux-gnu-gcc"


def a64_missing(*tools):
    """What of qemu, the cross compiler, `tools` and the sysroot is missing."""
    missing = [t for t in ("qemu-aarch64", A64_CC) + tools if not shutil.which(t)]
    return missing + ([A64_SYSROOT] if not os.path.isdir(A64_SYSROOT) else [])


_a64_built = set()


def a64_cross_build(ctx, *targets):
    """The AArch64 cross build (build-aarch64 beside --build, or
    STENCILGEN_AARCH64_BUILD), brought up to date: `targets`, or all of it
    once per run."""
    d = os.path.abspath(os.environ.get("STENCILGEN_AARCH64_BUILD") or ctx.build + "-aarch64")
    if targets or d not in _a64_built:
        check(os.path.exists(os.path.join(d, "build.ninja")),
              "no AArch64 cross build at %s: configure it with\n"
              "  meson setup %s --cross-file cross/aarch64-linux-gnu.ini\n"
              "(or point STENCILGEN_AARCH64_BUILD at one)", d, d)
        ctx.run(["ninja", "-C", d] + list(targets), check=True, timeout=1200)
        if not targets:
            _a64_built.add(d)
    return d


def for_targets(*targets):
    """Decorator for a check written once for several targets, fn(ctx, target):
    adds one test per target to fn's module, test_<fn>_<target.name>, so each
    target passes or fails on its own."""
    def add(fn):
        for target in targets:
            test = (lambda t: lambda ctx: fn(ctx, t))(target)
            test.__doc__ = fn.__doc__
            fn.__globals__["test_%s_%s" % (fn.__name__, target.name)] = test
        return fn
    return add


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


# --- reading generated headers -------------------------------------------

_ARRAY = re.compile(r"static const uint8_t (sg_(?:code|data)_\w+)\[(\d+)\] = \{([^}]*)\};")
_HOLES = re.compile(r"static const sg_hole (sg_(?:code|data)_holes_\w+)\[(\d+)\] = \{\n(.*?)\n\};",
                    re.S)
_HOLE = re.compile(r"\{0x([0-9a-f]+), SG_PATCH_(\w+), SG_VALUE_(\w+), (\d+), (-?\d+)\}, "
                   r"/\* (\S+) (\S*) \*/")
# Enumerators numbered by position (SG_OP_add,), or written (SG_OP_add = 5,) by older headers.
_OP = re.compile(r"^    SG_OP_(\w+)(?: = \d+)?,$", re.M)
_ENUM = re.compile(r"^enum sg_op \{\n(.*?)^    SG_OP__COUNT", re.M | re.S)


def enumerators(text):
    """A header's stencils, in SG_OP_ order: the C names of enum sg_op (a
    folded variant is a macro, not an enumerator)."""
    m = _ENUM.search(text)
    return _OP.findall(m.group(1)) if m else []


_COLD_SIZES = re.compile(r"sg_cold_sizes\[SG_OP__COUNT\] = \{\n(.*?)\};", re.S)
_COLD_SIZE = re.compile(r"^    (\d+), /\* (\w+) \*/$", re.M)


def cold_sizes(text):
    """{op: bytes at the end of its code that are its cold part} from a header's
    sg_cold_sizes (a line per stencil); None when the header has none."""
    m = _COLD_SIZES.search(text)
    return {op: int(n) for n, op in _COLD_SIZE.findall(m.group(1))} if m else None


class Header:
    """The stencils of one generated per-target header, parsed back."""

    def __init__(self, path):
        self.text = read(path)
        self.ops = enumerators(self.text)
        self.arrays = {}
        for name, size, body in _ARRAY.findall(self.text):
            data = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", body))
            if len(data) != int(size):
                raise TestFailure("%s: declared %s bytes, has %d" % (name, size, len(data)))
            self.arrays[name] = data
        self.holes = {}
        for name, count, body in _HOLES.findall(self.text):
            holes = [dict(offset=int(o, 16), patch=p, value=v, index=int(i), addend=int(a),
                          reloc=r, symbol=s)
                     for o, p, v, i, a, r, s in _HOLE.findall(body)]
            if len(holes) != int(count):
                raise TestFailure("%s: declared %s holes, parsed %d" % (name, count, len(holes)))
            self.holes[name] = holes

    def code(self, op):
        return self.arrays["sg_code_" + op]

    def data(self, op):
        return self.arrays.get("sg_data_" + op, b"")

    def code_holes(self, op):
        return self.holes.get("sg_code_holes_" + op, [])

    def data_holes(self, op):
        return self.holes.get("sg_data_holes_" + op, [])


# --- reading objects independently of the generator (llvm-readelf-22) -----

def readelf_relocs(ctx, obj):
    """{section: [(offset, type, symbol, addend, symbol value)]} from llvm-readelf -r."""
    out = ctx.run(["llvm-readelf-22", "-r", obj], check=True).stdout
    relocs, section = {}, None
    for line in out.splitlines():
        m = re.match(r"Relocation section '\.rela(\S+)'", line)
        if m:
            section = m.group(1)
            relocs[section] = []
            continue
        m = re.match(r"\s*([0-9a-f]{16})\s+[0-9a-f]+\s+(R_\w+)\s+([0-9a-f]{16})\s+(\S+)\s*"
                     r"([+-])\s*([0-9a-f]+)", line)
        if m and section:
            addend = int(m.group(6), 16) * (-1 if m.group(5) == "-" else 1)
            relocs[section].append((int(m.group(1), 16), m.group(2), m.group(4), addend,
                                    int(m.group(3), 16)))
    return relocs


def section_bytes(ctx, obj, name):
    out = ctx.run(["llvm-readelf-22", "-x", name, obj], check=True).stdout
    data = b""
    for line in out.splitlines():
        m = re.match(r"\s*0x[0-9a-f]+ ((?:[0-9a-f]{2,8} ){1,4})", line + " ")
        if m:
            data += bytes.fromhex(m.group(1).replace(" ", ""))
    return data


def sections_of(ctx, obj):
    """{name: (type, size, flags, align)} in section-header order."""
    out = ctx.run(["llvm-readelf-22", "-S", "-W", obj], check=True).stdout
    secs = {}
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+"
                     r"(\S*)\s+\d+\s+\d+\s+(\d+)", line)
        if m:
            secs[m.group(1)] = (m.group(2), int(m.group(3), 16), m.group(4), int(m.group(5)))
    return secs


def dwarfdump_rows(ctx, obj, register):
    """[(loc, end, row)] of the single FDE in obj's .eh_frame, by
    llvm-dwarfdump-22, spelled as the generator spells rows
    ("CFA=rbp+16 rbp=[CFA-16] rip=[CFA-8]"). register(name as llvm-dwarfdump
    prints it) is (DWARF number, the generator's name); rules go in number
    order."""
    out = ctx.run(["llvm-dwarfdump-22", "--eh-frame", obj], check=True, timeout=180).stdout
    fdes = re.findall(r"^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ "
                      r"pc=([0-9a-f]+)\.\.\.([0-9a-f]+)\n(.*?)(?=\n\n[0-9a-f]+ |\Z)",
                      out, re.S | re.M)
    check(len(fdes) == 1, "%s: %d FDEs in llvm-dwarfdump output, want 1:\n%s", obj, len(fdes),
          out)
    start, end, body = fdes[0]
    rows = []
    for loc, cfa, regs in re.findall(r"^\s+0x([0-9a-f]+): CFA=(\S+?):?(?: (.*))?$", body, re.M):
        m = re.match(r"(\w+)([+-]\d+)?$", cfa)
        text = "CFA=%s%+d" % (register(m.group(1))[1], int(m.group(2) or 0))
        rules = sorted(register(r) + (val,) for r, val in
                       (rule.split("=", 1) for rule in filter(None, (regs or "").split(", "))))
        text += "".join(" %s=%s" % (name, val) for _, name, val in rules)
        rows.append([int(loc, 16), None, text])
    for i, row in enumerate(rows):
        row[1] = rows[i + 1][0] if i + 1 < len(rows) else int(end, 16)
    check(rows and rows[0][0] == int(start, 16), "%s: cannot read the FDE's rows:\n%s", obj, body)
    return [tuple(r) for r in rows]


def x86_64_register(name):
    """llvm-dwarfdump's x86-64 register name (RBP) as (DWARF number, rbp)."""
    name = name.lower()
    return X86_64_DWARF_REGS.index(name), name


def aarch64_register(name):
    """llvm-dwarfdump's AArch64 register names (W29, WSP, B8, reg34) as
    (DWARF number, the generator's name: x29, sp, v8, ra_sign_state)."""
    name = name.lower()
    if name == "reg34":  # RA_SIGN_STATE (pointer authentication)
        return 34, "ra_sign_state"
    if name == "wsp":
        return 31, "sp"
    if re.match(r"^[wx]\d+$", name):
        return int(name[1:]), "x" + name[1:]
    if re.match(r"^[bhsdqv]\d+$", name):
        return 64 + int(name[1:]), "v" + name[1:]
    raise TestFailure("unknown register name %s" % name)


def value_of(symbol, symbols):
    if symbol == "_JIT_CONTINUE":
        return "CONTINUE", 0
    if symbol == "_JIT_JUMP_TARGET":
        return "JUMP_TARGET", 0
    m = re.match(r"_JIT_OPERAND(\d)$", symbol)
    if m:
        return "OPERAND", int(m.group(1))
    if symbol in symbols:
        return "SYMBOL", symbols.index(symbol)
    return None, 0


def manifest_symbols(path):
    m = re.search(r"^symbols: \[(.*)\]$", read(path), re.M)
    return [s.strip() for s in m.group(1).split(",")] if m else []


# --- linker differentials: what the linkers' images hold ------------------------

def pe_sections(image):
    """{name: (virtual address, bytes)} of a PE32+ or PE32 image."""
    pe = struct.unpack_from("<I", image, 0x3C)[0]
    check(image[pe:pe + 4] == b"PE\0\0", "not a PE image")
    nsec, opt_size = struct.unpack_from("<2xH12xH", image, pe + 4)
    magic = struct.unpack_from("<H", image, pe + 24)[0]
    check(magic in (0x10B, 0x20B), "PE optional header magic 0x%x", magic)
    base = (struct.unpack_from("<Q", image, pe + 24 + 24)[0] if magic == 0x20B else
            struct.unpack_from("<I", image, pe + 24 + 28)[0])
    sections = {}
    at = pe + 24 + opt_size
    for i in range(nsec):
        name, vsize, va, raw_size, raw_at = struct.unpack_from("<8sIIII", image, at + 40 * i)
        data = image[raw_at:raw_at + min(vsize, raw_size)].ljust(vsize, b"\0")
        sections[name.rstrip(b"\0").decode()] = (base + va, data)
    return sections


GOT_PATCHES = {"GOTPCREL32", "AARCH64_GOT_ADRP", "AARCH64_GOT_LO12"}


def a64_adrp_page(insn, pc):
    imm = ((insn >> 29) & 3) | (((insn >> 5) & 0x7FFFF) << 2)
    if imm & (1 << 20):
        imm -= 1 << 21
    return (pc & ~0xFFF) + (imm << 12)


def got_reach(code, code_at, holes):
    """For the code's GOT holes: {offset: (address, relaxed)}, the GOT slot
    its instruction(s) read, or, where the linker made the load an address
    computation (x86-64 movq -> leaq, arm64 ldr -> add, for a symbol the
    image defines), the address computed (relaxed True), decoded from the
    instructions alone (the holes' addends are the generator's claim: x86-64
    GOT loads end with their disp32, and an ADRP + LDR pair names its slot
    exactly); and {offset:
    (width, mask)}, the bits the holes own: x86-64's disp32 (and the opcode
    of a relaxed load), ADRP's immediate, LDR's imm12 (and the opcode of a
    relaxed one)."""
    reach, owned = {}, {}
    adrps = {}  # destination register -> (hole, page)
    for h in sorted(holes, key=lambda h: h["offset"]):
        off, patch, key = h["offset"], h["patch"], (h["value"], h["index"])
        if patch not in GOT_PATCHES:
            continue
        if patch == "GOTPCREL32":
            relaxed = off >= 2 and code[off - 2] == 0x8D  # leaq
            reach[off] = (code_at + off + 4 + struct.unpack_from("<i", code, off)[0], relaxed)
            owned[off] = (4, 0xFFFFFFFF)
            if relaxed:
                owned[off - 2] = (1, 0xFF)
            continue
        insn = struct.unpack_from("<I", code, off)[0]
        if patch == "AARCH64_GOT_ADRP":
            adrps[insn & 31] = (key, a64_adrp_page(insn, code_at + off))
            owned[off] = (4, 0x60FFFFE0)
            continue
        # AARCH64_GOT_LO12: ldr xt, [xn, #imm12 * 8], or relaxed, add xd, xn, #imm12
        relaxed = insn & 0xFFC00000 == 0x91000000
        adrp = adrps.get((insn >> 5) & 31)
        scale = 1 if relaxed else 8
        reach[off] = (None if adrp is None or adrp[0] != key else
                      adrp[1] + ((insn >> 10) & 0xFFF) * scale, relaxed)
        owned[off] = (4, 0xFFFFFC00 if relaxed else 0x003FFC00)
    return reach, owned


def masked(code, *owned):
    """code with the bits any of the `owned` maps names cleared."""
    b = bytearray(code)
    for each in owned:
        for off, (width, mask) in each.items():
            v = int.from_bytes(b[off:off + width], "little") & ~mask
            b[off:off + width] = v.to_bytes(width, "little")
    return bytes(b)
