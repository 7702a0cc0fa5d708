#!/usr/bin/env python3
"""Write a seed corpus for fuzz_objfile into the directory argv[1].

Each seed is an object file clang-22 writes for a target stencilgen reads
(ELF x86-64 and AArch64, COFF x86-64 and ARM64, Mach-O x86-64 and arm64), compiled with
the flags `stencilgen build -vv` shows: tinyvm's shim (asynchronous unwind
tables: .eh_frame, .pdata/.xdata, and on arm64 Mach-O an __eh_frame with
SUBTRACTOR pairs), and ops under tinyvm's template, one unit per source file
(stencils/ops/*.c, and the COFF fixture's ops, every relocation kind the
generator reads) and, as on Mach-O, one op per unit (ARM64_RELOC_ADDEND
pairs, GOT loads), and a small unit of data references at offsets (below:
ARM64_RELOC_ADDEND pairs, Mach-O and COFF addends kept in code and data). A
compile that fails is an error.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TRIPLES = {
    # triple: flags of its own (stencilgen's flags.c, and stencils.yaml's)
    "x86_64-unknown-linux-gnu": ["-fPIC", "-fno-plt", "-fcf-protection=full"],
    "aarch64-unknown-linux-gnu": ["-fPIC", "-fno-plt", "-mno-outline-atomics",
                                  "-mbranch-protection=standard"],
    "x86_64-w64-windows-gnu": [],
    "aarch64-pc-windows-msvc": [],
    "x86_64-apple-darwin": ["-mmacosx-version-min=11.0", "-nostdlibinc"],
    "aarch64-apple-darwin": ["-mno-outline-atomics", "-mmacosx-version-min=11.0",
                             "-nostdlibinc"],
}
COMMON = ["-x", "c", "-std=c11", "-fno-jump-tables", "-fno-stack-protector", "-fno-ident",
          "-fno-addrsig", "-DNDEBUG", "-w",
          "-include", os.path.join(ROOT, "stencils", "stencil_template.h"),
          "-I", os.path.join(ROOT, "stencils"), "-idirafter", os.path.join(ROOT, "templates")]
SHIM = ["-O2", "-fasynchronous-unwind-tables", "-fno-omit-frame-pointer",
        "-mno-omit-leaf-frame-pointer"]
OPS = ["-O3", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
       "-Xclang", "-mframe-pointer=reserved", "-Wno-unused-function",
       "-Wno-unused-const-variable"]
# (seed name, source, flags, triples' prefix): whole files, then single ops
# as Mach-O compiles them
WHOLE = OPS + ["-ffunction-sections", "-fdata-sections"]
UNITS = [("shim", "stencils/shim.c", SHIM, "")]
# The bundled set's op files: tinyvm's cached.c has variants, whose values
# stencilgen defines around each op (a whole-file compile has none).
with open(os.path.join(ROOT, "stencils", "stencils.yaml")) as manifest:
    BUNDLED = re.findall(r"^  - ops/(\w+\.c)$", manifest.read(), re.M)
UNITS += [("ops_" + f[:-2], "stencils/ops/" + f, WHOLE, "") for f in sorted(BUNDLED)]
UNITS += [("coff_fixture_ops", "tests/fixtures/coff/ops.c", WHOLE, "x86_64")]  # x86 asm
UNITS += [("coff_arm64_fixture_ops", "tests/fixtures/coff_arm64/ops.c", WHOLE,
           "aarch64-pc-windows")]  # import slots, addends in instructions
UNITS += [("op_" + op, "stencils/ops/" + src, OPS + ["-DSTENCILGEN_OP=" + op], "")
          for op, src in (("push", "stack.c"), ("div", "arith.c"), ("call", "calls.c"),
                          ("jump_if_zero", "control.c"))]

# References past a symbol's start: in code (an ADDEND pair before each of
# arm64 Mach-O's PAGE21/PAGEOFF12) and in data (addends in the field).
ADDENDS = r"""
extern long vm_table[8];
static const long local[4] = {1, 2, 3, 4};
static long counter[4];
const long *const pointers[3] = {&local[2], &vm_table[3], (const long *)&counter[1]};
long addends(long i) { counter[2] += i; return vm_table[5] + local[(i & 1) + 1] + counter[3]; }
"""


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    made = 0
    tmp = tempfile.TemporaryDirectory()
    with open(os.path.join(tmp.name, "addends.c"), "w") as f:
        f.write(ADDENDS)
    units = UNITS + [("addends", f.name, ["-O2"], "")]
    for triple, own in TRIPLES.items():
        for name, src, flags, prefix in units:
            if not triple.startswith(prefix):
                continue
            obj = os.path.join(out, "%s-%s.o" % (triple, name))
            cmd = (["clang-22"] + COMMON + flags + own + ["--target=" + triple, "-c",
                   os.path.join(ROOT, src), "-o", obj])
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=300)
            if p.returncode != 0:
                print("make_objfile_seeds: %s for %s failed:\n%s\n%s" % (
                    src, triple, " ".join(cmd), p.stdout[-2000:]), file=sys.stderr)
                return 1
            made += 1
    print("make_objfile_seeds: %d objects in %s" % (made, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
