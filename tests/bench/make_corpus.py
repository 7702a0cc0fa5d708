#!/usr/bin/env python3
"""Write a synthetic but realistic stencil set: N ops (default 300) in files of
10, with its manifest. Used by the benchmarks and the scale test only.

  make_corpus.py OUTDIR [--ops N] [--per-file K]
  make_corpus.py OUTDIR --cpython [--ops N] [--expand-variants]

--cpython writes a CPython-shaped set instead (cpython_corpus below): about
280 micro-ops whose variants make about 1,100 stencils, in one generated file
beside a few hand-written ones, for the 5 bundled targets.

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


# ---- the CPython-shaped set (--cpython)
#
# CPython 3.15's JIT caches up to 3 stack values in registers: each micro-op is
# compiled in variants for the number of values it finds in registers (and,
# for some, leaves there), all written as `case` blocks of one generated file.
# These ops do what its micro-ops do: type guards that leave the trace,
# reference-count decrements that call the deallocator, helper calls, error
# exits, operands. Axis `in` is how many values (0-3) arrive in registers
# (r0..r2, the top in the highest); `out` (0-1) how many the op leaves there.

PY_TEMPLATE = """/* py_template.h - a CPython-shaped op template (tests/bench/make_corpus.py --cpython). */
#ifndef PY_TEMPLATE_H
#define PY_TEMPLATE_H

#include <stdint.h>

typedef struct py_object py_object;
typedef struct py_type {
    const char *name;
    void (*dealloc)(py_object *);
    uint64_t flags;
    uint32_t version;
} py_type;
struct py_object {
    int64_t refcnt;
    const py_type *type;
    int64_t value;
    py_object *items[4];
};
typedef struct py_frame {
    py_object *locals[16];
    py_object **consts;
    int64_t ip;
} py_frame;

/* Run-time helpers (the manifest's symbols:). */
void py_dealloc(py_object *o);
py_object *py_int_from(py_frame *f, int64_t v);
py_object *py_binary_op(py_frame *f, int64_t kind, py_object *a, py_object *b);
int64_t py_compare(py_frame *f, int64_t kind, py_object *a, py_object *b);
py_object *py_call(py_frame *f, py_object *callable, int64_t argc, py_object **args);
py_object *py_getattr(py_frame *f, py_object *o, int64_t name);
py_object *py_deopt(py_frame *f, py_object **sp, int64_t reason);

/* Type checks read the type's flags (as PyLong_Check does) or compare its
 * version with an operand (as _GUARD_TYPE_VERSION does). */
#define PY_INT (1u << 24)
#define PY_FLOAT (1u << 25)
#define PY_LIST (1u << 26)
#define PY_IS(o, kind) (((o)->type->flags & (kind)) != 0)

/* Values cached in registers travel as arguments, as CPython's _tos_cache0..2. */
#define STENCIL_RETURN py_object *
#define STENCIL_PARAMS py_frame *frame, py_object **sp, py_object *r0, py_object *r1, py_object *r2
#define STENCIL_ARGS frame, sp, r0, r1, r2
#include "stencil_op.h"

#define OPERAND0 ((int64_t)STENCIL_OPERAND(0))
#define OPERAND1 ((int64_t)STENCIL_OPERAND(1))

static inline void py_incref(py_object *o) { o->refcnt++; }
static inline void py_decref(py_object *o)
{
    if (--o->refcnt == 0)
        py_dealloc(o);
}
/* A failed guard leaves the trace; an error jumps to the trace's error exit. */
#define GUARD(cond, reason)                                                              \\
    do {                                                                                 \\
        if (!(cond))                                                                     \\
            return py_deopt(frame, sp, reason);                                          \\
    } while (0)
#define ERROR_IF(cond)                                                                   \\
    do {                                                                                 \\
        if (cond)                                                                        \\
            JUMP();                                                                      \\
    } while (0)

#endif
"""

PY_SHIM = """/* py_shim.c - enters a CPython-shaped trace, no value in registers. */
py_object *py_shim(py_frame *frame, py_object **sp, stencil_fn *code);

py_object *py_shim(py_frame *frame, py_object **sp, stencil_fn *code)
{
    return code(frame, sp, 0, 0, 0);
}
"""

# Every shape: its axes, and the stencils it makes.
SHAPES = {"none": [], "in": [("in", 0, 3)], "in_out": [("in", 0, 2), ("out", 0, 1)],
          "in3_out": [("in", 0, 3), ("out", 0, 1)]}


def cases(axis, values, fragment):
    """An #if chain on STENCIL_V(axis): fragment(value) for each value."""
    lines = []
    for k, v in enumerate(values):
        lines.append("#%s STENCIL_V(%s) == %d" % ("if" if k == 0 else "elif", axis, v))
        lines += fragment(v)
    return lines + ["#endif"]


