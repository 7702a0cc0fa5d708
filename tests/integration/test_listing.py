"""The disassembly in the generated headers names every direct branch and call
target as llvm-objdump-22 does for the same object (relative to the stencil's
start). x86-64 printers count a PC-relative immediate from the next
instruction: without that, every continuation jump read as a jump to itself."""
import os
import re

from sgtest import check, read

TARGETS = ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu")
OBJDUMP_TARGET = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s([^#\n]*?)\b(0x[0-9a-f]+) <", re.M)
BRANCH = re.compile(r"^(j\w+|callq?|b|bl|b\.\w+|cbn?z|tbn?z)$")  # not rip-relative loads
LISTING_LINE = re.compile(r"^ \*   ([0-9a-f]{4}): (?:[0-9a-f]{2} )+\s*(\S+)(.*)$", re.M)


def listings(text):
    """{op: {offset: instruction text}} from a header's listing comments."""
    out = {}
    for m in re.finditer(r"^/\* (\w+) - .*?\*/", text, re.M | re.S):
        out[m.group(1)] = {int(l.group(1), 16): l.group(2) + l.group(3)
                           for l in LISTING_LINE.finditer(m.group(0))}
    return out


def test_branch_targets_match_objdump(ctx):
    out = os.path.join(ctx.tmp, "out")
    # llvm-objdump reads each op's own object (op_<name>.o), which only per-op units keep.
    # Ops whole, as objdump sees their objects (a split op's listing shows its
    # hot part, then its cold part: test_hot_cold).
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out, "--units", "per-op",
                       "--no-hot-cold")
    compared = 0
    for triple in TARGETS:
        ops = listings(read(os.path.join(out, "jit_stencils-%s.h" % triple)))
        for op, lines in ops.items():
            obj = os.path.join(out, ".stencilgen", triple, "op_%s.o" % op)
            if not os.path.exists(obj):
                continue  # the shim
            dump = ctx.run(["llvm-objdump-22", "-d", "--no-show-raw-insn", obj],
                           check=True).stdout
            for m in OBJDUMP_TARGET.finditer(dump):
                offset, mnemonic, target = int(m.group(1), 16), m.group(2), m.group(4)
                if offset not in lines or not BRANCH.match(mnemonic):
                    continue  # the removed trailing jump; a memory operand
                check(target in lines[offset].split(),
                      "%s %s +0x%x: objdump says %s %s, the header says %r", triple, op, offset,
                      mnemonic, target, lines[offset])
                compared += 1
    check(compared >= 20, "only %d branch targets compared", compared)
    print("%d branch and call targets equal llvm-objdump's" % compared)
