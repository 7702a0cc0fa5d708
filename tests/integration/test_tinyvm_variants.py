"""tinyvm's JIT with top-of-stack caching (stencils/ops/cached.c, jit.c's
choose_variants): it emits the cached ops' variants, chosen per instruction
by how many values are cached, and every program gives the interpreter's
results with variants and without (--no-variants, the plain ops)."""
import os
import re

from sgtest import check, write

T = 120
MODES = [["--interp"], ["--jit"], ["--jit", "--no-variants"]]

# Every depth path: a jump target at instruction 0, expressions deeper than
# the two registers (spills, then reloads from memory), dup/pop at each depth,
# calls with arguments at depth 2, values that need the 64-bit immediate,
# traps left alone.
DEPTHS = """func pick 3
    load 0
    load 1
    load 2
    sub
    mul
    ret

func main 0
top:
    load 0
    addi 1
    dup
    store 0
    push 3
    lt
    jump_if_nonzero top
    push 1
    push 2
    push 3
    push 4
    add
    add
    add
    push 10
    push 20
    push 30
    call pick 3
    add
    dup
    dup
    pop
    mul
    push 5000000000
    addi -5000000001
    mul
    load 0
    print
    pop
    push 7
    push 3
    div
    push 9
    push 4
    mod
    le
    add
    push 1
    push 1
    eq
    jump_if_zero top
    ret
"""


def tinyvm(ctx):
    return os.path.join(ctx.build, "stencils", "tinyvm")


def listing(ctx, prog, *args):
    """tinyvm --list: each instruction's stencil name, in order."""
    p = ctx.run([tinyvm(ctx), "--jit", "--list"] + list(args) + [prog], timeout=T)
    check(p.returncode == 0, "tinyvm --list %s failed (%d): %s", prog, p.returncode,
          p.stderr[-2000:])
    return p.stderr.split()


def test_tinyvm_jit_emits_cached_variants(ctx):
    """loop.tvm's hot loop runs on variants chosen by cached depth (values in
    registers, not memory); --no-variants gives the plain ops instead."""
    loop = ctx.path("stencils", "programs", "loop.tvm")
    got = listing(ctx, loop)
    for want in ("tos_load[in=1,out=2]@main[9]", "tos_load[in=2,out=2]@main[10]",
                 "tos_mul[in=2,out=1]@main[11]", "tos_mod[in=2,out=1]@main[13]",
                 "tos_lt[in=2,out=0,branch=1]@main[6]", "tos_skip@main[7]",
                 "tos_jump[in=0,out=0]@main[19]"):
        check(want in got, "%s not in tinyvm --list's stencils: %s", want, got)
    plain = listing(ctx, loop, "--no-variants")
    check(plain[11] == "mul@main[11]" and not any("[in=" in n for n in plain),
          "--no-variants still emits variants: %s", plain)


def test_tinyvm_wide_operands_get_the_64_bit_form(ctx):
    """An operand that fits 32 bits gets the narrow immediate, one that does
    not the 64-bit one (a narrow hole would fail the emit)."""
    prog = os.path.join(ctx.tmp, "depths.tvm")
    write(prog, DEPTHS)
    got = listing(ctx, prog)
    wide = [n for n in got if re.match(r"tos_(push|addi)\[.*wide=1\]", n)]
    check(len(wide) == 2 and wide[0].startswith("tos_push[") and wide[1].startswith("tos_addi["),
          "wide forms: %s (all: %s)", wide, got)
    check(any(n.startswith("tos_push[in=1,out=2,wide=0]") for n in got) and
          any(n.startswith("tos_dup[in=2,out=2]") for n in got) and
          any(re.match(r"tos_call\[in=2,", n) for n in got),
          "no depth-2 forms in: %s", got)


# A comparison before a conditional jump, one before a conditional jump that
# is a target of its own and one before a plain jump; calls of 0, 2 and 4
# arguments.
FUSED = """func count 0
    push 5
    ret

func two 2
    load 0
    load 1
    sub
    ret

func many 4
    load 0
    load 3
    add
    ret

func main 0
    push 0
    store 0
again:
    load 0
    addi 1
    store 0
    load 0
    push 2
    lt
    jump_if_nonzero again
    load 0
    push 6
    eq
check:
    jump_if_zero bump
    call count 0
    push 1
    push 2
    call two 2
    add
    push 1
    push 2
    push 3
    push 4
    call many 4
    add
    print
    ret
bump:
    load 0
    addi 1
    dup
    store 0
    push 6
    eq
    jump check
"""