def pops(n, regs):
    """Take n inputs (x0 deepest .. x{n-1} top): the top ones from the `regs`
    registers that hold values, the rest from the stack."""
    lines = []
    for j in range(n):  # j = 0: the top
        name = "x%d" % (n - 1 - j)
        lines.append("    py_object *%s = %s;" % (name, "r%d" % (regs - 1 - j) if j < regs
                                                    else "*--sp"))
    return lines


def pushes(result, rem, out):
    """Leave `result` (None: nothing) with `rem` registers still holding values:
    out None keeps as many in registers as fit, out 0 spills every value, out 1
    keeps the result alone in r0."""
    lines = []
    if out is None:
        if result is None:
            return lines
        if rem < 3:
            return ["    r%d = %s;" % (rem, result)]
        return ["    *sp++ = r0;", "    r0 = r1;", "    r1 = r2;", "    r2 = %s;" % result]
    lines += ["    *sp++ = r%d;" % k for k in range(rem)]
    if result is not None:
        lines.append("    *sp++ = %s;" % result if out == 0 else "    r0 = %s;" % result)
    return lines


def py_core(kind, rng, i):
    """(inputs, whether it pushes a result, the lines computing it as `res`)."""
    k = i % 7
    if kind == "binary_int":
        op = rng.choice(["add", "sub", "mul"])
        return 2, True, [
            "    GUARD(PY_IS(x0, PY_INT) && PY_IS(x1, PY_INT), %d + STENCIL_V(in));" % i,
            "    int64_t v;",
            "    py_object *res;",
            "    if (__builtin_%s_overflow(x0->value, x1->value, &v))" % op,
            "        res = py_binary_op(frame, %d, x0, x1);" % k,
            "    else",
            "        res = py_int_from(frame, v);",
            "    py_decref(x0);",
            "    py_decref(x1);",
            "    ERROR_IF(!res);"]
    if kind == "compare_jump":
        return 2, False, [
            "    int64_t c = py_compare(frame, %d, x0, x1);" % k,
            "    py_decref(x0);",
            "    py_decref(x1);",
            "    ERROR_IF(c < 0);",
            "    if (c %s)" % rng.choice(["", "== 0"]),
            "        JUMP();"]
    if kind == "load_fast":
        return 0, True, [
            "    py_object *res = frame->locals[(OPERAND0 + %d) & 15];" % (i % 5),
            "    py_incref(res);"]
    if kind == "load_const":
        return 0, True, ["    py_object *res = frame->consts[OPERAND0];", "    py_incref(res);"]
    if kind == "store_fast":
        return 1, False, [
            "    py_object *old = frame->locals[(OPERAND0 + %d) & 15];" % (i % 3),
            "    frame->locals[(OPERAND0 + %d) & 15] = x0;" % (i % 3),
            "    if (old)",
            "        py_decref(old);"]
    if kind == "pop_top":
        return 1, False, ["    py_decref(x0);"]
    if kind == "guard_type":
        if rng.random() < 0.5:
            guard = "PY_IS(x0, PY_%s)" % rng.choice(["INT", "FLOAT", "LIST"])
        else:
            guard = "x0->type->version == (uint32_t)OPERAND1"
        return 1, True, ["    GUARD(%s, %d);" % (guard, 1000 + i),
                         "    py_object *res = x0;"]
    if kind == "call":
        return 2, True, [
            "    py_object *res = py_call(frame, x0, OPERAND1 + %d, sp);" % (i % 4),
            "    py_decref(x0);",
            "    py_decref(x1);",
            "    ERROR_IF(!res);"]
    if kind == "load_attr":
        return 1, True, [
            "    GUARD(x0->type->flags & %d, %d);" % (1 << (i % 8), 2000 + i),
            "    py_object *res = py_getattr(frame, x0, OPERAND0);",
            "    py_decref(x0);",
            "    ERROR_IF(!res);"]
    if kind == "list_get":
        return 2, True, [
            "    GUARD(PY_IS(x0, PY_LIST), %d);" % (3000 + i),
            "    GUARD(PY_IS(x1, PY_INT) && (uint64_t)x1->value < 4, %d);" % (3001 + i),
            "    py_object *res = x0->items[x1->value];",
            "    py_incref(res);",
            "    py_decref(x0);",
            "    py_decref(x1);"]
    # unary: an arithmetic chain on an int's value
    ops = ["+", "-", "*", "^", "&", "|"]
    lines = ["    GUARD(PY_IS(x0, PY_INT), %d);" % (4000 + i), "    int64_t v = x0->value;"]
    for n in range(rng.randint(1, 8)):
        lines.append("    v = (int64_t)((uint64_t)v %s (uint64_t)(OPERAND0 + %d));" % (
            rng.choice(ops), n * 7 + i))
    lines += ["    py_decref(x0);", "    py_object *res = py_int_from(frame, v);",
              "    ERROR_IF(!res);"]
    return 1, True, lines


