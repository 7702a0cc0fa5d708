#!/usr/bin/env python3
"""Write a synthetic but realistic stencil set: N ops (default 300) in files of
10, with its manifest. Used by the benchmarks and the scale test only.

  make_corpus.py OUTDIR [--ops N]

The ops mix what real interpreters' micro-ops do: stack shuffling with
operands, arithmetic chains of various lengths, comparisons and conditional
jumps, helper calls, table lookups in read-only data, and short loops.
"""
import argparse
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def arith(rng, i):
    ops = ["+", "-", "*", "^", "&", "|"]
    body = ["    vm_value a = *--sp;", "    vm_value r = tos;"]
    for k in range(rng.randint(1, 12)):
        body.append("    r = (vm_value)((uint64_t)r %s ((uint64_t)a + %d));" % (rng.choice(ops), k * 7 + i))
    body.append("    tos = r;")
    return body


def operand(rng, i):
    return ["    *sp++ = tos;",
            "    tos = frame->locals[(OPERAND0 + %d) & %d] + OPERAND1 * %d;" % (i % 5, 15, rng.randint(1, 9))]


def branch(rng, i):
    return ["    vm_value cond = tos;",
            "    tos = *--sp;",
            "    if (cond %s %d)" % (rng.choice(["<", ">", "==", "!="]), rng.randint(-3, 3)),
            "        JUMP();"]


def helper(rng, i):
    fn = rng.choice(["vm_print(frame, tos)", "vm_native(frame, %d, tos)" % (i % 3)])
    return ["    tos = %s + %d;" % (fn, i % 11)]


def table(rng, i):
    values = ", ".join(str(rng.randint(-1000, 1000)) for _ in range(16))
    return ["    static const vm_value table[16] = {%s};" % values,
            "    tos = table[(uint64_t)tos & 15] + %d;" % i]


def loop(rng, i):
    return ["    vm_value acc = 0;",
            "    for (vm_value k = 0; k < (tos & %d); k++)" % rng.choice([7, 15, 31]),
            "        acc += frame->locals[k & 15] * (k + %d);" % (i % 13),
            "    tos = acc;"]


KINDS = [arith, arith, operand, branch, helper, table, loop]


def block(lines):
    return ["    {"] + ["    " + l for l in lines] + ["    }"]


def op_source(rng, i):
    body = block(rng.choice(KINDS)(rng, i))
    if rng.random() < 0.3:  # some ops combine two behaviours
        body += block(rng.choice([arith, operand, helper])(rng, i + 1000))
    return "OP(op%03d)\n{\n%s\n    CONTINUE();\n}\n" % (i, "\n".join(body))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--ops", type=int, default=300)
    args = ap.parse_args()
    rng = random.Random(20261122)  # the same corpus every time
    ops_dir = os.path.join(args.outdir, "ops")
    os.makedirs(ops_dir, exist_ok=True)
    files = []
    for f in range((args.ops + 9) // 10):
        name = "ops/group%02d.c" % f
        ops = [op_source(rng, i) for i in range(f * 10, min(args.ops, f * 10 + 10))]
        write(os.path.join(args.outdir, name),
              "/* %s - synthetic ops for benchmarks. */\n\n%s" % (name, "\n".join(ops)))
        files.append(name)
    stencils = os.path.join(ROOT, "stencils")
    write(os.path.join(args.outdir, "corpus.yaml"), """# A synthetic %d-op stencil set (tests/bench/make_corpus.py).
targets:
  - triple: x86_64-unknown-linux-gnu
template: %s
shim:
  source: %s
  function: tinyvm_shim
ops:
%s
include_dirs: [%s]
cflags: [-Wall, -Wextra, -Werror]
symbols: [vm_call, vm_print, vm_native, vm_trap]
""" % (args.ops, os.path.join(ROOT, "stencils", "stencil_template.h"),
       os.path.join(stencils, "shim.c"), "\n".join("  - " + f for f in files), stencils))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