def test_tinyvm_compare_and_jump_fuse_and_calls_know_their_count(ctx):
    """A comparison followed by a conditional jump is one compare-and-branch
    (branch=1 for jump_if_zero, 2 for jump_if_nonzero) with tos_skip where the
    jump was, unless the jump is a target itself; a call of 0-2 arguments has
    the count as a constant (args=N), more take it from the operand (args=3);
    and the program gives the interpreter's results."""
    prog = os.path.join(ctx.tmp, "fused.tvm")
    write(prog, FUSED)
    got = listing(ctx, prog)
    for want in ("tos_lt[in=2,out=0,branch=2]@main[7]", "tos_skip@main[8]",
                 "tos_eq[in=2,out=0,branch=0]@main[11]", "tos_jump_if_zero[in=0,out=0]@main[12]",
                 "tos_eq[in=2,out=1,branch=0]@main[31]", "tos_jump[in=1,out=0]@main[32]",
                 "tos_call[in=0,out=1,args=0]@main[13]", "tos_call[in=2,out=1,args=2]@main[16]",
                 "tos_call[in=2,out=1,args=3]@main[22]"):
        check(want in got, "%s not in tinyvm --list's stencils: %s", want, got)
    runs = [ctx.run([tinyvm(ctx)] + mode + [prog], timeout=T) for mode in MODES]
    check(all((r.returncode, r.stdout) == (0, "9\n9\n") for r in runs),
          "interpreter, JIT, JIT --no-variants: %s", [(r.returncode, r.stdout) for r in runs])


# `fill` pops below its entry and leaves a 7 where the operand stack starts;
# `zero`, whose frame lies where fill's did, returns what it never pushed.
PHANTOM = """func fill 0
    pop
    push 7
    push 7
    push 7
    add
    add
    ret

func zero 0
    ret

func main 0
    call fill 0
    pop
    call zero 0
    ret
"""


def test_tinyvm_a_function_pops_the_entry_value_in_every_mode(ctx):
    """A function enters with one stack value, a 0, which it finds if it pops
    more than it pushed: the plain ops in a register, the cached forms (which
    enter with nothing cached) in memory, put there by the JIT's entry. What
    an earlier call left in that memory is never what it finds."""
    prog = os.path.join(ctx.tmp, "phantom.tvm")
    write(prog, PHANTOM)
    got = listing(ctx, prog)
    check("tos_ret[in=0]@zero[0]" in got, "zero does not enter with nothing cached: %s", got)
    runs = [ctx.run([tinyvm(ctx)] + mode + [prog], timeout=T) for mode in MODES]
    check(all((r.returncode, r.stdout) == (0, "0\n") for r in runs),
          "interpreter, JIT, JIT --no-variants: %s", [(r.returncode, r.stdout) for r in runs])


def test_tinyvm_variants_give_the_interpreters_results(ctx):
    """Every bundled program and one that takes every depth path: the same
    output and exit status interpreted, JIT-compiled with variants and without
    (backtrace.tvm counts C frames, so its JIT modes are compared together)."""
    progs = sorted(f for f in os.listdir(ctx.path("stencils", "programs")) if f.endswith(".tvm"))
    paths = [ctx.path("stencils", "programs", f) for f in progs]
    paths.append(os.path.join(ctx.tmp, "depths.tvm"))
    write(paths[-1], DEPTHS)
    for prog in paths:
        runs = [ctx.run([tinyvm(ctx)] + mode + [prog], timeout=T) for mode in MODES]
        got = [(r.returncode, r.stdout) for r in runs]
        compared = got[1:] if prog.endswith("backtrace.tvm") else got
        check(all(g == compared[0] for g in compared) and runs[1].returncode != 2,
              "%s: interpreter, JIT, JIT --no-variants gave %s", os.path.basename(prog), got)