PY_KINDS = ["binary_int", "binary_int", "compare_jump", "load_fast", "load_const", "store_fast",
            "pop_top", "guard_type", "guard_type", "call", "load_attr", "list_get", "unary",
            "unary"]


def py_op(rng, i):
    """One generated micro-op: (name, axes, body lines)."""
    kind = rng.choice(PY_KINDS)
    n, has_result, core = py_core(kind, rng, i)
    r = rng.random()
    shape = "none" if r < 0.2 else "in" if r < 0.6 else "in_out" if r < 0.86 else "in3_out"
    if not has_result and shape != "none":
        shape = "in"  # what leaves no value keeps the registers it does not use
    axes = SHAPES[shape]
    if not axes:
        core = [l.replace("STENCIL_V(in)", "0") for l in core]
        body = pops(n, 0) + core + pushes("res" if has_result else None, 0, 0)
        return "%s_%03d" % (kind, i), axes, body
    ins = range(axes[0][1], axes[0][2] + 1)
    body = cases("in", ins, lambda v: pops(n, v))
    body += core
    result = "res" if has_result else None
    if len(axes) == 1:
        body += cases("in", ins, lambda v: pushes(result, max(0, v - n), None))
    else:  # the epilogue depends on both: the values left in registers, and out
        body.append("#if STENCIL_V(out) == 0")
        body += cases("in", ins, lambda v: pushes(result, max(0, v - n), 0))
        body.append("#else")
        body += cases("in", ins, lambda v: pushes(result, max(0, v - n), 1))
        body.append("#endif")
    return "%s_%03d" % (kind, i), axes, body


# The hand-written ops beside the generated file, as a VM's author writes them.
HAND_OPS = [
    ("trace_enter", [], ["    frame->ip = OPERAND0;"]),
    ("trace_exit", [], ["    return py_deopt(frame, sp, OPERAND0);"]),
    ("check_periodic", [], ["    GUARD(frame->ip >= 0, 7);"]),
    ("error_exit", [], ["    return py_deopt(frame, sp, -1);"]),
    ("spill", [("n", 1, 3)],
     ["    *sp++ = r0;",
      "#if STENCIL_V(n) >= 2",
      "    *sp++ = r1;",
      "#endif",
      "#if STENCIL_V(n) >= 3",
      "    *sp++ = r2;",
      "#endif"]),
    ("reload", [("n", 1, 3)],
     ["#if STENCIL_V(n) >= 3",
      "    r2 = *--sp;",
      "#endif",
      "#if STENCIL_V(n) >= 2",
      "    r1 = *--sp;",
      "#endif",
      "    r0 = *--sp;"]),
    ("nop", [], []),
    ("set_ip", [], ["    frame->ip = OPERAND0 + STENCIL_V_IP_BIAS;"]),
    ("incref_locals", [("k", 1, 4)],
     ["    for (int64_t j = 0; j < STENCIL_V(k); j++)",
      "        if (frame->locals[j])",
      "            py_incref(frame->locals[j]);"]),
    ("decref_locals", [("k", 1, 4)],
     ["    for (int64_t j = 0; j < STENCIL_V(k); j++)",
      "        if (frame->locals[j])",
      "            py_decref(frame->locals[j]);"]),
]


def combos(axes):
    """Every combination of the axes' values, in declaration order."""
    result = [[]]
    for name, first, last in axes:
        result = [c + [(name, v)] for c in result for v in range(first, last + 1)]
    return result


