#!/usr/bin/env python3
"""Write a guard-heavy stencil set: ops shaped like a production VM's (CPython's
uops), whose cold paths are most of their code. Used by the bench's hot/cold
rows and tests/integration/test_hot_cold.py.

  guard_corpus.py OUTDIR [--ops N]

Values are tinyvm's (its template and shim), read as pointers to
reference-counted objects. Each op mixes: type guards that leave for a
deoptimization handler (COLD_EXIT(vm_deopt)), error checks after helper calls
(a `noreturn` error call), and reference-count decrements that call a
deallocator (in a block marked STENCIL_COLD()).
"""
import argparse
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HEADER = """/* guard_vm.h - the objects and helpers of the guard-heavy corpus
 * (tests/bench/guard_corpus.py). */
#ifndef GUARD_VM_H
#define GUARD_VM_H
#include <stdint.h>

typedef struct gobj {
    int64_t refcnt;
    const struct gtype *type;
    int64_t value;
} gobj;
typedef struct gtype {
    const char *name;
} gtype;

extern const gtype g_int_type, g_float_type, g_str_type;
/* Leaves JIT code for the interpreter, with the op's state: a cold exit. */
extern stencil_fn vm_deopt;
_Noreturn void vm_raise(vm_frame *frame, const char *what, gobj *culprit);
void obj_dealloc(gobj *o);
gobj *obj_binary(int kind, gobj *a, gobj *b);
gobj *obj_attr(gobj *o, int64_t name);

#define AS_OBJ(v) ((gobj *)(uintptr_t)(v))
#define AS_VALUE(o) ((vm_value)(uintptr_t)(o))
#define GUARD_TYPE(o, t)                    \\
    do {                                    \\
        if (__builtin_expect((o)->type != &(t), 0)) \\
            COLD_EXIT(vm_deopt);            \\
    } while (0)
#define CHECK_RESULT(r, what, o)            \\
    do {                                    \\
        if (__builtin_expect((r) == 0, 0))  \\
            vm_raise(frame, what, o);       \\
    } while (0)
#define DECREF(o)                           \\
    do {                                    \\
        gobj *d_ = (o);                     \\
        if (__builtin_expect(--d_->refcnt == 0, 0)) { \\
            STENCIL_COLD();                 \\
            obj_dealloc(d_);                \\
        }                                   \\
    } while (0)
#endif
"""

TYPES = ["g_int_type", "g_float_type", "g_str_type"]


def guarded_binary(rng, i):
    t1, t2 = rng.choice(TYPES), rng.choice(TYPES)
    return ["gobj *a = AS_OBJ(sp[-1]), *b = AS_OBJ(tos);",
            "GUARD_TYPE(a, %s);" % t1,
            "GUARD_TYPE(b, %s);" % t2,
            "gobj *r = obj_binary(%d, a, b);" % (i % 17),
            'CHECK_RESULT(r, "binary op %d", a);' % i,
            "DECREF(a);",
            "DECREF(b);",
            "sp--;",
            "tos = AS_VALUE(r);"]


def guarded_attr(rng, i):
    return ["gobj *o = AS_OBJ(tos);",
            "GUARD_TYPE(o, %s);" % rng.choice(TYPES),
            "if (__builtin_expect(o->value < %d, 0))" % rng.randint(0, 9),
            "    COLD_EXIT(vm_deopt);",
            "gobj *r = obj_attr(o, (int64_t)OPERAND0 + %d);" % i,
            'CHECK_RESULT(r, "attribute %d", o);' % i,
            "DECREF(o);",
            "tos = AS_VALUE(r);"]


def guarded_unbox(rng, i):
    return ["gobj *o = AS_OBJ(tos);",
            "GUARD_TYPE(o, g_int_type);",
            "int64_t v = o->value * %d + (int64_t)OPERAND0;" % rng.randint(2, 9),
            "if (__builtin_expect(v < 0, 0))",
            '    vm_raise(frame, "negative %d", o);' % i,
            "DECREF(o);",
            "*sp++ = v;",
            "tos = v + %d;" % i]


KINDS = [guarded_binary, guarded_attr, guarded_unbox]


def op_source(rng, i):
    body = rng.choice(KINDS)(rng, i)
    return "OP(g%03d)\n{\n%s\n    CONTINUE();\n}\n" % (i, "\n".join("    " + l for l in body))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--ops", type=int, default=60)
    args = ap.parse_args()
    rng = random.Random(20261128)  # the same corpus every time
    ops_dir = os.path.join(args.outdir, "ops")
    os.makedirs(ops_dir, exist_ok=True)
    write(os.path.join(args.outdir, "guard_vm.h"), HEADER)
    files = []
    for f in range((args.ops + 9) // 10):
        name = "ops/guards%02d.c" % f
        ops = [op_source(rng, i) for i in range(f * 10, min(args.ops, f * 10 + 10))]
        write(os.path.join(args.outdir, name),
              "/* %s - guard-heavy ops. */\n#include \"guard_vm.h\"\n\n%s" % (name, "\n".join(ops)))
        files.append(name)
    stencils = os.path.join(ROOT, "stencils")
    write(os.path.join(args.outdir, "guards.yaml"), """# A guard-heavy %d-op stencil set (tests/bench/guard_corpus.py).
targets:
  - triple: x86_64-unknown-linux-gnu
  - triple: aarch64-unknown-linux-gnu
template: %s
shim:
  source: %s
  function: tinyvm_shim
ops:
%s
include_dirs: [%s, %s]
cflags: [-Wall, -Wextra, -Werror]
symbols: [vm_deopt, vm_raise, obj_dealloc, obj_binary, obj_attr, g_int_type, g_float_type, g_str_type]
""" % (args.ops, os.path.join(stencils, "stencil_template.h"), os.path.join(stencils, "shim.c"),
       "\n".join("  - " + f for f in files), stencils, os.path.abspath(args.outdir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