def op_texts(name, axes, body, expand):
    """The op's definition: with its VARIANT axes, or (expand) each variant as
    an op of its own named as the variant mechanism names it, the values put
    in textually."""
    if not axes:
        return ["OP(%s)\n{\n%s\n    CONTINUE();\n}\n" % (name, "\n".join(body))]
    if not expand:
        head = ", ".join("VARIANT(%s, %d, %d)" % a for a in axes)
        return ["OP(%s, %s)\n{\n%s\n    CONTINUE();\n}\n" % (name, head, "\n".join(body))]
    texts = []
    for c in combos(axes):
        text = "\n".join(body)
        for axis, v in c:
            text = text.replace("STENCIL_V(%s)" % axis, "%d" % v)
        cname = "%s__%s" % (name, "_".join("%s%d" % (a, v) for a, v in c))
        texts.append("OP(%s)\n{\n%s\n    CONTINUE();\n}\n" % (cname, text))
    return texts


def cpython_corpus(outdir, nops, expand, triples="five"):
    """The generated file (nops micro-ops) and two hand-written files, with
    their template, shim and manifest for the 5 bundled targets."""
    rng = random.Random(20261128)  # the same corpus every time
    os.makedirs(os.path.join(outdir, "ops"), exist_ok=True)
    write(os.path.join(outdir, "py_template.h"), PY_TEMPLATE)
    write(os.path.join(outdir, "py_shim.c"), PY_SHIM)
    texts, stencils = [], 0
    for i in range(nops):
        name, axes, body = py_op(rng, i)
        texts += op_texts(name, axes, body, expand)
        stencils += len(combos(axes))
    write(os.path.join(outdir, "ops", "generated_cases.c"),
          "/* generated_cases.c - generated micro-ops (make_corpus.py --cpython). */\n\n" +
          "\n".join(texts))
    halves = [HAND_OPS[:len(HAND_OPS) // 2], HAND_OPS[len(HAND_OPS) // 2:]]
    for k, part in enumerate(halves):
        texts = []
        for name, axes, body in part:
            texts += op_texts(name, axes, body, expand)
            stencils += len(combos(axes))
        write(os.path.join(outdir, "ops", "hand%d.c" % k),
              "/* hand%d.c - hand-written micro-ops. */\n\n"
              "#define STENCIL_V_IP_BIAS 2\n\n%s" % (k, "\n".join(texts)))
    targets = "".join("  - triple: %s\n" % t for t in TRIPLES[triples])
    write(os.path.join(outdir, "corpus.yaml"), """# A CPython-shaped stencil set: %d micro-ops, %d stencils (tests/bench/make_corpus.py --cpython).
targets:
%stemplate: py_template.h
shim:
  source: py_shim.c
  function: py_shim
ops:
  - ops/generated_cases.c
  - ops/hand0.c
  - ops/hand1.c
cflags: [-Wall, -Wextra, -Werror]
symbols: [py_dealloc, py_int_from, py_binary_op, py_compare, py_call, py_getattr, py_deopt]
""" % (nops + len(HAND_OPS), stencils, targets))
    print("%d ops, %d stencils" % (nops + len(HAND_OPS), stencils))
    return 0


# The CPython-shaped corpus's targets: the five of the bundled set before it
# grew, and CPython's own seven.
TRIPLES = {
    "five": ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "x86_64-w64-windows-gnu",
             "x86_64-apple-darwin", "aarch64-apple-darwin"),
    "seven": ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "x86_64-pc-windows-msvc",
              "i686-pc-windows-msvc", "aarch64-pc-windows-msvc", "x86_64-apple-darwin",
              "aarch64-apple-darwin"),
}


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--ops", type=int, default=None,
                    help="ops (default 300; with --cpython, ops of the generated file: 270)")
    ap.add_argument("--per-file", type=int, default=10, help="ops per file (default 10)")
    ap.add_argument("--cpython", action="store_true", help="the CPython-shaped set")
    ap.add_argument("--triples", choices=sorted(TRIPLES), default="five",
                    help="--cpython: the targets (default: five; seven: CPython's)")
    ap.add_argument("--expand-variants", action="store_true",
                    help="--cpython: each variant written out as an op of its own")
    args = ap.parse_args()
    if args.cpython:
        return cpython_corpus(args.outdir, 270 if args.ops is None else args.ops,
                              args.expand_variants, args.triples)
    args.ops = 300 if args.ops is None else args.ops
    per = max(1, args.per_file)
    rng = random.Random(20261122)  # the same corpus every time
    ops_dir = os.path.join(args.outdir, "ops")
    os.makedirs(ops_dir, exist_ok=True)
    files = []
    for f in range((args.ops + per - 1) // per):
        name = "ops/group%02d.c" % f
        ops = [op_source(rng, i) for i in range(f * per, min(args.ops, f * per + per))]
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
